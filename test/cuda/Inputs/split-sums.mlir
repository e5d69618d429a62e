// Sums over many terms per output, which the CUDA kernels split into fixed parts (a parts
// kernel and a combine kernel), beside small ones that run in one kernel: term counts that
// are no multiple of a part, parts that straddle rows, several reduced groups between kept
// axes, masks with zeros, pos_weight. Sums reduce exp(x) > 0, so that no result is a
// near-total cancellation.

// 3 outputs over 2·13·17·19 = 8398 terms (rows of 4199): 3 parts, the third short.
// Groups reduced, kept, reduced, kept, reduced: 6 outputs over 5·7 rows of 1000.
func.func @reduce_split(%x: tensor<2x3x13x17x19xf32>, %z: tensor<5x3x7x2x1000xf32>, %s: tensor<2x3x2x2x2xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1x3x1x2x1xf32>, tensor<1x3x1x2x1xf32>, tensor<3xf32>) {
  %p = med.exp %x : tensor<2x3x13x17x19xf32>
  %0 = med.reduce sum %p {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x13x17x19xf32>) -> tensor<3xf32>
  %1 = med.reduce mean %p {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x13x17x19xf32>) -> tensor<3xf32>
  %2 = med.reduce min %x {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x13x17x19xf32>) -> tensor<3xf32>
  %pz = med.exp %z : tensor<5x3x7x2x1000xf32>
  %3 = med.reduce sum %pz {axes = array<i64: 0, 2, 4>, keepdims} : (tensor<5x3x7x2x1000xf32>) -> tensor<1x3x1x2x1xf32>
  %4 = med.reduce max %z {axes = array<i64: 4, 0, 2>, keepdims} : (tensor<5x3x7x2x1000xf32>) -> tensor<1x3x1x2x1xf32>
  %ps = med.exp %s : tensor<2x3x2x2x2xf32>
  %5 = med.reduce sum %ps {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x2x2x2xf32>) -> tensor<3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1x3x1x2x1xf32>, tensor<1x3x1x2x1xf32>, tensor<3xf32>
}

// BCE over 3 channels of 2·23·19·21 = 18354 terms: 5 parts per channel, the last short. The mask zeroes
// channel 1 (its count is 0) and is random elsewhere.
func.func @bce_split(%x: tensor<2x3x23x19x21xf32>, %y: tensor<2x3x23x19x21xf32>, %m: tensor<2x3x23x19x21xf32>, %p: tensor<3xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %keep = med.constant dense<[[[[1.0]]], [[[0.0]]], [[[1.0]]]]> : tensor<3x1x1x1xf32>
  %mk = med.mul %m, %keep : (tensor<2x3x23x19x21xf32>, tensor<3x1x1x1xf32>) -> tensor<2x3x23x19x21xf32>
  %pw = med.exp %p : tensor<3xf32>
  %0 = med.bce_with_logits %x, %y mask %mk : (tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>) -> tensor<f32>
  %1 = med.bce_with_logits %x, %y {reduction = #med<reduction sum>} : (tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>) -> tensor<f32>
  %2 = med.bce_with_logits %x, %y mask %mk pos_weight %pw {reduction = #med<reduction per_channel>} : (tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>, tensor<3xf32>) -> tensor<f32>
  %3 = med.bce_with_logits %x, %y mask %mk {auto_pos_weight, reduction = #med<reduction per_channel>} : (tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>) -> tensor<f32>
  %4 = med.bce_with_logits %x, %y {auto_pos_weight, max_pos_weight = 2.0} : (tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>) -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// The gradient of a masked mean (split per-channel counts) and a tiny BCE (no split).
func.func @bce_split_mean(%x: tensor<2x3x23x19x21xf32>, %y: tensor<2x3x23x19x21xf32>, %m: tensor<2x3x23x19x21xf32>) -> tensor<f32> {
  %keep = med.constant dense<[[[[1.0]]], [[[0.0]]], [[[1.0]]]]> : tensor<3x1x1x1xf32>
  %mk = med.mul %m, %keep : (tensor<2x3x23x19x21xf32>, tensor<3x1x1x1xf32>) -> tensor<2x3x23x19x21xf32>
  %0 = med.bce_with_logits %x, %y mask %mk : (tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>, tensor<2x3x23x19x21xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func @bce_tiny(%x: tensor<2x3x2x3x2xf32>, %y: tensor<2x3x2x3x2xf32>, %m: tensor<2x3x2x3x2xf32>) -> tensor<f32> {
  %0 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction per_channel>} : (tensor<2x3x2x3x2xf32>, tensor<2x3x2x3x2xf32>, tensor<2x3x2x3x2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Dice + CE sums per sample over 20·20·21 = 8400 voxels: 3 parts each, every thread taking
// the softmax of a voxel once for all classes.
func.func @dice_split(%x: tensor<2x3x20x20x21xf32>, %t: tensor<2x1x20x20x21xf32>) -> (tensor<f32>, tensor<f32>) {
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>} : (tensor<2x3x20x20x21xf32>, tensor<2x1x20x20x21xf32>) -> tensor<f32>
  %1 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = false, include_background} : (tensor<2x3x20x20x21xf32>, tensor<2x1x20x20x21xf32>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}
