// A MedNeXt-style block wide enough for mlpGradChunks to keep its weights in shared memory
// (test/cuda/mlp-chunks.test): 37 channels expanded to 150 and compressed back (padded: 48
// and 160, ten warps; 98 KiB of shared memory, above the 48 KiB a kernel gets unasked), with
// the residual add, then a 1×1×1 head.
med.parameter @"stem.weight" : tensor<37x1x1x1x1xf32> init uniform(1)
med.parameter @"stem.bias" : tensor<37xf32> init uniform(1)
med.parameter @"a.dw" : tensor<37x1x3x3x3xf32> init uniform(27)
med.parameter @"a.norm.weight" : tensor<37xf32> init ones
med.parameter @"a.norm.bias" : tensor<37xf32> init zeros
med.parameter @"a.expand.weight" : tensor<150x37x1x1x1xf32> init uniform(37)
med.parameter @"a.expand.bias" : tensor<150xf32> init uniform(37)
med.parameter @"a.compress.weight" : tensor<37x150x1x1x1xf32> init uniform(150)
med.parameter @"a.compress.bias" : tensor<37xf32> init uniform(150)
med.parameter @"head.weight" : tensor<3x37x1x1x1xf32> init uniform(37)
med.parameter @"head.bias" : tensor<3xf32> init uniform(37)
func.func @net(%x: tensor<?x1x?x?x?xf32>) -> tensor<?x3x?x?x?xf32> {
  %sw = med.param @"stem.weight" : tensor<37x1x1x1x1xf32>
  %sb = med.param @"stem.bias" : tensor<37xf32>
  %dw = med.param @"a.dw" : tensor<37x1x3x3x3xf32>
  %g = med.param @"a.norm.weight" : tensor<37xf32>
  %be = med.param @"a.norm.bias" : tensor<37xf32>
  %aw1 = med.param @"a.expand.weight" : tensor<150x37x1x1x1xf32>
  %ab1 = med.param @"a.expand.bias" : tensor<150xf32>
  %aw2 = med.param @"a.compress.weight" : tensor<37x150x1x1x1xf32>
  %ab2 = med.param @"a.compress.bias" : tensor<37xf32>
  %hw = med.param @"head.weight" : tensor<3x37x1x1x1xf32>
  %hb = med.param @"head.bias" : tensor<3xf32>
  %0 = med.conv3d %x, %sw, %sb : (tensor<?x1x?x?x?xf32>, tensor<37x1x1x1x1xf32>, tensor<37xf32>) -> tensor<?x37x?x?x?xf32>
  %1 = med.conv3d %0, %dw {groups = 37 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x37x?x?x?xf32>, tensor<37x1x3x3x3xf32>) -> tensor<?x37x?x?x?xf32>
  %2 = med.group_norm %1, %g, %be {groups = 37 : i64} : (tensor<?x37x?x?x?xf32>, tensor<37xf32>, tensor<37xf32>) -> tensor<?x37x?x?x?xf32>
  %3 = med.conv3d %2, %aw1, %ab1 : (tensor<?x37x?x?x?xf32>, tensor<150x37x1x1x1xf32>, tensor<150xf32>) -> tensor<?x150x?x?x?xf32>
  %4 = med.gelu %3 : tensor<?x150x?x?x?xf32>
  %5 = med.conv3d %4, %aw2, %ab2 : (tensor<?x150x?x?x?xf32>, tensor<37x150x1x1x1xf32>, tensor<37xf32>) -> tensor<?x37x?x?x?xf32>
  %6 = med.add %0, %5 : (tensor<?x37x?x?x?xf32>, tensor<?x37x?x?x?xf32>) -> tensor<?x37x?x?x?xf32>
  %7 = med.conv3d %6, %hw, %hb : (tensor<?x37x?x?x?xf32>, tensor<3x37x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  return %7 : tensor<?x3x?x?x?xf32>
}
