// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 11 | FileCheck %s

// Unary ops, binary ops with NumPy broadcasting, and constants, against torch.

// log and sqrt get positive operands (exp, sigmoid).
// CHECK: unary  out0  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: unary  out1  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: unary  out2  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: unary  out3  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: unary  out4  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: unary  out5  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: unary  out6  2x3x5x4x7  max_abs {{.*}}  ok
func.func @unary(%x: tensor<2x3x5x4x7xf32>) -> (tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>) {
  %0 = med.gelu %x : tensor<2x3x5x4x7xf32>
  %1 = med.sigmoid %x : tensor<2x3x5x4x7xf32>
  %2 = med.neg %x : tensor<2x3x5x4x7xf32>
  %3 = med.exp %x : tensor<2x3x5x4x7xf32>
  %4 = med.log %1 : tensor<2x3x5x4x7xf32>
  %5 = med.sqrt %3 : tensor<2x3x5x4x7xf32>
  %6 = med.log %3 : tensor<2x3x5x4x7xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>
}

// Large magnitudes: GELU and sigmoid tails, exp overflow to inf in f32 (equal in both).
// CHECK: unary_large  out0  3x17  max_abs {{.*}}  ok
// CHECK: unary_large  out1  3x17  max_abs {{.*}}  ok
// CHECK: unary_large  out2  3x17  max_abs {{.*}}  ok
func.func @unary_large(%x: tensor<3x17xf32>) -> (tensor<3x17xf32>, tensor<3x17xf32>, tensor<3x17xf32>) {
  %c = med.constant dense<30.0> : tensor<f32>
  %big = med.mul %x, %c : (tensor<3x17xf32>, tensor<f32>) -> tensor<3x17xf32>
  %0 = med.gelu %big : tensor<3x17xf32>
  %1 = med.sigmoid %big : tensor<3x17xf32>
  %2 = med.exp %big : tensor<3x17xf32>
  return %0, %1, %2 : tensor<3x17xf32>, tensor<3x17xf32>, tensor<3x17xf32>
}

// Same shapes; different ranks (trailing alignment); size-1 axes on both sides; scalars.
// CHECK: binary  out0  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: binary  out1  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: binary  out2  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: binary  out3  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: binary  out4  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: binary  out5  2x3x5x4x7  max_abs {{.*}}  ok
func.func @binary(%x: tensor<2x3x5x4x7xf32>, %y: tensor<2x3x5x4x7xf32>, %r: tensor<5x1x7xf32>, %c: tensor<1x3x1x1x1xf32>, %s: tensor<f32>) -> (tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>) {
  %0 = med.add %x, %y : (tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>) -> tensor<2x3x5x4x7xf32>
  %1 = med.sub %r, %x : (tensor<5x1x7xf32>, tensor<2x3x5x4x7xf32>) -> tensor<2x3x5x4x7xf32>
  %2 = med.mul %x, %s : (tensor<2x3x5x4x7xf32>, tensor<f32>) -> tensor<2x3x5x4x7xf32>
  %e = med.exp %c : tensor<1x3x1x1x1xf32>
  %3 = med.div %x, %e : (tensor<2x3x5x4x7xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x4x7xf32>
  %4 = med.max %x, %c : (tensor<2x3x5x4x7xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x4x7xf32>
  %5 = med.min %s, %y : (tensor<f32>, tensor<2x3x5x4x7xf32>) -> tensor<2x3x5x4x7xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>
}

// Both operands broadcast (2x1x4 with 3x1 -> 2x3x4); every op on rank 3.
// CHECK: binary_both  out0  2x3x4  max_abs {{.*}}  ok
// CHECK: binary_both  out1  2x3x4  max_abs {{.*}}  ok
// CHECK: binary_both  out2  2x3x4  max_abs {{.*}}  ok
// CHECK: binary_both  out3  2x3x4  max_abs {{.*}}  ok
// CHECK: binary_both  out4  2x3x4  max_abs {{.*}}  ok
// CHECK: binary_both  out5  2x3x4  max_abs {{.*}}  ok
func.func @binary_both(%a: tensor<2x1x4xf32>, %b: tensor<3x1xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %0 = med.add %a, %b : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %1 = med.sub %b, %a : (tensor<3x1xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %2 = med.mul %a, %b : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %eb = med.exp %b : tensor<3x1xf32>
  %3 = med.div %a, %eb : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %4 = med.max %b, %a : (tensor<3x1xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %5 = med.min %a, %b : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// Scalar with scalar; a size-1 axis against a full one at the front.
// CHECK: binary_scalar  out0  scalar  max_abs {{.*}}  ok
// CHECK: binary_scalar  out1  6x5  max_abs {{.*}}  ok
func.func @binary_scalar(%s: tensor<f32>, %t: tensor<f32>, %u: tensor<1x5xf32>, %v: tensor<6x1xf32>) -> (tensor<f32>, tensor<6x5xf32>) {
  %0 = med.sub %s, %t : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %1 = med.mul %u, %v : (tensor<1x5xf32>, tensor<6x1xf32>) -> tensor<6x5xf32>
  return %0, %1 : tensor<f32>, tensor<6x5xf32>
}

// Splat and non-splat constants, returned and used.
// CHECK: constants  out0  scalar  max_abs {{.*}}  ok
// CHECK: constants  out1  3x1  max_abs {{.*}}  ok
// CHECK: constants  out2  2x3x4  max_abs {{.*}}  ok
// CHECK: constants  out3  2x3  max_abs {{.*}}  ok
func.func @constants(%x: tensor<2x3x4xf32>) -> (tensor<f32>, tensor<3x1xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>) {
  %0 = med.constant dense<0.5> : tensor<f32>
  %1 = med.constant dense<[[1.5], [-2.0], [0.25]]> : tensor<3x1xf32>
  %2 = med.mul %x, %1 : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %3 = med.add %2, %0 : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %4 = med.constant dense<-3.0> : tensor<2x3xf32>
  return %0, %1, %3, %4 : tensor<f32>, tensor<3x1xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>
}

// NaN and inf at the same places on both sides count as equal: sqrt and log of negative
// values, division by zero; max and min propagate NaN from either side (as torch does).
// CHECK: nan_inf  out0  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out1  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out2  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out3  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out4  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out5  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out6  4x9  max_abs {{.*}}  ok
func.func @nan_inf(%x: tensor<4x9xf32>, %y: tensor<4x9xf32>) -> (tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>) {
  %0 = med.sqrt %x : tensor<4x9xf32>
  %1 = med.log %x : tensor<4x9xf32>
  %zero = med.constant dense<0.0> : tensor<f32>
  %2 = med.div %x, %zero : (tensor<4x9xf32>, tensor<f32>) -> tensor<4x9xf32>
  %3 = med.max %0, %y : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  %4 = med.max %y, %0 : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  %5 = med.min %0, %y : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  %6 = med.min %y, %0 : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>
}

// CHECK: 35 outputs checked, 0 failed
