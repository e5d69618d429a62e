// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @target_shape(%x: tensor<2x6x4x4x4xf32>, %y: tensor<2x3x4x4x4xf32>) {
  // expected-error @+1 {{'med.bce_with_logits' op target: expected shape 2x6x4x4x4 (that of logits), got 2x3x4x4x4}}
  %0 = med.bce_with_logits %x, %y : (tensor<2x6x4x4x4xf32>, tensor<2x3x4x4x4xf32>) -> tensor<f32>
  return
}

// -----

func.func @mask_shape(%x: tensor<2x6x4x4x4xf32>, %m: tensor<2x6x4x4x5xf32>) {
  // expected-error @+1 {{mask: expected shape 2x6x4x4x4 (that of logits), got 2x6x4x4x5}}
  %0 = med.bce_with_logits %x, %x mask %m : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x5xf32>) -> tensor<f32>
  return
}

// -----

func.func @mask_type(%x: tensor<2x6x4x4x4xf32>, %m: tensor<2x6x4x4x4xf16>) {
  // expected-error @+1 {{mask: expected element type f32 (that of logits), got f16}}
  %0 = med.bce_with_logits %x, %x mask %m : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf16>) -> tensor<f32>
  return
}

// -----

func.func @pos_weight_both(%x: tensor<2x6x4x4x4xf32>, %p: tensor<6xf32>) {
  // expected-error @+1 {{pos_weight: give either the operand or 'auto_pos_weight', not both}}
  %0 = med.bce_with_logits %x, %x pos_weight %p {auto_pos_weight} : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>, tensor<6xf32>) -> tensor<f32>
  return
}

// -----

func.func @pos_weight_size(%x: tensor<2x6x4x4x4xf32>, %p: tensor<3xf32>) {
  // expected-error @+1 {{pos_weight: expected 6 elements (one per channel), got 3}}
  %0 = med.bce_with_logits %x, %x pos_weight %p : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>, tensor<3xf32>) -> tensor<f32>
  return
}

// -----

func.func @pos_weight_type(%x: tensor<2x6x4x4x4xf32>, %p: tensor<6xf64>) {
  // expected-error @+1 {{pos_weight: expected element type f32 (that of logits), got f64}}
  %0 = med.bce_with_logits %x, %x pos_weight %p : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>, tensor<6xf64>) -> tensor<f32>
  return
}

// -----

func.func @max_pos_weight(%x: tensor<2x6x4x4x4xf32>) {
  // expected-error @+1 {{'max_pos_weight' must be positive}}
  %0 = med.bce_with_logits %x, %x {auto_pos_weight, max_pos_weight = 0.0} : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>) -> tensor<f32>
  return
}

// -----

func.func @logits_rank(%x: tensor<6xf32>) {
  // expected-error @+1 {{logits: expected at least 2 dimensions (N x C x ...), got 6}}
  %0 = med.bce_with_logits %x, %x : (tensor<6xf32>, tensor<6xf32>) -> tensor<f32>
  return
}

// -----

func.func @reduction_none_result(%x: tensor<2x6x4x4x4xf32>) {
  // expected-error @+1 {{result: expected type 'tensor<2x6x4x4x4xf32>' (inferred from the operands), got 'tensor<f32>'}}
  %0 = med.bce_with_logits %x, %x {reduction = #med<reduction none>} : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>) -> tensor<f32>
  return
}

// -----

func.func @dice_no_logits() {
  // expected-error @+1 {{'med.dice_ce' op needs at least one logits operand}}
  %0 = med.dice_ce logits() targets() {weights = array<f64>} : () -> tensor<f32>
  return
}

// -----

func.func @dice_targets(%x: tensor<2x4x8x8x8xf32>, %t: tensor<2x1x8x8x8xf32>) {
  // expected-error @+1 {{expected one target per logits operand (2), got 1}}
  %0 = med.dice_ce logits(%x, %x) targets(%t) {weights = array<f64: 0.5, 0.5>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x8x8xf32>, tensor<2x1x8x8x8xf32>) -> tensor<f32>
  return
}

// -----

func.func @dice_ignore_negative(%x: tensor<2x4x8x8x8xf32>, %t: tensor<2x1x8x8x8xf32>) {
  // expected-error @+1 {{attribute 'ignore_index' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, ignore_index = -1} : (tensor<2x4x8x8x8xf32>, tensor<2x1x8x8x8xf32>) -> tensor<f32>
  return
}

// -----

func.func @dice_weights(%x: tensor<2x4x8x8x8xf32>, %t: tensor<2x1x8x8x8xf32>) {
  // expected-error @+1 {{'weights' needs one entry per logits operand (1), got 2}}
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 0.5, 0.5>} : (tensor<2x4x8x8x8xf32>, tensor<2x1x8x8x8xf32>) -> tensor<f32>
  return
}

// -----

func.func @dice_negative_weight(%x: tensor<2x4x8x8x8xf32>, %t: tensor<2x1x8x8x8xf32>) {
  // expected-error @+1 {{'weights' must be non-negative}}
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: -1.0>} : (tensor<2x4x8x8x8xf32>, tensor<2x1x8x8x8xf32>) -> tensor<f32>
  return
}

// -----

func.func @dice_one_class(%x: tensor<2x1x8x8x8xf32>, %t: tensor<2x1x8x8x8xf32>) {
  // expected-error @+1 {{logits 0: needs at least 2 classes on axis 1, got shape 2x1x8x8x8}}
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>} : (tensor<2x1x8x8x8xf32>, tensor<2x1x8x8x8xf32>) -> tensor<f32>
  return
}

// -----

func.func @dice_target_shape(%x: tensor<2x4x8x8x8xf32>, %t: tensor<2x4x8x8x8xi32>) {
  // expected-error @+1 {{target 0: expected shape 2x1x8x8x8 (class indices for logits 0), got 2x4x8x8x8}}
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x8x8xi32>) -> tensor<f32>
  return
}

// -----

func.func @dice_logits_rank(%x: tensor<2x4xf32>, %t: tensor<2x1xf32>) {
  // expected-error @+1 {{logits 0: expected at least 3 dimensions (N x C x spatial), got 2x4}}
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>} : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<f32>
  return
}
