// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @pad_count(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.pad' op 'low' needs 3 entries (one per axis), got [1, 1]}}
  %0 = med.pad %x {low = array<i64: 1, 1>, high = array<i64: 0, 0, 0>} : (tensor<2x3x4xf32>) -> tensor<?x?x?xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'high' entries must be non-negative, got [0, -1, 0]}}
  %0 = med.pad %x {low = array<i64: 0, 0, 0>, high = array<i64: 0, -1, 0>} : (tensor<2x3x4xf32>) -> tensor<?x?x?xf32>
  return
}

// -----

func.func @slice_count(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.slice' op 'offsets' needs 3 entries (one per axis), got [0]}}
  %0 = med.slice %x {offsets = array<i64: 0>, sizes = array<i64: 1, 1, 1>} : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
  return
}

// -----

func.func @slice_sizes(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'sizes' entries must be at least 1, got [1, 0, 1]}}
  %0 = med.slice %x {offsets = array<i64: 0, 0, 0>, sizes = array<i64: 1, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<1x0x1xf32>
  return
}

// -----

func.func @slice_strides(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'strides' entries must be at least 1, got [1, 1, 0]}}
  %0 = med.slice %x {offsets = array<i64: 0, 0, 0>, sizes = array<i64: 1, 1, 1>, strides = array<i64: 1, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x3x10xf32>) {
  // expected-error @+1 {{input: the box reaches index 10 on axis 2, but the input has only 10 elements there (shape 2x3x10)}}
  %0 = med.slice %x {offsets = array<i64: 0, 0, 4>, sizes = array<i64: 1, 1, 4>, strides = array<i64: 1, 1, 2>} : (tensor<2x3x10xf32>) -> tensor<1x1x4xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{'med.concat' op needs at least one input}}
  %0 = med.concat {axis = 0 : i64} : () -> tensor<1xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'axis' must be in [0, 2), got 2}}
  %0 = med.concat %a, %a {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_shape(%a: tensor<2x3x5xf32>, %b: tensor<2x4x6xf32>) {
  // expected-error @+1 {{input 1: expected shape 2x3x5 except on axis 1, got 2x4x6}}
  %0 = med.concat %a, %b {axis = 1 : i64} : (tensor<2x3x5xf32>, tensor<2x4x6xf32>) -> tensor<2x7x5xf32>
  return
}

// -----

func.func @concat_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+1 {{input 1: expected element type f32 (that of input 0), got f16}}
  %0 = med.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<4x3xf32>
  return
}

// -----

func.func @reduce_axis(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.reduce' op 'axes' entries must be in [0, 3), got [0, 3]}}
  %0 = med.reduce sum %x {axes = array<i64: 0, 3>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @reduce_repeat(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'axes' must not repeat an axis, got [1, 1]}}
  %0 = med.reduce max %x {axes = array<i64: 1, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @transpose_count(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.transpose' op 'permutation' needs 3 entries (one per axis of the input, shape 2x3x4), got [1, 0]}}
  %0 = med.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

func.func @transpose_repeat(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.transpose' op 'permutation' must name each axis once, but axis 1 appears twice in [1, 1, 0]}}
  %0 = med.transpose %x {permutation = array<i64: 1, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x3x2xf32>
  return
}

// -----

func.func @transpose_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.transpose' op 'permutation' entries must be axes of the input (0 to 2), got [0, 3, 1]}}
  %0 = med.transpose %x {permutation = array<i64: 0, 3, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  return
}

// -----

func.func @transpose_negative(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.transpose' op 'permutation' entries must be axes of the input (0 to 2), got [-1, 0, 1]}}
  %0 = med.transpose %x {permutation = array<i64: -1, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return
}

// -----

func.func @transpose_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'med.transpose' op input: expected a tensor of rank >= 1, got a scalar}}
  %0 = med.transpose %x {permutation = array<i64>} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.transpose' op result: expected type 'tensor<2x4x5x6x3xf32>' (inferred from the operands), got 'tensor<2x3x4x5x6xf32>'}}
  %0 = med.transpose %x {permutation = array<i64: 0, 2, 3, 4, 1>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x4x5x6xf32>
  return
}
