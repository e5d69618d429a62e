// `resample` fusions (med-form-resample-fusions) the CUDA backend runs as one kernel each
// (test/cuda/resample-fusion.test), at odd sizes, with a general affine matrix.
//
// BANIS's ending: the image resampled with reflection and cropped to its first voxels (the
// kernel samples the box alone), the instance ids resampled nearest with their affinities
// (the labels sampled at both ends of each, never stored), offsets of both signs, a box not
// at the origin.
func.func @banis(%x: tensor<2x1x9x8x7xf32>, %s: tensor<2x1x9x8x7xi32>) -> (tensor<2x1x6x5x4xf32>, tensor<2x4x6x5x4xf32>, tensor<2x4x6x5x4xf32>) {
  %m = med.constant dense<[[[0.6466457, -0.3502078, -0.1031221, 0.7000000], [0.3532641, 0.6795607, -0.4128187, -1.2000000], [0.3115347, 0.2644839, 0.6821632, 0.4000000]], [[1.1109555, -0.4295100, -0.0007694, -0.6000000], [0.6110592, 0.9346567, 0.6376788, 0.9000000], [-0.3616413, -0.4093447, 1.0751117, -1.1000000]]]> : tensor<2x3x4xf32>
  %0 = med.spatial_transform linear %x, %m border reflection {shape = array<i64: 9, 8, 7>} : (tensor<2x1x9x8x7xf32>, tensor<2x3x4xf32>) -> tensor<2x1x9x8x7xf32>
  %1 = med.spatial_transform nearest %s, %m border reflection {shape = array<i64: 9, 8, 7>} : (tensor<2x1x9x8x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x9x8x7xi32>
  %a, %k = med.affinities %1 {offsets = array<i64: 1, 0, 0, 0, 2, 0, 0, 0, -1, 3, 0, 0>, crop_low = array<i64: 1, 1, 1>, crop_size = array<i64: 6, 5, 4>} : (tensor<2x1x9x8x7xi32>) -> (tensor<2x4x6x5x4xf32>, tensor<2x4x6x5x4xf32>)
  %2 = med.slice %0 {offsets = array<i64: 0, 0, 1, 2, 1>, sizes = array<i64: 2, 1, 6, 5, 4>} : (tensor<2x1x9x8x7xf32>) -> tensor<2x1x6x5x4xf32>
  return %2, %a, %k : tensor<2x1x6x5x4xf32>, tensor<2x4x6x5x4xf32>, tensor<2x4x6x5x4xf32>
}

// nnU-Net's noise after the spatial transform, three channels: Philox numbers of each
// element's own counter (sample, channel and voxel), a per-sample deviation and a
// per-channel shift read at broadcast indices; the resampled image is a result too.
func.func @noise(%x: tensor<2x3x9x8x7xf32>, %u: tensor<2x1x1x1x1xf32>, %b: tensor<1x3x1x1x1xf32>, %key: tensor<i64>) -> (tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>) {
  %m = med.constant dense<[[[0.6466457, -0.3502078, -0.1031221, 0.7000000], [0.3532641, 0.6795607, -0.4128187, -1.2000000], [0.3115347, 0.2644839, 0.6821632, 0.4000000]], [[1.1109555, -0.4295100, -0.0007694, -0.6000000], [0.6110592, 0.9346567, 0.6376788, 0.9000000], [-0.3616413, -0.4093447, 1.0751117, -1.1000000]]]> : tensor<2x3x4xf32>
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x8x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %r = med.random %key, %0 {stream = 2 : i64, distribution = #med<distribution normal>} : (tensor<i64>, tensor<2x3x5x6x7xf32>) -> tensor<2x3x5x6x7xf32>
  %n = med.mul %r, %u : (tensor<2x3x5x6x7xf32>, tensor<2x1x1x1x1xf32>) -> tensor<2x3x5x6x7xf32>
  %1 = med.add %0, %n : (tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>) -> tensor<2x3x5x6x7xf32>
  %2 = med.add %1, %b : (tensor<2x3x5x6x7xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x6x7xf32>
  return %2, %0 : tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>
}

// nnU-Net's segmentation (one-hot linear, argmax, -1 outside) with an epilogue along an inner
// axis, then cropped; float labels resampled nearest with a constant border of -1 (the
// unlabelled id) and their affinities.
func.func @labels(%s: tensor<2x1x9x8x7xf32>, %w: tensor<7xf32>) -> (tensor<2x1x3x4x5xf32>, tensor<2x2x5x6x7xf32>, tensor<2x2x5x6x7xf32>) {
  %m = med.constant dense<[[[0.6466457, -0.3502078, -0.1031221, 0.7000000], [0.3532641, 0.6795607, -0.4128187, -1.2000000], [0.3115347, 0.2644839, 0.6821632, 0.4000000]], [[1.1109555, -0.4295100, -0.0007694, -0.6000000], [0.6110592, 0.9346567, 0.6376788, 0.9000000], [-0.3616413, -0.4093447, 1.0751117, -1.1000000]]]> : tensor<2x3x4xf32>
  %0 = med.spatial_transform linear_argmax %s, %m {labels = array<i64: -1, 0, 1, 2, 3>, shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x1x9x8x7xf32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xf32>
  %1 = med.mul %0, %w : (tensor<2x1x5x6x7xf32>, tensor<7xf32>) -> tensor<2x1x5x6x7xf32>
  %2 = med.slice %1 {offsets = array<i64: 0, 0, 2, 1, 2>, sizes = array<i64: 2, 1, 3, 4, 5>} : (tensor<2x1x5x6x7xf32>) -> tensor<2x1x3x4x5xf32>
  %3 = med.spatial_transform nearest %s, %m border constant {shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x1x9x8x7xf32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xf32>
  %a, %k = med.affinities %3 {offsets = array<i64: 0, 1, 0, 0, 0, 1>} : (tensor<2x1x5x6x7xf32>) -> (tensor<2x2x5x6x7xf32>, tensor<2x2x5x6x7xf32>)
  return %2, %a, %k : tensor<2x1x3x4x5xf32>, tensor<2x2x5x6x7xf32>, tensor<2x2x5x6x7xf32>
}
