// Gradients whose elementwise kernels move several elements per thread (gelu_grad,
// group_norm_grad's map): sizes that leave a remainder for the last thread, planes that are
// whole vectors and planes that are not. Losses are sum(y * r) for a random r. Run by
// vectorized.test with --grad.

// 105 elements: the last thread has 1.
func.func @gelu_tail(%x: tensor<3x5x7xf32>, %r: tensor<3x5x7xf32>) -> tensor<f32> {
  %0 = med.gelu %x : tensor<3x5x7xf32>
  %1 = med.mul %0, %r : (tensor<3x5x7xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 0, 1, 2>} : (tensor<3x5x7xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// Planes of 35 (each element finds its channel), 105 elements in all.
func.func @gn_tail(%x: tensor<1x3x5x7xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %r: tensor<1x3x5x7xf32>) -> tensor<f32> {
  %0 = med.group_norm %x, %g, %b {groups = 3 : i64} : (tensor<1x3x5x7xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x5x7xf32>
  %1 = med.mul %0, %r : (tensor<1x3x5x7xf32>, tensor<1x3x5x7xf32>) -> tensor<1x3x5x7xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x3x5x7xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// Planes of 24: a thread's elements share their channel; groups of 2 channels.
func.func @gn_planes(%x: tensor<2x4x2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>, %r: tensor<2x4x2x3x4xf32>) -> tensor<f32> {
  %0 = med.group_norm %x, %g, %b {groups = 2 : i64} : (tensor<2x4x2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x2x3x4xf32>
  %1 = med.gelu %0 : tensor<2x4x2x3x4xf32>
  %2 = med.mul %1, %r : (tensor<2x4x2x3x4xf32>, tensor<2x4x2x3x4xf32>) -> tensor<2x4x2x3x4xf32>
  %3 = med.reduce sum %2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x4x2x3x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
