// A small network with the depthwise convolutions of MedNeXt (shift-sum-run.test): a 1x1x1
// stem, a k3 depthwise convolution with bias, group norm and GELU, a k5 one without bias, a
// mixed (3, 5, 1) kernel, a skip add, and the strided down and transposed up depthwise
// convolutions that med-shift-sum leaves alone; odd channel count, a 1x1x1 head.
med.parameter @"stem.weight" : tensor<5x2x1x1x1xf32> init uniform(2)
med.parameter @"stem.bias" : tensor<5xf32> init uniform(2)
med.parameter @"dw3.weight" : tensor<5x1x3x3x3xf32> init uniform(27)
med.parameter @"dw3.bias" : tensor<5xf32> init uniform(27)
med.parameter @"norm.weight" : tensor<5xf32> init ones
med.parameter @"norm.bias" : tensor<5xf32> init zeros
med.parameter @"dw5.weight" : tensor<5x1x5x5x5xf32> init uniform(125)
med.parameter @"dwm.weight" : tensor<5x1x3x5x1xf32> init uniform(15)
med.parameter @"dwm.bias" : tensor<5xf32> init uniform(15)
med.parameter @"down.weight" : tensor<5x1x3x3x3xf32> init uniform(27)
med.parameter @"up.weight" : tensor<5x1x3x3x3xf32> init uniform(27)
med.parameter @"head.weight" : tensor<3x5x1x1x1xf32> init uniform(5)
med.parameter @"head.bias" : tensor<3xf32> init uniform(5)
func.func @net(%x: tensor<?x2x?x?x?xf32>) -> tensor<?x3x?x?x?xf32> {
  %sw = med.param @"stem.weight" : tensor<5x2x1x1x1xf32>
  %sb = med.param @"stem.bias" : tensor<5xf32>
  %w3 = med.param @"dw3.weight" : tensor<5x1x3x3x3xf32>
  %b3 = med.param @"dw3.bias" : tensor<5xf32>
  %g = med.param @"norm.weight" : tensor<5xf32>
  %be = med.param @"norm.bias" : tensor<5xf32>
  %w5 = med.param @"dw5.weight" : tensor<5x1x5x5x5xf32>
  %wm = med.param @"dwm.weight" : tensor<5x1x3x5x1xf32>
  %bm = med.param @"dwm.bias" : tensor<5xf32>
  %wd = med.param @"down.weight" : tensor<5x1x3x3x3xf32>
  %wu = med.param @"up.weight" : tensor<5x1x3x3x3xf32>
  %hw = med.param @"head.weight" : tensor<3x5x1x1x1xf32>
  %hb = med.param @"head.bias" : tensor<3xf32>
  %0 = med.conv3d %x, %sw, %sb : (tensor<?x2x?x?x?xf32>, tensor<5x2x1x1x1xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %1 = med.conv3d %0, %w3, %b3 {groups = 5 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x5x?x?x?xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %2 = med.group_norm %1, %g, %be {groups = 1 : i64} : (tensor<?x5x?x?x?xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %3 = med.gelu %2 : tensor<?x5x?x?x?xf32>
  %4 = med.conv3d %3, %w5 {groups = 5 : i64, padding = array<i64: 2, 2, 2>} : (tensor<?x5x?x?x?xf32>, tensor<5x1x5x5x5xf32>) -> tensor<?x5x?x?x?xf32>
  %5 = med.conv3d %4, %wm, %bm {groups = 5 : i64, padding = array<i64: 1, 2, 0>} : (tensor<?x5x?x?x?xf32>, tensor<5x1x3x5x1xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %6 = med.add %5, %0 : (tensor<?x5x?x?x?xf32>, tensor<?x5x?x?x?xf32>) -> tensor<?x5x?x?x?xf32>
  %7 = med.conv3d %6, %wd {groups = 5 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<?x5x?x?x?xf32>, tensor<5x1x3x3x3xf32>) -> tensor<?x5x?x?x?xf32>
  %8 = med.conv3d_transpose %7, %wu {groups = 5 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>, output_padding = array<i64: 1, 1, 1>} : (tensor<?x5x?x?x?xf32>, tensor<5x1x3x3x3xf32>) -> tensor<?x5x?x?x?xf32>
  %9 = med.add %8, %6 : (tensor<?x5x?x?x?xf32>, tensor<?x5x?x?x?xf32>) -> tensor<?x5x?x?x?xf32>
  %10 = med.conv3d %9, %hw, %hb : (tensor<?x5x?x?x?xf32>, tensor<3x5x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  return %10 : tensor<?x3x?x?x?xf32>
}
