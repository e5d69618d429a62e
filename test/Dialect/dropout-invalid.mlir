// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @dropout_p_one(%x: tensor<2x3x4xf32>, %key: tensor<i64>) {
  // expected-error @+1 {{'med.dropout' op 'p' must be in [0, 1) (the probability of dropping an element), got 1}}
  %0 = med.dropout %x, %key {p = 1.0 : f64, stream = 0 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @dropout_p_negative(%x: tensor<2x3x4xf32>, %key: tensor<i64>) {
  // expected-error @+1 {{'med.dropout' op 'p' must be in [0, 1) (the probability of dropping an element), got -0.1}}
  %0 = med.dropout %x, %key {p = -0.1 : f64, stream = 0 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @dropout_stream(%x: tensor<2x3x4xf32>, %key: tensor<i64>) {
  // expected-error @+1 {{'med.dropout' op 'stream' must be a 32-bit counter word, got 4294967296}}
  %0 = med.dropout %x, %key {p = 0.5 : f64, stream = 4294967296 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @dropout_key(%x: tensor<2x3x4xf32>, %key: tensor<2xi64>) {
  // expected-error @+1 {{'med.dropout' op key: expected an i64 scalar (the step's key), got tensor<2xi64>}}
  %0 = med.dropout %x, %key {p = 0.5 : f64, stream = 0 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @dropout_scalar(%x: tensor<f32>, %key: tensor<i64>) {
  // expected-error @+1 {{'med.dropout' op input: expected at least one dimension (the first indexes the samples), got a scalar}}
  %0 = med.dropout %x, %key {p = 0.5 : f64, stream = 0 : i64} : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @dropout_result(%x: tensor<2x3x4xf32>, %key: tensor<i64>) {
  // expected-error @+1 {{'med.dropout' op result: expected type 'tensor<2x3x4xf32>' (inferred from the operands), got 'tensor<2x3x5xf32>'}}
  %0 = med.dropout %x, %key {p = 0.5 : f64, stream = 0 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x5xf32>
  return
}
