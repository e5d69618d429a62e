// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @batch_norm_gamma(%x: tensor<2x3x4x4x4xf32>, %g: tensor<4xf32>, %v: tensor<3xf32>) {
  // expected-error @+1 {{'med.batch_norm' op gamma: expected 3 elements (one per input channel), got 4}}
  %y, %m, %s = med.batch_norm %x, %g, %v, %v, %v {training} : (tensor<2x3x4x4x4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_norm_running_var(%x: tensor<2x3x4x4x4xf32>, %v: tensor<3xf32>, %r: tensor<1x3x1x1x1xf32>) {
  // expected-error @+1 {{'med.batch_norm' op running_var: expected 1 dimension (one per input channel), got 1x3x1x1x1}}
  %y, %m, %s = med.batch_norm %x, %v, %v, %v, %r {training} : (tensor<2x3x4x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1x3x1x1x1xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

// ONNX's convention (the old value's weight) would be 0.9 here; 1.5 is neither.
func.func @batch_norm_momentum(%x: tensor<2x3x4x4x4xf32>, %v: tensor<3xf32>) {
  // expected-error @+1 {{'med.batch_norm' op 'momentum' must be in [0, 1] (PyTorch's convention: the weight of the batch's statistics), got 1.500000}}
  %y, %m, %s = med.batch_norm %x, %v, %v, %v, %v {training, momentum = 1.5 : f64} : (tensor<2x3x4x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

// One value per channel: the unbiased variance of the running update divides by n - 1 = 0
// (PyTorch refuses it too). The eval form takes it.
func.func @batch_norm_one_value(%x: tensor<1x3x1x1x1xf32>, %v: tensor<3xf32>) {
  %y0, %m0, %s0 = med.batch_norm %x, %v, %v, %v, %v : (tensor<1x3x1x1x1xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<1x3x1x1x1xf32>, tensor<3xf32>, tensor<3xf32>)
  // expected-error @+1 {{'med.batch_norm' op input: the training form needs more than one value per channel (the unbiased variance divides by n - 1), got 1x3x1x1x1}}
  %y, %m, %s = med.batch_norm %x, %v, %v, %v, %v {training} : (tensor<1x3x1x1x1xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<1x3x1x1x1xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}
