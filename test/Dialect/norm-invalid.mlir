// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @groups_positive(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{'med.group_norm' op 'groups' must be at least 1, got 0}}
  %0 = med.group_norm %x, %g, %g {groups = 0 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @groups_divide(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{input: 6 channels are not divisible by groups = 4}}
  %0 = med.group_norm %x, %g, %g {groups = 4 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @epsilon(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{'epsilon' must be positive}}
  %0 = med.group_norm %x, %g, %g {groups = 6 : i64, epsilon = 0.0} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @gamma_size(%x: tensor<2x6x4x4x4xf32>, %g: tensor<5xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{gamma: expected 6 elements (one per input channel), got 5}}
  %0 = med.group_norm %x, %g, %b {groups = 6 : i64} : (tensor<2x6x4x4x4xf32>, tensor<5xf32>, tensor<6xf32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @beta_type(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %b: tensor<6xf16>) {
  // expected-error @+1 {{beta: expected element type f32 (that of input), got f16}}
  %0 = med.group_norm %x, %g, %b {groups = 6 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf16>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @gn_statistics_missing(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{'med.group_norm' op result: expected type 'tensor<2x6x4x4x4xf32>' (inferred from the operands), got 'tensor<2x6x4x4x4xf32>', 'tensor<2x3xf32>', 'tensor<2x3xf32>'}}
  %0:3 = med.group_norm %x, %g, %g {groups = 3 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @gn_statistics_shape(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{'med.group_norm' op result: expected type 'tensor<2x6x4x4x4xf32>', 'tensor<2x3xf32>', 'tensor<2x3xf32>' (inferred from the operands), got 'tensor<2x6x4x4x4xf32>', 'tensor<2x6xf32>', 'tensor<2x6xf32>'}}
  %0:3 = med.group_norm %x, %g, %g {groups = 3 : i64, save_statistics} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<2x6xf32>, tensor<2x6xf32>)
  return
}

// -----

func.func @input_rank(%x: tensor<6xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{input: expected at least 2 dimensions (N x C x ...), got 6}}
  %0 = med.channel_layer_norm %x, %g, %g : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{'med.channel_layer_norm' op 'epsilon' must be positive}}
  %0 = med.channel_layer_norm %x, %g, %g {epsilon = -1.0} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @grn_gamma(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %b: tensor<1x6x1x1x1xf32>) {
  // expected-error @+1 {{'med.grn' op gamma: expected shape 1x6x1x1x1, got 6}}
  %0 = med.grn %x, %g, %b : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<1x6x1x1x1xf32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @grn_beta_type(%x: tensor<2x6x4x4x4xf32>, %g: tensor<1x6x1x1x1xf32>, %b: tensor<1x6x1x1x1xbf16>) {
  // expected-error @+1 {{'med.grn' op beta: expected element type f32 (that of input), got bf16}}
  %0 = med.grn %x, %g, %b : (tensor<2x6x4x4x4xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xbf16>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @grn_rank(%x: tensor<2x6x4x4xf32>, %g: tensor<1x6x1x1x1xf32>) {
  // expected-error @+1 {{'med.grn' op input: expected 5 dimensions (N x C x D x H x W), got 2x6x4x4}}
  %0 = med.grn %x, %g, %g : (tensor<2x6x4x4xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xf32>) -> tensor<2x6x4x4xf32>
  return
}

// -----

func.func @stats_groups_divide(%x: tensor<2x6x4x4x4xf32>) {
  // expected-error @+1 {{'med.group_norm_stats' op input: 6 channels are not divisible by groups = 4}}
  %0:2 = med.group_norm_stats %x {groups = 4 : i64} : (tensor<2x6x4x4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @stats_epsilon(%x: tensor<2x6x4x4x4xf32>) {
  // expected-error @+1 {{'med.group_norm_stats' op 'epsilon' must be positive}}
  %0:2 = med.group_norm_stats %x {groups = 3 : i64, epsilon = 0.0} : (tensor<2x6x4x4x4xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @stats_rank(%x: tensor<6xf32>) {
  // expected-error @+1 {{'med.group_norm_stats' op input: expected at least 2 dimensions (N x C x ...), got 6}}
  %0:2 = med.group_norm_stats %x {groups = 3 : i64} : (tensor<6xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @stats_result(%x: tensor<2x6x4x4x4xf32>) {
  // expected-error @+1 {{'med.group_norm_stats' op}}
  %0:2 = med.group_norm_stats %x {groups = 3 : i64} : (tensor<2x6x4x4x4xf32>) -> (tensor<2x6xf32>, tensor<2x3xf32>)
  return
}
