// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @stride_count(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'med.conv3d' op 'stride' needs 3 entries (one per spatial axis), got [2, 2]}}
  %0 = med.conv3d %x, %w {stride = array<i64: 2, 2>} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @stride_positive(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'stride' entries must be at least 1, got [1, 0, 1]}}
  %0 = med.conv3d %x, %w {stride = array<i64: 1, 0, 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @padding_negative(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'padding' entries must be non-negative, got [1, -1, 1]}}
  %0 = med.conv3d %x, %w {padding = array<i64: 1, -1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @dilation_positive(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'dilation' entries must be at least 1, got [0, 1, 1]}}
  %0 = med.conv3d %x, %w {dilation = array<i64: 0, 1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @groups_positive(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'groups' must be at least 1, got 0}}
  %0 = med.conv3d %x, %w {groups = 0 : i64} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @weight_element_type(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf16>) {
  // expected-error @+1 {{weight: expected element type f32 (that of input), got f16}}
  %0 = med.conv3d %x, %w : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf16>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @input_groups(%x: tensor<1x5x8x8x8xf32>, %w: tensor<4x1x3x3x3xf32>) {
  // expected-error @+1 {{input: 5 channels are not divisible by groups = 2}}
  %0 = med.conv3d %x, %w {groups = 2 : i64} : (tensor<1x5x8x8x8xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @weight_in_channels(%x: tensor<1x4x8x8x8xf32>, %w: tensor<8x4x3x3x3xf32>) {
  // expected-error @+1 {{weight: expected shape Cout x 1 x kD x kH x kW (input channels 4 / groups 4), got 8x4x3x3x3}}
  %0 = med.conv3d %x, %w {groups = 4 : i64} : (tensor<1x4x8x8x8xf32>, tensor<8x4x3x3x3xf32>) -> tensor<1x8x?x?x?xf32>
  return
}

// -----

func.func @output_groups(%x: tensor<1x4x8x8x8xf32>, %w: tensor<6x1x3x3x3xf32>) {
  // expected-error @+1 {{weight: 6 output channels are not divisible by groups = 4}}
  %0 = med.conv3d %x, %w {groups = 4 : i64} : (tensor<1x4x8x8x8xf32>, tensor<6x1x3x3x3xf32>) -> tensor<1x6x?x?x?xf32>
  return
}

// -----

func.func @bias_size(%x: tensor<1x4x8x8x8xf32>, %w: tensor<8x4x1x1x1xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias: expected 8 elements (one per output channel), got 4}}
  %0 = med.conv3d %x, %w, %b : (tensor<1x4x8x8x8xf32>, tensor<8x4x1x1x1xf32>, tensor<4xf32>) -> tensor<1x8x8x8x8xf32>
  return
}

// -----

func.func @bias_element_type(%x: tensor<1x4x8x8x8xf32>, %w: tensor<8x4x1x1x1xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{bias: expected element type f32 (that of input), got bf16}}
  %0 = med.conv3d %x, %w, %b : (tensor<1x4x8x8x8xf32>, tensor<8x4x1x1x1xf32>, tensor<8xbf16>) -> tensor<1x8x8x8x8xf32>
  return
}

// -----

func.func @too_small(%x: tensor<1x4x8x2x8xf32>, %w: tensor<4x4x5x5x5xf32>) {
  // expected-error @+1 {{input: spatial size 2 on axis 1 is too small for kernel 5 (dilation 1, padding 1); the output would be empty}}
  %0 = med.conv3d %x, %w {padding = array<i64: 1, 1, 1>} : (tensor<1x4x8x2x8xf32>, tensor<4x4x5x5x5xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @result_shape(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'med.conv3d' op result: expected type 'tensor<1x4x6x6x6xf32>' (inferred from the operands), got 'tensor<1x4x8x8x8xf32>'}}
  %0 = med.conv3d %x, %w : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x8x8x8xf32>
  return
}

// -----

func.func @input_rank(%x: tensor<4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{input: expected 5 dimensions (N x C x D x H x W), got 4x8x8x8}}
  %0 = med.conv3d %x, %w : (tensor<4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x6x6x6xf32>
  return
}

// -----

func.func @transposed_weight(%x: tensor<1x4x8x8x8xf32>, %w: tensor<2x4x3x3x3xf32>) {
  // expected-error @+1 {{'med.conv3d_transpose' op weight: expected shape 4xCout/groups x kD x kH x kW (input channels first), got 2x4x3x3x3}}
  %0 = med.conv3d_transpose %x, %w : (tensor<1x4x8x8x8xf32>, tensor<2x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @transposed_output_padding(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'output_padding' must be smaller than stride or dilation on each axis, got [0, 2, 0] with stride [2, 2, 2] and dilation [1, 1, 1]}}
  %0 = med.conv3d_transpose %x, %w {stride = array<i64: 2, 2, 2>, output_padding = array<i64: 0, 2, 0>} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @transposed_output_padding_count(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{'output_padding' needs 3 entries (one per spatial axis), got [1]}}
  %0 = med.conv3d_transpose %x, %w {output_padding = array<i64: 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @transposed_too_small(%x: tensor<1x4x1x8x8xf32>, %w: tensor<4x4x3x3x3xf32>) {
  // expected-error @+1 {{input: spatial size 1 on axis 0 is too small for kernel 3 (dilation 1, padding 2); the output would be empty}}
  %0 = med.conv3d_transpose %x, %w {padding = array<i64: 2, 0, 0>} : (tensor<1x4x1x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @weight_rank(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+1 {{weight: expected 5 dimensions (Cin x Cout/groups x kD x kH x kW), got 4x4x3x3}}
  %0 = med.conv3d_transpose %x, %w : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x?x?x?xf32>
  return
}

// -----

func.func @bias_rank(%x: tensor<1x4x8x8x8xf32>, %w: tensor<8x4x1x1x1xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{bias: expected 1 dimension (one per output channel), got 1x8}}
  %0 = med.conv3d %x, %w, %b : (tensor<1x4x8x8x8xf32>, tensor<8x4x1x1x1xf32>, tensor<1x8xf32>) -> tensor<1x8x8x8x8xf32>
  return
}

// -----

func.func @integer_input(%x: tensor<1x4x8x8x8xi32>, %w: tensor<4x4x1x1x1xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values, but got 'tensor<1x4x8x8x8xi32>'}}
  %0 = med.conv3d %x, %w : (tensor<1x4x8x8x8xi32>, tensor<4x4x1x1x1xf32>) -> tensor<1x4x8x8x8xf32>
  return
}
