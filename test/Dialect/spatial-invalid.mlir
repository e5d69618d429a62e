// RUN: med-opt %s --split-input-file --verify-diagnostics
// One case per message of med.spatial_transform's verifier (lib/ShapeRules: spatialTransform).

func.func @input_rank(%x: tensor<2x3x9x11xf32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{input: expected 5 dimensions (N x C x D x H x W), got 2x3x9x11}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  return
}

// -----

func.func @label_type(%x: tensor<2x1x9x11x7xi8>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{input: integer labels must be i32, got i8}}
  %0 = med.spatial_transform nearest %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x1x9x11x7xi8>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi8>
  return
}

// -----

func.func @linear_labels(%x: tensor<2x1x9x11x7xi32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{input: mode linear interpolates floats, got i32 (labels take nearest or linear_argmax)}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return
}

// -----

func.func @matrix_type(%x: tensor<2x3x9x11x7xf32>, %m: tensor<2x3x4xbf16>) {
  // expected-error @+1 {{matrix: expected element type f32, got bf16}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xbf16>) -> tensor<2x3x5x6x7xf32>
  return
}

// -----

func.func @matrix_shape(%x: tensor<2x3x9x11x7xf32>, %m: tensor<2x4x4xf32>) {
  // expected-error @+1 {{matrix: expected shape N x 3 x 4 (one affine matrix per sample), got 2x4x4}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x4x4xf32>) -> tensor<2x3x5x6x7xf32>
  return
}

// -----

func.func @matrix_batch(%x: tensor<2x3x9x11x7xf32>, %m: tensor<3x3x4xf32>) {
  // expected-error @+1 {{matrix: expected 2 matrices (one per sample of input), got 3}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<3x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  return
}

// -----

func.func @shape_entries(%x: tensor<2x3x9x11x7xf32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'shape' needs 3 entries (one per spatial axis D, H, W of the result), got [5, 6]}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  return
}

// -----

func.func @shape_positive(%x: tensor<2x3x9x11x7xf32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'shape' entries must be at least 1, got [5, 0, 7]}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 0, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x0x7xf32>
  return
}

// -----

func.func @argmax_border(%x: tensor<2x1x9x11x7xi32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'border' does not apply to mode linear_argmax (a voxel sampled outside the input is 'value'), got reflection}}
  %0 = med.spatial_transform linear_argmax %x, %m border reflection {shape = array<i64: 5, 6, 7>, labels = array<i64: 0, 1>} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return
}

// -----

func.func @argmax_no_labels(%x: tensor<2x1x9x11x7xi32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'labels' must list the labels that mode linear_argmax resamples}}
  %0 = med.spatial_transform linear_argmax %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return
}

// -----

func.func @labels_ascend(%x: tensor<2x1x9x11x7xi32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'labels' must ascend strictly (ties go to the first), got [0, 2, 1]}}
  %0 = med.spatial_transform linear_argmax %x, %m {shape = array<i64: 5, 6, 7>, labels = array<i64: 0, 2, 1>} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return
}

// -----

func.func @labels_mode(%x: tensor<2x1x9x11x7xi32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'labels' applies to mode linear_argmax only, got [0, 1]}}
  %0 = med.spatial_transform nearest %x, %m {shape = array<i64: 5, 6, 7>, labels = array<i64: 0, 1>} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return
}

// -----

func.func @value_zeros(%x: tensor<2x3x9x11x7xf32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'value' applies to border constant and mode linear_argmax only, got 2.000000}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>, value = 2.0} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  return
}

// -----

func.func @value_label(%x: tensor<2x1x9x11x7xi32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'value' must be an i32 for i32 labels, got 0.500000}}
  %0 = med.spatial_transform nearest %x, %m border constant {shape = array<i64: 5, 6, 7>, value = 0.5} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return
}

// -----

func.func @result_type(%x: tensor<2x3x9x11x7xf32>, %m: tensor<2x3x4xf32>) {
  // expected-error @+1 {{result: expected type 'tensor<2x3x5x6x7xf32>' (inferred from the operands), got 'tensor<2x3x5x6x8xf32>'}}
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x8xf32>
  return
}
