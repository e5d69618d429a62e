// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 3 | FileCheck %s

// med.group_norm against torch::group_norm, med.channel_layer_norm against torch::layer_norm
// over the channel axis, med.grn against MedNeXt's formula in torch ops.

med.parameter @"norm.weight" : tensor<6xf32> init ones
med.parameter @"norm.bias" : tensor<6xf32> init zeros
med.parameter @"grn.gamma" : tensor<1x6x1x1x1xf32> init zeros
med.parameter @"grn.beta" : tensor<1x6x1x1x1xf32> init zeros

// groups = 1 (layer norm over C, D, H, W), 2, 3 and C (instance norm), random affine.
// CHECK: group_norm_groups  out0  2x6x5x7x3  max_abs {{.*}}  ok
// CHECK: group_norm_groups  out1  2x6x5x7x3  max_abs {{.*}}  ok
// CHECK: group_norm_groups  out2  2x6x5x7x3  max_abs {{.*}}  ok
// CHECK: group_norm_groups  out3  2x6x5x7x3  max_abs {{.*}}  ok
func.func @group_norm_groups(%x: tensor<2x6x5x7x3xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>) -> (tensor<2x6x5x7x3xf32>, tensor<2x6x5x7x3xf32>, tensor<2x6x5x7x3xf32>, tensor<2x6x5x7x3xf32>) {
  %0 = med.group_norm %x, %g, %b {groups = 1 : i64} : (tensor<2x6x5x7x3xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x5x7x3xf32>
  %1 = med.group_norm %x, %g, %b {groups = 2 : i64} : (tensor<2x6x5x7x3xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x5x7x3xf32>
  %2 = med.group_norm %x, %g, %b {groups = 3 : i64, epsilon = 1.0e-3} : (tensor<2x6x5x7x3xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x5x7x3xf32>
  %3 = med.group_norm %x, %g, %b {groups = 6 : i64} : (tensor<2x6x5x7x3xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x5x7x3xf32>
  return %0, %1, %2, %3 : tensor<2x6x5x7x3xf32>, tensor<2x6x5x7x3xf32>, tensor<2x6x5x7x3xf32>, tensor<2x6x5x7x3xf32>
}

// With save_statistics: the mean and rstd = 1/sqrt(var + eps) per (sample, group) against
// torch::native_group_norm's, groups 3 and C, odd sizes, a shifted and scaled input.
// CHECK: group_norm_statistics  out0  3x6x5x3x7  max_abs {{.*}}  ok
// CHECK: group_norm_statistics  out1  3x3  max_abs {{.*}}  ok
// CHECK: group_norm_statistics  out2  3x3  max_abs {{.*}}  ok
// CHECK: group_norm_statistics  out3  3x6  max_abs {{.*}}  ok
// CHECK: group_norm_statistics  out4  3x6  max_abs {{.*}}  ok
func.func @group_norm_statistics(%x: tensor<3x6x5x3x7xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>) -> (tensor<3x6x5x3x7xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x6xf32>, tensor<3x6xf32>) {
  %c = med.constant dense<2.5> : tensor<f32>
  %x2 = med.mul %x, %c : (tensor<3x6x5x3x7xf32>, tensor<f32>) -> tensor<3x6x5x3x7xf32>
  %x3 = med.add %x2, %c : (tensor<3x6x5x3x7xf32>, tensor<f32>) -> tensor<3x6x5x3x7xf32>
  %y, %s:2 = med.group_norm %x3, %g, %b {groups = 3 : i64, epsilon = 1.0e-3, save_statistics} : (tensor<3x6x5x3x7xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<3x6x5x3x7xf32>, tensor<3x3xf32>, tensor<3x3xf32>)
  %z, %t:2 = med.group_norm %x, %g, %b {groups = 6 : i64, save_statistics} : (tensor<3x6x5x3x7xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<3x6x5x3x7xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
  return %y, %s#0, %s#1, %t#0, %t#1 : tensor<3x6x5x3x7xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x6xf32>, tensor<3x6xf32>
}

// MedNeXt's use: groups = C with parameters initialized to ones / zeros.
// CHECK: group_norm_param  out0  1x6x9x4x5  max_abs {{.*}}  ok
func.func @group_norm_param(%x: tensor<1x6x9x4x5xf32>) -> tensor<1x6x9x4x5xf32> {
  %g = med.param @"norm.weight" : tensor<6xf32>
  %b = med.param @"norm.bias" : tensor<6xf32>
  %y = med.group_norm %x, %g, %b {groups = 6 : i64} : (tensor<1x6x9x4x5xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<1x6x9x4x5xf32>
  return %y : tensor<1x6x9x4x5xf32>
}

// Inputs far from zero mean: statistics must not cancel catastrophically.
// CHECK: group_norm_offset  out0  2x4x6x5x7  max_abs {{.*}}  ok
func.func @group_norm_offset(%x: tensor<2x4x6x5x7xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x4x6x5x7xf32> {
  %c = med.constant dense<20.0> : tensor<f32>
  %xs = med.add %x, %c : (tensor<2x4x6x5x7xf32>, tensor<f32>) -> tensor<2x4x6x5x7xf32>
  %y = med.group_norm %xs, %g, %b {groups = 2 : i64} : (tensor<2x4x6x5x7xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x6x5x7xf32>
  return %y : tensor<2x4x6x5x7xf32>
}

// Ranks 3 and 4 (N x C x L, N x C x H x W).
// CHECK: group_norm_ranks  out0  3x6x11  max_abs {{.*}}  ok
// CHECK: group_norm_ranks  out1  2x4x5x3  max_abs {{.*}}  ok
func.func @group_norm_ranks(%x: tensor<3x6x11xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>, %y: tensor<2x4x5x3xf32>, %g4: tensor<4xf32>, %b4: tensor<4xf32>) -> (tensor<3x6x11xf32>, tensor<2x4x5x3xf32>) {
  %0 = med.group_norm %x, %g, %b {groups = 3 : i64} : (tensor<3x6x11xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<3x6x11xf32>
  %1 = med.group_norm %y, %g4, %b4 {groups = 4 : i64} : (tensor<2x4x5x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x5x3xf32>
  return %0, %1 : tensor<3x6x11xf32>, tensor<2x4x5x3xf32>
}

// CHECK: channel_layer_norm  out0  2x5x3x4x7  max_abs {{.*}}  ok
// CHECK: channel_layer_norm  out1  2x5x3x4x7  max_abs {{.*}}  ok
func.func @channel_layer_norm(%x: tensor<2x5x3x4x7xf32>, %g: tensor<5xf32>, %b: tensor<5xf32>) -> (tensor<2x5x3x4x7xf32>, tensor<2x5x3x4x7xf32>) {
  %0 = med.channel_layer_norm %x, %g, %b : (tensor<2x5x3x4x7xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<2x5x3x4x7xf32>
  %1 = med.channel_layer_norm %x, %g, %b {epsilon = 1.0e-2} : (tensor<2x5x3x4x7xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<2x5x3x4x7xf32>
  return %0, %1 : tensor<2x5x3x4x7xf32>, tensor<2x5x3x4x7xf32>
}

// CHECK: channel_layer_norm_param  out0  1x6x5x3x3  max_abs {{.*}}  ok
// CHECK: channel_layer_norm_param  out1  3x6x4  max_abs {{.*}}  ok
func.func @channel_layer_norm_param(%x: tensor<1x6x5x3x3xf32>, %y: tensor<3x6x4xf32>) -> (tensor<1x6x5x3x3xf32>, tensor<3x6x4xf32>) {
  %g = med.param @"norm.weight" : tensor<6xf32>
  %b = med.param @"norm.bias" : tensor<6xf32>
  %0 = med.channel_layer_norm %x, %g, %b : (tensor<1x6x5x3x3xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<1x6x5x3x3xf32>
  %1 = med.channel_layer_norm %y, %g, %b : (tensor<3x6x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<3x6x4xf32>
  return %0, %1 : tensor<1x6x5x3x3xf32>, tensor<3x6x4xf32>
}

// CHECK: grn  out0  2x6x3x5x4  max_abs {{.*}}  ok
// CHECK: grn  out1  2x6x3x5x4  max_abs {{.*}}  ok
func.func @grn(%x: tensor<2x6x3x5x4xf32>, %g: tensor<1x6x1x1x1xf32>, %b: tensor<1x6x1x1x1xf32>) -> (tensor<2x6x3x5x4xf32>, tensor<2x6x3x5x4xf32>) {
  %0 = med.grn %x, %g, %b : (tensor<2x6x3x5x4xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xf32>) -> tensor<2x6x3x5x4xf32>
  %1 = med.grn %x, %g, %b {epsilon = 0.5} : (tensor<2x6x3x5x4xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xf32>) -> tensor<2x6x3x5x4xf32>
  return %0, %1 : tensor<2x6x3x5x4xf32>, tensor<2x6x3x5x4xf32>
}

// GRN with MedNeXt's zero-initialized parameters (the identity) after a GELU.
// CHECK: grn_param  out0  1x6x7x3x5  max_abs {{.*}}  ok
func.func @grn_param(%x: tensor<1x6x7x3x5xf32>) -> tensor<1x6x7x3x5xf32> {
  %g = med.param @"grn.gamma" : tensor<1x6x1x1x1xf32>
  %b = med.param @"grn.beta" : tensor<1x6x1x1x1xf32>
  %a = med.gelu %x : tensor<1x6x7x3x5xf32>
  %y = med.grn %a, %g, %b : (tensor<1x6x7x3x5xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xf32>) -> tensor<1x6x7x3x5xf32>
  return %y : tensor<1x6x7x3x5xf32>
}

// CHECK: 20 outputs checked, 0 failed
