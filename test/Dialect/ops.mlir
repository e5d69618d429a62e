// RUN: med-opt %s --split-input-file | med-opt --split-input-file | FileCheck %s
// Every op prints and parses back; defaults are elided.

med.parameter @"stem.weight" : tensor<32x1x1x1x1xf32> init uniform(1)
med.parameter @"norm.weight" : tensor<32xf32> init ones
med.parameter @"norm.bias" : tensor<32xf32> init zeros

// CHECK-LABEL: med.parameter @stem.weight : tensor<32x1x1x1x1xf32> init uniform(1)
// CHECK: med.parameter @norm.weight : tensor<32xf32> init ones
// CHECK-LABEL: func.func @params
// CHECK: %[[W:.*]] = med.param @stem.weight : tensor<32x1x1x1x1xf32>
// CHECK: return %[[W]]
func.func @params() -> tensor<32x1x1x1x1xf32> {
  %w = med.param @"stem.weight" : tensor<32x1x1x1x1xf32>
  return %w : tensor<32x1x1x1x1xf32>
}

// -----

// CHECK-LABEL: func.func @convs
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x9x10x11xf32>, %[[W:.*]]: tensor<4x1x3x3x3xf32>, %[[B:.*]]: tensor<4xf32>, %[[T:.*]]: tensor<4x2x3x3x3xf32>)
func.func @convs(%x: tensor<2x4x9x10x11xf32>, %w: tensor<4x1x3x3x3xf32>, %b: tensor<4xf32>, %t: tensor<4x2x3x3x3xf32>) -> (tensor<2x4x5x5x6xf32>, tensor<2x4x9x10x11xf32>, tensor<2x8x18x20x22xf32>) {
  // CHECK: med.conv3d %[[X]], %[[W]], %[[B]] {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<2x4x9x10x11xf32>, tensor<4x1x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x5x6xf32>
  %0 = med.conv3d %x, %w, %b {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>, dilation = array<i64: 1, 1, 1>} : (tensor<2x4x9x10x11xf32>, tensor<4x1x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x5x6xf32>
  // CHECK: med.conv3d %[[X]], %[[W]] {dilation = array<i64: 2, 1, 1>, groups = 4 : i64, padding = array<i64: 2, 1, 1>}
  %1 = med.conv3d %x, %w {groups = 4 : i64, padding = array<i64: 2, 1, 1>, dilation = array<i64: 2, 1, 1>} : (tensor<2x4x9x10x11xf32>, tensor<4x1x3x3x3xf32>) -> tensor<2x4x9x10x11xf32>
  // CHECK: med.conv3d_transpose %[[X]], %[[T]] {groups = 4 : i64, output_padding = array<i64: 1, 1, 1>, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<2x4x9x10x11xf32>, tensor<4x2x3x3x3xf32>) -> tensor<2x8x18x20x22xf32>
  %2 = med.conv3d_transpose %x, %t {groups = 4 : i64, padding = array<i64: 1, 1, 1>, output_padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<2x4x9x10x11xf32>, tensor<4x2x3x3x3xf32>) -> tensor<2x8x18x20x22xf32>
  return %0, %1, %2 : tensor<2x4x5x5x6xf32>, tensor<2x4x9x10x11xf32>, tensor<2x8x18x20x22xf32>
}

// -----

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<?x6x?x?x?xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>, %gg: tensor<1x6x1x1x1xf32>) -> (tensor<?x6x?x?x?xf32>, tensor<?x6x?x?x?xf32>, tensor<?x6x?x?x?xf32>) {
  // CHECK: med.group_norm %{{.*}} {epsilon = 1.000000e-03 : f64, groups = 3 : i64}
  %0 = med.group_norm %x, %g, %b {groups = 3 : i64, epsilon = 1.0e-3} : (tensor<?x6x?x?x?xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x6x?x?x?xf32>
  // CHECK: med.channel_layer_norm %{{.*}} : (tensor<?x6x?x?x?xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x6x?x?x?xf32>
  %1 = med.channel_layer_norm %x, %g, %b : (tensor<?x6x?x?x?xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x6x?x?x?xf32>
  // CHECK: med.grn %{{.*}} : (tensor<?x6x?x?x?xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xf32>) -> tensor<?x6x?x?x?xf32>
  %2 = med.grn %x, %gg, %gg : (tensor<?x6x?x?x?xf32>, tensor<1x6x1x1x1xf32>, tensor<1x6x1x1x1xf32>) -> tensor<?x6x?x?x?xf32>
  // The statistics for the backward pass: N x groups, the batch may be dynamic.
  // CHECK: %{{.*}}, %{{.*}}:2 = med.group_norm %{{.*}} {groups = 2 : i64, save_statistics} : (tensor<?x6x?x?x?xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<?x6x?x?x?xf32>, tensor<?x2xf32>, tensor<?x2xf32>)
  %3:3 = med.group_norm %x, %g, %b {groups = 2 : i64, save_statistics} : (tensor<?x6x?x?x?xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<?x6x?x?x?xf32>, tensor<?x2xf32>, tensor<?x2xf32>)
  // The same statistics alone (the chunked merge): N x groups.
  // CHECK: %{{.*}}, %{{.*}} = med.group_norm_stats %{{.*}} {groups = 3 : i64} : (tensor<?x6x?x?x?xf32>) -> (tensor<?x3xf32>, tensor<?x3xf32>)
  %4:2 = med.group_norm_stats %x {groups = 3 : i64} : (tensor<?x6x?x?x?xf32>) -> (tensor<?x3xf32>, tensor<?x3xf32>)
  return %0, %1, %2 : tensor<?x6x?x?x?xf32>, tensor<?x6x?x?x?xf32>, tensor<?x6x?x?x?xf32>
}

// -----

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<2x3x4xf32>, %y: tensor<3x1xf32>, %s: tensor<f32>) -> tensor<2x3x4xf32> {
  // CHECK: med.gelu %{{.*}} : tensor<2x3x4xf32>
  %0 = med.gelu %x : tensor<2x3x4xf32>
  // CHECK: med.sigmoid
  %1 = med.sigmoid %0 : tensor<2x3x4xf32>
  // CHECK: med.neg
  %2 = med.neg %1 : tensor<2x3x4xf32>
  // CHECK: med.exp
  %3 = med.exp %2 : tensor<2x3x4xf32>
  // CHECK: med.log
  %4 = med.log %3 : tensor<2x3x4xf32>
  // CHECK: med.sqrt
  %5 = med.sqrt %3 : tensor<2x3x4xf32>
  // CHECK: med.add %{{.*}} : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %6 = med.add %5, %y : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  // CHECK: med.sub %{{.*}} : (tensor<3x1xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %7 = med.sub %y, %6 : (tensor<3x1xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: med.mul %{{.*}} : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %8 = med.mul %7, %s : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  // CHECK: med.div
  %9 = med.div %8, %4 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: med.max
  %10 = med.max %9, %s : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  // CHECK: med.min
  %11 = med.min %10, %s : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  // CHECK: %[[C:.*]] = med.constant dense<5.000000e-01> : tensor<f32>
  %c = med.constant dense<0.5> : tensor<f32>
  %12 = med.mul %11, %c : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  return %12 : tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x3x7x7x7xf32>, %y: tensor<2x5x7x7x7xf32>) -> (tensor<2x3x8x8x8xf32>, tensor<2x3x3x3x2xf32>, tensor<2x8x7x7x7xf32>) {
  // CHECK: med.pad %{{.*}} {high = array<i64: 0, 0, 0, 0, 0>, low = array<i64: 0, 0, 1, 1, 1>} : (tensor<2x3x7x7x7xf32>) -> tensor<2x3x8x8x8xf32>
  %0 = med.pad %x {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<2x3x7x7x7xf32>) -> tensor<2x3x8x8x8xf32>
  // CHECK: med.slice %{{.*}} {offsets = array<i64: 0, 0, 1, 1, 1>, sizes = array<i64: 2, 3, 3, 3, 2>, strides = array<i64: 1, 1, 2, 2, 3>}
  %1 = med.slice %x {offsets = array<i64: 0, 0, 1, 1, 1>, sizes = array<i64: 2, 3, 3, 3, 2>, strides = array<i64: 1, 1, 2, 2, 3>} : (tensor<2x3x7x7x7xf32>) -> tensor<2x3x3x3x2xf32>
  // CHECK: med.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3x7x7x7xf32>, tensor<2x5x7x7x7xf32>) -> tensor<2x8x7x7x7xf32>
  %2 = med.concat %x, %y {axis = 1 : i64} : (tensor<2x3x7x7x7xf32>, tensor<2x5x7x7x7xf32>) -> tensor<2x8x7x7x7xf32>
  return %0, %1, %2 : tensor<2x3x8x8x8xf32>, tensor<2x3x3x3x2xf32>, tensor<2x8x7x7x7xf32>
}

// -----

// CHECK-LABEL: func.func @transpose
func.func @transpose(%x: tensor<?x3x5x6x7xf32>) -> tensor<?x5x6x7x3xf32> {
  // CHECK: med.transpose %{{.*}} {permutation = array<i64: 0, 2, 3, 4, 1>} : (tensor<?x3x5x6x7xf32>) -> tensor<?x5x6x7x3xf32>
  %0 = med.transpose %x {permutation = array<i64: 0, 2, 3, 4, 1>} : (tensor<?x3x5x6x7xf32>) -> tensor<?x5x6x7x3xf32>
  return %0 : tensor<?x5x6x7x3xf32>
}

// -----

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x5x5x5xf32>) -> (tensor<2x3x1x1x1xf32>, tensor<3xf32>) {
  // CHECK: med.reduce mean %{{.*}} {axes = array<i64: 2, 3, 4>, keepdims}
  %0 = med.reduce mean %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x5x5x5xf32>) -> tensor<2x3x1x1x1xf32>
  // CHECK: med.reduce sum %{{.*}} {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x5x5x5xf32>) -> tensor<3xf32>
  %1 = med.reduce sum %x {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x5x5x5xf32>) -> tensor<3xf32>
  return %0, %1 : tensor<2x3x1x1x1xf32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @losses
func.func @losses(%x: tensor<2x6x5x5x5xf32>, %y: tensor<2x6x5x5x5xf32>, %m: tensor<2x6x5x5x5xf32>, %pw: tensor<6xf32>,
                  %l0: tensor<2x4x8x8x8xf32>, %l1: tensor<2x4x4x4x4xf32>, %t0: tensor<2x1x8x8x8xi32>, %t1: tensor<2x1x4x4x4xf32>) -> (tensor<f32>, tensor<f32>, tensor<2x6x5x5x5xf32>, tensor<f32>) {
  // CHECK: med.bce_with_logits %{{.*}}, %{{.*}} mask %{{.*}} : (tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>) -> tensor<f32>
  %0 = med.bce_with_logits %x, %y mask %m : (tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>) -> tensor<f32>
  // CHECK: med.bce_with_logits %{{.*}}, %{{.*}} mask %{{.*}} {auto_pos_weight, max_pos_weight = 5.000000e+00 : f64, reduction = #med<reduction per_channel>}
  %1 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction per_channel>, auto_pos_weight, max_pos_weight = 5.0} : (tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>) -> tensor<f32>
  // CHECK: med.bce_with_logits %{{.*}}, %{{.*}} pos_weight %{{.*}} {reduction = #med<reduction none>} : (tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>, tensor<6xf32>) -> tensor<2x6x5x5x5xf32>
  %2 = med.bce_with_logits %x, %y pos_weight %pw {reduction = #med<reduction none>} : (tensor<2x6x5x5x5xf32>, tensor<2x6x5x5x5xf32>, tensor<6xf32>) -> tensor<2x6x5x5x5xf32>
  // CHECK: med.dice_ce logits(%{{.*}}, %{{.*}}) targets(%{{.*}}, %{{.*}}) {weights = array<f64: 0.66666666666666663, 0.33333333333333331>}
  %3 = med.dice_ce logits(%l0, %l1) targets(%t0, %t1) {weights = array<f64: 0.66666666666666663, 0.33333333333333331>} : (tensor<2x4x8x8x8xf32>, tensor<2x4x4x4x4xf32>, tensor<2x1x8x8x8xi32>, tensor<2x1x4x4x4xf32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<2x6x5x5x5xf32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @gradient_ops
func.func @gradient_ops(%x: tensor<2x4x5x5x5xf32>, %w: tensor<4x1x3x3x3xf32>, %g: tensor<4xf32>, %gg: tensor<1x4x1x1x1xf32>,
                        %t: tensor<2x1x5x5x5xi32>, %d: tensor<f32>, %v: tensor<2x4xf32>, %s: tensor<2x2xf32>,
                        %m: tensor<2x1xf32>) {
  // CHECK: med.reshape %{{.*}} {shape = array<i64: 2, 4, 1, 1, 1>} : (tensor<2x4xf32>) -> tensor<2x4x1x1x1xf32>
  %0 = med.reshape %v {shape = array<i64: 2, 4, 1, 1, 1>} : (tensor<2x4xf32>) -> tensor<2x4x1x1x1xf32>
  // CHECK: med.broadcast %{{.*}} {shape = array<i64: 2, 4, 5, 5, 5>} : (tensor<2x4x1x1x1xf32>) -> tensor<2x4x5x5x5xf32>
  %1 = med.broadcast %0 {shape = array<i64: 2, 4, 5, 5, 5>} : (tensor<2x4x1x1x1xf32>) -> tensor<2x4x5x5x5xf32>
  // CHECK: med.conv3d_grad_weight %{{.*}}, %{{.*}} {groups = 4 : i64, kernel = array<i64: 3, 3, 3>, padding = array<i64: 1, 1, 1>} : (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>) -> tensor<4x1x3x3x3xf32>
  %2 = med.conv3d_grad_weight %x, %1 {kernel = array<i64: 3, 3, 3>, groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>) -> tensor<4x1x3x3x3xf32>
  // CHECK: med.group_norm_grad %{{.*}} {groups = 2 : i64} : (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x4x5x5x5xf32>) -> (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<4xf32>)
  %3:3 = med.group_norm_grad %x, %g, %s, %s, %1 {groups = 2 : i64} : (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x4x5x5x5xf32>) -> (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: med.channel_layer_norm_grad
  %4:3 = med.channel_layer_norm_grad %x, %g, %1 : (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<2x4x5x5x5xf32>) -> (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: med.grn_grad
  %5:3 = med.grn_grad %x, %gg, %1 : (tensor<2x4x5x5x5xf32>, tensor<1x4x1x1x1xf32>, tensor<2x4x5x5x5xf32>) -> (tensor<2x4x5x5x5xf32>, tensor<1x4x1x1x1xf32>, tensor<1x4x1x1x1xf32>)
  // CHECK: med.gelu_grad
  %6 = med.gelu_grad %x, %1 : (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>) -> tensor<2x4x5x5x5xf32>
  // CHECK: med.bce_with_logits_grad %{{.*}}, %{{.*}} mask %{{.*}} grad %{{.*}} {reduction = #med<reduction per_channel>}
  %7 = med.bce_with_logits_grad %x, %x mask %x grad %d {reduction = #med<reduction per_channel>} : (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>, tensor<f32>) -> tensor<2x4x5x5x5xf32>
  // CHECK: med.dice_ce_grad logits(%{{.*}}) targets(%{{.*}}) grad %{{.*}} {weights = array<f64: 1.000000e+00>}
  %8 = med.dice_ce_grad logits(%x) targets(%t) grad %d {weights = array<f64: 1.0>} : (tensor<2x4x5x5x5xf32>, tensor<2x1x5x5x5xi32>, tensor<f32>) -> tensor<2x4x5x5x5xf32>
  // CHECK: med.extremum_grad max %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x5x5x5xf32>, tensor<1x4x1x1x1xf32>, tensor<2x4x5x5x5xf32>) -> (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>)
  %9:2 = med.extremum_grad max %x, %gg, %1 : (tensor<2x4x5x5x5xf32>, tensor<1x4x1x1x1xf32>, tensor<2x4x5x5x5xf32>) -> (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>)
  // CHECK: med.extremum_grad min
  %10:2 = med.extremum_grad min %m, %v, %v : (tensor<2x1xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  // CHECK: med.reduce_extremum_grad max %{{.*}}, %{{.*}}, %{{.*}} {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x5x5x5xf32>
  %11 = med.reduce_extremum_grad max %x, %g, %g {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x5x5x5xf32>
  // CHECK: med.reduce_extremum_grad min %{{.*}} {axes = array<i64: 1>, keepdims} : (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %12 = med.reduce_extremum_grad min %v, %m, %m {axes = array<i64: 1>, keepdims} : (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  // CHECK: med.slice_grad %{{.*}} {offsets = array<i64: 0, 0, 1, 0, 2>, shape = array<i64: 2, 4, 11, 5, 12>, strides = array<i64: 1, 1, 2, 1, 2>} : (tensor<2x4x5x5x5xf32>) -> tensor<2x4x11x5x12xf32>
  %13 = med.slice_grad %1 {offsets = array<i64: 0, 0, 1, 0, 2>, strides = array<i64: 1, 1, 2, 1, 2>, shape = array<i64: 2, 4, 11, 5, 12>} : (tensor<2x4x5x5x5xf32>) -> tensor<2x4x11x5x12xf32>
  return
}

// -----

// CHECK-LABEL: med.parameter @w : tensor<4xf32> init uniform(3)
// CHECK: med.parameter @m : tensor<4xf32> init zeros frozen
med.parameter @w : tensor<4xf32> init uniform(3)
med.parameter @m : tensor<4xf32> init zeros frozen
med.parameter @v : tensor<4xf32> init zeros frozen

// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%g: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>) {
  %w = med.param @w : tensor<4xf32>
  %m = med.param @m : tensor<4xf32>
  %v = med.param @v : tensor<4xf32>
  // CHECK: %[[P:[a-z_]+]], %{{.*}}, %{{.*}} = med.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {weight_decay = 3.000000e-05 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %0:3 = med.adamw %w, %g, %m, %v, %lr, %t {weight_decay = 3.0e-5} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: med.sgd %{{.*}} {momentum = 0.98999999999999999 : f64, nesterov, weight_decay = 3.000000e-05 : f64}
  %1:2 = med.sgd %w, %g, %m, %lr {momentum = 0.99, weight_decay = 3.0e-5, nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  // CHECK: med.assign @w, %[[P]] : tensor<4xf32>
  med.assign @w, %0#0 : tensor<4xf32>
  med.assign @m, %0#1 : tensor<4xf32>
  return
}

// Dynamic loss scaling; med.fp32 (the step's f32 math) is an ordinary discardable attribute.
// CHECK-LABEL: func.func @loss_scaling
func.func @loss_scaling(%g: tensor<4xf32>, %h: tensor<2x3xf32>, %s: tensor<f32>, %n: tensor<f32>) -> (tensor<4xf32>, tensor<f32>, tensor<f32>) {
  %w = med.param @w : tensor<4xf32>
  // CHECK: %[[F:.*]] = med.any_non_finite %{{.*}}, %{{.*}} {med.fp32} : (tensor<4xf32>, tensor<2x3xf32>) -> tensor<f32>
  %f = med.any_non_finite %g, %h {med.fp32} : (tensor<4xf32>, tensor<2x3xf32>) -> tensor<f32>
  // CHECK: med.select %[[F]], %{{.*}}, %{{.*}} : (tensor<f32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %p = med.select %f, %w, %g : (tensor<f32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: med.update_loss_scale %{{.*}}, %{{.*}}, %[[F]] {growth_interval = 10 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %u:2 = med.update_loss_scale %s, %n, %f {growth_interval = 10 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %p, %u#0, %u#1 : tensor<4xf32>, tensor<f32>, tensor<f32>
}

// Random numbers: shaped like an operand, or per sample; the default distribution is uniform.
// CHECK-LABEL: func.func @random
func.func @random(%key: tensor<i64>, %x: tensor<?x1x8x8x8xf32>, %l: tensor<2x1x4x4x4xi32>) -> (tensor<?x1x8x8x8xf32>, tensor<?x3xf32>, tensor<2x2x3xf32>) {
  // CHECK: med.random %{{.*}}, %{{.*}} {distribution = #med<distribution normal>, stream = 4 : i64} : (tensor<i64>, tensor<?x1x8x8x8xf32>) -> tensor<?x1x8x8x8xf32>
  %z = med.random %key, %x {stream = 4 : i64, distribution = #med<distribution normal>} : (tensor<i64>, tensor<?x1x8x8x8xf32>) -> tensor<?x1x8x8x8xf32>
  // CHECK: med.random %{{.*}}, %{{.*}} {sample_shape = array<i64: 3>, stream = 3 : i64} : (tensor<i64>, tensor<?x1x8x8x8xf32>) -> tensor<?x3xf32>
  %a = med.random %key, %x {stream = 3 : i64, sample_shape = array<i64: 3>} : (tensor<i64>, tensor<?x1x8x8x8xf32>) -> tensor<?x3xf32>
  // CHECK: med.random %{{.*}}, %{{.*}} {sample_shape = array<i64: 2, 3>, stream = 0 : i64} : (tensor<i64>, tensor<2x1x4x4x4xi32>) -> tensor<2x2x3xf32>
  %b = med.random %key, %l {stream = 0 : i64, sample_shape = array<i64: 2, 3>} : (tensor<i64>, tensor<2x1x4x4x4xi32>) -> tensor<2x2x3xf32>
  return %z, %a, %b : tensor<?x1x8x8x8xf32>, tensor<?x3xf32>, tensor<2x2x3xf32>
}

// Augmentation transforms with per-sample parameters.
// CHECK-LABEL: func.func @intensity
func.func @intensity(%x: tensor<?x2x8x8x8xf32>, %p: tensor<?x2x3xf32>, %l: tensor<?x1x8x8x8xi32>, %f: tensor<?x3xf32>) -> (tensor<?x2x8x8x8xf32>, tensor<?x2x8x8x8xf32>, tensor<?x1x8x8x8xi32>) {
  // CHECK: med.gaussian_blur %{{.*}}, %{{.*}} : (tensor<?x2x8x8x8xf32>, tensor<?x2x3xf32>) -> tensor<?x2x8x8x8xf32>
  %b = med.gaussian_blur %x, %p : (tensor<?x2x8x8x8xf32>, tensor<?x2x3xf32>) -> tensor<?x2x8x8x8xf32>
  // CHECK: med.simulate_low_resolution %{{.*}}, %{{.*}} : (tensor<?x2x8x8x8xf32>, tensor<?x2x3xf32>) -> tensor<?x2x8x8x8xf32>
  %s = med.simulate_low_resolution %x, %p : (tensor<?x2x8x8x8xf32>, tensor<?x2x3xf32>) -> tensor<?x2x8x8x8xf32>
  // CHECK: med.mirror %{{.*}}, %{{.*}} : (tensor<?x1x8x8x8xi32>, tensor<?x3xf32>) -> tensor<?x1x8x8x8xi32>
  %m = med.mirror %l, %f : (tensor<?x1x8x8x8xi32>, tensor<?x3xf32>) -> tensor<?x1x8x8x8xi32>
  return %b, %s, %m : tensor<?x2x8x8x8xf32>, tensor<?x2x8x8x8xf32>, tensor<?x1x8x8x8xi32>
}

// CHECK-LABEL: func.func @affine
func.func @affine(%a: tensor<?x3xf32>, %k: tensor<?x3xf32>, %s: tensor<?x6xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x4xf32>) {
  // CHECK: med.affine_matrix %{{.*}}, %{{.*}} shear %{{.*}} : (tensor<?x3xf32>, tensor<?x3xf32>, tensor<?x6xf32>) -> tensor<?x3x4xf32>
  %m = med.affine_matrix %a, %k shear %s : (tensor<?x3xf32>, tensor<?x3xf32>, tensor<?x6xf32>) -> tensor<?x3x4xf32>
  // CHECK: med.affine_matrix %{{.*}}, %{{.*}} : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3x4xf32>
  %r = med.affine_matrix %a, %k : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3x4xf32>
  return %m, %r : tensor<?x3x4xf32>, tensor<?x3x4xf32>
}

// CHECK-LABEL: func.func @orientation
func.func @orientation(%u: tensor<?xf32>) -> tensor<?x3x4xf32> {
  // CHECK: med.orientation_matrix %{{.*}} : (tensor<?xf32>) -> tensor<?x3x4xf32>
  %o = med.orientation_matrix %u : (tensor<?xf32>) -> tensor<?x3x4xf32>
  return %o : tensor<?x3x4xf32>
}

// CHECK-LABEL: func.func @slice_shift
func.func @slice_shift(%x: tensor<2x1x8x6x6xf32>, %s: tensor<2x8x2xf32>) -> tensor<2x1x8x6x6xf32> {
  // CHECK: med.shift_slices %{{.*}}, %{{.*}} : (tensor<2x1x8x6x6xf32>, tensor<2x8x2xf32>) -> tensor<2x1x8x6x6xf32>
  %y = med.shift_slices %x, %s : (tensor<2x1x8x6x6xf32>, tensor<2x8x2xf32>) -> tensor<2x1x8x6x6xf32>
  return %y : tensor<2x1x8x6x6xf32>
}

// -----

// Label transforms: affinities with a crop (two results of f32 from i32 ids; the default
// unlabelled_below elided), remove-label of f32 labels, regions, nearest-exact resizing;
// the batch may be dynamic.
// CHECK-LABEL: func.func @labels
func.func @labels(%seg: tensor<?x1x13x12x11xi32>, %f: tensor<2x1x8x8x8xf32>) -> (tensor<?x2x10x10x10xf32>, tensor<?x2x10x10x10xf32>, tensor<2x1x8x8x8xf32>, tensor<2x2x8x8x8xf32>, tensor<2x1x4x4x3xf32>) {
  // CHECK: med.affinities %{{.*}} {crop_low = array<i64: 0, 1, 0>, crop_size = array<i64: 10, 10, 10>, offsets = array<i64: 1, 0, 0, 0, 0, 3>} : (tensor<?x1x13x12x11xi32>) -> (tensor<?x2x10x10x10xf32>, tensor<?x2x10x10x10xf32>)
  %a, %m = med.affinities %seg {offsets = array<i64: 1, 0, 0, 0, 0, 3>, crop_low = array<i64: 0, 1, 0>, crop_size = array<i64: 10, 10, 10>, unlabelled_below = 0 : i64} : (tensor<?x1x13x12x11xi32>) -> (tensor<?x2x10x10x10xf32>, tensor<?x2x10x10x10xf32>)
  // CHECK: med.remove_label %{{.*}} {label = -1 : i64, replace_with = 0 : i64} : (tensor<2x1x8x8x8xf32>) -> tensor<2x1x8x8x8xf32>
  %r = med.remove_label %f {label = -1 : i64, replace_with = 0 : i64} : (tensor<2x1x8x8x8xf32>) -> tensor<2x1x8x8x8xf32>
  // CHECK: med.label_regions %{{.*}} {regions = [array<i64: 1, 2>, array<i64: 2>]} : (tensor<2x1x8x8x8xf32>) -> tensor<2x2x8x8x8xf32>
  %g = med.label_regions %r {regions = [array<i64: 1, 2>, array<i64: 2>]} : (tensor<2x1x8x8x8xf32>) -> tensor<2x2x8x8x8xf32>
  // CHECK: med.downsample_nearest %{{.*}} {size = array<i64: 4, 4, 3>} : (tensor<2x1x8x8x8xf32>) -> tensor<2x1x4x4x3xf32>
  %d = med.downsample_nearest %r {size = array<i64: 4, 4, 3>} : (tensor<2x1x8x8x8xf32>) -> tensor<2x1x4x4x3xf32>
  return %a, %m, %r, %g, %d : tensor<?x2x10x10x10xf32>, tensor<?x2x10x10x10xf32>, tensor<2x1x8x8x8xf32>, tensor<2x2x8x8x8xf32>, tensor<2x1x4x4x3xf32>
}

// -----

// CHECK-LABEL: func.func @spatial
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x9x11x7xf32>, %[[S:.*]]: tensor<2x1x9x11x7xi32>, %[[M:.*]]: tensor<2x3x4xf32>)
func.func @spatial(%x: tensor<2x3x9x11x7xf32>, %s: tensor<2x1x9x11x7xi32>, %m: tensor<2x3x4xf32>) -> (tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x1x5x6x7xi32>, tensor<2x1x5x6x7xi32>) {
  // The default border (zeros) is elided.
  // CHECK: med.spatial_transform linear %[[X]], %[[M]] {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %0 = med.spatial_transform linear %x, %m border zeros {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  // CHECK: med.spatial_transform nearest %[[X]], %[[M]] border reflection {shape = array<i64: 5, 6, 7>}
  %1 = med.spatial_transform nearest %x, %m border reflection {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  // CHECK: med.spatial_transform nearest %[[S]], %[[M]] border constant {shape = array<i64: 5, 6, 7>, value = -1.000000e+00 : f64} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  %2 = med.spatial_transform nearest %s, %m border constant {shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  // CHECK: med.spatial_transform linear_argmax %[[S]], %[[M]] {labels = array<i64: -1, 0, 1, 2, 3>, shape = array<i64: 5, 6, 7>, value = -1.000000e+00 : f64}
  %3 = med.spatial_transform linear_argmax %s, %m {labels = array<i64: -1, 0, 1, 2, 3>, shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return %0, %1, %2, %3 : tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x1x5x6x7xi32>, tensor<2x1x5x6x7xi32>
}
