// A small network of nnU-Net's conv blocks (split-norms-run.test): 3x3x3 convolution ->
// instance norm (groups = C) -> LeakyReLU, a second block with a group norm of 2 groups of
// 3 channels -> ReLU, a residual add after a third norm (ResEncUNet's) -> LeakyReLU, and a
// 1x1x1 head; odd channel counts.
med.parameter @"c1.weight" : tensor<5x2x3x3x3xf32> init uniform(54)
med.parameter @"c1.bias" : tensor<5xf32> init uniform(54)
med.parameter @"n1.weight" : tensor<5xf32> init uniform(1)
med.parameter @"n1.bias" : tensor<5xf32> init uniform(1)
med.parameter @"c2.weight" : tensor<6x5x3x3x3xf32> init uniform(135)
med.parameter @"n2.weight" : tensor<6xf32> init uniform(1)
med.parameter @"n2.bias" : tensor<6xf32> init uniform(1)
med.parameter @"c3.weight" : tensor<6x6x3x3x3xf32> init uniform(162)
med.parameter @"n3.weight" : tensor<6xf32> init uniform(1)
med.parameter @"n3.bias" : tensor<6xf32> init uniform(1)
med.parameter @"head.weight" : tensor<3x6x1x1x1xf32> init uniform(6)
med.parameter @"head.bias" : tensor<3xf32> init uniform(6)
func.func @net(%x: tensor<?x2x?x?x?xf32>) -> tensor<?x3x?x?x?xf32> {
  %w1 = med.param @"c1.weight" : tensor<5x2x3x3x3xf32>
  %b1 = med.param @"c1.bias" : tensor<5xf32>
  %g1 = med.param @"n1.weight" : tensor<5xf32>
  %be1 = med.param @"n1.bias" : tensor<5xf32>
  %w2 = med.param @"c2.weight" : tensor<6x5x3x3x3xf32>
  %g2 = med.param @"n2.weight" : tensor<6xf32>
  %be2 = med.param @"n2.bias" : tensor<6xf32>
  %w3 = med.param @"c3.weight" : tensor<6x6x3x3x3xf32>
  %g3 = med.param @"n3.weight" : tensor<6xf32>
  %be3 = med.param @"n3.bias" : tensor<6xf32>
  %hw = med.param @"head.weight" : tensor<3x6x1x1x1xf32>
  %hb = med.param @"head.bias" : tensor<3xf32>
  %0 = med.conv3d %x, %w1, %b1 {padding = array<i64: 1, 1, 1>} : (tensor<?x2x?x?x?xf32>, tensor<5x2x3x3x3xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %1 = med.group_norm %0, %g1, %be1 {groups = 5 : i64} : (tensor<?x5x?x?x?xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %2 = med.leaky_relu %1 {negative_slope = 0.01 : f64} : tensor<?x5x?x?x?xf32>
  %3 = med.conv3d %2, %w2 {padding = array<i64: 1, 1, 1>} : (tensor<?x5x?x?x?xf32>, tensor<6x5x3x3x3xf32>) -> tensor<?x6x?x?x?xf32>
  %4 = med.group_norm %3, %g2, %be2 {groups = 2 : i64} : (tensor<?x6x?x?x?xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x6x?x?x?xf32>
  %5 = med.relu %4 : tensor<?x6x?x?x?xf32>
  %6 = med.conv3d %5, %w3 {padding = array<i64: 1, 1, 1>} : (tensor<?x6x?x?x?xf32>, tensor<6x6x3x3x3xf32>) -> tensor<?x6x?x?x?xf32>
  %7 = med.group_norm %6, %g3, %be3 {groups = 6 : i64} : (tensor<?x6x?x?x?xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x6x?x?x?xf32>
  %8 = med.add %7, %5 : (tensor<?x6x?x?x?xf32>, tensor<?x6x?x?x?xf32>) -> tensor<?x6x?x?x?xf32>
  %9 = med.leaky_relu %8 {negative_slope = 0.01 : f64} : tensor<?x6x?x?x?xf32>
  %10 = med.conv3d %9, %hw, %hb : (tensor<?x6x?x?x?xf32>, tensor<3x6x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  return %10 : tensor<?x3x?x?x?xf32>
}
