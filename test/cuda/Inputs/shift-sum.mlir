// Shift-sums on the CUDA backend (shift-sum.test): forward with and without bias, k3, k5 and
// (3, 5, 1) kernels, the mirrored form (input gradients), and the tap reductions (weight
// gradients, the split reduction), on odd sizes and channel counts; `parts` has a spatial
// extent split into several parts.
func.func @fwd_k3(%x: tensor<2x5x7x9x11xf32>, %w: tensor<5x1x3x3x3xf32>, %b: tensor<5xf32>) -> tensor<2x5x7x9x11xf32> {
  %0 = med.shift_sum %x, %w, %b : (tensor<2x5x7x9x11xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x7x9x11xf32>
  return %0 : tensor<2x5x7x9x11xf32>
}
func.func @fwd_k5(%x: tensor<1x3x7x5x9xf32>, %w: tensor<3x1x5x5x5xf32>) -> tensor<1x3x7x5x9xf32> {
  %0 = med.shift_sum %x, %w : (tensor<1x3x7x5x9xf32>, tensor<3x1x5x5x5xf32>) -> tensor<1x3x7x5x9xf32>
  return %0 : tensor<1x3x7x5x9xf32>
}
func.func @fwd_mixed(%x: tensor<2x7x5x7x9xf32>, %w: tensor<7x1x3x5x1xf32>, %b: tensor<7xf32>) -> tensor<2x7x5x7x9xf32> {
  %0 = med.shift_sum %x, %w, %b : (tensor<2x7x5x7x9xf32>, tensor<7x1x3x5x1xf32>, tensor<7xf32>) -> tensor<2x7x5x7x9xf32>
  return %0 : tensor<2x7x5x7x9xf32>
}
func.func @mirrored_k3(%dy: tensor<2x5x7x9x11xf32>, %w: tensor<5x1x3x3x3xf32>) -> tensor<2x5x7x9x11xf32> {
  %0 = med.shift_sum %dy, %w {mirrored} : (tensor<2x5x7x9x11xf32>, tensor<5x1x3x3x3xf32>) -> tensor<2x5x7x9x11xf32>
  return %0 : tensor<2x5x7x9x11xf32>
}
func.func @mirrored_k5(%dy: tensor<1x3x7x5x9xf32>, %w: tensor<3x1x5x5x5xf32>) -> tensor<1x3x7x5x9xf32> {
  %0 = med.shift_sum %dy, %w {mirrored} : (tensor<1x3x7x5x9xf32>, tensor<3x1x5x5x5xf32>) -> tensor<1x3x7x5x9xf32>
  return %0 : tensor<1x3x7x5x9xf32>
}
func.func @grad_weight_k3(%x: tensor<2x5x7x9x11xf32>, %dy: tensor<2x5x7x9x11xf32>) -> tensor<5x1x3x3x3xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<2x5x7x9x11xf32>, tensor<2x5x7x9x11xf32>) -> tensor<5x1x3x3x3xf32>
  return %0 : tensor<5x1x3x3x3xf32>
}
func.func @grad_weight_k5(%x: tensor<1x3x7x5x9xf32>, %dy: tensor<1x3x7x5x9xf32>) -> tensor<3x1x5x5x5xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 5, 5, 5>} : (tensor<1x3x7x5x9xf32>, tensor<1x3x7x5x9xf32>) -> tensor<3x1x5x5x5xf32>
  return %0 : tensor<3x1x5x5x5xf32>
}
func.func @parts(%x: tensor<1x2x40x40x48xf32>, %dy: tensor<1x2x40x40x48xf32>) -> tensor<2x1x3x3x3xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<1x2x40x40x48xf32>, tensor<1x2x40x40x48xf32>) -> tensor<2x1x3x3x3xf32>
  return %0 : tensor<2x1x3x3x3xf32>
}
// Several tiles along every axis, the last one partial (the forward tiles are 4 × 16 × 64
// outputs here, the weight gradient's 4 × 8 × 64).
func.func @fwd_tiles(%x: tensor<1x2x9x19x70xf32>, %w: tensor<2x1x3x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x9x19x70xf32> {
  %0 = med.shift_sum %x, %w, %b : (tensor<1x2x9x19x70xf32>, tensor<2x1x3x3x3xf32>, tensor<2xf32>) -> tensor<1x2x9x19x70xf32>
  return %0 : tensor<1x2x9x19x70xf32>
}
func.func @fwd_tiles_k5(%x: tensor<1x2x9x19x70xf32>, %w: tensor<2x1x5x5x5xf32>) -> tensor<1x2x9x19x70xf32> {
  %0 = med.shift_sum %x, %w : (tensor<1x2x9x19x70xf32>, tensor<2x1x5x5x5xf32>) -> tensor<1x2x9x19x70xf32>
  return %0 : tensor<1x2x9x19x70xf32>
}
func.func @mirrored_tiles(%dy: tensor<1x2x9x19x70xf32>, %w: tensor<2x1x3x5x1xf32>) -> tensor<1x2x9x19x70xf32> {
  %0 = med.shift_sum %dy, %w {mirrored} : (tensor<1x2x9x19x70xf32>, tensor<2x1x3x5x1xf32>) -> tensor<1x2x9x19x70xf32>
  return %0 : tensor<1x2x9x19x70xf32>
}
func.func @grad_weight_tiles(%x: tensor<1x2x9x19x70xf32>, %dy: tensor<1x2x9x19x70xf32>) -> tensor<2x1x3x3x3xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<1x2x9x19x70xf32>, tensor<1x2x9x19x70xf32>) -> tensor<2x1x3x3x3xf32>
  return %0 : tensor<2x1x3x3x3xf32>
}
func.func @grad_weight_tiles_k5(%x: tensor<1x2x9x19x70xf32>, %dy: tensor<1x2x9x19x70xf32>) -> tensor<2x1x5x5x5xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 5, 5, 5>} : (tensor<1x2x9x19x70xf32>, tensor<1x2x9x19x70xf32>) -> tensor<2x1x5x5x5xf32>
  return %0 : tensor<2x1x5x5x5xf32>
}
func.func @grad_weight_mixed(%x: tensor<2x3x9x19x70xf32>, %dy: tensor<2x3x9x19x70xf32>) -> tensor<3x1x3x5x1xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 5, 1>} : (tensor<2x3x9x19x70xf32>, tensor<2x3x9x19x70xf32>) -> tensor<3x1x3x5x1xf32>
  return %0 : tensor<3x1x3x5x1xf32>
}
// A long D axis: 8193 tiles of 4 slices, so that each block walks a run of two tiles (the
// last run one).
func.func @runs(%x: tensor<1x1x32771x1x5xf32>, %dy: tensor<1x1x32771x1x5xf32>) -> tensor<1x1x3x1x3xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 1, 3>} : (tensor<1x1x32771x1x5xf32>, tensor<1x1x32771x1x5xf32>) -> tensor<1x1x3x1x3xf32>
  return %0 : tensor<1x1x3x1x3xf32>
}
// Kernels too large for a tile in shared memory (25³ weights) or for a thread per (kd, kh)
// pair (23 × 23): the generic convolution kernels.
func.func @fwd_fallback(%x: tensor<1x2x3x4x5xf32>, %w: tensor<2x1x25x25x25xf32>) -> tensor<1x2x3x4x5xf32> {
  %0 = med.shift_sum %x, %w : (tensor<1x2x3x4x5xf32>, tensor<2x1x25x25x25xf32>) -> tensor<1x2x3x4x5xf32>
  return %0 : tensor<1x2x3x4x5xf32>
}
func.func @grad_weight_fallback(%x: tensor<1x2x3x4x5xf32>, %dy: tensor<1x2x3x4x5xf32>) -> tensor<2x1x23x23x1xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 23, 23, 1>} : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> tensor<2x1x23x23x1xf32>
  return %0 : tensor<2x1x23x23x1xf32>
}
