// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc --tolerance 1e-30 | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 5 --tolerance 1e-30 | FileCheck %s

// The label transforms against LibTorch compositions, exactly (a tolerance of 1e-30 on
// values that are labels or 0/1): med.affinities against indexing (index_select of the
// other ends, BANIS's comparisons), med.remove_label against torch.where,
// med.label_regions against torch.isin, med.downsample_nearest against the op behind
// interpolate(mode='nearest-exact'). Odd sizes; labels drawn from -1 (unlabelled), 0
// (background) and 1..4, integer and f32. test/cuda/labels.test runs this file on the CUDA
// backend (its negative controls: a flipped offset, background not zeroed, the trailing
// edge not masked, floor-nearest instead of nearest-exact).

// BANIS's six affinities at offsets 1 and 3 from a crop with 3 voxels of trailing context,
// and from a box at (1, 2, 0) with negative offsets, a mixed one and one of 6 along an axis
// of 7 (valid at one voxel of each row).
// CHECK: affinities_i32  out0  2x6x6x8x4  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: affinities_i32  out1  2x6x6x8x4  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: affinities_i32  out2  2x4x5x7x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: affinities_i32  out3  2x4x5x7x7  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @affinities_i32(%seg: tensor<2x1x9x11x7xi32>) -> (tensor<2x6x6x8x4xf32>, tensor<2x6x6x8x4xf32>, tensor<2x4x5x7x7xf32>, tensor<2x4x5x7x7xf32>) {
  %a, %m = med.affinities %seg {offsets = array<i64: 1, 0, 0, 0, 1, 0, 0, 0, 1, 3, 0, 0, 0, 3, 0, 0, 0, 3>, crop_size = array<i64: 6, 8, 4>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x6x6x8x4xf32>, tensor<2x6x6x8x4xf32>)
  %b, %n = med.affinities %seg {offsets = array<i64: -1, 0, 0, 0, -3, 0, 2, 1, -1, 0, 0, 6>, crop_low = array<i64: 1, 2, 0>, crop_size = array<i64: 5, 7, 7>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x4x5x7x7xf32>, tensor<2x4x5x7x7xf32>)
  return %a, %m, %b, %n : tensor<2x6x6x8x4xf32>, tensor<2x6x6x8x4xf32>, tensor<2x4x5x7x7xf32>, tensor<2x4x5x7x7xf32>
}

// f32 ids over the whole volume (no crop: the trailing edge is masked), and with
// unlabelled_below = 1 (background counts as unlabelled too).
// CHECK: affinities_f32  out0  1x3x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: affinities_f32  out1  1x3x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: affinities_f32  out2  1x2x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: affinities_f32  out3  1x2x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @affinities_f32(%seg: tensor<1x1x9x11x7xf32>) -> (tensor<1x3x9x11x7xf32>, tensor<1x3x9x11x7xf32>, tensor<1x2x9x11x7xf32>, tensor<1x2x9x11x7xf32>) {
  %a, %m = med.affinities %seg {offsets = array<i64: 1, 0, 0, 0, 1, 0, 0, 0, 3>} : (tensor<1x1x9x11x7xf32>) -> (tensor<1x3x9x11x7xf32>, tensor<1x3x9x11x7xf32>)
  %b, %n = med.affinities %seg {offsets = array<i64: 0, 0, 1, 3, 0, 0>, unlabelled_below = 1 : i64} : (tensor<1x1x9x11x7xf32>) -> (tensor<1x2x9x11x7xf32>, tensor<1x2x9x11x7xf32>)
  return %a, %m, %b, %n : tensor<1x3x9x11x7xf32>, tensor<1x3x9x11x7xf32>, tensor<1x2x9x11x7xf32>, tensor<1x2x9x11x7xf32>
}

// nnU-Net's RemoveLabelTansform(-1, 0), and another pair.
// CHECK: remove_label  out0  2x1x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: remove_label  out1  2x1x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @remove_label(%f: tensor<2x1x9x11x7xf32>, %i: tensor<2x1x9x11x7xi32>) -> (tensor<2x1x9x11x7xf32>, tensor<2x1x9x11x7xi32>) {
  %a = med.remove_label %f {label = -1 : i64, replace_with = 0 : i64} : (tensor<2x1x9x11x7xf32>) -> tensor<2x1x9x11x7xf32>
  %b = med.remove_label %i {label = 3 : i64, replace_with = 7 : i64} : (tensor<2x1x9x11x7xi32>) -> tensor<2x1x9x11x7xi32>
  return %a, %b : tensor<2x1x9x11x7xf32>, tensor<2x1x9x11x7xi32>
}

// BraTS-like regions (whole tumour, tumour core, enhancing tumour) of integer labels, and
// regions of f32 labels including the unlabelled -1.
// CHECK: label_regions  out0  2x3x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: label_regions  out1  2x2x9x11x7  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @label_regions(%i: tensor<2x1x9x11x7xi32>, %f: tensor<2x1x9x11x7xf32>) -> (tensor<2x3x9x11x7xf32>, tensor<2x2x9x11x7xf32>) {
  %a = med.label_regions %i {regions = [array<i64: 1, 2, 3>, array<i64: 2, 3>, array<i64: 3>]} : (tensor<2x1x9x11x7xi32>) -> tensor<2x3x9x11x7xf32>
  %b = med.label_regions %f {regions = [array<i64: -1, 4>, array<i64: 0>]} : (tensor<2x1x9x11x7xf32>) -> tensor<2x2x9x11x7xf32>
  return %a, %b : tensor<2x3x9x11x7xf32>, tensor<2x2x9x11x7xf32>
}

// Deep-supervision sizes: odd ratios where nearest-exact and floor-nearest pick different
// voxels (9 -> 5, 11 -> 6, 7 -> 4 and 7 -> 3), a halving (20 -> 10 -> 5) and an upsampling.
// CHECK: downsample_nearest  out0  2x1x5x6x4  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: downsample_nearest  out1  2x1x3x4x3  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: downsample_nearest  out2  2x1x13x5x9  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: downsample_nearest  out3  1x2x10x10x5  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @downsample_nearest(%i: tensor<2x1x9x11x7xi32>, %f: tensor<2x1x9x11x7xf32>, %g: tensor<1x2x20x20x10xf32>) -> (tensor<2x1x5x6x4xi32>, tensor<2x1x3x4x3xf32>, tensor<2x1x13x5x9xi32>, tensor<1x2x10x10x5xf32>) {
  %a = med.downsample_nearest %i {size = array<i64: 5, 6, 4>} : (tensor<2x1x9x11x7xi32>) -> tensor<2x1x5x6x4xi32>
  %b = med.downsample_nearest %f {size = array<i64: 3, 4, 3>} : (tensor<2x1x9x11x7xf32>) -> tensor<2x1x3x4x3xf32>
  %c = med.downsample_nearest %i {size = array<i64: 13, 5, 9>} : (tensor<2x1x9x11x7xi32>) -> tensor<2x1x13x5x9xi32>
  %d = med.downsample_nearest %g {size = array<i64: 10, 10, 5>} : (tensor<1x2x20x20x10xf32>) -> tensor<1x2x10x10x5xf32>
  return %a, %b, %c, %d : tensor<2x1x5x6x4xi32>, tensor<2x1x3x4x3xf32>, tensor<2x1x13x5x9xi32>, tensor<1x2x10x10x5xf32>
}
