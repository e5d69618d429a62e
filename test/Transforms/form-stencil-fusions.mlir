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
