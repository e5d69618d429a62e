// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @reshape_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.reshape' op 'shape' sizes must be non-negative, got [-1, 6]}}
  %0 = med.reshape %x {shape = array<i64: -1, 6>} : (tensor<2x3xf32>) -> tensor<1x6xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'shape' 4x2 has 8 elements, the input 2x3 has 6}}
  %0 = med.reshape %x {shape = array<i64: 4, 2>} : (tensor<2x3xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @broadcast(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.broadcast' op input 2x3 does not broadcast to 4x2x4 (trailing axes must be equal or 1)}}
  %0 = med.broadcast %x {shape = array<i64: 4, 2, 4>} : (tensor<2x3xf32>) -> tensor<4x2x4xf32>
  return
}

// -----

func.func @gw_rank(%x: tensor<2x4x8x8xf32>, %dy: tensor<2x4x8x8x8xf32>) {
  // expected-error @+1 {{'med.conv3d_grad_weight' op input: expected 5 dimensions (N x C x D x H x W), got 2x4x8x8}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8x8xf32>) -> tensor<4x4x3x3x3xf32>
  return
}

// -----

func.func @gw_dy_rank(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<4x8x8x8xf32>) {
  // expected-error @+1 {{grad_output: expected 5 dimensions (N x C x D x H x W), got 4x8x8x8}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<2x4x8x8x8xf32>, tensor<4x8x8x8xf32>) -> tensor<4x4x3x3x3xf32>
  return
}

// -----

func.func @gw_kernel(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<2x4x8x8x8xf32>) {
  // expected-error @+1 {{'kernel' entries must be at least 1, got [3, 0, 3]}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 0, 3>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x8x8xf32>) -> tensor<4x4x3x0x3xf32>
  return
}

// -----

func.func @gw_type(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<2x4x8x8x8xf64>) {
  // expected-error @+1 {{grad_output: expected element type f32 (that of input), got f64}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 1, 1, 1>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x8x8xf64>) -> tensor<4x4x1x1x1xf32>
  return
}

// -----

func.func @gw_groups(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<2x4x8x8x8xf32>) {
  // expected-error @+1 {{'groups' must be at least 1, got 0}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 1, 1, 1>, groups = 0 : i64} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x8x8xf32>) -> tensor<4x4x1x1x1xf32>
  return
}

// -----

func.func @gw_input_groups(%x: tensor<2x3x8x8x8xf32>, %dy: tensor<2x4x8x8x8xf32>) {
  // expected-error @+1 {{input: 3 channels are not divisible by groups = 2}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 1, 1, 1>, groups = 2 : i64} : (tensor<2x3x8x8x8xf32>, tensor<2x4x8x8x8xf32>) -> tensor<4x1x1x1x1xf32>
  return
}

// -----

func.func @gw_output_groups(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<2x5x8x8x8xf32>) {
  // expected-error @+1 {{grad_output: 5 channels are not divisible by groups = 2}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 1, 1, 1>, groups = 2 : i64} : (tensor<2x4x8x8x8xf32>, tensor<2x5x8x8x8xf32>) -> tensor<5x2x1x1x1xf32>
  return
}

// -----

func.func @gw_batch(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<3x4x8x8x8xf32>) {
  // expected-error @+1 {{grad_output: batch 3 differs from the input's 2}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 1, 1, 1>} : (tensor<2x4x8x8x8xf32>, tensor<3x4x8x8x8xf32>) -> tensor<4x4x1x1x1xf32>
  return
}

// -----

// grad_output must be the convolution's output: padding 1 with kernel 3 keeps 8, padding 2 makes 10.
func.func @gw_spatial(%x: tensor<2x4x8x8x8xf32>, %dy: tensor<2x4x8x8x8xf32>) {
  // expected-error @+1 {{grad_output: spatial size 8 on axis 0 does not fit the convolution of the input (size 8, kernel 3, stride 1, padding 2, dilation 1 gives 10)}}
  %0 = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>, padding = array<i64: 2, 2, 2>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x8x8x8xf32>) -> tensor<4x4x3x3x3xf32>
  return
}

// -----

// The weight gradient of a transposed convolution swaps input and grad_output.
func.func @gw_transposed(%y: tensor<1x2x8x8x8xf32>, %x: tensor<1x2x4x4x4xf32>) -> tensor<2x2x2x2x2xf32> {
  %0 = med.conv3d_grad_weight %y, %x {kernel = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>} : (tensor<1x2x8x8x8xf32>, tensor<1x2x4x4x4xf32>) -> tensor<2x2x2x2x2xf32>
  return %0 : tensor<2x2x2x2x2xf32>
}

// -----

func.func @gn_groups(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'med.group_norm_grad' op 'groups' must be at least 1, got 0}}
  %0:3 = med.group_norm_grad %x, %g, %s, %s, %x {groups = 0 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x6x4x4x4xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @gn_divide(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %s: tensor<2x4xf32>) {
  // expected-error @+1 {{input: 6 channels are not divisible by groups = 4}}
  %0:3 = med.group_norm_grad %x, %g, %s, %s, %x {groups = 4 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x6x4x4x4xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @gn_gamma(%x: tensor<2x6x4x4x4xf32>, %g: tensor<5xf32>, %s: tensor<2x6xf32>) {
  // expected-error @+1 {{gamma: expected 6 elements (one per input channel), got 5}}
  %0:3 = med.group_norm_grad %x, %g, %s, %s, %x {groups = 6 : i64} : (tensor<2x6x4x4x4xf32>, tensor<5xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6x4x4x4xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<5xf32>, tensor<5xf32>)
  return
}

// -----

func.func @gn_mean_shape(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %m: tensor<2x6xf32>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.group_norm_grad' op mean: expected shape 2x3 (N x groups, as group_norm saves them), got 2x6}}
  %0:3 = med.group_norm_grad %x, %g, %m, %s, %x {groups = 3 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<2x6xf32>, tensor<2x3xf32>, tensor<2x6x4x4x4xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @gn_rstd_type(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %m: tensor<2x3xf32>, %s: tensor<2x3xf64>) {
  // expected-error @+1 {{'med.group_norm_grad' op rstd: expected element type f32 (that of input), got f64}}
  %0:3 = med.group_norm_grad %x, %g, %m, %s, %x {groups = 3 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<2x3xf32>, tensor<2x3xf64>, tensor<2x6x4x4x4xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @gn_dy_shape(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %s: tensor<2x3xf32>, %dy: tensor<2x6x4x4x3xf32>) {
  // expected-error @+1 {{'med.group_norm_grad' op grad_output: expected shape 2x6x4x4x4 (that of the input), got 2x6x4x4x3}}
  %0:3 = med.group_norm_grad %x, %g, %s, %s, %dy {groups = 3 : i64} : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x6x4x4x3xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @ln_dy_shape(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>, %dy: tensor<2x6x4x4x5xf32>) {
  // expected-error @+1 {{'med.channel_layer_norm_grad' op grad_output: expected shape 2x6x4x4x4 (that of the input), got 2x6x4x4x5}}
  %0:3 = med.channel_layer_norm_grad %x, %g, %dy : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<2x6x4x4x5xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @grn_rank(%x: tensor<2x6x4x4xf32>, %g: tensor<1x6x1x1x1xf32>) {
  // expected-error @+1 {{'med.grn_grad' op input: expected 5 dimensions (N x C x D x H x W), got 2x6x4x4}}
  %0:3 = med.grn_grad %x, %g, %x : (tensor<2x6x4x4xf32>, tensor<1x6x1x1x1xf32>, tensor<2x6x4x4xf32>) -> (tensor<2x6x4x4xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xf32>)
  return
}

// -----

func.func @grn_gamma(%x: tensor<2x6x4x4x4xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{'med.grn_grad' op gamma: expected shape 1x6x1x1x1, got 6}}
  %0:3 = med.grn_grad %x, %g, %x : (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<2x6x4x4x4xf32>) -> (tensor<2x6x4x4x4xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @gelu_grad_type(%x: tensor<2x3xf32>, %dy: tensor<2x3xbf16>) {
  // expected-error @+1 {{'med.gelu_grad' op grad_output: expected element type f32 (that of input), got bf16}}
  %0 = med.gelu_grad %x, %dy : (tensor<2x3xf32>, tensor<2x3xbf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @bce_grad_loss(%x: tensor<2x6x4x4x4xf32>, %d: tensor<2xf32>) {
  // expected-error @+1 {{'med.bce_with_logits_grad' op grad_loss: expected tensor<f32> (the type of the loss), got tensor<2xf32>}}
  %0 = med.bce_with_logits_grad %x, %x grad %d : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x4xf32>, tensor<2xf32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @bce_grad_checks(%x: tensor<2x6x4x4x4xf32>, %y: tensor<2x6x4x4x3xf32>, %d: tensor<f32>) {
  // expected-error @+1 {{target: expected shape 2x6x4x4x4 (that of logits), got 2x6x4x4x3}}
  %0 = med.bce_with_logits_grad %x, %y grad %d : (tensor<2x6x4x4x4xf32>, tensor<2x6x4x4x3xf32>, tensor<f32>) -> tensor<2x6x4x4x4xf32>
  return
}

// -----

func.func @dice_grad_loss(%x: tensor<2x4x8x8x8xf32>, %t: tensor<2x1x8x8x8xf32>, %d: tensor<1xf32>) {
  // expected-error @+1 {{'med.dice_ce_grad' op grad_loss: expected tensor<f32> (the type of the loss), got tensor<1xf32>}}
  %0 = med.dice_ce_grad logits(%x) targets(%t) grad %d {weights = array<f64: 1.0>} : (tensor<2x4x8x8x8xf32>, tensor<2x1x8x8x8xf32>, tensor<1xf32>) -> tensor<2x4x8x8x8xf32>
  return
}

// -----

func.func @dice_grad_checks(%x: tensor<2x4x8x8x8xf32>, %t: tensor<2x1x8x8x8xf32>, %d: tensor<f32>) {
  // expected-error @+1 {{'weights' needs one entry per logits operand (1), got 2}}
  %0 = med.dice_ce_grad logits(%x) targets(%t) grad %d {weights = array<f64: 1.0, 2.0>} : (tensor<2x4x8x8x8xf32>, tensor<2x1x8x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8x8xf32>
  return
}

// -----

func.func @extremum_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>, %dy: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.extremum_grad' op operands do not broadcast: lhs 2x3 and rhs 4 differ on axis 1 (3 vs 4; sizes must be equal or 1)}}
  %0:2 = med.extremum_grad max %a, %b, %dy : (tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @extremum_dy_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %dy: tensor<3xf32>) {
  // expected-error @+1 {{'med.extremum_grad' op grad_output: expected shape 2x3 (lhs and rhs broadcast), got 3}}
  %0:2 = med.extremum_grad min %a, %b, %dy : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @extremum_dy_type(%a: tensor<2x3xf32>, %dy: tensor<2x3xf64>) {
  // expected-error @+1 {{'med.extremum_grad' op grad_output: expected element type f32 (that of lhs), got f64}}
  %0:2 = med.extremum_grad max %a, %a, %dy : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf64>) -> (tensor<2x3xf64>, tensor<2x3xf64>)
  return
}

// -----

func.func @extremum_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.extremum_grad' op result: expected type 'tensor<2x3xf32>', 'tensor<2x3xf32>' (inferred from the operands), got 'tensor<2x3xf32>', 'tensor<3xf32>'}}
  %0:2 = med.extremum_grad max %a, %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @extremum_kind(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [max, min]}}
  %0:2 = med.extremum_grad sum %a, %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @reduce_grad_axes(%x: tensor<2x3x4xf32>, %m: tensor<2x1x4xf32>) {
  // expected-error @+1 {{'med.reduce_extremum_grad' op 'axes' entries must be in [0, 3), got [1, 3]}}
  %0 = med.reduce_extremum_grad max %x, %m, %m {axes = array<i64: 1, 3>, keepdims} : (tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_grad_extremum(%x: tensor<2x3x4xf32>, %m: tensor<2x1x4xf32>, %d: tensor<2x4xf32>) {
  // expected-error @+1 {{'med.reduce_extremum_grad' op extremum: expected shape 2x4 (the input reduced over 'axes'), got 2x1x4}}
  %0 = med.reduce_extremum_grad min %x, %m, %d {axes = array<i64: 1>} : (tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_grad_dy(%x: tensor<2x3x4xf32>, %m: tensor<2x1x4xf32>, %d: tensor<2x1x3xf32>) {
  // expected-error @+1 {{'med.reduce_extremum_grad' op grad_output: expected shape 2x1x4 (the input reduced over 'axes'), got 2x1x3}}
  %0 = med.reduce_extremum_grad max %x, %m, %d {axes = array<i64: 1>, keepdims} : (tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x1x3xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @slice_grad_rank(%dy: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.slice_grad' op 'strides' needs 2 entries (one per axis), got [2]}}
  %0 = med.slice_grad %dy {offsets = array<i64: 0, 0>, strides = array<i64: 2>, shape = array<i64: 4, 6>} : (tensor<2x3xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @slice_grad_stride(%dy: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.slice_grad' op 'strides' entries must be at least 1, got [0, 1]}}
  %0 = med.slice_grad %dy {offsets = array<i64: 0, 0>, strides = array<i64: 0, 1>, shape = array<i64: 4, 6>} : (tensor<2x3xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @slice_grad_box(%dy: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.slice_grad' op grad_output: the box reaches index 5 on axis 0, but 'shape' has only 5 elements there (5x6)}}
  %0 = med.slice_grad %dy {offsets = array<i64: 1, 0>, strides = array<i64: 4, 2>, shape = array<i64: 5, 6>} : (tensor<2x3xf32>) -> tensor<5x6xf32>
  return
}

// -----

func.func @slice_grad_result(%dy: tensor<2x3xf32>) {
  // expected-error @+1 {{'med.slice_grad' op result: expected type 'tensor<5x6xf32>' (inferred from the operands), got 'tensor<5x7xf32>'}}
  %0 = med.slice_grad %dy {offsets = array<i64: 0, 0>, strides = array<i64: 2, 2>, shape = array<i64: 5, 6>} : (tensor<2x3xf32>) -> tensor<5x7xf32>
  return
}
