// The loss of the training-step checks (train-adamw.test, train-sgd.test), not a test
// itself: a pointwise stem, a depthwise conv, group norm, GELU, a skip add, a strided conv
// down and a transposed conv up with a second skip, a GRN-named scale (exempt from weight
// decay by name with exempt-norm-bias), a frozen scale and a 1x1x1 head; masked BCE.
med.parameter @"stem.weight" : tensor<4x2x1x1x1xf32> init uniform(2)
med.parameter @"stem.bias" : tensor<4xf32> init uniform(2)
med.parameter @"dw.weight" : tensor<4x1x3x3x3xf32> init uniform(27)
med.parameter @"norm.weight" : tensor<4xf32> init ones
med.parameter @"norm.bias" : tensor<4xf32> init zeros
med.parameter @"down.weight" : tensor<8x4x2x2x2xf32> init uniform(32)
med.parameter @"down.bias" : tensor<8xf32> init uniform(32)
med.parameter @"up.weight" : tensor<8x4x2x2x2xf32> init uniform(32)
med.parameter @"up.bias" : tensor<4xf32> init uniform(32)
med.parameter @"block.grn_gamma" : tensor<1x4x1x1x1xf32> init ones
med.parameter @"fixed.scale" : tensor<1x4x1x1x1xf32> init ones frozen
med.parameter @"head.weight" : tensor<3x4x1x1x1xf32> init uniform(4)
med.parameter @"head.bias" : tensor<3xf32> init uniform(4)
func.func @loss(%x: tensor<?x2x?x?x?xf32>, %y: tensor<?x3x?x?x?xf32>, %m: tensor<?x3x?x?x?xf32>) -> tensor<f32> {
  %sw = med.param @"stem.weight" : tensor<4x2x1x1x1xf32>
  %sb = med.param @"stem.bias" : tensor<4xf32>
  %dw = med.param @"dw.weight" : tensor<4x1x3x3x3xf32>
  %g = med.param @"norm.weight" : tensor<4xf32>
  %be = med.param @"norm.bias" : tensor<4xf32>
  %down = med.param @"down.weight" : tensor<8x4x2x2x2xf32>
  %downb = med.param @"down.bias" : tensor<8xf32>
  %up = med.param @"up.weight" : tensor<8x4x2x2x2xf32>
  %upb = med.param @"up.bias" : tensor<4xf32>
  %gamma = med.param @"block.grn_gamma" : tensor<1x4x1x1x1xf32>
  %s = med.param @"fixed.scale" : tensor<1x4x1x1x1xf32>
  %hw = med.param @"head.weight" : tensor<3x4x1x1x1xf32>
  %hb = med.param @"head.bias" : tensor<3xf32>
  %0 = med.conv3d %x, %sw, %sb : (tensor<?x2x?x?x?xf32>, tensor<4x2x1x1x1xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = med.conv3d %0, %dw {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %2 = med.group_norm %1, %g, %be {groups = 2 : i64} : (tensor<?x4x?x?x?xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %3 = med.gelu %2 : tensor<?x4x?x?x?xf32>
  %4 = med.add %3, %0 : (tensor<?x4x?x?x?xf32>, tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  %5 = med.conv3d %4, %down, %downb {stride = array<i64: 2, 2, 2>} : (tensor<?x4x?x?x?xf32>, tensor<8x4x2x2x2xf32>, tensor<8xf32>) -> tensor<?x8x?x?x?xf32>
  %6 = med.gelu %5 : tensor<?x8x?x?x?xf32>
  %7 = med.conv3d_transpose %6, %up, %upb {stride = array<i64: 2, 2, 2>} : (tensor<?x8x?x?x?xf32>, tensor<8x4x2x2x2xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %8 = med.mul %7, %gamma : (tensor<?x4x?x?x?xf32>, tensor<1x4x1x1x1xf32>) -> tensor<?x4x?x?x?xf32>
  %9 = med.add %8, %4 : (tensor<?x4x?x?x?xf32>, tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  %10 = med.mul %9, %s : (tensor<?x4x?x?x?xf32>, tensor<1x4x1x1x1xf32>) -> tensor<?x4x?x?x?xf32>
  %11 = med.conv3d %10, %hw, %hb : (tensor<?x4x?x?x?xf32>, tensor<3x4x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  %l = med.bce_with_logits %11, %y mask %m : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
