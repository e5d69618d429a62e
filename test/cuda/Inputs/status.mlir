// Ops whose CUDA kernels report invalid data through the status word (status.test).
func.func @dice(%x: tensor<1x3x4x4x2xf32>, %t: tensor<1x1x4x4x2xf32>) -> (tensor<1x3x4x4x2xf32>, tensor<f32>) {
  %y = med.mul %x, %x : (tensor<1x3x4x4x2xf32>, tensor<1x3x4x4x2xf32>) -> tensor<1x3x4x4x2xf32>
  %l = med.dice_ce logits(%y) targets(%t) {weights = array<f64: 1.0>} : (tensor<1x3x4x4x2xf32>, tensor<1x1x4x4x2xf32>) -> tensor<f32>
  return %y, %l : tensor<1x3x4x4x2xf32>, tensor<f32>
}
func.func @adamw(%w: tensor<5xf32>, %g: tensor<5xf32>, %m: tensor<5xf32>, %v: tensor<5xf32>, %lr: tensor<f32>, %t: tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  %0:3 = med.adamw %w, %g, %m, %v, %lr, %t {weight_decay = 0.01} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
  return %0#0, %0#1, %0#2 : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}
