// RUN: med-opt %s --split-input-file --verify-diagnostics
// Every verifier message of the label transforms (include/med/IR/MedLabelOps.td).

func.func @aff_rank(%x: tensor<2x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op seg: expected 5 dimensions (N x 1 x D x H x W instance ids), got 2x9x11x7}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>} : (tensor<2x9x11x7xi32>) -> (tensor<2x1x9x11x7xf32>, tensor<2x1x9x11x7xf32>)
  return
}

// -----

func.func @aff_channels(%x: tensor<2x2x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op seg: expected 1 channel (N x 1 x D x H x W instance ids), got 2}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>} : (tensor<2x2x9x11x7xi32>) -> (tensor<2x1x9x11x7xf32>, tensor<2x1x9x11x7xf32>)
  return
}

// -----

func.func @aff_offsets_count(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op 'offsets' needs 3 entries (along D, H, W) per affinity, got [1, 0]}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x9x11x7xf32>, tensor<2x1x9x11x7xf32>)
  return
}

// -----

func.func @aff_offsets_empty(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op 'offsets' needs 3 entries (along D, H, W) per affinity, got []}}
  %0:2 = med.affinities %x {offsets = array<i64>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x0x9x11x7xf32>, tensor<2x0x9x11x7xf32>)
  return
}

// -----

func.func @aff_offset_zero(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op 'offsets': affinity 1 has offset (0, 0, 0); each affinity needs a non-zero offset}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0, 0, 0, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x2x9x11x7xf32>, tensor<2x2x9x11x7xf32>)
  return
}

// -----

func.func @aff_crop_low_count(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op 'crop_low' needs 3 entries (one per spatial axis), got [0, 0]}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>, crop_low = array<i64: 0, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x9x11x7xf32>, tensor<2x1x9x11x7xf32>)
  return
}

// -----

func.func @aff_crop_low_negative(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op 'crop_low' entries must be non-negative, got [0, -1, 0]}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>, crop_low = array<i64: 0, -1, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x9x12x7xf32>, tensor<2x1x9x12x7xf32>)
  return
}

// -----

func.func @aff_crop_size(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op 'crop_size' entries must be at least 1, got [4, 0, 4]}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>, crop_size = array<i64: 4, 0, 4>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x4x0x4xf32>, tensor<2x1x4x0x4xf32>)
  return
}

// -----

func.func @aff_crop_outside(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op crop: the box from [0, 4, 0] of size [8, 8, 4] does not lie inside the labels' spatial size 9x11x7}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>, crop_low = array<i64: 0, 4, 0>, crop_size = array<i64: 8, 8, 4>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x8x8x4xf32>, tensor<2x1x8x8x4xf32>)
  return
}

// -----

func.func @aff_crop_low_outside(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op crop: the box from [9, 0, 0] does not lie inside the labels' spatial size 9x11x7}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>, crop_low = array<i64: 9, 0, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x0x11x7xf32>, tensor<2x1x0x11x7xf32>)
  return
}

// -----

func.func @aff_crop_overflow(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op crop: sizes overflow 64-bit integers}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>, crop_low = array<i64: 9223372036854775807, 0, 0>, crop_size = array<i64: 1, 1, 1>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x1x1x1xf32>, tensor<2x1x1x1x1xf32>)
  return
}

// -----

func.func @aff_result(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op result: expected type 'tensor<2x1x9x11x7xf32>', 'tensor<2x1x9x11x7xf32>' (inferred from the operands), got 'tensor<2x1x9x11x7xf32>', 'tensor<2x1x9x11x6xf32>'}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x9x11x7xf32>, tensor<2x1x9x11x6xf32>)
  return
}

// -----

func.func @remove_same(%x: tensor<2x1x4x4x4xf32>) {
  // expected-error @+1 {{'med.remove_label' op 'label' and 'replace_with' are both 0: the op would change nothing}}
  %0 = med.remove_label %x {label = 0 : i64, replace_with = 0 : i64} : (tensor<2x1x4x4x4xf32>) -> tensor<2x1x4x4x4xf32>
  return
}

// -----

func.func @regions_rank(%x: tensor<8xi32>) {
  // expected-error @+1 {{'med.label_regions' op input: expected at least 2 dimensions (N x 1 x ... labels), got 8}}
  %0 = med.label_regions %x {regions = [array<i64: 1>]} : (tensor<8xi32>) -> tensor<8xf32>
  return
}

// -----

func.func @regions_channels(%x: tensor<2x3x4x4x4xi32>) {
  // expected-error @+1 {{'med.label_regions' op input: expected 1 channel (N x 1 x ... labels), got 3}}
  %0 = med.label_regions %x {regions = [array<i64: 1>]} : (tensor<2x3x4x4x4xi32>) -> tensor<2x1x4x4x4xf32>
  return
}

// -----

func.func @regions_none(%x: tensor<2x1x4x4x4xi32>) {
  // expected-error @+1 {{'med.label_regions' op 'regions' needs at least one region (a list of labels)}}
  %0 = med.label_regions %x {regions = []} : (tensor<2x1x4x4x4xi32>) -> tensor<2x0x4x4x4xf32>
  return
}

// -----

func.func @regions_empty(%x: tensor<2x1x4x4x4xi32>) {
  // expected-error @+1 {{'med.label_regions' op 'regions': region 1 lists no labels}}
  %0 = med.label_regions %x {regions = [array<i64: 1, 2>, array<i64>]} : (tensor<2x1x4x4x4xi32>) -> tensor<2x2x4x4x4xf32>
  return
}

// -----

func.func @regions_result(%x: tensor<2x1x4x4x4xi32>) {
  // expected-error @+1 {{'med.label_regions' op result: expected type 'tensor<2x2x4x4x4xf32>' (inferred from the operands), got 'tensor<2x3x4x4x4xf32>'}}
  %0 = med.label_regions %x {regions = [array<i64: 1, 2>, array<i64: 2>]} : (tensor<2x1x4x4x4xi32>) -> tensor<2x3x4x4x4xf32>
  return
}

// -----

func.func @downsample_rank(%x: tensor<2x8x8x8xf32>) {
  // expected-error @+1 {{'med.downsample_nearest' op input: expected 5 dimensions (N x C x D x H x W), got 2x8x8x8}}
  %0 = med.downsample_nearest %x {size = array<i64: 4, 4, 4>} : (tensor<2x8x8x8xf32>) -> tensor<2x1x4x4x4xf32>
  return
}

// -----

func.func @downsample_size_count(%x: tensor<2x1x8x8x8xf32>) {
  // expected-error @+1 {{'med.downsample_nearest' op 'size' needs 3 entries (one per spatial axis), got [4, 4]}}
  %0 = med.downsample_nearest %x {size = array<i64: 4, 4>} : (tensor<2x1x8x8x8xf32>) -> tensor<2x1x4x4x4xf32>
  return
}

// -----

func.func @downsample_size_zero(%x: tensor<2x1x8x8x8xf32>) {
  // expected-error @+1 {{'med.downsample_nearest' op 'size' entries must be at least 1, got [4, 0, 4]}}
  %0 = med.downsample_nearest %x {size = array<i64: 4, 0, 4>} : (tensor<2x1x8x8x8xf32>) -> tensor<2x1x4x0x4xf32>
  return
}

// -----

func.func @downsample_result(%x: tensor<2x1x8x8x8xi32>) {
  // expected-error @+1 {{'med.downsample_nearest' op result: expected type 'tensor<2x1x4x4x4xi32>' (inferred from the operands), got 'tensor<2x1x4x4x4xf32>'}}
  %0 = med.downsample_nearest %x {size = array<i64: 4, 4, 4>} : (tensor<2x1x8x8x8xi32>) -> tensor<2x1x4x4x4xf32>
  return
}

// -----

func.func @aff_result_type(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op result #0 must be ranked tensor of floating-point values, but got 'tensor<2x1x9x11x7xi32>'}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x1x9x11x7xi32>, tensor<2x1x9x11x7xf32>)
  return
}

// -----

func.func @remove_range(%x: tensor<2x1x4x4x4xi8>) {
  // expected-error @+1 {{'med.remove_label' op 'replace_with' is 300, outside the range of the i8 labels [-128, 127]}}
  %0 = med.remove_label %x {label = -1 : i64, replace_with = 300 : i64} : (tensor<2x1x4x4x4xi8>) -> tensor<2x1x4x4x4xi8>
  return
}

// -----

func.func @aff_offset_long(%x: tensor<2x1x9x11x7xi32>) {
  // expected-error @+1 {{'med.affinities' op 'offsets': affinity 1 reaches -11 voxels along axis 3, which has 11: its mask would be 0 everywhere}}
  %0:2 = med.affinities %x {offsets = array<i64: 1, 0, 0, 0, -11, 0>} : (tensor<2x1x9x11x7xi32>) -> (tensor<2x2x9x11x7xf32>, tensor<2x2x9x11x7xf32>)
  return
}
