// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @resize_rank(%x: tensor<2x3x4x5xf32>) {
  // expected-error @+1 {{'med.resize' op input: expected 5 dimensions (N x C x D x H x W), got 2x3x4x5}}
  %0 = med.resize linear %x {size = array<i64: 8, 10, 2>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x8x10x2xf32>
  return
}

// -----

func.func @resize_size(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.resize' op 'size' needs 3 entries (one per spatial axis)}}
  %0 = med.resize linear %x {size = array<i64: 8, 10>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x8x10x6xf32>
  return
}

// -----

func.func @resize_nearest_corners(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.resize' op align_corners: only linear resizing has corners to align (mode nearest)}}
  %0 = med.resize nearest %x {size = array<i64: 8, 10, 12>, align_corners} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x8x10x12xf32>
  return
}

// -----

func.func @resize_result(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.resize' op result: expected type 'tensor<2x3x8x10x12xf32>' (inferred from the operands), got 'tensor<2x3x8x10x6xf32>'}}
  %0 = med.resize linear %x {size = array<i64: 8, 10, 12>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x8x10x6xf32>
  return
}

// -----

func.func @resize_grad_rank(%dy: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'med.resize_grad' op grad_output: expected 5 dimensions (N x C x D x H x W), got 2x3x8}}
  %0 = med.resize_grad linear %dy {size = array<i64: 4, 4, 4>} : (tensor<2x3x8xf32>) -> tensor<2x3x4x4x4xf32>
  return
}

// -----

func.func @resize_both(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.resize' op give either 'size' or 'scale', not both}}
  %0 = med.resize linear %x {size = array<i64: 8, 10, 12>, scale = array<i64: 2, 2, 2>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x8x10x12xf32>
  return
}

// -----

func.func @resize_neither(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.resize' op needs 'size' (the output's spatial size) or 'scale' (whole factors)}}
  %0 = med.resize linear %x : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x8x10x12xf32>
  return
}

// -----

func.func @resize_scale_zero(%x: tensor<?x3x?x?x?xf32>) {
  // expected-error @+1 {{'med.resize' op 'scale' entries must be at least 1, got [2, 0, 2]}}
  %0 = med.resize linear %x {scale = array<i64: 2, 0, 2>} : (tensor<?x3x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  return
}

// -----

// The scale form's result follows the input: a static axis is multiplied, an open one stays open.
func.func @resize_scale_result(%x: tensor<2x3x4x?x6xf32>) {
  // expected-error @+1 {{'med.resize' op result: expected type 'tensor<2x3x8x?x18xf32>' (inferred from the operands), got 'tensor<2x3x8x?x12xf32>'}}
  %0 = med.resize linear %x {scale = array<i64: 2, 2, 3>} : (tensor<2x3x4x?x6xf32>) -> tensor<2x3x8x?x12xf32>
  return
}
