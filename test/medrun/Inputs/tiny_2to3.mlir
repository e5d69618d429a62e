// tiny.mlir with 2 input and 3 output channels (two-channel datasets, channels.test): stem,
// depthwise block, head.
med.parameter @"stem.weight" : tensor<3x2x1x1x1xf32> init uniform(2)
med.parameter @"stem.bias" : tensor<3xf32> init uniform(2)
med.parameter @"dw.weight" : tensor<3x1x3x3x3xf32> init uniform(27)
med.parameter @"norm.weight" : tensor<3xf32> init ones
med.parameter @"norm.bias" : tensor<3xf32> init zeros
func.func @tiny(%x: tensor<?x2x?x?x?xf32>) -> tensor<?x3x?x?x?xf32> {
  %w = med.param @"stem.weight" : tensor<3x2x1x1x1xf32>
  %b = med.param @"stem.bias" : tensor<3xf32>
  %dw = med.param @"dw.weight" : tensor<3x1x3x3x3xf32>
  %g = med.param @"norm.weight" : tensor<3xf32>
  %be = med.param @"norm.bias" : tensor<3xf32>
  %0 = med.conv3d %x, %w, %b : (tensor<?x2x?x?x?xf32>, tensor<3x2x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  %1 = med.conv3d %0, %dw {groups = 3 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x3x?x?x?xf32>, tensor<3x1x3x3x3xf32>) -> tensor<?x3x?x?x?xf32>
  %2 = med.group_norm %1, %g, %be {groups = 3 : i64} : (tensor<?x3x?x?x?xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  %3 = med.gelu %2 : tensor<?x3x?x?x?xf32>
  %4 = med.add %3, %0 : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  return %4 : tensor<?x3x?x?x?xf32>
}
