// RUN: med-opt %s --split-input-file --verify-diagnostics

// med.relu, med.leaky_relu, med.prelu and med.prelu_grad: what the verifier rejects.

func.func @relu_integer(%a: tensor<2x3xi32>) {
  // expected-error @+1 {{'med.relu' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<2x3xi32>'}}
  %0 = med.relu %a : tensor<2x3xi32>
  return
}

// -----

func.func @leaky_slope_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.leaky_relu' op attribute 'negative_slope' failed to satisfy constraint: 64-bit float attribute}}
  %0 = med.leaky_relu %a {negative_slope = 1 : i64} : tensor<2x3xf32>
  return
}

// -----

// The slope broadcasts to the input; it never enlarges it.
func.func @prelu_slope_enlarges(%x: tensor<2x4x3x3x3xf32>, %a: tensor<2x2x4x3x3x3xf32>) {
  // expected-error @+1 {{'med.prelu' op slope: shape 2x2x4x3x3x3 does not broadcast to the input's 2x4x3x3x3}}
  %0 = med.prelu %x, %a : (tensor<2x4x3x3x3xf32>, tensor<2x2x4x3x3x3xf32>) -> tensor<2x4x3x3x3xf32>
  return
}

// -----

// A per-channel slope of size C aligns with W, not with the channels: C x 1 x 1 x 1 does.
func.func @prelu_slope_axis(%x: tensor<2x4x3x3x5xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'med.prelu' op slope: shape 4 does not broadcast to the input's 2x4x3x3x5 (trailing axes aligned, sizes equal or 1; a per-channel slope of an N x C x ... input is C x 1 x ...)}}
  %0 = med.prelu %x, %a : (tensor<2x4x3x3x5xf32>, tensor<4xf32>) -> tensor<2x4x3x3x5xf32>
  return
}

// -----

func.func @prelu_element_type(%x: tensor<2x4xf32>, %a: tensor<4xbf16>) {
  // expected-error @+1 {{'med.prelu' op slope: expected element type f32 (that of input), got bf16}}
  %0 = med.prelu %x, %a : (tensor<2x4xf32>, tensor<4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @prelu_result(%x: tensor<2x4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'med.prelu' op result: expected type 'tensor<2x4xf32>' (inferred from the operands), got 'tensor<4xf32>'}}
  %0 = med.prelu %x, %a : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @prelu_grad_shape(%x: tensor<2x4xf32>, %a: tensor<f32>, %dy: tensor<2x5xf32>) {
  // expected-error @+1 {{'med.prelu_grad' op grad_output: expected shape 2x4 (that of the input), got 2x5}}
  %0 = med.prelu_grad %x, %a, %dy : (tensor<2x4xf32>, tensor<f32>, tensor<2x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @prelu_grad_slope(%x: tensor<2x4xf32>, %a: tensor<3xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'med.prelu_grad' op slope: shape 3 does not broadcast to the input's 2x4}}
  %0 = med.prelu_grad %x, %a, %dy : (tensor<2x4xf32>, tensor<3xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'med.softmax' op axis: expected an axis of the input (0 to 2 for shape 2x3x4), got 3}}
  %0 = med.softmax %x {axis = 3 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}
