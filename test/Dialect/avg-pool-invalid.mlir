// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @avg_pool_rank(%x: tensor<2x3x4x5xf32>) {
  // expected-error @+1 {{'med.avg_pool' op input: expected 5 dimensions (N x C x D x H x W), got 2x3x4x5}}
  %0 = med.avg_pool %x {kernel = array<i64: 2, 2, 2>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x2x2x2xf32>
  return
}

// -----

func.func @avg_pool_kernel(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.avg_pool' op 'kernel' entries must be at least 1, got [2, 0, 2]}}
  %0 = med.avg_pool %x {kernel = array<i64: 2, 0, 2>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x2x2x3xf32>
  return
}

// -----

func.func @avg_pool_window(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.avg_pool' op kernel: window [2, 6, 2] is larger than the input's spatial size 2x3x4x5x6 along axis 3}}
  %0 = med.avg_pool %x {kernel = array<i64: 2, 6, 2>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x2x0x3xf32>
  return
}

// -----

func.func @avg_pool_result(%x: tensor<2x3x4x5x6xf32>) {
  // expected-error @+1 {{'med.avg_pool' op result: expected type 'tensor<2x3x2x2x3xf32>' (inferred from the operands), got 'tensor<2x3x2x3x3xf32>'}}
  %0 = med.avg_pool %x {kernel = array<i64: 2, 2, 2>} : (tensor<2x3x4x5x6xf32>) -> tensor<2x3x2x3x3xf32>
  return
}

// -----

func.func @avg_pool_grad_size(%dy: tensor<2x3x2x2x3xf32>) {
  // expected-error @+1 {{'med.avg_pool_grad' op size: an input of spatial size [4, 6, 6] pooled by [2, 2, 2] does not give grad_output's 2x3x2x2x3}}
  %0 = med.avg_pool_grad %dy {kernel = array<i64: 2, 2, 2>, size = array<i64: 4, 6, 6>} : (tensor<2x3x2x2x3xf32>) -> tensor<2x3x4x6x6xf32>
  return
}
