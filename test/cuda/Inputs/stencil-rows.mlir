// The streamed stencils of test/cuda/stencil-rows.test (MEDC_STENCIL=rows): shift-sums
// without statistics and weight gradients, streamed where W is a multiple of 4 (f32) and a
// block has at least 64 threads, tiled or staged otherwise.
// Forward k3 with bias, H in two parts (the last shorter), more slices per block than D has.
func.func @fwd_k3_parts(%x: tensor<1x2x9x65x16xf32>, %w: tensor<2x1x3x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x9x65x16xf32> {
  %0 = med.shift_sum %x, %w, %b : (tensor<1x2x9x65x16xf32>, tensor<2x1x3x3x3xf32>, tensor<2xf32>) -> tensor<1x2x9x65x16xf32>
  return %0 : tensor<1x2x9x65x16xf32>
}
// Mirrored (3, 3, 5) on 7 rows, two samples.
func.func @mirrored_k335(%dy: tensor<2x1x9x7x16xf32>, %w: tensor<1x1x3x3x5xf32>) -> tensor<2x1x9x7x16xf32> {
  %0 = med.shift_sum %dy, %w {mirrored} : (tensor<2x1x9x7x16xf32>, tensor<1x1x3x3x5xf32>) -> tensor<2x1x9x7x16xf32>
  return %0 : tensor<2x1x9x7x16xf32>
}
// Mirrored k5: too many taps to keep in registers, the tiled kernel.
func.func @mirrored_k5(%dy: tensor<1x1x9x7x16xf32>, %w: tensor<1x1x5x5x5xf32>) -> tensor<1x1x9x7x16xf32> {
  %0 = med.shift_sum %dy, %w {mirrored} : (tensor<1x1x9x7x16xf32>, tensor<1x1x5x5x5xf32>) -> tensor<1x1x9x7x16xf32>
  return %0 : tensor<1x1x9x7x16xf32>
}
// A mixed kernel (3, 5, 1) forward, W = 32.
func.func @fwd_mixed(%x: tensor<1x3x5x6x32xf32>, %w: tensor<3x1x3x5x1xf32>, %b: tensor<3xf32>) -> tensor<1x3x5x6x32xf32> {
  %0 = med.shift_sum %x, %w, %b : (tensor<1x3x5x6x32xf32>, tensor<3x1x3x5x1xf32>, tensor<3xf32>) -> tensor<1x3x5x6x32xf32>
  return %0 : tensor<1x3x5x6x32xf32>
}
// W not a multiple of 4: the tiled kernel.
func.func @fwd_odd(%x: tensor<1x2x5x9x13xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x9x13xf32> {
  %0 = med.shift_sum %x, %w : (tensor<1x2x5x9x13xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x9x13xf32>
  return %0 : tensor<1x2x5x9x13xf32>
}
// k3, H in two parts (the last shorter), more slices per block than D has.
func.func @gw_k3_parts(%x: tensor<1x2x5x33x16xf32>, %dy: tensor<1x2x5x33x16xf32>) -> tensor<2x1x3x3x3xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<1x2x5x33x16xf32>, tensor<1x2x5x33x16xf32>) -> tensor<2x1x3x3x3xf32>
  return %0 : tensor<2x1x3x3x3xf32>
}
// (3, 3, 5) on 7 rows (a halo of two).
func.func @gw_k335(%x: tensor<1x2x6x7x16xf32>, %dy: tensor<1x2x6x7x16xf32>) -> tensor<2x1x3x3x5xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 5>} : (tensor<1x2x6x7x16xf32>, tensor<1x2x6x7x16xf32>) -> tensor<2x1x3x3x5xf32>
  return %0 : tensor<2x1x3x3x5xf32>
}
// k5: more sums and rows than a thread keeps: the staged split reduction.
func.func @gw_k5(%x: tensor<2x2x6x7x16xf32>, %dy: tensor<2x2x6x7x16xf32>) -> tensor<2x1x5x5x5xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 5, 5, 5>} : (tensor<2x2x6x7x16xf32>, tensor<2x2x6x7x16xf32>) -> tensor<2x1x5x5x5xf32>
  return %0 : tensor<2x1x5x5x5xf32>
}
// A mixed kernel: one row (a window of one slot), five columns (a halo of two a side).
func.func @gw_mixed(%x: tensor<1x3x7x8x32xf32>, %dy: tensor<1x3x7x8x32xf32>) -> tensor<3x1x3x1x5xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 1, 5>} : (tensor<1x3x7x8x32xf32>, tensor<1x3x7x8x32xf32>) -> tensor<3x1x3x1x5xf32>
  return %0 : tensor<3x1x3x1x5xf32>
}
// W not a multiple of 4: the staged split reduction.
func.func @gw_odd(%x: tensor<1x2x5x9x13xf32>, %dy: tensor<1x2x5x9x13xf32>) -> tensor<2x1x3x3x3xf32> {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<1x2x5x9x13xf32>, tensor<1x2x5x9x13xf32>) -> tensor<2x1x3x3x3xf32>
  return %0 : tensor<2x1x3x3x3xf32>
}
// A weight gradient with its bias gradient (med-form-stencil-fusions: a `stencil_grad`
// fusion): at k3 dy summed in the streamed kernel (two samples, three channels, H in two
// parts); at k5 the staged kernel, then a split sum.
func.func @gw_bias_k3(%x: tensor<2x3x5x33x16xf32>, %dy: tensor<2x3x5x33x16xf32>) -> (tensor<3x1x3x3x3xf32>, tensor<3xf32>) {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<2x3x5x33x16xf32>, tensor<2x3x5x33x16xf32>) -> tensor<3x1x3x3x3xf32>
  %1 = med.reduce sum %dy {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x5x33x16xf32>) -> tensor<3xf32>
  return %0, %1 : tensor<3x1x3x3x3xf32>, tensor<3xf32>
}
func.func @gw_bias_k5(%x: tensor<2x2x6x7x16xf32>, %dy: tensor<2x2x6x7x16xf32>) -> (tensor<2x1x5x5x5xf32>, tensor<2xf32>) {
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 5, 5, 5>} : (tensor<2x2x6x7x16xf32>, tensor<2x2x6x7x16xf32>) -> tensor<2x1x5x5x5xf32>
  %1 = med.reduce sum %dy {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x2x6x7x16xf32>) -> tensor<2xf32>
  return %0, %1 : tensor<2x1x5x5x5xf32>, tensor<2xf32>
}
// A mirrored shift-sum plus another tensor (med-form-stencil-fusions: a `stencil` fusion
// with a residual): at k3 with bias added in the streamed kernel's store (H in two parts);
// at k5 the tiled kernel, then the add over its result.
func.func @residual_k3(%x: tensor<2x2x9x65x16xf32>, %w: tensor<2x1x3x3x3xf32>, %b: tensor<2xf32>, %g: tensor<2x2x9x65x16xf32>) -> tensor<2x2x9x65x16xf32> {
  %0 = med.shift_sum %x, %w, %b {mirrored} : (tensor<2x2x9x65x16xf32>, tensor<2x1x3x3x3xf32>, tensor<2xf32>) -> tensor<2x2x9x65x16xf32>
  %1 = med.add %0, %g : (tensor<2x2x9x65x16xf32>, tensor<2x2x9x65x16xf32>) -> tensor<2x2x9x65x16xf32>
  return %1 : tensor<2x2x9x65x16xf32>
}
func.func @residual_k5(%x: tensor<1x2x9x7x16xf32>, %w: tensor<2x1x5x5x5xf32>, %g: tensor<1x2x9x7x16xf32>) -> tensor<1x2x9x7x16xf32> {
  %0 = med.shift_sum %x, %w {mirrored} : (tensor<1x2x9x7x16xf32>, tensor<2x1x5x5x5xf32>) -> tensor<1x2x9x7x16xf32>
  %1 = med.add %g, %0 : (tensor<1x2x9x7x16xf32>, tensor<1x2x9x7x16xf32>) -> tensor<1x2x9x7x16xf32>
  return %1 : tensor<1x2x9x7x16xf32>
}
// Group norms of shift-sums (med-form-stencil-fusions: the statistics in the shift-sum's
// epilogue): chunks of 4 x 16 x 64 with the last ones clipped along every axis (9 x 20 x 72),
// with bias; groups of two channels and a (3, 3, 5) kernel.
func.func @norm_k3(%x: tensor<2x3x9x20x72xf32>, %w: tensor<3x1x3x3x3xf32>, %b: tensor<3xf32>, %g: tensor<3xf32>, %be: tensor<3xf32>) -> tensor<2x3x9x20x72xf32> {
  %y = med.conv3d %x, %w, %b {groups = 3 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x3x9x20x72xf32>, tensor<3x1x3x3x3xf32>, tensor<3xf32>) -> tensor<2x3x9x20x72xf32>
  %n = med.group_norm %y, %g, %be {groups = 3 : i64} : (tensor<2x3x9x20x72xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x9x20x72xf32>
  return %n : tensor<2x3x9x20x72xf32>
}
func.func @norm_groups(%x: tensor<1x4x5x17x64xf32>, %w: tensor<4x1x3x3x5xf32>, %g: tensor<4xf32>, %be: tensor<4xf32>) -> (tensor<1x4x5x17x64xf32>, tensor<1x4x5x17x64xf32>) {
  %y = med.conv3d %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 2>} : (tensor<1x4x5x17x64xf32>, tensor<4x1x3x3x5xf32>) -> tensor<1x4x5x17x64xf32>
  %n = med.group_norm %y, %g, %be {groups = 2 : i64} : (tensor<1x4x5x17x64xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x5x17x64xf32>
  return %n, %y : tensor<1x4x5x17x64xf32>, tensor<1x4x5x17x64xf32>
}
