// Sizes of a MedNeXt training step (only compiled): a bias gradient of 32 channels over
// 2·128³ voxels and BCE over 6 channels.
func.func @large(%g: tensor<2x32x128x128x128xf32>, %x: tensor<2x6x128x128x128xf32>, %y: tensor<2x6x128x128x128xf32>, %m: tensor<2x6x128x128x128xf32>) -> (tensor<32xf32>, tensor<f32>) {
  %0 = med.reduce sum %g {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x32x128x128x128xf32>) -> tensor<32xf32>
  %1 = med.bce_with_logits %x, %y mask %m : (tensor<2x6x128x128x128xf32>, tensor<2x6x128x128x128xf32>, tensor<2x6x128x128x128xf32>) -> tensor<f32>
  return %0, %1 : tensor<32xf32>, tensor<f32>
}
