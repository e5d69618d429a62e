// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 2 | FileCheck %s --check-prefix=FD
// RUN: medcheck %t.medc | FileCheck %s --check-prefix=FWD

// Gradients of med.conv3d and med.conv3d_transpose (input, weight, bias if any) against
// torch autograd of torch::conv3d / conv_transpose3d (--grad, f32) and against central
// finite differences on our backend (--fd, f64): strides (with remainders that need
// output_padding in the input gradient), padding, dilation, groups, depthwise, 1x1x1,
// with and without bias. Each loss is sum(y * r) for a random r, so every
// output element carries its own weight. The plain run checks every function op by op,
// the _grad ones included (conv3d_grad_weight via torch autograd).

med.parameter @"c.weight" : tensor<4x3x3x3x3xf32> init uniform(81)
med.parameter @"c.bias" : tensor<4xf32> init uniform(81)
med.parameter @"t.weight" : tensor<4x3x2x2x2xf32> init uniform(24)
med.parameter @"t.bias" : tensor<3xf32> init uniform(24)

// Weight and bias as parameters; odd sizes, padding 1.
// CHECK: conv_param_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_param_grad  grad.c.weight  4x3x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_param_grad  grad.c.bias  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_param_grad  grad.arg0  1x3x7x9x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_param_grad  grad.arg1  1x4x7x9x5  max_abs {{.*}}  ok{{$}}
// FD: conv_param_grad  grad.c.weight  4x3x3x3x3  fd 2 of 324  max_abs {{.*}}  ok
// FD-NEXT: conv_param_grad  grad.c.bias  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: conv_param_grad  grad.arg0  1x3x7x9x5  fd 2 of 945  max_abs {{.*}}  ok
// FD-NEXT: conv_param_grad  grad.arg1  1x4x7x9x5  fd 2 of 1260  max_abs {{.*}}  ok
func.func @conv_param(%x: tensor<1x3x7x9x5xf32>, %r: tensor<1x4x7x9x5xf32>) -> tensor<f32> {
  %v1 = med.param @"c.weight" : tensor<4x3x3x3x3xf32>
  %v2 = med.param @"c.bias" : tensor<4xf32>
  %v3 = med.conv3d %x, %v1, %v2 {padding = array<i64: 1, 1, 1>} : (tensor<1x3x7x9x5xf32>, tensor<4x3x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x7x9x5xf32>
  %v4 = med.mul %v3, %r : (tensor<1x4x7x9x5xf32>, tensor<1x4x7x9x5xf32>) -> tensor<1x4x7x9x5xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x4x7x9x5xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// Strides (2, 2, 3) that leave a remainder on every axis (8+2-3 = 7 = 2*3+1, 10-3 = 7, 8+2-3 = 7 = 3*2+1):
// the input gradient is a transposed convolution with output_padding (1, 1, 1). No bias.
// CHECK: conv_stride_remainder_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_stride_remainder_grad  grad.arg0  2x3x8x10x8  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_stride_remainder_grad  grad.arg1  5x3x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_stride_remainder_grad  grad.arg2  2x5x4x4x3  max_abs {{.*}}  ok{{$}}
// FD: conv_stride_remainder_grad  grad.arg0  2x3x8x10x8  fd 2 of 3840  max_abs {{.*}}  ok
// FD-NEXT: conv_stride_remainder_grad  grad.arg1  5x3x3x3x3  fd 2 of 405  max_abs {{.*}}  ok
// FD-NEXT: conv_stride_remainder_grad  grad.arg2  2x5x4x4x3  fd 2 of 480  max_abs {{.*}}  ok
func.func @conv_stride_remainder(%x: tensor<2x3x8x10x8xf32>, %w: tensor<5x3x3x3x3xf32>, %r: tensor<2x5x4x4x3xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w {stride = array<i64: 2, 2, 3>, padding = array<i64: 1, 0, 1>} : (tensor<2x3x8x10x8xf32>, tensor<5x3x3x3x3xf32>) -> tensor<2x5x4x4x3xf32>
  %v2 = med.mul %v1, %r : (tensor<2x5x4x4x3xf32>, tensor<2x5x4x4x3xf32>) -> tensor<2x5x4x4x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x5x4x4x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Dilation (2, 1, 3) with padding keeping the size; bias as an argument.
// CHECK: conv_dilation_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_dilation_grad  grad.arg0  1x2x9x8x7  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_dilation_grad  grad.arg1  3x2x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_dilation_grad  grad.arg2  3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_dilation_grad  grad.arg3  1x3x9x8x7  max_abs {{.*}}  ok{{$}}
// FD: conv_dilation_grad  grad.arg0  1x2x9x8x7  fd 2 of 1008  max_abs {{.*}}  ok
// FD-NEXT: conv_dilation_grad  grad.arg1  3x2x3x3x3  fd 2 of 162  max_abs {{.*}}  ok
// FD-NEXT: conv_dilation_grad  grad.arg2  3  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: conv_dilation_grad  grad.arg3  1x3x9x8x7  fd 2 of 1512  max_abs {{.*}}  ok
func.func @conv_dilation(%x: tensor<1x2x9x8x7xf32>, %w: tensor<3x2x3x3x3xf32>, %b: tensor<3xf32>, %r: tensor<1x3x9x8x7xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w, %b {padding = array<i64: 2, 1, 3>, dilation = array<i64: 2, 1, 3>} : (tensor<1x2x9x8x7xf32>, tensor<3x2x3x3x3xf32>, tensor<3xf32>) -> tensor<1x3x9x8x7xf32>
  %v2 = med.mul %v1, %r : (tensor<1x3x9x8x7xf32>, tensor<1x3x9x8x7xf32>) -> tensor<1x3x9x8x7xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x3x9x8x7xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Stride, dilation and padding together, a 3x2x3 kernel, a remainder on W (output_padding 0, 0, 1).
// CHECK: conv_stride_dilation_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_stride_dilation_grad  grad.arg0  1x3x11x10x8  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_stride_dilation_grad  grad.arg1  2x3x3x2x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_stride_dilation_grad  grad.arg2  1x2x3x5x3  max_abs {{.*}}  ok{{$}}
// FD: conv_stride_dilation_grad  grad.arg0  1x3x11x10x8  fd 2 of 2640  max_abs {{.*}}  ok
// FD-NEXT: conv_stride_dilation_grad  grad.arg1  2x3x3x2x3  fd 2 of 108  max_abs {{.*}}  ok
// FD-NEXT: conv_stride_dilation_grad  grad.arg2  1x2x3x5x3  fd 2 of 90  max_abs {{.*}}  ok
func.func @conv_stride_dilation(%x: tensor<1x3x11x10x8xf32>, %w: tensor<2x3x3x2x3xf32>, %r: tensor<1x2x3x5x3xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w {stride = array<i64: 3, 2, 2>, padding = array<i64: 0, 1, 0>, dilation = array<i64: 2, 3, 1>} : (tensor<1x3x11x10x8xf32>, tensor<2x3x3x2x3xf32>) -> tensor<1x2x3x5x3xf32>
  %v2 = med.mul %v1, %r : (tensor<1x2x3x5x3xf32>, tensor<1x2x3x5x3xf32>) -> tensor<1x2x3x5x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x3x5x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// groups = 2.
// CHECK: conv_groups_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_groups_grad  grad.arg0  1x6x5x7x6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_groups_grad  grad.arg1  4x3x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_groups_grad  grad.arg2  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_groups_grad  grad.arg3  1x4x5x7x6  max_abs {{.*}}  ok{{$}}
// FD: conv_groups_grad  grad.arg0  1x6x5x7x6  fd 2 of 1260  max_abs {{.*}}  ok
// FD-NEXT: conv_groups_grad  grad.arg1  4x3x3x3x3  fd 2 of 324  max_abs {{.*}}  ok
// FD-NEXT: conv_groups_grad  grad.arg2  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: conv_groups_grad  grad.arg3  1x4x5x7x6  fd 2 of 840  max_abs {{.*}}  ok
func.func @conv_groups(%x: tensor<1x6x5x7x6xf32>, %w: tensor<4x3x3x3x3xf32>, %b: tensor<4xf32>, %r: tensor<1x4x5x7x6xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>, groups = 2 : i64} : (tensor<1x6x5x7x6xf32>, tensor<4x3x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x7x6xf32>
  %v2 = med.mul %v1, %r : (tensor<1x4x5x7x6xf32>, tensor<1x4x5x7x6xf32>) -> tensor<1x4x5x7x6xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x4x5x7x6xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Depthwise (groups = Cin = Cout, MedNeXt) and depthwise with a channel multiplier of 2 and
// stride 2 (6+2-3 = 5 leaves a remainder on H and W: output_padding 1 in the input gradient);
// x feeds both (its gradient sums two contributions).
// CHECK: conv_depthwise_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_depthwise_grad  grad.arg0  2x5x7x6x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_depthwise_grad  grad.arg1  5x1x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_depthwise_grad  grad.arg2  5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_depthwise_grad  grad.arg3  10x1x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_depthwise_grad  grad.arg4  10  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_depthwise_grad  grad.arg5  2x5x7x6x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_depthwise_grad  grad.arg6  2x10x4x3x3  max_abs {{.*}}  ok{{$}}
// FD: conv_depthwise_grad  grad.arg0  2x5x7x6x5  fd 2 of 2100  max_abs {{.*}}  ok
// FD-NEXT: conv_depthwise_grad  grad.arg1  5x1x3x3x3  fd 2 of 135  max_abs {{.*}}  ok
// FD-NEXT: conv_depthwise_grad  grad.arg2  5  fd 2 of 5  max_abs {{.*}}  ok
// FD-NEXT: conv_depthwise_grad  grad.arg3  10x1x3x3x3  fd 2 of 270  max_abs {{.*}}  ok
// FD-NEXT: conv_depthwise_grad  grad.arg4  10  fd 2 of 10  max_abs {{.*}}  ok
// FD-NEXT: conv_depthwise_grad  grad.arg5  2x5x7x6x5  fd 2 of 2100  max_abs {{.*}}  ok
// FD-NEXT: conv_depthwise_grad  grad.arg6  2x10x4x3x3  fd 2 of 720  max_abs {{.*}}  ok
func.func @conv_depthwise(%x: tensor<2x5x7x6x5xf32>, %w: tensor<5x1x3x3x3xf32>, %b: tensor<5xf32>, %w2: tensor<10x1x3x3x3xf32>, %b2: tensor<10xf32>, %r: tensor<2x5x7x6x5xf32>, %r2: tensor<2x10x4x3x3xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>, groups = 5 : i64} : (tensor<2x5x7x6x5xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x7x6x5xf32>
  %v2 = med.conv3d %x, %w2, %b2 {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>, groups = 5 : i64} : (tensor<2x5x7x6x5xf32>, tensor<10x1x3x3x3xf32>, tensor<10xf32>) -> tensor<2x10x4x3x3xf32>
  %v3 = med.mul %v1, %r : (tensor<2x5x7x6x5xf32>, tensor<2x5x7x6x5xf32>) -> tensor<2x5x7x6x5xf32>
  %v4 = med.reduce sum %v3 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x5x7x6x5xf32>) -> tensor<f32>
  %v5 = med.mul %v2, %r2 : (tensor<2x10x4x3x3xf32>, tensor<2x10x4x3x3xf32>) -> tensor<2x10x4x3x3xf32>
  %v6 = med.reduce sum %v5 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x10x4x3x3xf32>) -> tensor<f32>
  %v7 = med.add %v4, %v6 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %v7 : tensor<f32>
}

// 1x1x1 convolution (MedNeXt's expansion and compression).
// CHECK: conv_pointwise_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_pointwise_grad  grad.arg0  2x4x3x5x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_pointwise_grad  grad.arg1  6x4x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_pointwise_grad  grad.arg2  6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_pointwise_grad  grad.arg3  2x6x3x5x4  max_abs {{.*}}  ok{{$}}
// FD: conv_pointwise_grad  grad.arg0  2x4x3x5x4  fd 2 of 480  max_abs {{.*}}  ok
// FD-NEXT: conv_pointwise_grad  grad.arg1  6x4x1x1x1  fd 2 of 24  max_abs {{.*}}  ok
// FD-NEXT: conv_pointwise_grad  grad.arg2  6  fd 2 of 6  max_abs {{.*}}  ok
// FD-NEXT: conv_pointwise_grad  grad.arg3  2x6x3x5x4  fd 2 of 720  max_abs {{.*}}  ok
func.func @conv_pointwise(%x: tensor<2x4x3x5x4xf32>, %w: tensor<6x4x1x1x1xf32>, %b: tensor<6xf32>, %r: tensor<2x6x3x5x4xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w, %b : (tensor<2x4x3x5x4xf32>, tensor<6x4x1x1x1xf32>, tensor<6xf32>) -> tensor<2x6x3x5x4xf32>
  %v2 = med.mul %v1, %r : (tensor<2x6x3x5x4xf32>, tensor<2x6x3x5x4xf32>) -> tensor<2x6x3x5x4xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x6x3x5x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Transposed convolution with parameters, kernel 2 stride 2 (upsampling).
// CHECK: convt_param_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_param_grad  grad.t.weight  4x3x2x2x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_param_grad  grad.t.bias  3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_param_grad  grad.arg0  1x4x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_param_grad  grad.arg1  1x3x6x8x10  max_abs {{.*}}  ok{{$}}
// FD: convt_param_grad  grad.t.weight  4x3x2x2x2  fd 2 of 96  max_abs {{.*}}  ok
// FD-NEXT: convt_param_grad  grad.t.bias  3  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: convt_param_grad  grad.arg0  1x4x3x4x5  fd 2 of 240  max_abs {{.*}}  ok
// FD-NEXT: convt_param_grad  grad.arg1  1x3x6x8x10  fd 2 of 1440  max_abs {{.*}}  ok
func.func @convt_param(%x: tensor<1x4x3x4x5xf32>, %r: tensor<1x3x6x8x10xf32>) -> tensor<f32> {
  %v1 = med.param @"t.weight" : tensor<4x3x2x2x2xf32>
  %v2 = med.param @"t.bias" : tensor<3xf32>
  %v3 = med.conv3d_transpose %x, %v1, %v2 {stride = array<i64: 2, 2, 2>} : (tensor<1x4x3x4x5xf32>, tensor<4x3x2x2x2xf32>, tensor<3xf32>) -> tensor<1x3x6x8x10xf32>
  %v4 = med.mul %v3, %r : (tensor<1x3x6x8x10xf32>, tensor<1x3x6x8x10xf32>) -> tensor<1x3x6x8x10xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x3x6x8x10xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// Transposed convolution, stride 2, padding 1, output_padding (1, 0, 1) < stride, no bias.
// CHECK: convt_output_padding_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_output_padding_grad  grad.arg0  2x3x3x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_output_padding_grad  grad.arg1  3x2x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_output_padding_grad  grad.arg2  2x2x6x7x6  max_abs {{.*}}  ok{{$}}
// FD: convt_output_padding_grad  grad.arg0  2x3x3x4x3  fd 2 of 216  max_abs {{.*}}  ok
// FD-NEXT: convt_output_padding_grad  grad.arg1  3x2x3x3x3  fd 2 of 162  max_abs {{.*}}  ok
// FD-NEXT: convt_output_padding_grad  grad.arg2  2x2x6x7x6  fd 2 of 1008  max_abs {{.*}}  ok
func.func @convt_output_padding(%x: tensor<2x3x3x4x3xf32>, %w: tensor<3x2x3x3x3xf32>, %r: tensor<2x2x6x7x6xf32>) -> tensor<f32> {
  %v1 = med.conv3d_transpose %x, %w {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>, output_padding = array<i64: 1, 0, 1>} : (tensor<2x3x3x4x3xf32>, tensor<3x2x3x3x3xf32>) -> tensor<2x2x6x7x6xf32>
  %v2 = med.mul %v1, %r : (tensor<2x2x6x7x6xf32>, tensor<2x2x6x7x6xf32>) -> tensor<2x2x6x7x6xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x2x6x7x6xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Depthwise transposed convolution, stride 2, padding 1, output_padding 1 (MedNeXt's up blocks).
// CHECK: convt_depthwise_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_depthwise_grad  grad.arg0  1x4x3x3x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_depthwise_grad  grad.arg1  4x1x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_depthwise_grad  grad.arg2  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_depthwise_grad  grad.arg3  1x4x6x6x8  max_abs {{.*}}  ok{{$}}
// FD: convt_depthwise_grad  grad.arg0  1x4x3x3x4  fd 2 of 144  max_abs {{.*}}  ok
// FD-NEXT: convt_depthwise_grad  grad.arg1  4x1x3x3x3  fd 2 of 108  max_abs {{.*}}  ok
// FD-NEXT: convt_depthwise_grad  grad.arg2  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: convt_depthwise_grad  grad.arg3  1x4x6x6x8  fd 2 of 1152  max_abs {{.*}}  ok
func.func @convt_depthwise(%x: tensor<1x4x3x3x4xf32>, %w: tensor<4x1x3x3x3xf32>, %b: tensor<4xf32>, %r: tensor<1x4x6x6x8xf32>) -> tensor<f32> {
  %v1 = med.conv3d_transpose %x, %w, %b {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>, output_padding = array<i64: 1, 1, 1>, groups = 4 : i64} : (tensor<1x4x3x3x4xf32>, tensor<4x1x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6x8xf32>
  %v2 = med.mul %v1, %r : (tensor<1x4x6x6x8xf32>, tensor<1x4x6x6x8xf32>) -> tensor<1x4x6x6x8xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x4x6x6x8xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Transposed convolution with groups = 2 (4 -> 6 channels), stride (2, 1, 2), dilation (1, 2, 1).
// CHECK: convt_groups_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_groups_grad  grad.arg0  1x4x3x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_groups_grad  grad.arg1  4x3x2x2x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_groups_grad  grad.arg2  6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: convt_groups_grad  grad.arg3  1x6x6x6x6  max_abs {{.*}}  ok{{$}}
// FD: convt_groups_grad  grad.arg0  1x4x3x4x3  fd 2 of 144  max_abs {{.*}}  ok
// FD-NEXT: convt_groups_grad  grad.arg1  4x3x2x2x2  fd 2 of 96  max_abs {{.*}}  ok
// FD-NEXT: convt_groups_grad  grad.arg2  6  fd 2 of 6  max_abs {{.*}}  ok
// FD-NEXT: convt_groups_grad  grad.arg3  1x6x6x6x6  fd 2 of 1296  max_abs {{.*}}  ok
func.func @convt_groups(%x: tensor<1x4x3x4x3xf32>, %w: tensor<4x3x2x2x2xf32>, %b: tensor<6xf32>, %r: tensor<1x6x6x6x6xf32>) -> tensor<f32> {
  %v1 = med.conv3d_transpose %x, %w, %b {stride = array<i64: 2, 1, 2>, dilation = array<i64: 1, 2, 1>, groups = 2 : i64} : (tensor<1x4x3x4x3xf32>, tensor<4x3x2x2x2xf32>, tensor<6xf32>) -> tensor<1x6x6x6x6xf32>
  %v2 = med.mul %v1, %r : (tensor<1x6x6x6x6xf32>, tensor<1x6x6x6x6xf32>) -> tensor<1x6x6x6x6xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x6x6x6x6xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// A strided convolution into a transposed one (a down/up pair): gradients flow through both.
// CHECK: conv_chain_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_chain_grad  grad.arg0  1x2x6x5x7  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_chain_grad  grad.arg1  3x2x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_chain_grad  grad.arg2  3x2x2x2x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: conv_chain_grad  grad.arg3  1x2x6x4x8  max_abs {{.*}}  ok{{$}}
// FD: conv_chain_grad  grad.arg0  1x2x6x5x7  fd 2 of 420  max_abs {{.*}}  ok
// FD-NEXT: conv_chain_grad  grad.arg1  3x2x3x3x3  fd 2 of 162  max_abs {{.*}}  ok
// FD-NEXT: conv_chain_grad  grad.arg2  3x2x2x2x2  fd 2 of 48  max_abs {{.*}}  ok
// FD-NEXT: conv_chain_grad  grad.arg3  1x2x6x4x8  fd 2 of 384  max_abs {{.*}}  ok
func.func @conv_chain(%x: tensor<1x2x6x5x7xf32>, %w: tensor<3x2x3x3x3xf32>, %wt: tensor<3x2x2x2x2xf32>, %r: tensor<1x2x6x4x8xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 0, 1>} : (tensor<1x2x6x5x7xf32>, tensor<3x2x3x3x3xf32>) -> tensor<1x3x3x2x4xf32>
  %v2 = med.gelu %v1 : tensor<1x3x3x2x4xf32>
  %v3 = med.conv3d_transpose %v2, %wt {stride = array<i64: 2, 2, 2>} : (tensor<1x3x3x2x4xf32>, tensor<3x2x2x2x2xf32>) -> tensor<1x2x6x4x8xf32>
  %v4 = med.mul %v3, %r : (tensor<1x2x6x4x8xf32>, tensor<1x2x6x4x8xf32>) -> tensor<1x2x6x4x8xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x6x4x8xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// CHECK: 60 gradient outputs checked against torch autograd, 0 failed (tolerance 1.0e-04, precision f32)
// FD: 48 gradients checked by finite differences (96 elements), 0 failed (tolerance 1.0e-06, f64)
// FWD-NOT: FAIL
// FWD: 72 outputs checked, 0 failed (tolerance 1.0e-04, precision f32)
