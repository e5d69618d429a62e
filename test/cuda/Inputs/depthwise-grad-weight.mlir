// Depthwise weight gradients (groups = channels), lowered to the split reduction
// (depthwise-grad-weight.test): kernel 3 with padding 1, kernel 5 with padding 2, stride 2
// as in MedNeXt's down blocks, odd sizes, and a spatial extent split into several parts.
func.func @k3(%x: tensor<2x3x5x7x6xf32>, %dy: tensor<2x3x5x7x6xf32>) -> tensor<3x1x3x3x3xf32> {
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>, padding = array<i64: 1, 1, 1>, groups = 3 : i64} : (tensor<2x3x5x7x6xf32>, tensor<2x3x5x7x6xf32>) -> tensor<3x1x3x3x3xf32>
  return %0 : tensor<3x1x3x3x3xf32>
}
func.func @k5(%x: tensor<1x4x7x5x9xf32>, %dy: tensor<1x4x7x5x9xf32>) -> tensor<4x1x5x5x5xf32> {
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 5, 5, 5>, padding = array<i64: 2, 2, 2>, groups = 4 : i64} : (tensor<1x4x7x5x9xf32>, tensor<1x4x7x5x9xf32>) -> tensor<4x1x5x5x5xf32>
  return %0 : tensor<4x1x5x5x5xf32>
}
func.func @strided(%x: tensor<2x2x9x7x8xf32>, %dy: tensor<2x2x5x4x4xf32>) -> tensor<2x1x3x3x3xf32> {
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>, groups = 2 : i64} : (tensor<2x2x9x7x8xf32>, tensor<2x2x5x4x4xf32>) -> tensor<2x1x3x3x3xf32>
  return %0 : tensor<2x1x3x3x3xf32>
}
func.func @parts(%x: tensor<1x2x40x40x48xf32>, %dy: tensor<1x2x40x40x48xf32>) -> tensor<2x1x3x3x3xf32> {
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>, padding = array<i64: 1, 1, 1>, groups = 2 : i64} : (tensor<1x2x40x40x48xf32>, tensor<1x2x40x40x48xf32>) -> tensor<2x1x3x3x3xf32>
  return %0 : tensor<2x1x3x3x3xf32>
}
