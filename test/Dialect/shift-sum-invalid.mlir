// RUN: med-opt %s --split-input-file --verify-diagnostics

// The shape rules of med.shift_sum and med.shift_sum_grad_weight: odd kernels, one tap set
// per channel, a bias per channel, the input's shape for the result and the gradient.

func.func @even(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x1x3x2x3xf32>) {
  // expected-error @+1 {{'med.shift_sum' op weight: every kernel size must be odd (taps centred on the voxel), got 3x2x3}}
  %0 = med.shift_sum %x, %w : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x2x3xf32>) -> tensor<1x4x8x8x8xf32>
  return
}

// -----

func.func @multiplier(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x2x3x3x3xf32>) {
  // expected-error @+1 {{'med.shift_sum' op weight: expected shape 4 x 1 x kD x kH x kW (one tap set per input channel), got 4x2x3x3x3}}
  %0 = med.shift_sum %x, %w : (tensor<1x4x8x8x8xf32>, tensor<4x2x3x3x3xf32>) -> tensor<1x4x8x8x8xf32>
  return
}

// -----

func.func @bias(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x1x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'med.shift_sum' op bias: expected 4 elements (one per output channel), got 3}}
  %0 = med.shift_sum %x, %w, %b : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x8x8x8xf32>
  return
}

// -----

func.func @result(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x1x3x3x3xf32>) {
  // expected-error @+1 {{'med.shift_sum' op result: expected type 'tensor<1x4x8x8x8xf32>' (inferred from the operands), got 'tensor<1x4x6x6x6xf32>'}}
  %0 = med.shift_sum %x, %w : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x6x6x6xf32>
  return
}

// -----

func.func @gw_even(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<2x4x8x8x8xf32>) {
  // expected-error @+1 {{'med.shift_sum_grad_weight' op 'kernel': every kernel size must be odd (taps centred on the voxel), got 3x4x3}}
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 4, 3>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x8x8xf32>) -> tensor<4x1x3x4x3xf32>
  return
}

// -----

func.func @gw_shape(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<2x4x8x7x8xf32>) {
  // expected-error @+1 {{'med.shift_sum_grad_weight' op grad_output: expected the input's channels and spatial sizes 2x4x8x8x8 (batch aside), got 2x4x8x7x8}}
  %0 = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x7x8xf32>) -> tensor<4x1x3x3x3xf32>
  return
}
