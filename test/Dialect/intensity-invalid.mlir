// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @blur_rank(%x: tensor<2x8x8x8xf32>, %s: tensor<2x8x3xf32>) {
  // expected-error @+1 {{'med.gaussian_blur' op input: expected 5 dimensions (N×C×D×H×W), got 2x8x8x8}}
  %0 = med.gaussian_blur %x, %s : (tensor<2x8x8x8xf32>, tensor<2x8x3xf32>) -> tensor<2x8x8x8xf32>
  return
}

// -----

func.func @blur_sigma_shape(%x: tensor<2x3x8x8x8xf32>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.gaussian_blur' op sigma: expected 2x3x3 (a value per sample, channel and axis D, H, W), got 2x3}}
  %0 = med.gaussian_blur %x, %s : (tensor<2x3x8x8x8xf32>, tensor<2x3xf32>) -> tensor<2x3x8x8x8xf32>
  return
}

// -----

func.func @blur_sigma_type(%x: tensor<2x3x8x8x8xf32>, %s: tensor<2x3x3xf64>) {
  // expected-error @+1 {{'med.gaussian_blur' op sigma: expected f32 elements, got f64}}
  %0 = med.gaussian_blur %x, %s : (tensor<2x3x8x8x8xf32>, tensor<2x3x3xf64>) -> tensor<2x3x8x8x8xf32>
  return
}

// -----

func.func @low_resolution_scale(%x: tensor<2x3x8x8x8xf32>, %s: tensor<2x1x3xf32>) {
  // expected-error @+1 {{'med.simulate_low_resolution' op scale: expected 2x3x3 (a value per sample, channel and axis D, H, W), got 2x1x3}}
  %0 = med.simulate_low_resolution %x, %s : (tensor<2x3x8x8x8xf32>, tensor<2x1x3xf32>) -> tensor<2x3x8x8x8xf32>
  return
}

// -----

func.func @mirror_flip(%x: tensor<2x1x8x8x8xi32>, %f: tensor<3x3xf32>) {
  // expected-error @+1 {{'med.mirror' op flip: expected 2x3 (a value per sample and axis D, H, W), got 3x3}}
  %0 = med.mirror %x, %f : (tensor<2x1x8x8x8xi32>, tensor<3x3xf32>) -> tensor<2x1x8x8x8xi32>
  return
}

// -----

func.func @mirror_result(%x: tensor<2x1x8x8x8xi32>, %f: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.mirror' op result: expected type 'tensor<2x1x8x8x8xi32>' (inferred from the operands), got 'tensor<2x1x8x8x8xf32>'}}
  %0 = med.mirror %x, %f : (tensor<2x1x8x8x8xi32>, tensor<2x3xf32>) -> tensor<2x1x8x8x8xf32>
  return
}

// -----

func.func @shift_shape(%x: tensor<2x1x8x6x6xf32>, %s: tensor<2x6x2xf32>) {
  // expected-error @+1 {{'med.shift_slices' op shift: expected 2x8x2 (a shift along H and W per sample and D-slice), got 2x6x2}}
  %0 = med.shift_slices %x, %s : (tensor<2x1x8x6x6xf32>, tensor<2x6x2xf32>) -> tensor<2x1x8x6x6xf32>
  return
}

// -----

func.func @shift_rank(%x: tensor<8x6x6xf32>, %s: tensor<8x6x2xf32>) {
  // expected-error @+1 {{'med.shift_slices' op input: expected 5 dimensions (N×C×D×H×W), got 8x6x6}}
  %0 = med.shift_slices %x, %s : (tensor<8x6x6xf32>, tensor<8x6x2xf32>) -> tensor<8x6x6xf32>
  return
}

// -----

func.func @matrix_scales(%a: tensor<2x3xf32>, %k: tensor<3x3xf32>) {
  // expected-error @+1 {{'med.affine_matrix' op scales: expected N×3 (N the samples of angles), got 3x3}}
  %0 = med.affine_matrix %a, %k : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @matrix_shear(%a: tensor<2x3xf32>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.affine_matrix' op shear: expected N×6 (N the samples of angles), got 2x3}}
  %0 = med.affine_matrix %a, %a shear %s : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @matrix_angles(%a: tensor<2x3x1xf32>, %k: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.affine_matrix' op angles: expected N×3, got 2x3x1}}
  %0 = med.affine_matrix %a, %k : (tensor<2x3x1xf32>, tensor<2x3xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @orientation_u(%u: tensor<2x1xf32>) {
  // expected-error @+1 {{'med.orientation_matrix' op u: expected an f32 vector of N (a uniform number per sample), got tensor<2x1xf32>}}
  %0 = med.orientation_matrix %u : (tensor<2x1xf32>) -> tensor<2x3x4xf32>
  return
}
