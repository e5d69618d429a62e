// The loss of train-autocast.test, not a test itself: convolutions (pointwise, depthwise
// with padding, pointwise), GELU, a skip add and masked BCE; no transposed conv and no
// norm, whose autocast policies differ between LibTorch 1.13's CPU and CUDA autocast.
med.parameter @"stem.weight" : tensor<8x2x1x1x1xf32> init uniform(2)
med.parameter @"stem.bias" : tensor<8xf32> init uniform(2)
med.parameter @"dw.weight" : tensor<8x1x3x3x3xf32> init uniform(27)
med.parameter @"dw.bias" : tensor<8xf32> init uniform(27)
med.parameter @"down.weight" : tensor<16x8x1x1x1xf32> init uniform(8)
med.parameter @"down.bias" : tensor<16xf32> init uniform(8)
med.parameter @"head.weight" : tensor<3x16x1x1x1xf32> init uniform(16)
med.parameter @"head.bias" : tensor<3xf32> init uniform(16)
func.func @loss(%x: tensor<?x2x?x?x?xf32>, %y: tensor<?x3x?x?x?xf32>, %m: tensor<?x3x?x?x?xf32>) -> tensor<f32> {
  %sw = med.param @"stem.weight" : tensor<8x2x1x1x1xf32>
  %sb = med.param @"stem.bias" : tensor<8xf32>
  %dw = med.param @"dw.weight" : tensor<8x1x3x3x3xf32>
  %db = med.param @"dw.bias" : tensor<8xf32>
  %down = med.param @"down.weight" : tensor<16x8x1x1x1xf32>
  %downb = med.param @"down.bias" : tensor<16xf32>
  %hw = med.param @"head.weight" : tensor<3x16x1x1x1xf32>
  %hb = med.param @"head.bias" : tensor<3xf32>
  %0 = med.conv3d %x, %sw, %sb : (tensor<?x2x?x?x?xf32>, tensor<8x2x1x1x1xf32>, tensor<8xf32>) -> tensor<?x8x?x?x?xf32>
  %1 = med.conv3d %0, %dw, %db {groups = 8 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x8x?x?x?xf32>, tensor<8x1x3x3x3xf32>, tensor<8xf32>) -> tensor<?x8x?x?x?xf32>
  %3 = med.gelu %1 : tensor<?x8x?x?x?xf32>
  %4 = med.add %3, %0 : (tensor<?x8x?x?x?xf32>, tensor<?x8x?x?x?xf32>) -> tensor<?x8x?x?x?xf32>
  %5 = med.conv3d %4, %down, %downb : (tensor<?x8x?x?x?xf32>, tensor<16x8x1x1x1xf32>, tensor<16xf32>) -> tensor<?x16x?x?x?xf32>
  %6 = med.gelu %5 : tensor<?x16x?x?x?xf32>
  %11 = med.conv3d %6, %hw, %hb : (tensor<?x16x?x?x?xf32>, tensor<3x16x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  %l = med.bce_with_logits %11, %y mask %m : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
