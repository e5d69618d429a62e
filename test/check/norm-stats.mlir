// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc --tolerance 1e-5 | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 3 --tolerance 1e-5 | FileCheck %s

// med.group_norm_stats (the chunked merge of medrun/NormStats.h: chunks of 4 x 16 x 64 values
// of a plane, Chan's merge in a fixed tree) against the statistics of torch's group norm
// (native_group_norm of the same values in f64), f32 to 1e-5, on odd sizes: planes of one
// chunk and of several along each axis with short last ones, groups of 1, 2, 3 planes and C;
// and med.group_norm, whose statistics are the same, beside it. test/cuda/norm-stats.test
// runs this file on the CUDA backend (its negative controls: a one-pass E[x²] − E[x]²
// variant, a wrong chunk offset, a wrong merge).

// CHECK: stats_small  out0  2x6  max_abs {{.*}}  ok
// CHECK: stats_small  out1  2x6  max_abs {{.*}}  ok
// CHECK: stats_small  out2  2x2  max_abs {{.*}}  ok
// CHECK: stats_small  out3  2x2  max_abs {{.*}}  ok
// CHECK: stats_small  out4  2x1  max_abs {{.*}}  ok
// CHECK: stats_small  out5  2x1  max_abs {{.*}}  ok
func.func @stats_small(%x: tensor<2x6x5x7x3xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>) {
  %m0, %r0 = med.group_norm_stats %x {groups = 6 : i64} : (tensor<2x6x5x7x3xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>)
  %m1, %r1 = med.group_norm_stats %x {groups = 2 : i64, epsilon = 1.0e-3} : (tensor<2x6x5x7x3xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  %m2, %r2 = med.group_norm_stats %x {groups = 1 : i64} : (tensor<2x6x5x7x3xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>)
  return %m0, %r0, %m1, %r1, %m2, %r2 : tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>
}

// Chunks are boxes of 4 x 16 x 64 (D x H x W) of a plane, the last ones clipped: planes of
// 3 chunks along D (9 = 4 + 4 + 1), of 3 x 2 (D, and H: 23 = 16 + 7) and of 2 x 3 (D, and W:
// 130 = 64 + 64 + 2): trees over 3 to 18 chunks per group.
// CHECK: stats_chunks  out0  1x3  max_abs {{.*}}  ok
// CHECK: stats_chunks  out1  1x3  max_abs {{.*}}  ok
// CHECK: stats_chunks  out2  1x1  max_abs {{.*}}  ok
// CHECK: stats_chunks  out3  1x1  max_abs {{.*}}  ok
// CHECK: stats_chunks  out4  2x3  max_abs {{.*}}  ok
// CHECK: stats_chunks  out5  2x3  max_abs {{.*}}  ok
// CHECK: stats_chunks  out6  2x1  max_abs {{.*}}  ok
// CHECK: stats_chunks  out7  2x1  max_abs {{.*}}  ok
// CHECK: stats_chunks  out8  1x2  max_abs {{.*}}  ok
// CHECK: stats_chunks  out9  1x2  max_abs {{.*}}  ok
func.func @stats_chunks(%x: tensor<1x3x9x11x45xf32>, %y: tensor<2x3x9x23x41xf32>, %z: tensor<1x2x5x3x130xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<1x2xf32>, tensor<1x2xf32>) {
  %m0, %r0 = med.group_norm_stats %x {groups = 3 : i64} : (tensor<1x3x9x11x45xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>)
  %m1, %r1 = med.group_norm_stats %x {groups = 1 : i64} : (tensor<1x3x9x11x45xf32>) -> (tensor<1x1xf32>, tensor<1x1xf32>)
  %m2, %r2 = med.group_norm_stats %y {groups = 3 : i64} : (tensor<2x3x9x23x41xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  %m3, %r3 = med.group_norm_stats %y {groups = 1 : i64} : (tensor<2x3x9x23x41xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>)
  %m4, %r4 = med.group_norm_stats %z {groups = 2 : i64} : (tensor<1x2x5x3x130xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>)
  return %m0, %r0, %m1, %r1, %m2, %r2, %m3, %r3, %m4, %r4 : tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<1x2xf32>, tensor<1x2xf32>
}

// A large mean over a small spread (1000 + x/100, x uniform in [-1, 1): variance about
// 3e-5): in f32 the one-pass E[x²] − E[x]² loses every digit of it (E[x²] ≈ 1e6 has an ulp of
// 0.06), and torch's own f32 statistics are off by 5e-5 in rstd here; the reference is
// torch's computed in f64 from the same f32 values.
// CHECK: stats_offset  out0  2x2  max_abs {{.*}}  ok
// CHECK: stats_offset  out1  2x2  max_abs {{.*}}  ok
func.func @stats_offset(%x: tensor<2x4x9x23x41xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %s = med.constant dense<0.01> : tensor<f32>
  %c = med.constant dense<1000.0> : tensor<f32>
  %x1 = med.mul %x, %s : (tensor<2x4x9x23x41xf32>, tensor<f32>) -> tensor<2x4x9x23x41xf32>
  %x2 = med.add %x1, %c : (tensor<2x4x9x23x41xf32>, tensor<f32>) -> tensor<2x4x9x23x41xf32>
  %m, %r = med.group_norm_stats %x2 {groups = 2 : i64} : (tensor<2x4x9x23x41xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return %m, %r : tensor<2x2xf32>, tensor<2x2xf32>
}

// med.group_norm beside them on the same odd sizes (its statistics are the same
// computation), with its saved statistics, against torch's group norm in f32.
// CHECK: group_norm_chunks  out0  2x3x9x23x41  max_abs {{.*}}  ok
// CHECK: group_norm_chunks  out1  2x3  max_abs {{.*}}  ok
// CHECK: group_norm_chunks  out2  2x3  max_abs {{.*}}  ok
// CHECK: group_norm_chunks  out3  1x3x9x11x45  max_abs {{.*}}  ok
func.func @group_norm_chunks(%x: tensor<2x3x9x23x41xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %z: tensor<1x3x9x11x45xf32>) -> (tensor<2x3x9x23x41xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<1x3x9x11x45xf32>) {
  %y, %s:2 = med.group_norm %x, %g, %b {groups = 3 : i64, save_statistics} : (tensor<2x3x9x23x41xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x9x23x41xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  %w = med.group_norm %z, %g, %b {groups = 1 : i64} : (tensor<1x3x9x11x45xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x9x11x45xf32>
  return %y, %s#0, %s#1, %w : tensor<2x3x9x23x41xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<1x3x9x11x45xf32>
}

// CHECK: 22 outputs checked, 0 failed
