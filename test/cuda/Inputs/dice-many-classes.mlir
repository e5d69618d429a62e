// 257 classes with targets stored in bf16: class 257 would read back as 256 (test/cuda/labels.test).
func.func @dice_257(%x: tensor<1x257x2x2x2xf32>, %t: tensor<1x1x2x2x2xf32>) -> tensor<f32> attributes {med.precision = "bf16-mixed"} {
  %l = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = false} : (tensor<1x257x2x2x2xf32>, tensor<1x1x2x2x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
