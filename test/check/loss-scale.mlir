// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 3 | FileCheck %s

// The ops of dynamic loss scaling against medcheck's torch mappings (written from
// torch.amp.GradScaler: torch.isfinite, torch.where-like selection, _amp_update_scale_).
// Non-finite values are made inside the functions: exp(100·x) overflows for x > 0.89,
// log(x) is NaN for x < 0, and the standard normal inputs have both.

// CHECK: found  out0  scalar  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: found  out1  scalar  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: found  out2  scalar  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: found  out3  2x3x4  max_abs {{.*}}  ok
// CHECK: found  out4  2x3x4  max_abs {{.*}}  ok
func.func @found(%x: tensor<2x3x4xf32>, %y: tensor<5xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %hundred = med.constant dense<100.0> : tensor<f32>
  %big = med.exp %x : tensor<2x3x4xf32>
  %x100 = med.mul %x, %hundred : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %inf = med.exp %x100 : tensor<2x3x4xf32>
  %nan = med.log %y : tensor<5xf32>
  // finite (0), an overflow among finite values (1), a NaN (1)
  %a = med.any_non_finite %big, %y : (tensor<2x3x4xf32>, tensor<5xf32>) -> tensor<f32>
  %b = med.any_non_finite %y, %inf : (tensor<5xf32>, tensor<2x3x4xf32>) -> tensor<f32>
  %c = med.any_non_finite %nan : (tensor<5xf32>) -> tensor<f32>
  // found_inf keeps the old (finite) value; the new one holds inf and NaN
  %keep = med.select %b, %big, %inf : (tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %take = med.select %a, %big, %inf : (tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %a, %b, %c, %keep, %take : tensor<f32>, tensor<f32>, tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// growth after growth_interval successes, backoff on found_inf, the tracker counting up,
// no growth past the f32 range, and a non-power-of-two growth factor (rounded to f32).
// CHECK: update  out0  scalar  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: update  out9  scalar  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @update(%s: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %scale = med.constant dense<65536.0> : tensor<f32>
  %huge = med.constant dense<3.0e38> : tensor<f32>
  %zero = med.constant dense<0.0> : tensor<f32>
  %one = med.constant dense<1.0> : tensor<f32>
  %t1999 = med.constant dense<1999.0> : tensor<f32>
  %t5 = med.constant dense<5.0> : tensor<f32>
  %g:2 = med.update_loss_scale %scale, %t1999, %zero : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %b:2 = med.update_loss_scale %scale, %t5, %one : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %c:2 = med.update_loss_scale %scale, %t5, %zero : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %h:2 = med.update_loss_scale %huge, %one, %zero {growth_interval = 2 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %abs = med.mul %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %f:2 = med.update_loss_scale %abs, %zero, %zero {growth_interval = 1 : i64, growth_factor = 3.3} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %g#0, %g#1, %b#0, %b#1, %c#0, %c#1, %h#0, %h#1, %f#0, %f#1 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}
