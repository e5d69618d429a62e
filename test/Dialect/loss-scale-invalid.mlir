// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @any_non_finite_empty() {
  // expected-error @+1 {{'med.any_non_finite' op needs at least one input}}
  %0 = med.any_non_finite : () -> tensor<f32>
  return
}

// -----

func.func @any_non_finite_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{result: expected type 'tensor<f32>' (inferred from the operands), got 'tensor<1xf32>'}}
  %0 = med.any_non_finite %x : (tensor<4xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @select_cond(%c: tensor<1xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'med.select' op cond: expected a scalar (rank 0), got shape 1}}
  %0 = med.select %c, %a, %a : (tensor<1xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @select_types(%c: tensor<f32>, %a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'med.select' op on_false: expected tensor<4xf32> (the type of on_true), got tensor<5xf32>}}
  %0 = med.select %c, %a, %b : (tensor<f32>, tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @update_scale_rank(%s: tensor<1xf32>, %n: tensor<f32>) {
  // expected-error @+1 {{'med.update_loss_scale' op scale: expected a scalar (rank 0), got shape 1}}
  %0:2 = med.update_loss_scale %s, %n, %n : (tensor<1xf32>, tensor<f32>, tensor<f32>) -> (tensor<1xf32>, tensor<f32>)
  return
}

// -----

func.func @update_scale_tracker(%s: tensor<f32>, %n: tensor<2xf32>) {
  // expected-error @+1 {{growth_tracker: expected a scalar (rank 0), got shape 2}}
  %0:2 = med.update_loss_scale %s, %n, %s : (tensor<f32>, tensor<2xf32>, tensor<f32>) -> (tensor<f32>, tensor<2xf32>)
  return
}

// -----

func.func @update_scale_found(%s: tensor<f32>, %f: tensor<3xf32>) {
  // expected-error @+1 {{found_inf: expected a scalar (rank 0), got shape 3}}
  %0:2 = med.update_loss_scale %s, %s, %f : (tensor<f32>, tensor<f32>, tensor<3xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @update_scale_growth(%s: tensor<f32>) {
  // expected-error @+1 {{'growth_factor' must be a finite number > 1, got 1.0}}
  %0:2 = med.update_loss_scale %s, %s, %s {growth_factor = 1.0} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @update_scale_backoff(%s: tensor<f32>) {
  // expected-error @+1 {{'backoff_factor' must be in (0, 1), got 0.0}}
  %0:2 = med.update_loss_scale %s, %s, %s {backoff_factor = 0.0} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @update_scale_interval(%s: tensor<f32>) {
  // expected-error @+1 {{'growth_interval' must be at least 1, got 0}}
  %0:2 = med.update_loss_scale %s, %s, %s {growth_interval = 0 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}
