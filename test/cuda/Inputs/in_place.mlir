// in-place.test: a step whose update of @w is a fusion reading @w (written in place in the
// resident state on the device) after an op that can fail (dice_ce, a target no class index).
med.parameter @w : tensor<5xf32> init ones
func.func @step(%x: tensor<1x3x4x4x2xf32>, %t: tensor<1x1x4x4x2xf32>, %s: tensor<f32>) -> tensor<f32> {
  %l = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>} : (tensor<1x3x4x4x2xf32>, tensor<1x1x4x4x2xf32>) -> tensor<f32>
  %w = med.param @w : tensor<5xf32>
  %a = med.mul %w, %s : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  %b = med.add %a, %l : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
  med.assign @w, %b : tensor<5xf32>
  return %l : tensor<f32>
}
