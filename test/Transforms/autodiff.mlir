// RUN: med-opt %s --split-input-file --med-autodiff 2>/dev/null | FileCheck %s
// RUN: med-opt %s --split-input-file --med-autodiff 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN

// Reverse sweep: the loss seeds 1, each op's rule runs in reverse order, and the two
// contributions to the conv output (through the norm and through the skip) are summed.

med.parameter @"c.weight" : tensor<4x2x3x3x3xf32> init uniform(54)
med.parameter @"c.bias" : tensor<4xf32> init uniform(54)
med.parameter @"n.weight" : tensor<4xf32> init ones
med.parameter @"n.bias" : tensor<4xf32> init zeros

// CHECK-LABEL: func.func @loss(
// CHECK: med.group_norm %{{.*}} {groups = 2 : i64} : (
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x2x5x5x5xf32>, %[[Y:.*]]: tensor<2x4x5x5x5xf32>)
// CHECK-SAME: med.output_names = ["out0", "grad.c.weight", "grad.c.bias", "grad.n.weight", "grad.n.bias", "grad.arg0", "grad.arg1"]
// CHECK: %[[W:.*]] = med.param @c.weight
// CHECK: %[[CONV:.*]] = med.conv3d %[[X]], %[[W]]
// The group norm saves its statistics for its backward op (only in @loss_grad; @loss keeps
// the plain form, checked below).
// CHECK: %[[NORM:[^,]*]], %[[STATS:.*]]:2 = med.group_norm %[[CONV]], %{{.*}}, %{{.*}} {groups = 2 : i64, save_statistics}
// CHECK: %[[ACT:.*]] = med.gelu %[[NORM]]
// CHECK: %[[SUM:.*]] = med.add %[[ACT]], %[[CONV]]
// CHECK: %[[LOSS:.*]] = med.bce_with_logits %[[SUM]], %[[Y]]
// CHECK: %[[ONE:.*]] = med.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DSUM:.*]] = med.bce_with_logits_grad %[[SUM]], %[[Y]] grad %[[ONE]]
// CHECK: %[[DNORM:.*]] = med.gelu_grad %[[NORM]], %[[DSUM]]
// CHECK: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = med.group_norm_grad %[[CONV]], %{{.*}}, %[[STATS]]#0, %[[STATS]]#1, %[[DNORM]] {groups = 2 : i64}
// CHECK: %[[DCONV:.*]] = med.add %[[DSUM]], %[[DX]]
// CHECK: %[[DIN:.*]] = med.conv3d_transpose %[[DCONV]], %[[W]] {padding = array<i64: 1, 1, 1>}
// CHECK: %[[DW:.*]] = med.conv3d_grad_weight %[[X]], %[[DCONV]] {kernel = array<i64: 3, 3, 3>, padding = array<i64: 1, 1, 1>}
// CHECK: %[[DBIAS:.*]] = med.reduce sum %[[DCONV]] {axes = array<i64: 0, 2, 3, 4>}
// CHECK: %[[ZERO:.*]] = med.constant dense<0.000000e+00> : tensor<2x4x5x5x5xf32>
// CHECK: return %[[LOSS]], %[[DW]], %[[DBIAS]], %[[DG]], %[[DB]], %[[DIN]], %[[ZERO]]
func.func @loss(%x: tensor<2x2x5x5x5xf32>, %y: tensor<2x4x5x5x5xf32>) -> tensor<f32> {
  %w = med.param @"c.weight" : tensor<4x2x3x3x3xf32>
  %b = med.param @"c.bias" : tensor<4xf32>
  %g = med.param @"n.weight" : tensor<4xf32>
  %be = med.param @"n.bias" : tensor<4xf32>
  %0 = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>} : (tensor<2x2x5x5x5xf32>, tensor<4x2x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x5x5xf32>
  %1 = med.group_norm %0, %g, %be {groups = 2 : i64} : (tensor<2x4x5x5x5xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x5x5x5xf32>
  %2 = med.gelu %1 : tensor<2x4x5x5x5xf32>
  %3 = med.add %2, %0 : (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>) -> tensor<2x4x5x5x5xf32>
  %l = med.bce_with_logits %3, %y : (tensor<2x4x5x5x5xf32>, tensor<2x4x5x5x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter read twice accumulates both contributions; broadcasting is summed back;
// a parameter the loss does not depend on gets zeros and a warning; a constant stops
// nothing (it has no inputs) and is not differentiated.

med.parameter @"s" : tensor<3xf32> init ones
med.parameter @"frozen" : tensor<3xf32> init zeros

// WARN: warning: parameter "frozen" does not influence the loss of @shared; its gradient is zero (freeze it?)
// CHECK-LABEL: func.func @shared_grad
// CHECK-SAME: med.output_names = ["out0", "grad.s", "grad.frozen", "grad.arg0"]
// CHECK: %[[S1:.*]] = med.param @s
// CHECK: %[[S2:.*]] = med.param @s
// The unused read of "frozen" is dropped from the gradient function.
// CHECK-NOT: med.param @frozen
// CHECK: %[[M:.*]] = med.mul %[[X:.*]], %[[S1]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[A:.*]] = med.add %[[M]], %[[S2]]
// CHECK: %[[L:.*]] = med.reduce sum %[[A]]
// CHECK: %[[DA:.*]] = med.broadcast %{{.*}} {shape = array<i64: 2, 3>}
// CHECK: %[[DS2:.*]] = med.reduce sum %[[DA]] {axes = array<i64: 0>}
// CHECK: %[[DM:.*]] = med.mul %[[DA]], %[[S1]]
// CHECK: %[[DS1P:.*]] = med.mul %[[DA]], %[[X]]
// CHECK: %[[DS1:.*]] = med.reduce sum %[[DS1P]] {axes = array<i64: 0>}
// CHECK: %[[DS:.*]] = med.add %[[DS2]], %[[DS1]]
// CHECK: %[[DF:.*]] = med.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %[[L]], %[[DS]], %[[DF]], %[[DM]]
func.func @shared(%x: tensor<2x3xf32>) -> tensor<f32> {
  %s1 = med.param @"s" : tensor<3xf32>
  %s2 = med.param @"s" : tensor<3xf32>
  %f = med.param @"frozen" : tensor<3xf32>
  %0 = med.mul %x, %s1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = med.add %0, %s2 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Functions whose first result is not a scalar are left alone.
// CHECK-LABEL: func.func @features
// CHECK-NOT: func.func @features_grad
func.func @features(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = med.gelu %x : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// med.max / med.min: one med.extremum_grad gives both sides' gradients in the broadcast
// shape; a broadcast operand sums its own back. The side that is a constant needs none, so
// its sum is not built.

// CHECK-LABEL: func.func @extremum_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x3x4xf32>, %[[B:.*]]: tensor<3x1xf32>)
// CHECK: %[[MAX:.*]] = med.max %[[A]], %[[B]]
// CHECK: %[[C:.*]] = med.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[MIN:.*]] = med.min %[[C]], %[[MAX]]
// CHECK: %[[DMIN:.*]] = med.broadcast
// CHECK: %{{.*}}, %[[DM:.*]] = med.extremum_grad min %[[C]], %[[MAX]], %[[DMIN]] : (tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK-NOT: med.reduce sum %{{.*}} {axes = array<i64: 0, 1, 2>}
// CHECK: %[[DA:.*]], %[[DBF:.*]] = med.extremum_grad max %[[A]], %[[B]], %[[DM]] : (tensor<2x3x4xf32>, tensor<3x1xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK: %[[DB0:.*]] = med.reduce sum %[[DBF]] {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[DB:.*]] = med.reduce sum %[[DB0]] {axes = array<i64: 1>, keepdims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
// CHECK: return %{{.*}}, %[[DA]], %[[DB]]
func.func @extremum(%a: tensor<2x3x4xf32>, %b: tensor<3x1xf32>) -> tensor<f32> {
  %0 = med.max %a, %b : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %c = med.constant dense<0.5> : tensor<f32>
  %1 = med.min %c, %0 : (tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// med.reduce max / min: med.reduce_extremum_grad reads the forward result (no recomputation),
// with or without the kept axes.

// CHECK-LABEL: func.func @reduce_extremum_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5xf32>)
// CHECK: %[[MX:.*]] = med.reduce max %[[X]] {axes = array<i64: 1>, keepdims}
// CHECK: %[[MN:.*]] = med.reduce min %[[MX]] {axes = array<i64: 0, 2>}
// CHECK: %[[S:.*]] = med.reduce sum %[[MN]]
// CHECK: %[[DMN:.*]] = med.broadcast %{{.*}} {shape = array<i64: 1>}
// CHECK: %[[DMX:.*]] = med.reduce_extremum_grad min %[[MX]], %[[MN]], %[[DMN]] {axes = array<i64: 0, 2>} : (tensor<2x1x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x5xf32>
// CHECK: %[[DX:.*]] = med.reduce_extremum_grad max %[[X]], %[[MX]], %[[DMX]] {axes = array<i64: 1>, keepdims} : (tensor<2x3x5xf32>, tensor<2x1x5xf32>, tensor<2x1x5xf32>) -> tensor<2x3x5xf32>
// CHECK: return %[[S]], %[[DX]]
func.func @reduce_extremum(%x: tensor<2x3x5xf32>) -> tensor<f32> {
  %0 = med.reduce max %x {axes = array<i64: 1>, keepdims} : (tensor<2x3x5xf32>) -> tensor<2x1x5xf32>
  %1 = med.reduce min %0 {axes = array<i64: 0, 2>} : (tensor<2x1x5xf32>) -> tensor<1xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 0>} : (tensor<1xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// A strided slice scatters its gradient into zeros (med.slice_grad); a unit-stride slice pads.

// CHECK-LABEL: func.func @slices_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x9x7xf32>)
// CHECK: %[[S1:.*]] = med.slice %[[X]] {offsets = array<i64: 0, 1, 0>, sizes = array<i64: 2, 3, 4>, strides = array<i64: 1, 3, 2>}
// CHECK: %[[S2:.*]] = med.slice %[[X]] {offsets = array<i64: 0, 2, 3>, sizes = array<i64: 2, 3, 4>, strides = array<i64: 1, 1, 1>}
// CHECK: %[[D2:.*]] = med.pad %{{.*}} {high = array<i64: 0, 4, 0>, low = array<i64: 0, 2, 3>} : (tensor<2x3x4xf32>) -> tensor<2x9x7xf32>
// CHECK: %[[D1:.*]] = med.slice_grad %{{.*}} {offsets = array<i64: 0, 1, 0>, shape = array<i64: 2, 9, 7>, strides = array<i64: 1, 3, 2>} : (tensor<2x3x4xf32>) -> tensor<2x9x7xf32>
// CHECK: %[[DX:.*]] = med.add %[[D2]], %[[D1]]
// CHECK: return %{{.*}}, %[[DX]]
func.func @slices(%x: tensor<2x9x7xf32>) -> tensor<f32> {
  %0 = med.slice %x {offsets = array<i64: 0, 1, 0>, sizes = array<i64: 2, 3, 4>, strides = array<i64: 1, 3, 2>} : (tensor<2x9x7xf32>) -> tensor<2x3x4xf32>
  %1 = med.slice %x {offsets = array<i64: 0, 2, 3>, sizes = array<i64: 2, 3, 4>, strides = array<i64: 1, 1, 1>} : (tensor<2x9x7xf32>) -> tensor<2x3x4xf32>
  %2 = med.mul %0, %1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %3 = med.reduce sum %2 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
