// RUN: med-opt %s --split-input-file --verify-diagnostics --med-autodiff

// The statistics a group norm saves are for its backward op; no gradient flows through them.
func.func @through_statistics(%x: tensor<2x4x3xf32>, %g: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{gradient through the saved statistics (mean, rstd) is not supported}}
  %y, %s:2 = med.group_norm %x, %g, %g {groups = 2 : i64, save_statistics} : (tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
  %0 = med.reduce sum %s#0 {axes = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @dynamic(%x: tensor<?x2x4x4x4xf32>, %w: tensor<2x2x1x1x1xf32>) -> tensor<f32> {
  %0 = med.conv3d %x, %w : (tensor<?x2x4x4x4xf32>, tensor<2x2x1x1x1xf32>) -> tensor<?x2x4x4x4xf32>
  // expected-error @+1 {{gradient needs static shapes (run med-specialize first)}}
  %1 = med.reduce sum %0 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<?x2x4x4x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// expected-error @+1 {{med-autodiff: @exists_grad already exists}}
func.func @exists(%x: tensor<2xf32>) -> tensor<f32> {
  %0 = med.reduce sum %x {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func @exists_grad() {
  return
}
