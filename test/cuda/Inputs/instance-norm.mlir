// Instance normalization as med.group_norm with groups = C (test/cuda/instance-norm.test):
// after a depthwise convolution (MedNeXt's, and any imported network's depthwise stage) it
// is a `stencil` fusion with the statistics in the shift-sum's epilogue, followed by
// LeakyReLU (nnU-Net's norm -> nonlinearity); 5 x 18 x 66 is two chunks of the statistics
// along every axis, the last ones clipped. The loss function's backward reads the fused
// statistics (group_norm_grad).
func.func @dw_in_lrelu(%x: tensor<2x4x5x18x66xf32>, %w: tensor<4x1x3x3x3xf32>, %b: tensor<4xf32>, %g: tensor<4xf32>, %be: tensor<4xf32>) -> tensor<2x4x5x18x66xf32> {
  %y = med.conv3d %x, %w, %b {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x4x5x18x66xf32>, tensor<4x1x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x18x66xf32>
  %n = med.group_norm %y, %g, %be {groups = 4 : i64} : (tensor<2x4x5x18x66xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x5x18x66xf32>
  %a = med.leaky_relu %n : tensor<2x4x5x18x66xf32>
  return %a : tensor<2x4x5x18x66xf32>
}
func.func @dw_in_lrelu_loss(%x: tensor<1x4x5x18x66xf32>, %w: tensor<4x1x3x3x3xf32>, %g: tensor<4xf32>, %be: tensor<4xf32>, %r: tensor<1x4x5x18x66xf32>) -> tensor<f32> {
  %y = med.conv3d %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<1x4x5x18x66xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x5x18x66xf32>
  %n = med.group_norm %y, %g, %be {groups = 4 : i64} : (tensor<1x4x5x18x66xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x5x18x66xf32>
  %a = med.leaky_relu %n : tensor<1x4x5x18x66xf32>
  %v = med.mul %a, %r : (tensor<1x4x5x18x66xf32>, tensor<1x4x5x18x66xf32>) -> tensor<1x4x5x18x66xf32>
  %l = med.reduce sum %v {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x4x5x18x66xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
