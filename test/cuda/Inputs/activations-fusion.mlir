// The rectifiers inside elementwise fusions (test/cuda/activations.test): each function's
// ops form one fused kernel that composes the ops' scalar forms, at odd sizes, with the
// slopes per channel, along the last axis and as the attribute's literal.
func.func @bias_lrelu(%x: tensor<2x5x3x7x3xf32>, %b: tensor<1x5x1x1x1xf32>, %r: tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32> {
  %0 = med.add %x, %b : (tensor<2x5x3x7x3xf32>, tensor<1x5x1x1x1xf32>) -> tensor<2x5x3x7x3xf32>
  %1 = med.leaky_relu %0 {negative_slope = 0.1 : f64} : tensor<2x5x3x7x3xf32>
  %2 = med.mul %1, %r : (tensor<2x5x3x7x3xf32>, tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32>
  return %2 : tensor<2x5x3x7x3xf32>
}
func.func @prelu_relu(%x: tensor<2x5x3x7x3xf32>, %a: tensor<5x1x1x1xf32>, %w: tensor<3xf32>, %r: tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32> {
  %0 = med.prelu %x, %a : (tensor<2x5x3x7x3xf32>, tensor<5x1x1x1xf32>) -> tensor<2x5x3x7x3xf32>
  %1 = med.add %0, %r : (tensor<2x5x3x7x3xf32>, tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32>
  %2 = med.prelu %1, %w : (tensor<2x5x3x7x3xf32>, tensor<3xf32>) -> tensor<2x5x3x7x3xf32>
  %3 = med.relu %2 : tensor<2x5x3x7x3xf32>
  return %3 : tensor<2x5x3x7x3xf32>
}
func.func @prelu_grad_chain(%x: tensor<2x5x3x7x3xf32>, %a: tensor<5x1x1x1xf32>, %dy: tensor<2x5x3x7x3xf32>, %s: tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32> {
  %0 = med.mul %dy, %s : (tensor<2x5x3x7x3xf32>, tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32>
  %1 = med.prelu_grad %x, %a, %0 : (tensor<2x5x3x7x3xf32>, tensor<5x1x1x1xf32>, tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32>
  %2 = med.neg %1 : tensor<2x5x3x7x3xf32>
  return %2 : tensor<2x5x3x7x3xf32>
}
