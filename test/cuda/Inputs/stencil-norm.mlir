// Group norms of shift-sums for test/cuda/stencil-norm.test: med-form-stencil-fusions makes
// each a `stencil` fusion (the shift-sum with the statistics in its epilogue) and a
// group_norm_apply. Odd sizes: tiles that are whole chunks of the statistics (4 x 16 x 64)
// along every axis with the last ones clipped (9 x 20 x 70: 3 x 2 x 2 chunks per plane), a
// volume smaller than one chunk, groups of one and of several channels; and a k7 kernel
// whose tile shrinks to fit shared memory, no chunk any more: its statistics run their own
// kernels.
func.func @tiles_k3(%x: tensor<2x3x9x20x70xf32>, %w: tensor<3x1x3x3x3xf32>, %b: tensor<3xf32>, %g: tensor<3xf32>, %be: tensor<3xf32>) -> tensor<2x3x9x20x70xf32> {
  %y = med.conv3d %x, %w, %b {groups = 3 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x3x9x20x70xf32>, tensor<3x1x3x3x3xf32>, tensor<3xf32>) -> tensor<2x3x9x20x70xf32>
  %n = med.group_norm %y, %g, %be {groups = 3 : i64} : (tensor<2x3x9x20x70xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x9x20x70xf32>
  return %n : tensor<2x3x9x20x70xf32>
}

func.func @small_k5(%x: tensor<2x5x6x7x9xf32>, %w: tensor<5x1x5x5x5xf32>, %g: tensor<5xf32>, %be: tensor<5xf32>) -> (tensor<2x5x6x7x9xf32>, tensor<2x5x6x7x9xf32>) {
  %y = med.conv3d %x, %w {groups = 5 : i64, padding = array<i64: 2, 2, 2>} : (tensor<2x5x6x7x9xf32>, tensor<5x1x5x5x5xf32>) -> tensor<2x5x6x7x9xf32>
  %n = med.group_norm %y, %g, %be {groups = 1 : i64, epsilon = 1.0e-3} : (tensor<2x5x6x7x9xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<2x5x6x7x9xf32>
  return %n, %y : tensor<2x5x6x7x9xf32>, tensor<2x5x6x7x9xf32>
}

func.func @shrunk_k7(%x: tensor<1x2x9x20x70xf32>, %w: tensor<2x1x7x7x7xf32>, %g: tensor<2xf32>, %be: tensor<2xf32>) -> tensor<1x2x9x20x70xf32> {
  %y = med.conv3d %x, %w {groups = 2 : i64, padding = array<i64: 3, 3, 3>} : (tensor<1x2x9x20x70xf32>, tensor<2x1x7x7x7xf32>) -> tensor<1x2x9x20x70xf32>
  %n = med.group_norm %y, %g, %be {groups = 2 : i64} : (tensor<1x2x9x20x70xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x9x20x70xf32>
  return %n : tensor<1x2x9x20x70xf32>
}
