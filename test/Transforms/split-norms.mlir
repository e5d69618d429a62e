// RUN: med-opt %s --med-split-norms --split-input-file | FileCheck %s
// A second run finds nothing more.
// RUN: med-opt %s --med-split-norms --med-split-norms --split-input-file | FileCheck %s

// An instance norm (groups = C) of a convolution, read by LeakyReLU, saving its statistics
// for group_norm_grad: its statistics are group_norm_stats of the convolution's result, the
// map is (x − mean)·(rstd·gamma) + beta over N×C×1×1×1 coefficients in f32 (med.fp32), and
// group_norm_grad reads the new statistics.

// CHECK-LABEL: func.func @instance
// CHECK:       %[[Y:.*]] = med.conv3d
// CHECK-NEXT:  %[[M:.*]], %[[R:.*]] = med.group_norm_stats %[[Y]] {groups = 5 : i64}
// CHECK-NEXT:  %[[MC:.*]] = med.reshape %[[M]] {med.fp32, shape = array<i64: 2, 5, 1, 1, 1>}
// CHECK-NEXT:  %[[RC:.*]] = med.reshape %[[R]] {med.fp32, shape = array<i64: 2, 5, 1, 1, 1>}
// CHECK-NEXT:  %[[G:.*]] = med.reshape %arg2 {med.fp32, shape = array<i64: 5, 1, 1, 1>}
// CHECK-NEXT:  %[[B:.*]] = med.reshape %arg3 {med.fp32, shape = array<i64: 5, 1, 1, 1>}
// CHECK-NEXT:  %[[S:.*]] = med.mul %[[RC]], %[[G]] {med.fp32}
// CHECK-NEXT:  %[[C:.*]] = med.sub %[[Y]], %[[MC]] :
// CHECK-NEXT:  %[[T:.*]] = med.mul %[[C]], %[[S]] :
// CHECK-NEXT:  %[[N:.*]] = med.add %[[T]], %[[B]] :
// CHECK-NEXT:  med.leaky_relu %[[N]]
// CHECK-NEXT:  med.group_norm_grad %[[Y]], %arg2, %[[M]], %[[R]], %arg4
// CHECK-NOT:   med.group_norm %
func.func @instance(%x: tensor<2x3x5x6x7xf32>, %w: tensor<5x3x3x3x3xf32>, %g: tensor<5xf32>, %be: tensor<5xf32>, %dy: tensor<2x5x5x6x7xf32>) -> (tensor<2x5x5x6x7xf32>, tensor<2x5x5x6x7xf32>) {
  %y = med.conv3d %x, %w {padding = array<i64: 1, 1, 1>} : (tensor<2x3x5x6x7xf32>, tensor<5x3x3x3x3xf32>) -> tensor<2x5x5x6x7xf32>
  %n, %m, %r = med.group_norm %y, %g, %be {groups = 5 : i64, save_statistics} : (tensor<2x5x5x6x7xf32>, tensor<5xf32>, tensor<5xf32>) -> (tensor<2x5x5x6x7xf32>, tensor<2x5xf32>, tensor<2x5xf32>)
  %a = med.leaky_relu %n {negative_slope = 0.01 : f64} : tensor<2x5x5x6x7xf32>
  %dx, %dg, %db = med.group_norm_grad %y, %g, %m, %r, %dy {groups = 5 : i64} : (tensor<2x5x5x6x7xf32>, tensor<5xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5x5x6x7xf32>) -> (tensor<2x5x5x6x7xf32>, tensor<5xf32>, tensor<5xf32>)
  return %a, %dx : tensor<2x5x5x6x7xf32>, tensor<2x5x5x6x7xf32>
}

// -----

// A group norm of 2 groups of 3 channels into a residual add: the per-group statistics are
// broadcast over the group's channels.

// CHECK-LABEL: func.func @groups
// CHECK:       %[[M:.*]], %[[R:.*]] = med.group_norm_stats %arg0 {groups = 2 : i64}
// CHECK-NEXT:  %[[M3:.*]] = med.reshape %[[M]] {med.fp32, shape = array<i64: 1, 2, 1>}
// CHECK-NEXT:  %[[MB:.*]] = med.broadcast %[[M3]] {med.fp32, shape = array<i64: 1, 2, 3>}
// CHECK-NEXT:  %[[MC:.*]] = med.reshape %[[MB]] {med.fp32, shape = array<i64: 1, 6, 1, 1, 1>}
// CHECK:       %[[C:.*]] = med.sub %arg0, %[[MC]] :
// CHECK-NEXT:  %[[T:.*]] = med.mul %[[C]], %{{.*}} :
// CHECK-NEXT:  %[[N:.*]] = med.add %[[T]], %{{.*}} :
// CHECK-NEXT:  med.add %[[N]], %arg3
// CHECK-NOT:   med.group_norm %
func.func @groups(%y: tensor<1x6x3x4x5xf32>, %g: tensor<6xf32>, %be: tensor<6xf32>, %s: tensor<1x6x3x4x5xf32>) -> tensor<1x6x3x4x5xf32> {
  %n = med.group_norm %y, %g, %be {groups = 2 : i64} : (tensor<1x6x3x4x5xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<1x6x3x4x5xf32>
  %a = med.add %n, %s : (tensor<1x6x3x4x5xf32>, tensor<1x6x3x4x5xf32>) -> tensor<1x6x3x4x5xf32>
  return %a : tensor<1x6x3x4x5xf32>
}

// -----

// Left as they are: a norm read by a convolution (nothing to fuse it with), and a norm of
// an elementwise producer (med-form-fusions computes that value in registers already).

// CHECK-LABEL: func.func @stays
// CHECK-COUNT-2: med.group_norm %
// CHECK-NOT:   med.group_norm_stats
func.func @stays(%x: tensor<1x4x3x4x5xf32>, %w: tensor<4x4x1x1x1xf32>, %g: tensor<4xf32>, %be: tensor<4xf32>) -> (tensor<1x4x3x4x5xf32>, tensor<1x4x3x4x5xf32>) {
  %n = med.group_norm %x, %g, %be {groups = 4 : i64} : (tensor<1x4x3x4x5xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x3x4x5xf32>
  %c = med.conv3d %n, %w : (tensor<1x4x3x4x5xf32>, tensor<4x4x1x1x1xf32>) -> tensor<1x4x3x4x5xf32>
  %e = med.exp %x : tensor<1x4x3x4x5xf32>
  %n2 = med.group_norm %e, %g, %be {groups = 4 : i64} : (tensor<1x4x3x4x5xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x3x4x5xf32>
  %a = med.relu %n2 : tensor<1x4x3x4x5xf32>
  return %c, %a : tensor<1x4x3x4x5xf32>, tensor<1x4x3x4x5xf32>
}

// -----

// An instance norm (med.instance_norm, as medc import marks ONNX InstanceNormalization):
// the mark carries over to the ops of the split, which medcheck's autocast reference reads.

// CHECK-LABEL: func.func @instance_mark
// CHECK:       med.group_norm_stats
// CHECK:       %[[C:.*]] = med.sub %arg0, %{{.*}} {med.instance_norm} :
// CHECK-NEXT:  %[[T:.*]] = med.mul %[[C]], %{{.*}} {med.instance_norm} :
// CHECK-NEXT:  %[[N:.*]] = med.add %[[T]], %{{.*}} {med.instance_norm} :
// CHECK-NEXT:  med.relu %[[N]]
func.func @instance_mark(%y: tensor<1x4x3x4x5xf32>, %g: tensor<4xf32>, %be: tensor<4xf32>) -> tensor<1x4x3x4x5xf32> {
  %n = med.group_norm %y, %g, %be {groups = 4 : i64, med.instance_norm} : (tensor<1x4x3x4x5xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x3x4x5xf32>
  %a = med.relu %n : tensor<1x4x3x4x5xf32>
  return %a : tensor<1x4x3x4x5xf32>
}
