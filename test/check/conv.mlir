// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 7 | FileCheck %s
// RUN: medcheck %t.medc --threads 1 --func conv_groups --func convt_groups | FileCheck %s --check-prefix=SOME

// med.conv3d and med.conv3d_transpose against torch::conv3d / torch::conv_transpose3d:
// strides, padding, dilation, groups (depthwise, channel multiplier), 1x1x1 and asymmetric
// kernels, with and without bias, weights as parameters or as arguments; odd sizes.

med.parameter @"c.weight" : tensor<4x3x3x3x3xf32> init uniform(81)
med.parameter @"c.bias" : tensor<4xf32> init uniform(81)
med.parameter @"t.weight" : tensor<4x3x2x2x2xf32> init uniform(24)
med.parameter @"t.bias" : tensor<3xf32> init uniform(24)

// CHECK: conv_param  out0  1x4x7x9x5  max_abs {{.*}}  ok
func.func @conv_param(%x: tensor<1x3x7x9x5xf32>) -> tensor<1x4x7x9x5xf32> {
  %w = med.param @"c.weight" : tensor<4x3x3x3x3xf32>
  %b = med.param @"c.bias" : tensor<4xf32>
  %y = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>} : (tensor<1x3x7x9x5xf32>, tensor<4x3x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x7x9x5xf32>
  return %y : tensor<1x4x7x9x5xf32>
}

// CHECK: conv_stride_pad  out0  2x5x4x7x4  max_abs {{.*}}  ok
func.func @conv_stride_pad(%x: tensor<2x3x7x9x5xf32>, %w: tensor<5x3x3x3x3xf32>) -> tensor<2x5x4x7x4xf32> {
  %y = med.conv3d %x, %w {stride = array<i64: 2, 1, 2>, padding = array<i64: 1, 0, 2>} : (tensor<2x3x7x9x5xf32>, tensor<5x3x3x3x3xf32>) -> tensor<2x5x4x7x4xf32>
  return %y : tensor<2x5x4x7x4xf32>
}

// CHECK: conv_dilation  out0  1x3x9x8x7  max_abs {{.*}}  ok
func.func @conv_dilation(%x: tensor<1x2x9x8x7xf32>, %w: tensor<3x2x3x3x3xf32>, %b: tensor<3xf32>) -> tensor<1x3x9x8x7xf32> {
  %y = med.conv3d %x, %w, %b {dilation = array<i64: 2, 1, 3>, padding = array<i64: 2, 1, 3>} : (tensor<1x2x9x8x7xf32>, tensor<3x2x3x3x3xf32>, tensor<3xf32>) -> tensor<1x3x9x8x7xf32>
  return %y : tensor<1x3x9x8x7xf32>
}

// Stride, dilation and padding together, no padding on one axis.
// CHECK: conv_stride_dilation  out0  1x2x3x5x3  max_abs {{.*}}  ok
func.func @conv_stride_dilation(%x: tensor<1x3x11x10x7xf32>, %w: tensor<2x3x3x2x3xf32>) -> tensor<1x2x3x5x3xf32> {
  %y = med.conv3d %x, %w {stride = array<i64: 3, 2, 2>, dilation = array<i64: 2, 3, 1>, padding = array<i64: 0, 1, 0>} : (tensor<1x3x11x10x7xf32>, tensor<2x3x3x2x3xf32>) -> tensor<1x2x3x5x3xf32>
  return %y : tensor<1x2x3x5x3xf32>
}

// CHECK: conv_groups  out0  1x4x5x7x6  max_abs {{.*}}  ok
// SOME: conv_groups  out0  1x4x5x7x6  max_abs {{.*}}  ok
func.func @conv_groups(%x: tensor<1x6x5x7x6xf32>, %w: tensor<4x3x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x5x7x6xf32> {
  %y = med.conv3d %x, %w, %b {groups = 2 : i64, padding = array<i64: 1, 1, 1>} : (tensor<1x6x5x7x6xf32>, tensor<4x3x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x7x6xf32>
  return %y : tensor<1x4x5x7x6xf32>
}

// Depthwise (groups = Cin = Cout) as in MedNeXt, and with a channel multiplier of 2.
// CHECK: conv_depthwise  out0  2x5x7x6x5  max_abs {{.*}}  ok
// CHECK: conv_depthwise  out1  2x10x4x3x3  max_abs {{.*}}  ok
func.func @conv_depthwise(%x: tensor<2x5x7x6x5xf32>, %w: tensor<5x1x3x3x3xf32>, %b: tensor<5xf32>, %w2: tensor<10x1x3x3x3xf32>) -> (tensor<2x5x7x6x5xf32>, tensor<2x10x4x3x3xf32>) {
  %y = med.conv3d %x, %w, %b {groups = 5 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x5x7x6x5xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x7x6x5xf32>
  %z = med.conv3d %x, %w2 {groups = 5 : i64, stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>} : (tensor<2x5x7x6x5xf32>, tensor<10x1x3x3x3xf32>) -> tensor<2x10x4x3x3xf32>
  return %y, %z : tensor<2x5x7x6x5xf32>, tensor<2x10x4x3x3xf32>
}

// Depthwise 5x5x5 (MedNeXt k5) and 7x7x7.
// CHECK: conv_depthwise_large  out0  1x3x9x7x6  max_abs {{.*}}  ok
// CHECK: conv_depthwise_large  out1  1x3x9x7x6  max_abs {{.*}}  ok
func.func @conv_depthwise_large(%x: tensor<1x3x9x7x6xf32>, %w5: tensor<3x1x5x5x5xf32>, %w7: tensor<3x1x7x7x7xf32>, %b: tensor<3xf32>) -> (tensor<1x3x9x7x6xf32>, tensor<1x3x9x7x6xf32>) {
  %y = med.conv3d %x, %w5, %b {groups = 3 : i64, padding = array<i64: 2, 2, 2>} : (tensor<1x3x9x7x6xf32>, tensor<3x1x5x5x5xf32>, tensor<3xf32>) -> tensor<1x3x9x7x6xf32>
  %z = med.conv3d %x, %w7 {groups = 3 : i64, padding = array<i64: 3, 3, 3>} : (tensor<1x3x9x7x6xf32>, tensor<3x1x7x7x7xf32>) -> tensor<1x3x9x7x6xf32>
  return %y, %z : tensor<1x3x9x7x6xf32>, tensor<1x3x9x7x6xf32>
}

// CHECK: conv_pointwise  out0  1x3x5x6x7  max_abs {{.*}}  ok
// CHECK: conv_pointwise  out1  1x3x3x3x4  max_abs {{.*}}  ok
func.func @conv_pointwise(%x: tensor<1x7x5x6x7xf32>, %w: tensor<3x7x1x1x1xf32>, %b: tensor<3xf32>) -> (tensor<1x3x5x6x7xf32>, tensor<1x3x3x3x4xf32>) {
  %y = med.conv3d %x, %w, %b : (tensor<1x7x5x6x7xf32>, tensor<3x7x1x1x1xf32>, tensor<3xf32>) -> tensor<1x3x5x6x7xf32>
  %z = med.conv3d %x, %w {stride = array<i64: 2, 2, 2>} : (tensor<1x7x5x6x7xf32>, tensor<3x7x1x1x1xf32>) -> tensor<1x3x3x3x4xf32>
  return %y, %z : tensor<1x3x5x6x7xf32>, tensor<1x3x3x3x4xf32>
}

// CHECK: conv_asymmetric  out0  1x4x7x5x5  max_abs {{.*}}  ok
func.func @conv_asymmetric(%x: tensor<1x2x7x9x5xf32>, %w: tensor<4x2x3x1x5xf32>, %b: tensor<4xf32>) -> tensor<1x4x7x5x5xf32> {
  %y = med.conv3d %x, %w, %b {stride = array<i64: 1, 2, 1>, padding = array<i64: 1, 0, 2>} : (tensor<1x2x7x9x5xf32>, tensor<4x2x3x1x5xf32>, tensor<4xf32>) -> tensor<1x4x7x5x5xf32>
  return %y : tensor<1x4x7x5x5xf32>
}

// Wider channels, so that accumulation order matters (Cin*k^3 = 432 terms).
// CHECK: conv_wide  out0  2x24x5x4x3  max_abs {{.*}}  ok
func.func @conv_wide(%x: tensor<2x16x5x4x3xf32>, %w: tensor<24x16x3x3x3xf32>, %b: tensor<24xf32>) -> tensor<2x24x5x4x3xf32> {
  %y = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>} : (tensor<2x16x5x4x3xf32>, tensor<24x16x3x3x3xf32>, tensor<24xf32>) -> tensor<2x24x5x4x3xf32>
  return %y : tensor<2x24x5x4x3xf32>
}

// ---- transposed ----

// CHECK: convt_param  out0  1x3x6x10x8  max_abs {{.*}}  ok
func.func @convt_param(%x: tensor<1x4x3x5x4xf32>) -> tensor<1x3x6x10x8xf32> {
  %w = med.param @"t.weight" : tensor<4x3x2x2x2xf32>
  %b = med.param @"t.bias" : tensor<3xf32>
  %y = med.conv3d_transpose %x, %w, %b {stride = array<i64: 2, 2, 2>} : (tensor<1x4x3x5x4xf32>, tensor<4x3x2x2x2xf32>, tensor<3xf32>) -> tensor<1x3x6x10x8xf32>
  return %y : tensor<1x3x6x10x8xf32>
}

// CHECK: convt_pad_outpad  out0  1x2x8x6x10  max_abs {{.*}}  ok
func.func @convt_pad_outpad(%x: tensor<1x3x4x3x5xf32>, %w: tensor<3x2x3x3x3xf32>) -> tensor<1x2x8x6x10xf32> {
  %y = med.conv3d_transpose %x, %w {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>, output_padding = array<i64: 1, 1, 1>} : (tensor<1x3x4x3x5xf32>, tensor<3x2x3x3x3xf32>) -> tensor<1x2x8x6x10xf32>
  return %y : tensor<1x2x8x6x10xf32>
}

// Per-axis stride, dilation, padding and output_padding; asymmetric kernel.
// CHECK: convt_dilation  out0  2x3x5x9x9  max_abs {{.*}}  ok
func.func @convt_dilation(%x: tensor<2x2x3x4x3xf32>, %w: tensor<2x3x3x2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3x5x9x9xf32> {
  %y = med.conv3d_transpose %x, %w, %b {stride = array<i64: 1, 2, 3>, dilation = array<i64: 2, 1, 1>, padding = array<i64: 1, 0, 1>, output_padding = array<i64: 0, 1, 2>} : (tensor<2x2x3x4x3xf32>, tensor<2x3x3x2x3xf32>, tensor<3xf32>) -> tensor<2x3x5x9x9xf32>
  return %y : tensor<2x3x5x9x9xf32>
}

// CHECK: convt_groups  out0  1x6x5x5x5  max_abs {{.*}}  ok
// SOME: convt_groups  out0  1x6x5x5x5  max_abs {{.*}}  ok
func.func @convt_groups(%x: tensor<1x4x3x3x3xf32>, %w: tensor<4x3x3x3x3xf32>, %b: tensor<6xf32>) -> tensor<1x6x5x5x5xf32> {
  %y = med.conv3d_transpose %x, %w, %b {groups = 2 : i64, stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>} : (tensor<1x4x3x3x3xf32>, tensor<4x3x3x3x3xf32>, tensor<6xf32>) -> tensor<1x6x5x5x5xf32>
  return %y : tensor<1x6x5x5x5xf32>
}

// Depthwise transposed (MedNeXt's up blocks), with and without output_padding.
// CHECK: convt_depthwise  out0  1x5x5x7x5  max_abs {{.*}}  ok
// CHECK: convt_depthwise  out1  1x5x6x8x6  max_abs {{.*}}  ok
func.func @convt_depthwise(%x: tensor<1x5x3x4x3xf32>, %w: tensor<5x1x3x3x3xf32>, %b: tensor<5xf32>) -> (tensor<1x5x5x7x5xf32>, tensor<1x5x6x8x6xf32>) {
  %y = med.conv3d_transpose %x, %w, %b {groups = 5 : i64, stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>} : (tensor<1x5x3x4x3xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<1x5x5x7x5xf32>
  %z = med.conv3d_transpose %x, %w {groups = 5 : i64, stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>, output_padding = array<i64: 1, 1, 1>} : (tensor<1x5x3x4x3xf32>, tensor<5x1x3x3x3xf32>) -> tensor<1x5x6x8x6xf32>
  return %y, %z : tensor<1x5x5x7x5xf32>, tensor<1x5x6x8x6xf32>
}

// Stride 1, no padding: a "full" correlation.
// CHECK: convt_full  out0  2x3x7x6x5  max_abs {{.*}}  ok
func.func @convt_full(%x: tensor<2x4x5x4x3xf32>, %w: tensor<4x3x3x3x3xf32>) -> tensor<2x3x7x6x5xf32> {
  %y = med.conv3d_transpose %x, %w : (tensor<2x4x5x4x3xf32>, tensor<4x3x3x3x3xf32>) -> tensor<2x3x7x6x5xf32>
  return %y : tensor<2x3x7x6x5xf32>
}

// CHECK: 20 outputs checked, 0 failed
// SOME: 2 outputs checked, 0 failed
