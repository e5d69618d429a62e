// A small network and its BCE loss, for the training-step tests.
med.parameter @"stem.weight" : tensor<4x2x1x1x1xf32> init uniform(2)
med.parameter @"stem.bias" : tensor<4xf32> init uniform(2)
med.parameter @"dw.weight" : tensor<4x1x3x3x3xf32> init uniform(27)
med.parameter @"norm.weight" : tensor<4xf32> init ones
med.parameter @"norm.bias" : tensor<4xf32> init zeros
med.parameter @"fixed.scale" : tensor<4x1x1x1xf32> init ones frozen
func.func @loss(%x: tensor<?x2x?x?x?xf32>, %y: tensor<?x4x?x?x?xf32>) -> tensor<f32> {
  %w = med.param @"stem.weight" : tensor<4x2x1x1x1xf32>
  %b = med.param @"stem.bias" : tensor<4xf32>
  %dw = med.param @"dw.weight" : tensor<4x1x3x3x3xf32>
  %g = med.param @"norm.weight" : tensor<4xf32>
  %be = med.param @"norm.bias" : tensor<4xf32>
  %s = med.param @"fixed.scale" : tensor<4x1x1x1xf32>
  %0 = med.conv3d %x, %w, %b : (tensor<?x2x?x?x?xf32>, tensor<4x2x1x1x1xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = med.conv3d %0, %dw {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %2 = med.group_norm %1, %g, %be {groups = 4 : i64} : (tensor<?x4x?x?x?xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %3 = med.gelu %2 : tensor<?x4x?x?x?xf32>
  %4 = med.add %3, %0 : (tensor<?x4x?x?x?xf32>, tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  %5 = med.mul %4, %s : (tensor<?x4x?x?x?xf32>, tensor<4x1x1x1xf32>) -> tensor<?x4x?x?x?xf32>
  %l = med.bce_with_logits %5, %y : (tensor<?x4x?x?x?xf32>, tensor<?x4x?x?x?xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
