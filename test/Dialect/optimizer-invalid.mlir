// RUN: med-opt %s --split-input-file --verify-diagnostics

med.parameter @w : tensor<4xf32> init zeros
func.func @assign_undeclared(%x: tensor<4xf32>) {
  // expected-error @+1 {{parameter @nope is not declared (no med.parameter or med.flat_buffer of that name)}}
  med.assign @nope, %x : tensor<4xf32>
  return
}

// -----

med.parameter @w : tensor<4xf32> init zeros
func.func @assign_type(%x: tensor<5xf32>) {
  // expected-error @+1 {{value type 'tensor<5xf32>' differs from the declared type 'tensor<4xf32>' of parameter @w}}
  med.assign @w, %x : tensor<5xf32>
  return
}

// -----

func.func @adamw_state(%p: tensor<4xf32>, %m: tensor<5xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'med.adamw' op exp_avg: expected tensor<4xf32> (the type of param), got tensor<5xf32>}}
  %0:3 = med.adamw %p, %p, %m, %p, %s, %s : (tensor<4xf32>, tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_lr(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<1xf32>) {
  // expected-error @+1 {{lr: expected a scalar (rank 0), got shape 1}}
  %0:3 = med.adamw %p, %p, %p, %p, %lr, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_beta(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{betas must be in [0, 1), got 1.0}}
  %0:3 = med.adamw %p, %p, %p, %p, %s, %s {beta2 = 1.0} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_eps(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'epsilon' must be positive}}
  %0:3 = med.adamw %p, %p, %p, %p, %s, %s {epsilon = 0.0} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_momentum(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'med.sgd' op 'momentum' must be non-negative}}
  %0:2 = med.sgd %p, %p, %p, %s {momentum = -0.5} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{Nesterov momentum needs a positive 'momentum'}}
  %0:2 = med.sgd %p, %p, %p, %s {nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_buffer(%p: tensor<4xf32>, %b: tensor<4xf64>, %s: tensor<f32>) {
  // expected-error @+1 {{momentum_buffer: expected tensor<4xf32> (the type of param), got tensor<4xf64>}}
  %0:2 = med.sgd %p, %p, %b, %s {momentum = 0.9} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}
