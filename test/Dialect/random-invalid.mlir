// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @key_type(%key: tensor<i32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.random' op operand #0 must be ranked tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0 = med.random %key, %x {stream = 0 : i64} : (tensor<i32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @key_scalar(%key: tensor<2xi64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.random' op key: expected an i64 scalar (the step's key), got tensor<2xi64>}}
  %0 = med.random %key, %x {stream = 0 : i64} : (tensor<2xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @like_scalar(%key: tensor<i64>, %x: tensor<f32>) {
  // expected-error @+1 {{'med.random' op like: expected at least one dimension (the first indexes the samples), got a scalar}}
  %0 = med.random %key, %x {stream = 0 : i64} : (tensor<i64>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @stream_range(%key: tensor<i64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.random' op 'stream' must be a 32-bit counter word, got 4294967296}}
  %0 = med.random %key, %x {stream = 4294967296 : i64} : (tensor<i64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @stream_negative(%key: tensor<i64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.random' op 'stream' must be a 32-bit counter word, got -1}}
  %0 = med.random %key, %x {stream = -1 : i64} : (tensor<i64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sample_shape_positive(%key: tensor<i64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'sample_shape' entries must be at least 1, got [3, 0]}}
  %0 = med.random %key, %x {stream = 0 : i64, sample_shape = array<i64: 3, 0>} : (tensor<i64>, tensor<2x3xf32>) -> tensor<2x3x0xf32>
  return
}

// -----

func.func @counter_word(%key: tensor<i64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{a sample of 2x65536x65537 has 4295032832 elements; at most 2^32 (one counter word)}}
  %0 = med.random %key, %x {stream = 0 : i64, sample_shape = array<i64: 65536, 65537>} : (tensor<i64>, tensor<2x3xf32>) -> tensor<2x65536x65537xf32>
  return
}

// -----

func.func @result_type(%key: tensor<i64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.random' op result: expected type 'tensor<2x4xf32>' (inferred from the operands), got 'tensor<2x3xf32>'}}
  %0 = med.random %key, %x {stream = 0 : i64, sample_shape = array<i64: 4>} : (tensor<i64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @probability(%key: tensor<i64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.random' op 'probability' must be in [0, 1], got 1.5}}
  %0 = med.random %key, %x {stream = 0 : i64, distribution = #med<distribution bernoulli>, probability = 1.5} : (tensor<i64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
