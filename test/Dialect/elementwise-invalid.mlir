// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @no_broadcast(%a: tensor<2x3x4xf32>, %b: tensor<2x5x4xf32>) {
  // expected-error @+1 {{'med.add' op operands do not broadcast: lhs 2x3x4 and rhs 2x5x4 differ on axis 1 (3 vs 5; sizes must be equal or 1)}}
  %0 = med.add %a, %b : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @element_types(%a: tensor<2x3xf32>, %b: tensor<2x3xbf16>) {
  // expected-error @+1 {{'med.mul' op rhs: expected element type f32 (that of lhs), got bf16}}
  %0 = med.mul %a, %b : (tensor<2x3xf32>, tensor<2x3xbf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'med.div' op result: expected type 'tensor<2x3xf32>' (inferred from the operands), got 'tensor<3xf32>'}}
  %0 = med.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @integer(%a: tensor<2x3xi32>) {
  // expected-error @+1 {{'med.gelu' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<2x3xi32>'}}
  %0 = med.gelu %a : tensor<2x3xi32>
  return
}

// -----

func.func @unknown_op(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{custom op 'med.relu6' is unknown}}
  %0 = med.relu6 %a : tensor<2x3xf32>
  return
}
