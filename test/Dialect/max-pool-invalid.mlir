// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @max_pool_window(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.max_pool' op kernel: window [2, 6, 2] is larger than the input's spatial size 2x3x4x5x6 along axis 3}}
  %0 = med.max_pool %x {kernel = array<i64: 2, 6, 2>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x2x0x3xf32>
  return
}

// -----

func.func @max_pool_grad_shape(%x: tensor<2x3x4x5x6xf32>, %dy: tensor<2x3x2x3x3xf32>) {
  // expected-error @+1 {{'med.max_pool_grad' op grad_output: expected shape 2x3x2x2x3 (the input pooled by kernel), got 2x3x2x3x3}}
  %0 = med.max_pool_grad %x, %dy {kernel = array<i64: 2, 2, 2>} : (tensor<2x3x4x5x6xf32>, tensor<2x3x2x3x3xf32>) -> tensor<2x3x4x5x6xf32>
  return
}
