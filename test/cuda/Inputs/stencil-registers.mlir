// The register-tiled stencils (stencil-registers.test): shift-sums forward and mirrored with
// 8 outputs per thread along W (4 on a narrow row), staged from whole 16-byte vectors where W
// is a multiple of 4 (f32) and element by element where it is not, on sizes that are not
// multiples of the tile (several tiles along W, the last partial); k3, k5 and k7. The
// strided depthwise transposed convolutions as their stride's parity classes: k3, k5 and a
// (3, 3, 7) kernel, strides 2, (2, 1, 2) and (3, 2, 3), output paddings that leave odd sizes,
// with and without bias, and a width whose outputs are stored as vectors.
func.func @fwd_k3_vec(%x: tensor<1x2x5x9x72xf32>, %w: tensor<2x1x3x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x5x9x72xf32> {
  %0 = med.shift_sum %x, %w, %b : (tensor<1x2x5x9x72xf32>, tensor<2x1x3x3x3xf32>, tensor<2xf32>) -> tensor<1x2x5x9x72xf32>
  return %0 : tensor<1x2x5x9x72xf32>
}
func.func @fwd_k5_odd(%x: tensor<1x2x6x7x13xf32>, %w: tensor<2x1x5x5x5xf32>) -> tensor<1x2x6x7x13xf32> {
  %0 = med.shift_sum %x, %w : (tensor<1x2x6x7x13xf32>, tensor<2x1x5x5x5xf32>) -> tensor<1x2x6x7x13xf32>
  return %0 : tensor<1x2x6x7x13xf32>
}
func.func @fwd_k7(%x: tensor<1x2x5x6x20xf32>, %w: tensor<2x1x7x7x7xf32>, %b: tensor<2xf32>) -> tensor<1x2x5x6x20xf32> {
  %0 = med.shift_sum %x, %w, %b : (tensor<1x2x5x6x20xf32>, tensor<2x1x7x7x7xf32>, tensor<2xf32>) -> tensor<1x2x5x6x20xf32>
  return %0 : tensor<1x2x5x6x20xf32>
}
func.func @fwd_narrow(%x: tensor<2x3x5x6x3xf32>, %w: tensor<3x1x3x3x3xf32>) -> tensor<2x3x5x6x3xf32> {
  %0 = med.shift_sum %x, %w : (tensor<2x3x5x6x3xf32>, tensor<3x1x3x3x3xf32>) -> tensor<2x3x5x6x3xf32>
  return %0 : tensor<2x3x5x6x3xf32>
}
func.func @mirrored_k3_vec(%dy: tensor<1x2x5x9x72xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x9x72xf32> {
  %0 = med.shift_sum %dy, %w {mirrored} : (tensor<1x2x5x9x72xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x9x72xf32>
  return %0 : tensor<1x2x5x9x72xf32>
}
func.func @mirrored_k7_odd(%dy: tensor<1x1x4x5x11xf32>, %w: tensor<1x1x7x7x7xf32>) -> tensor<1x1x4x5x11xf32> {
  %0 = med.shift_sum %dy, %w {mirrored} : (tensor<1x1x4x5x11xf32>, tensor<1x1x7x7x7xf32>) -> tensor<1x1x4x5x11xf32>
  return %0 : tensor<1x1x4x5x11xf32>
}
func.func @tr_k3(%x: tensor<2x3x3x4x5xf32>, %w: tensor<3x1x3x3x3xf32>, %b: tensor<3xf32>) -> tensor<2x3x6x8x10xf32> {
  %0 = med.conv3d_transpose %x, %w, %b {groups = 3 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>, output_padding = array<i64: 1, 1, 1>} : (tensor<2x3x3x4x5xf32>, tensor<3x1x3x3x3xf32>, tensor<3xf32>) -> tensor<2x3x6x8x10xf32>
  return %0 : tensor<2x3x6x8x10xf32>
}
func.func @tr_k3_odd(%x: tensor<1x2x3x4x5xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x7x9xf32> {
  %0 = med.conv3d_transpose %x, %w {groups = 2 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x7x9xf32>
  return %0 : tensor<1x2x5x7x9xf32>
}
func.func @tr_k5(%x: tensor<1x2x3x5x9xf32>, %w: tensor<2x1x5x5x5xf32>, %b: tensor<2xf32>) -> tensor<1x2x6x10x18xf32> {
  %0 = med.conv3d_transpose %x, %w, %b {groups = 2 : i64, padding = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>, output_padding = array<i64: 1, 1, 1>} : (tensor<1x2x3x5x9xf32>, tensor<2x1x5x5x5xf32>, tensor<2xf32>) -> tensor<1x2x6x10x18xf32>
  return %0 : tensor<1x2x6x10x18xf32>
}
func.func @tr_mixed(%x: tensor<1x2x4x5x6xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<1x2x8x5x12xf32> {
  %0 = med.conv3d_transpose %x, %w {groups = 2 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 1, 2>, output_padding = array<i64: 1, 0, 1>} : (tensor<1x2x4x5x6xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x8x5x12xf32>
  return %0 : tensor<1x2x8x5x12xf32>
}
func.func @tr_s3_k7(%x: tensor<1x1x3x4x5xf32>, %w: tensor<1x1x3x3x7xf32>) -> tensor<1x1x9x8x15xf32> {
  %0 = med.conv3d_transpose %x, %w {groups = 1 : i64, padding = array<i64: 1, 1, 3>, stride = array<i64: 3, 2, 3>, output_padding = array<i64: 2, 1, 2>} : (tensor<1x1x3x4x5xf32>, tensor<1x1x3x3x7xf32>) -> tensor<1x1x9x8x15xf32>
  return %0 : tensor<1x1x9x8x15xf32>
}
func.func @tr_vec(%x: tensor<1x2x3x3x8xf32>, %w: tensor<2x1x3x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x6x6x16xf32> {
  %0 = med.conv3d_transpose %x, %w, %b {groups = 2 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>, output_padding = array<i64: 1, 1, 1>} : (tensor<1x2x3x3x8xf32>, tensor<2x1x3x3x3xf32>, tensor<2xf32>) -> tensor<1x2x6x6x16xf32>
  return %0 : tensor<1x2x6x6x16xf32>
}
// The weight gradient with dy staged as vectors (W a multiple of 4): k5 and k7.
func.func @gw_k5_vec(%x: tensor<2x2x6x7x16xf32>, %dy: tensor<2x2x6x7x16xf32>) -> tensor<2x1x5x5x5xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 5, 5, 5>} : (tensor<2x2x6x7x16xf32>, tensor<2x2x6x7x16xf32>) -> tensor<2x1x5x5x5xf32>
  return %0 : tensor<2x1x5x5x5xf32>
}
func.func @gw_k7_vec(%x: tensor<1x2x5x9x24xf32>, %dy: tensor<1x2x5x9x24xf32>) -> tensor<2x1x7x7x7xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 7, 7, 7>} : (tensor<1x2x5x9x24xf32>, tensor<1x2x5x9x24xf32>) -> tensor<2x1x7x7x7xf32>
  return %0 : tensor<2x1x7x7x7xf32>
}
