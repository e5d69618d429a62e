// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 2 | FileCheck %s --check-prefix=FD
// RUN: medcheck %t.medc | FileCheck %s --check-prefix=FWD

// Gradients of med.group_norm (groups 1, 2, C), med.channel_layer_norm and med.grn (input,
// gamma, beta: med.*_norm_grad / med.grn_grad) against torch autograd of torch::group_norm,
// torch::layer_norm and MedNeXt's GRN formula (--grad, f32) and against central finite
// differences (--fd, f64). Losses are sum(y * r) for a random r: a plain sum would make the
// input gradient of a normalization vanish (up to rounding) and say nothing.
// Parameters are uniform-initialized so that gamma and beta are not 1 and 0.
// In the gradient functions the group norms save their statistics and med.group_norm_grad
// reads them; the op-by-op run (FWD) maps those onto torch::native_group_norm and
// torch::native_group_norm_backward.

med.parameter @"gn.weight" : tensor<4xf32> init uniform(3)
med.parameter @"gn.bias" : tensor<4xf32> init uniform(3)
med.parameter @"ln.weight" : tensor<4xf32> init uniform(3)
med.parameter @"ln.bias" : tensor<4xf32> init uniform(3)
med.parameter @"grn.gamma" : tensor<1x4x1x1x1xf32> init uniform(3)
med.parameter @"grn.beta" : tensor<1x4x1x1x1xf32> init uniform(3)

// groups = 1 (layer norm over C, D, H, W); gamma and beta as arguments.
// CHECK: gn_one_group_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_one_group_grad  grad.arg0  2x4x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_one_group_grad  grad.arg1  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_one_group_grad  grad.arg2  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_one_group_grad  grad.arg3  2x4x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: gn_one_group_grad  grad.arg0  2x4x3x4x5  fd 2 of 480  max_abs {{.*}}  ok
// FD-NEXT: gn_one_group_grad  grad.arg1  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: gn_one_group_grad  grad.arg2  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: gn_one_group_grad  grad.arg3  2x4x3x4x5  fd 2 of 480  max_abs {{.*}}  ok
func.func @gn_one_group(%x: tensor<2x4x3x4x5xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>, %r: tensor<2x4x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.group_norm %x, %g, %b {groups = 1 : i64} : (tensor<2x4x3x4x5xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x4x3x4x5xf32>, tensor<2x4x3x4x5xf32>) -> tensor<2x4x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x4x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// groups = 2 with parameters (random values: uniform init), epsilon 1e-3.
// CHECK: gn_two_groups_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_two_groups_grad  grad.gn.weight  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_two_groups_grad  grad.gn.bias  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_two_groups_grad  grad.arg0  1x4x5x3x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_two_groups_grad  grad.arg1  1x4x5x3x4  max_abs {{.*}}  ok{{$}}
// FD: gn_two_groups_grad  grad.gn.weight  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: gn_two_groups_grad  grad.gn.bias  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: gn_two_groups_grad  grad.arg0  1x4x5x3x4  fd 2 of 240  max_abs {{.*}}  ok
// FD-NEXT: gn_two_groups_grad  grad.arg1  1x4x5x3x4  fd 2 of 240  max_abs {{.*}}  ok
func.func @gn_two_groups(%x: tensor<1x4x5x3x4xf32>, %r: tensor<1x4x5x3x4xf32>) -> tensor<f32> {
  %v1 = med.param @"gn.weight" : tensor<4xf32>
  %v2 = med.param @"gn.bias" : tensor<4xf32>
  %v3 = med.group_norm %x, %v1, %v2 {groups = 2 : i64, epsilon = 1.0e-3} : (tensor<1x4x5x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x5x3x4xf32>
  %v4 = med.mul %v3, %r : (tensor<1x4x5x3x4xf32>, tensor<1x4x5x3x4xf32>) -> tensor<1x4x5x3x4xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x4x5x3x4xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// groups = C (instance norm with a per-channel affine, as in MedNeXt).
// CHECK: gn_instance_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_instance_grad  grad.arg0  2x6x3x3x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_instance_grad  grad.arg1  6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_instance_grad  grad.arg2  6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gn_instance_grad  grad.arg3  2x6x3x3x4  max_abs {{.*}}  ok{{$}}
// FD: gn_instance_grad  grad.arg0  2x6x3x3x4  fd 2 of 432  max_abs {{.*}}  ok
// FD-NEXT: gn_instance_grad  grad.arg1  6  fd 2 of 6  max_abs {{.*}}  ok
// FD-NEXT: gn_instance_grad  grad.arg2  6  fd 2 of 6  max_abs {{.*}}  ok
// FD-NEXT: gn_instance_grad  grad.arg3  2x6x3x3x4  fd 2 of 432  max_abs {{.*}}  ok
func.func @gn_instance(%x: tensor<2x6x3x3x4xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>, %r: tensor<2x6x3x3x4xf32>) -> tensor<f32> {
  %v1 = med.group_norm %x, %g, %b {groups = 6 : i64} : (tensor<2x6x3x3x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x3x3x4xf32>
  %v2 = med.mul %v1, %r : (tensor<2x6x3x3x4xf32>, tensor<2x6x3x3x4xf32>) -> tensor<2x6x3x3x4xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x6x3x3x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Channel layer norm with parameters.
// CHECK: cln_param_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_param_grad  grad.ln.weight  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_param_grad  grad.ln.bias  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_param_grad  grad.arg0  2x4x3x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_param_grad  grad.arg1  2x4x3x4x3  max_abs {{.*}}  ok{{$}}
// FD: cln_param_grad  grad.ln.weight  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: cln_param_grad  grad.ln.bias  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: cln_param_grad  grad.arg0  2x4x3x4x3  fd 2 of 288  max_abs {{.*}}  ok
// FD-NEXT: cln_param_grad  grad.arg1  2x4x3x4x3  fd 2 of 288  max_abs {{.*}}  ok
func.func @cln_param(%x: tensor<2x4x3x4x3xf32>, %r: tensor<2x4x3x4x3xf32>) -> tensor<f32> {
  %v1 = med.param @"ln.weight" : tensor<4xf32>
  %v2 = med.param @"ln.bias" : tensor<4xf32>
  %v3 = med.channel_layer_norm %x, %v1, %v2 : (tensor<2x4x3x4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x4x3xf32>
  %v4 = med.mul %v3, %r : (tensor<2x4x3x4x3xf32>, tensor<2x4x3x4x3xf32>) -> tensor<2x4x3x4x3xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x4x3x4x3xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// Channel layer norm, gamma and beta as arguments, epsilon 1e-2.
// CHECK: cln_args_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_args_grad  grad.arg0  1x3x4x2x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_args_grad  grad.arg1  3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_args_grad  grad.arg2  3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: cln_args_grad  grad.arg3  1x3x4x2x5  max_abs {{.*}}  ok{{$}}
// FD: cln_args_grad  grad.arg0  1x3x4x2x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: cln_args_grad  grad.arg1  3  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: cln_args_grad  grad.arg2  3  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: cln_args_grad  grad.arg3  1x3x4x2x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @cln_args(%x: tensor<1x3x4x2x5xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %r: tensor<1x3x4x2x5xf32>) -> tensor<f32> {
  %v1 = med.channel_layer_norm %x, %g, %b {epsilon = 1.0e-2} : (tensor<1x3x4x2x5xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x2x5xf32>
  %v2 = med.mul %v1, %r : (tensor<1x3x4x2x5xf32>, tensor<1x3x4x2x5xf32>) -> tensor<1x3x4x2x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x3x4x2x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// GRN with 1xCx1x1x1 parameters (random values).
// CHECK: grn_param_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_param_grad  grad.grn.gamma  1x4x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_param_grad  grad.grn.beta  1x4x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_param_grad  grad.arg0  2x4x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_param_grad  grad.arg1  2x4x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: grn_param_grad  grad.grn.gamma  1x4x1x1x1  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: grn_param_grad  grad.grn.beta  1x4x1x1x1  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: grn_param_grad  grad.arg0  2x4x3x4x5  fd 2 of 480  max_abs {{.*}}  ok
// FD-NEXT: grn_param_grad  grad.arg1  2x4x3x4x5  fd 2 of 480  max_abs {{.*}}  ok
func.func @grn_param(%x: tensor<2x4x3x4x5xf32>, %r: tensor<2x4x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.param @"grn.gamma" : tensor<1x4x1x1x1xf32>
  %v2 = med.param @"grn.beta" : tensor<1x4x1x1x1xf32>
  %v3 = med.grn %x, %v1, %v2 : (tensor<2x4x3x4x5xf32>, tensor<1x4x1x1x1xf32>, tensor<1x4x1x1x1xf32>) -> tensor<2x4x3x4x5xf32>
  %v4 = med.mul %v3, %r : (tensor<2x4x3x4x5xf32>, tensor<2x4x3x4x5xf32>) -> tensor<2x4x3x4x5xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x4x3x4x5xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// GRN, gamma and beta as arguments, epsilon 1e-3.
// CHECK: grn_args_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_args_grad  grad.arg0  1x3x2x3x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_args_grad  grad.arg1  1x3x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_args_grad  grad.arg2  1x3x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: grn_args_grad  grad.arg3  1x3x2x3x4  max_abs {{.*}}  ok{{$}}
// FD: grn_args_grad  grad.arg0  1x3x2x3x4  fd 2 of 72  max_abs {{.*}}  ok
// FD-NEXT: grn_args_grad  grad.arg1  1x3x1x1x1  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: grn_args_grad  grad.arg2  1x3x1x1x1  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: grn_args_grad  grad.arg3  1x3x2x3x4  fd 2 of 72  max_abs {{.*}}  ok
func.func @grn_args(%x: tensor<1x3x2x3x4xf32>, %g: tensor<1x3x1x1x1xf32>, %b: tensor<1x3x1x1x1xf32>, %r: tensor<1x3x2x3x4xf32>) -> tensor<f32> {
  %v1 = med.grn %x, %g, %b {epsilon = 1.0e-3} : (tensor<1x3x2x3x4xf32>, tensor<1x3x1x1x1xf32>, tensor<1x3x1x1x1xf32>) -> tensor<1x3x2x3x4xf32>
  %v2 = med.mul %v1, %r : (tensor<1x3x2x3x4xf32>, tensor<1x3x2x3x4xf32>) -> tensor<1x3x2x3x4xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x3x2x3x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// A MedNeXt-like block: depthwise conv, group norm (groups 2: with groups = C the conv bias
// would cancel and its gradient vanish), GELU, GRN, group norm (groups 1: with groups = C
// the GRN beta would cancel) again,
// channel layer norm, residual add. x is used twice (conv input and residual), and the
// group-norm parameters are read twice (before and after the GRN): both accumulate.
// CHECK: norm_block_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.gn.weight  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.gn.bias  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.ln.weight  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.ln.bias  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.grn.gamma  1x4x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.grn.beta  1x4x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.arg0  2x4x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.arg1  4x1x3x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.arg2  4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: norm_block_grad  grad.arg3  2x4x3x3x3  max_abs {{.*}}  ok{{$}}
// FD: norm_block_grad  grad.gn.weight  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.gn.bias  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.ln.weight  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.ln.bias  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.grn.gamma  1x4x1x1x1  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.grn.beta  1x4x1x1x1  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.arg0  2x4x3x3x3  fd 2 of 216  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.arg1  4x1x3x3x3  fd 2 of 108  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.arg2  4  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: norm_block_grad  grad.arg3  2x4x3x3x3  fd 2 of 216  max_abs {{.*}}  ok
func.func @norm_block(%x: tensor<2x4x3x3x3xf32>, %w: tensor<4x1x3x3x3xf32>, %cb: tensor<4xf32>, %r: tensor<2x4x3x3x3xf32>) -> tensor<f32> {
  %v1 = med.conv3d %x, %w, %cb {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x4x3x3x3xf32>, tensor<4x1x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x3x3x3xf32>
  %v2 = med.param @"gn.weight" : tensor<4xf32>
  %v3 = med.param @"gn.bias" : tensor<4xf32>
  %v4 = med.group_norm %v1, %v2, %v3 {groups = 2 : i64} : (tensor<2x4x3x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3x3xf32>
  %v5 = med.gelu %v4 : tensor<2x4x3x3x3xf32>
  %v6 = med.param @"grn.gamma" : tensor<1x4x1x1x1xf32>
  %v7 = med.param @"grn.beta" : tensor<1x4x1x1x1xf32>
  %v8 = med.grn %v5, %v6, %v7 : (tensor<2x4x3x3x3xf32>, tensor<1x4x1x1x1xf32>, tensor<1x4x1x1x1xf32>) -> tensor<2x4x3x3x3xf32>
  %v9 = med.param @"gn.weight" : tensor<4xf32>
  %v10 = med.param @"gn.bias" : tensor<4xf32>
  %v11 = med.group_norm %v8, %v9, %v10 {groups = 1 : i64} : (tensor<2x4x3x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3x3xf32>
  %v12 = med.param @"ln.weight" : tensor<4xf32>
  %v13 = med.param @"ln.bias" : tensor<4xf32>
  %v14 = med.channel_layer_norm %v11, %v12, %v13 : (tensor<2x4x3x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3x3xf32>
  %v15 = med.add %v14, %x : (tensor<2x4x3x3x3xf32>, tensor<2x4x3x3x3xf32>) -> tensor<2x4x3x3x3xf32>
  %v16 = med.mul %v15, %r : (tensor<2x4x3x3x3xf32>, tensor<2x4x3x3x3xf32>) -> tensor<2x4x3x3x3xf32>
  %v17 = med.reduce sum %v16 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x4x3x3x3xf32>) -> tensor<f32>
  return %v17 : tensor<f32>
}

// CHECK: 46 gradient outputs checked against torch autograd, 0 failed (tolerance 1.0e-04, precision f32)
// FD: 38 gradients checked by finite differences (76 elements), 0 failed (tolerance 1.0e-06, f64)
// FWD-NOT: FAIL
// FWD: 54 outputs checked, 0 failed (tolerance 1.0e-04, precision f32)
