// A loss with a parameter that does not influence it (`unused.scale`: read, its product
// unused), so med-autodiff gives it a zero gradient, and a loss scaled by a constant one:
// material for canonicalize (canonicalize-run.test).
med.parameter @"conv.weight" : tensor<3x2x1x1x1xf32> init uniform(2)
med.parameter @"conv.bias" : tensor<3xf32> init uniform(2)
med.parameter @"unused.scale" : tensor<1x2x1x1x1xf32> init ones
func.func @loss(%x: tensor<?x2x?x?x?xf32>, %y: tensor<?x3x?x?x?xf32>) -> tensor<f32> {
  %w = med.param @"conv.weight" : tensor<3x2x1x1x1xf32>
  %b = med.param @"conv.bias" : tensor<3xf32>
  %u = med.param @"unused.scale" : tensor<1x2x1x1x1xf32>
  %dead = med.mul %x, %u : (tensor<?x2x?x?x?xf32>, tensor<1x2x1x1x1xf32>) -> tensor<?x2x?x?x?xf32>
  %0 = med.conv3d %x, %w, %b : (tensor<?x2x?x?x?xf32>, tensor<3x2x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  %1 = med.gelu %0 : tensor<?x3x?x?x?xf32>
  %2 = med.sub %1, %y : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  %3 = med.mul %2, %2 : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  %4 = med.reduce mean %3 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<?x3x?x?x?xf32>) -> tensor<f32>
  %one = med.constant dense<1.0> : tensor<f32>
  %5 = med.mul %4, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %5 : tensor<f32>
}
