// Two MedNeXt-style blocks of odd sizes for med-form-mlp-fusions: a residual block (5
// channels expanded to 40, compressed back, + the block input) and a block whose
// compression changes the channels (5 → 75 → 7, no residual), then a 1×1×1 head. The CUDA
// templates stage the expanded channels' weights 32 at a time (40: two stages, 75: three,
// the last ones partial) and give each chunk of 16 a warp of the weight-gradient kernel
// (40: three chunks, a block of three warps; 75: five, blocks of four, three warps idle).
med.parameter @"stem.weight" : tensor<5x1x1x1x1xf32> init uniform(1)
med.parameter @"stem.bias" : tensor<5xf32> init uniform(1)
med.parameter @"a.dw" : tensor<5x1x3x3x3xf32> init uniform(27)
med.parameter @"a.norm.weight" : tensor<5xf32> init ones
med.parameter @"a.norm.bias" : tensor<5xf32> init zeros
med.parameter @"a.expand.weight" : tensor<40x5x1x1x1xf32> init uniform(5)
med.parameter @"a.expand.bias" : tensor<40xf32> init uniform(5)
med.parameter @"a.compress.weight" : tensor<5x40x1x1x1xf32> init uniform(40)
med.parameter @"a.compress.bias" : tensor<5xf32> init uniform(40)
med.parameter @"b.expand.weight" : tensor<75x5x1x1x1xf32> init uniform(5)
med.parameter @"b.expand.bias" : tensor<75xf32> init uniform(5)
med.parameter @"b.compress.weight" : tensor<7x75x1x1x1xf32> init uniform(75)
med.parameter @"b.compress.bias" : tensor<7xf32> init uniform(75)
med.parameter @"head.weight" : tensor<3x7x1x1x1xf32> init uniform(7)
med.parameter @"head.bias" : tensor<3xf32> init uniform(7)
func.func @net(%x: tensor<?x1x?x?x?xf32>) -> tensor<?x3x?x?x?xf32> {
  %sw = med.param @"stem.weight" : tensor<5x1x1x1x1xf32>
  %sb = med.param @"stem.bias" : tensor<5xf32>
  %dw = med.param @"a.dw" : tensor<5x1x3x3x3xf32>
  %g = med.param @"a.norm.weight" : tensor<5xf32>
  %be = med.param @"a.norm.bias" : tensor<5xf32>
  %aw1 = med.param @"a.expand.weight" : tensor<40x5x1x1x1xf32>
  %ab1 = med.param @"a.expand.bias" : tensor<40xf32>
  %aw2 = med.param @"a.compress.weight" : tensor<5x40x1x1x1xf32>
  %ab2 = med.param @"a.compress.bias" : tensor<5xf32>
  %bw1 = med.param @"b.expand.weight" : tensor<75x5x1x1x1xf32>
  %bb1 = med.param @"b.expand.bias" : tensor<75xf32>
  %bw2 = med.param @"b.compress.weight" : tensor<7x75x1x1x1xf32>
  %bb2 = med.param @"b.compress.bias" : tensor<7xf32>
  %hw = med.param @"head.weight" : tensor<3x7x1x1x1xf32>
  %hb = med.param @"head.bias" : tensor<3xf32>
  %0 = med.conv3d %x, %sw, %sb : (tensor<?x1x?x?x?xf32>, tensor<5x1x1x1x1xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %1 = med.conv3d %0, %dw {groups = 5 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x5x?x?x?xf32>, tensor<5x1x3x3x3xf32>) -> tensor<?x5x?x?x?xf32>
  %2 = med.group_norm %1, %g, %be {groups = 5 : i64} : (tensor<?x5x?x?x?xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %3 = med.conv3d %2, %aw1, %ab1 : (tensor<?x5x?x?x?xf32>, tensor<40x5x1x1x1xf32>, tensor<40xf32>) -> tensor<?x40x?x?x?xf32>
  %4 = med.gelu %3 : tensor<?x40x?x?x?xf32>
  %5 = med.conv3d %4, %aw2, %ab2 : (tensor<?x40x?x?x?xf32>, tensor<5x40x1x1x1xf32>, tensor<5xf32>) -> tensor<?x5x?x?x?xf32>
  %6 = med.add %0, %5 : (tensor<?x5x?x?x?xf32>, tensor<?x5x?x?x?xf32>) -> tensor<?x5x?x?x?xf32>
  %7 = med.conv3d %6, %bw1, %bb1 : (tensor<?x5x?x?x?xf32>, tensor<75x5x1x1x1xf32>, tensor<75xf32>) -> tensor<?x75x?x?x?xf32>
  %8 = med.gelu %7 : tensor<?x75x?x?x?xf32>
  %9 = med.conv3d %8, %bw2, %bb2 : (tensor<?x75x?x?x?xf32>, tensor<7x75x1x1x1xf32>, tensor<7xf32>) -> tensor<?x7x?x?x?xf32>
  %10 = med.conv3d %9, %hw, %hb : (tensor<?x7x?x?x?xf32>, tensor<3x7x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  return %10 : tensor<?x3x?x?x?xf32>
}
