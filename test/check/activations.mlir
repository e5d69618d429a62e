// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 5 | FileCheck %s

// The rectifiers against torch (relu, leaky_relu, prelu: torch's own prelu for a slope per
// channel or shared, its definition for a slope along another axis), on random normal
// inputs at odd sizes (both sides of 0 in every channel).

// CHECK: rectifiers  out0  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: rectifiers  out1  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: rectifiers  out2  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: rectifiers  out3  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: rectifiers  out4  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: rectifiers  out5  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: rectifiers  out6  2x3x5x4x7  max_abs {{.*}}  ok
func.func @rectifiers(%x: tensor<2x3x5x4x7xf32>, %c: tensor<3x1x1x1xf32>, %c5: tensor<1x3x1x1x1xf32>, %s: tensor<f32>, %w: tensor<4x7xf32>) -> (tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>) {
  %0 = med.relu %x : tensor<2x3x5x4x7xf32>
  %1 = med.leaky_relu %x : tensor<2x3x5x4x7xf32>
  %2 = med.leaky_relu %x {negative_slope = 0.1 : f64} : tensor<2x3x5x4x7xf32>
  %3 = med.prelu %x, %c : (tensor<2x3x5x4x7xf32>, tensor<3x1x1x1xf32>) -> tensor<2x3x5x4x7xf32>
  %4 = med.prelu %x, %c5 : (tensor<2x3x5x4x7xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x4x7xf32>
  %5 = med.prelu %x, %s : (tensor<2x3x5x4x7xf32>, tensor<f32>) -> tensor<2x3x5x4x7xf32>
  %6 = med.prelu %x, %w : (tensor<2x3x5x4x7xf32>, tensor<4x7xf32>) -> tensor<2x3x5x4x7xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>
}

// A NaN stays NaN through every rectifier; infinities keep their side (log and sqrt of
// negative numbers, division by zero).
// CHECK: nan_inf  out0  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out1  4x9  max_abs {{.*}}  ok
// CHECK: nan_inf  out2  4x9  max_abs {{.*}}  ok
func.func @nan_inf(%x: tensor<4x9xf32>, %s: tensor<9xf32>) -> (tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>) {
  %n = med.log %x : tensor<4x9xf32>
  %zero = med.constant dense<0.0> : tensor<f32>
  %i = med.div %x, %zero : (tensor<4x9xf32>, tensor<f32>) -> tensor<4x9xf32>
  %v = med.add %n, %i : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  %0 = med.relu %v : tensor<4x9xf32>
  %1 = med.leaky_relu %v {negative_slope = 0.2 : f64} : tensor<4x9xf32>
  %2 = med.prelu %v, %s : (tensor<4x9xf32>, tensor<9xf32>) -> tensor<4x9xf32>
  return %0, %1, %2 : tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>
}

// nnU-Net's stage: conv -> instance norm (group norm, groups = C) -> LeakyReLU, the
// activation fused with what follows (a residual add, as ResEnc's blocks end).
// CHECK: conv_norm_lrelu  out0  2x4x5x3x6  max_abs {{.*}}  ok
func.func @conv_norm_lrelu(%x: tensor<2x3x5x3x6xf32>, %w: tensor<4x3x3x3x3xf32>, %b: tensor<4xf32>, %g: tensor<4xf32>, %be: tensor<4xf32>, %r: tensor<2x4x5x3x6xf32>) -> tensor<2x4x5x3x6xf32> {
  %0 = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>} : (tensor<2x3x5x3x6xf32>, tensor<4x3x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x3x6xf32>
  %1 = med.group_norm %0, %g, %be {groups = 4 : i64} : (tensor<2x4x5x3x6xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x5x3x6xf32>
  %2 = med.add %1, %r : (tensor<2x4x5x3x6xf32>, tensor<2x4x5x3x6xf32>) -> tensor<2x4x5x3x6xf32>
  %3 = med.leaky_relu %2 : tensor<2x4x5x3x6xf32>
  return %3 : tensor<2x4x5x3x6xf32>
}

// CHECK: 11 outputs checked, 0 failed
