// RUN: med-opt %s --med-form-stencil-fusions --split-input-file | FileCheck %s
// A second run finds nothing more (it does not look inside fusions).
// RUN: med-opt %s --med-form-stencil-fusions --med-form-stencil-fusions --split-input-file | FileCheck %s

// A group norm of a shift-sum (MedNeXt's depthwise convolution and norm, as med-autodiff
// leaves them: the norm saving its statistics for group_norm_grad): the shift-sum and the
// statistics of its result become one `stencil` fusion yielding the result, mean and rstd;
// the norm becomes group_norm_apply of them; group_norm_grad reads the fusion's statistics
// and its result, as everything else that read the shift-sum's.

// CHECK-LABEL: func.func @block
// CHECK:       %[[F:.*]]:3 = med.fusion "stencil"(%arg0, %arg1, %arg2)
// CHECK-SAME:    {roles = {statistics = 1 : i64, stencil = 0 : i64}}
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<2x5x6x7x9xf32>, %[[W:.*]]: tensor<5x1x3x3x3xf32>, %[[B:.*]]: tensor<5xf32>):
// CHECK-NEXT:    %[[Y:.*]] = med.shift_sum %[[X]], %[[W]], %[[B]]
// CHECK-NEXT:    %[[M:.*]], %[[R:.*]] = med.group_norm_stats %[[Y]] {epsilon = 1.000000e-03 : f64, groups = 5 : i64}
// CHECK-NEXT:    med.yield %[[Y]], %[[M]], %[[R]]
// CHECK:       %[[N:.*]] = med.group_norm_apply %[[F]]#0, %[[F]]#1, %[[F]]#2, %arg3, %arg4 {groups = 5 : i64}
// CHECK-NEXT:  %[[G:.*]] = med.gelu %[[N]]
// CHECK-NEXT:  %{{.*}} = med.group_norm_grad %[[F]]#0, %arg3, %[[F]]#1, %[[F]]#2, %arg5 {groups = 5 : i64}
// CHECK-NOT:   med.group_norm
func.func @block(%x: tensor<2x5x6x7x9xf32>, %w: tensor<5x1x3x3x3xf32>, %b: tensor<5xf32>, %g: tensor<5xf32>, %be: tensor<5xf32>, %dy: tensor<2x5x6x7x9xf32>) -> (tensor<2x5x6x7x9xf32>, tensor<2x5x6x7x9xf32>) {
  %y = med.shift_sum %x, %w, %b : (tensor<2x5x6x7x9xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x6x7x9xf32>
  %n, %m, %r = med.group_norm %y, %g, %be {groups = 5 : i64, epsilon = 1.0e-3, save_statistics} : (tensor<2x5x6x7x9xf32>, tensor<5xf32>, tensor<5xf32>) -> (tensor<2x5x6x7x9xf32>, tensor<2x5xf32>, tensor<2x5xf32>)
  %a = med.gelu %n : tensor<2x5x6x7x9xf32>
  %dx, %dg, %db = med.group_norm_grad %y, %g, %m, %r, %dy {groups = 5 : i64} : (tensor<2x5x6x7x9xf32>, tensor<5xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5x6x7x9xf32>) -> (tensor<2x5x6x7x9xf32>, tensor<5xf32>, tensor<5xf32>)
  return %a, %dx : tensor<2x5x6x7x9xf32>, tensor<2x5x6x7x9xf32>
}

// -----

// Left alone: a group norm of anything but a stencil (a convolution), and of a shift-sum
// whose kernel the template does not take (9 along W: at most 7).
// CHECK-LABEL: func.func @left
// CHECK-NOT:   med.fusion
// CHECK:       med.group_norm %{{.*}} {groups = 1 : i64}
// CHECK:       med.group_norm %{{.*}} {groups = 5 : i64}
func.func @left(%x: tensor<1x5x6x7x9xf32>, %w: tensor<5x5x1x1x1xf32>, %w9: tensor<5x1x1x1x9xf32>, %g: tensor<5xf32>) -> (tensor<1x5x6x7x9xf32>, tensor<1x5x6x7x9xf32>) {
  %c = med.conv3d %x, %w : (tensor<1x5x6x7x9xf32>, tensor<5x5x1x1x1xf32>) -> tensor<1x5x6x7x9xf32>
  %n = med.group_norm %c, %g, %g {groups = 1 : i64} : (tensor<1x5x6x7x9xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<1x5x6x7x9xf32>
  %s = med.shift_sum %x, %w9 : (tensor<1x5x6x7x9xf32>, tensor<5x1x1x1x9xf32>) -> tensor<1x5x6x7x9xf32>
  %m = med.group_norm %s, %g, %g {groups = 5 : i64} : (tensor<1x5x6x7x9xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<1x5x6x7x9xf32>
  return %n, %m : tensor<1x5x6x7x9xf32>, tensor<1x5x6x7x9xf32>
}

// -----

// An instance norm's mark (med.instance_norm) carries over to the group_norm_apply that
// yields its result (medcheck's autocast reference reads it there).

// CHECK-LABEL: func.func @instance_mark
// CHECK:       med.fusion "stencil"
// CHECK:       med.group_norm_apply %{{.*}} {groups = 5 : i64, med.instance_norm}
// CHECK-NOT:   med.group_norm %
func.func @instance_mark(%x: tensor<1x5x6x7x9xf32>, %w: tensor<5x1x3x3x3xf32>, %g: tensor<5xf32>) -> tensor<1x5x6x7x9xf32> {
  %s = med.shift_sum %x, %w : (tensor<1x5x6x7x9xf32>, tensor<5x1x3x3x3xf32>) -> tensor<1x5x6x7x9xf32>
  %m = med.group_norm %s, %g, %g {groups = 5 : i64, med.instance_norm} : (tensor<1x5x6x7x9xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<1x5x6x7x9xf32>
  return %m : tensor<1x5x6x7x9xf32>
}

// -----

// A shift-sum's weight gradient and the sum of the same output gradient over N, D, H, W (the
// bias gradient, as med-autodiff writes it) become one `stencil_grad` fusion at the later of
// the two, yielding both; what read them reads the fusion.

// CHECK-LABEL: func.func @grad
// CHECK:       %[[F:.*]]:2 = med.fusion "stencil_grad"(%arg0, %arg1)
// CHECK-SAME:    {roles = {bias_grad = 1 : i64, grad_weight = 0 : i64}}
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<2x5x6x7x9xf32>, %[[DY:.*]]: tensor<2x5x6x7x9xf32>):
// CHECK-NEXT:    %[[DW:.*]] = med.shift_sum_grad_weight %[[X]], %[[DY]] {kernel = array<i64: 3, 3, 3>}
// CHECK-NEXT:    %[[DB:.*]] = med.reduce sum %[[DY]] {axes = array<i64: 0, 2, 3, 4>}
// CHECK-NEXT:    med.yield %[[DW]], %[[DB]]
// CHECK:       %[[S:.*]] = med.mul %[[F]]#1, %[[F]]#1
// CHECK:       return %[[F]]#0, %[[S]]
// CHECK-NOT:   med.shift_sum_grad_weight
func.func @grad(%x: tensor<2x5x6x7x9xf32>, %dy: tensor<2x5x6x7x9xf32>) -> (tensor<5x1x3x3x3xf32>, tensor<5xf32>) {
  %db = med.reduce sum %dy {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x5x6x7x9xf32>) -> tensor<5xf32>
  %dw = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<2x5x6x7x9xf32>, tensor<2x5x6x7x9xf32>) -> tensor<5x1x3x3x3xf32>
  %s = med.mul %db, %db : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  return %dw, %s : tensor<5x1x3x3x3xf32>, tensor<5xf32>
}

// -----

// Left alone: a sum of the output gradient over other axes (its channels), a mean, a sum
// with keepdims, and a bias gradient read before the weight gradient (the fusion would
// stand after its reader).

// CHECK-LABEL: func.func @grad_left
// CHECK-NOT:   med.fusion
// CHECK:       return
func.func @grad_left(%x: tensor<2x5x6x7x9xf32>, %dy: tensor<2x5x6x7x9xf32>) -> (tensor<5x1x3x3x3xf32>, tensor<2x6x7x9xf32>, tensor<5xf32>, tensor<1x5x1x1x1xf32>) {
  %c = med.reduce sum %dy {axes = array<i64: 1>} : (tensor<2x5x6x7x9xf32>) -> tensor<2x6x7x9xf32>
  %m = med.reduce mean %dy {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x5x6x7x9xf32>) -> tensor<5xf32>
  %k = med.reduce sum %dy {axes = array<i64: 0, 2, 3, 4>, keepdims} : (tensor<2x5x6x7x9xf32>) -> tensor<1x5x1x1x1xf32>
  %db = med.reduce sum %dy {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x5x6x7x9xf32>) -> tensor<5xf32>
  %s = med.mul %db, %m : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %dw = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>} : (tensor<2x5x6x7x9xf32>, tensor<2x5x6x7x9xf32>) -> tensor<5x1x3x3x3xf32>
  return %dw, %c, %s, %k : tensor<5x1x3x3x3xf32>, tensor<2x6x7x9xf32>, tensor<5xf32>, tensor<1x5x1x1x1xf32>
}

// -----

// A shift-sum whose result only an add reads (a residual block's input gradient: the mirrored
// shift-sum plus the other path's) becomes a `stencil` fusion with the add, yielding the sum,
// at the add's place.

// CHECK-LABEL: func.func @residual
// CHECK:       %[[N:.*]] = med.neg %arg2
// CHECK-NEXT:  %[[F:.*]] = med.fusion "stencil"(%arg0, %arg1, %[[N]])
// CHECK-SAME:    {roles = {residual = 1 : i64, stencil = 0 : i64}}
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<2x5x6x7x8xf32>, %[[W:.*]]: tensor<5x1x3x3x3xf32>, %[[G:.*]]: tensor<2x5x6x7x8xf32>):
// CHECK-NEXT:    %[[Y:.*]] = med.shift_sum %[[X]], %[[W]] {mirrored}
// CHECK-NEXT:    %[[S:.*]] = med.add %[[G]], %[[Y]]
// CHECK-NEXT:    med.yield %[[S]]
// CHECK:       return %[[F]]
func.func @residual(%x: tensor<2x5x6x7x8xf32>, %w: tensor<5x1x3x3x3xf32>, %g: tensor<2x5x6x7x8xf32>) -> tensor<2x5x6x7x8xf32> {
  %y = med.shift_sum %x, %w {mirrored} : (tensor<2x5x6x7x8xf32>, tensor<5x1x3x3x3xf32>) -> tensor<2x5x6x7x8xf32>
  %n = med.neg %g : tensor<2x5x6x7x8xf32>
  %s = med.add %n, %y : (tensor<2x5x6x7x8xf32>, tensor<2x5x6x7x8xf32>) -> tensor<2x5x6x7x8xf32>
  return %s : tensor<2x5x6x7x8xf32>
}

// -----

// Left alone: a shift-sum read by more than the add, and one whose only reader multiplies.

// CHECK-LABEL: func.func @residual_left
// CHECK-NOT:   med.fusion
// CHECK:       return
func.func @residual_left(%x: tensor<2x5x6x7x8xf32>, %w: tensor<5x1x3x3x3xf32>, %g: tensor<2x5x6x7x8xf32>) -> (tensor<2x5x6x7x8xf32>, tensor<2x5x6x7x8xf32>, tensor<2x5x6x7x8xf32>) {
  %y = med.shift_sum %x, %w {mirrored} : (tensor<2x5x6x7x8xf32>, tensor<5x1x3x3x3xf32>) -> tensor<2x5x6x7x8xf32>
  %s = med.add %g, %y : (tensor<2x5x6x7x8xf32>, tensor<2x5x6x7x8xf32>) -> tensor<2x5x6x7x8xf32>
  %z = med.shift_sum %x, %w : (tensor<2x5x6x7x8xf32>, tensor<5x1x3x3x3xf32>) -> tensor<2x5x6x7x8xf32>
  %m = med.mul %g, %z : (tensor<2x5x6x7x8xf32>, tensor<2x5x6x7x8xf32>) -> tensor<2x5x6x7x8xf32>
  return %s, %y, %m : tensor<2x5x6x7x8xf32>, tensor<2x5x6x7x8xf32>, tensor<2x5x6x7x8xf32>
}
