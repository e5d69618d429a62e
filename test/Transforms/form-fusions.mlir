// RUN: med-opt %s --split-input-file --med-form-fusions | FileCheck %s

// Bias + GELU + residual add: one fusion; the broadcast bias is an input read at broadcast
// indices, and nothing in between is a value of the function any more.
// CHECK-LABEL: func.func @bias_gelu_residual
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x4x4x4xf32>, %[[B:.*]]: tensor<1x8x1x1x1xf32>, %[[R:.*]]: tensor<2x8x4x4x4xf32>)
// CHECK-NEXT: %[[F:.*]] = med.fusion "elementwise"(%[[X]], %[[B]], %[[R]])
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<2x8x4x4x4xf32>, %[[A1:.*]]: tensor<1x8x1x1x1xf32>, %[[A2:.*]]: tensor<2x8x4x4x4xf32>):
// CHECK-NEXT: %[[S:.*]] = med.add %[[A0]], %[[A1]]
// CHECK-NEXT: %[[G:.*]] = med.gelu %[[S]]
// CHECK-NEXT: %[[Y:.*]] = med.add %[[G]], %[[A2]]
// CHECK-NEXT: med.yield %[[Y]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @bias_gelu_residual(%x: tensor<2x8x4x4x4xf32>, %b: tensor<1x8x1x1x1xf32>, %r: tensor<2x8x4x4x4xf32>) -> tensor<2x8x4x4x4xf32> {
  %0 = med.add %x, %b : (tensor<2x8x4x4x4xf32>, tensor<1x8x1x1x1xf32>) -> tensor<2x8x4x4x4xf32>
  %1 = med.gelu %0 : tensor<2x8x4x4x4xf32>
  %2 = med.add %1, %r : (tensor<2x8x4x4x4xf32>, tensor<2x8x4x4x4xf32>) -> tensor<2x8x4x4x4xf32>
  return %2 : tensor<2x8x4x4x4xf32>
}

// -----

// A producer read elsewhere too stays outside (its result is stored anyway; nothing is
// computed twice); so does an opaque op (conv3d). A value read twice by one op joins.
// CHECK-LABEL: func.func @shared_producer
// CHECK: %[[C:.*]] = med.conv3d
// CHECK-NEXT: %[[G:.*]] = med.gelu %[[C]]
// CHECK-NEXT: %[[F:.*]] = med.fusion "elementwise"(%[[G]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<1x2x3x3x3xf32>):
// CHECK-NEXT: %[[E:.*]] = med.exp %[[A]]
// CHECK-NEXT: %[[M:.*]] = med.mul %[[E]], %[[E]]
// CHECK-NEXT: med.yield %[[M]]
// CHECK: %[[N:.*]] = med.neg %[[G]]
// CHECK-NEXT: return %[[F]], %[[N]]
func.func @shared_producer(%x: tensor<1x2x3x3x3xf32>, %w: tensor<2x2x1x1x1xf32>) -> (tensor<1x2x3x3x3xf32>, tensor<1x2x3x3x3xf32>) {
  %c = med.conv3d %x, %w : (tensor<1x2x3x3x3xf32>, tensor<2x2x1x1x1xf32>) -> tensor<1x2x3x3x3xf32>
  %g = med.gelu %c : tensor<1x2x3x3x3xf32>
  %e = med.exp %g : tensor<1x2x3x3x3xf32>
  %m = med.mul %e, %e : (tensor<1x2x3x3x3xf32>, tensor<1x2x3x3x3xf32>) -> tensor<1x2x3x3x3xf32>
  %n = med.neg %g : tensor<1x2x3x3x3xf32>
  return %m, %n : tensor<1x2x3x3x3xf32>, tensor<1x2x3x3x3xf32>
}

// -----

// Two producer chains joined by one consumer become one fusion; a producer of another
// shape (the broadcast operand computed from small tensors) stays outside.
// CHECK-LABEL: func.func @two_chains
// CHECK: %[[S:.*]] = med.sqrt %{{.*}} : tensor<1x4x1x1x1xf32>
// CHECK-NEXT: %[[F:.*]] = med.fusion "elementwise"(%{{.*}}, %{{.*}}, %[[S]])
// CHECK-COUNT-4: med.
// CHECK-NEXT: med.yield
// CHECK-NOT: med.fusion
func.func @two_chains(%a: tensor<1x4x2x2x2xf32>, %b: tensor<1x4x2x2x2xf32>, %v: tensor<1x4x1x1x1xf32>) -> tensor<1x4x2x2x2xf32> {
  %0 = med.sigmoid %a : tensor<1x4x2x2x2xf32>
  %1 = med.exp %b : tensor<1x4x2x2x2xf32>
  %s = med.sqrt %v : tensor<1x4x1x1x1xf32>
  %2 = med.mul %0, %1 : (tensor<1x4x2x2x2xf32>, tensor<1x4x2x2x2xf32>) -> tensor<1x4x2x2x2xf32>
  %3 = med.div %2, %s : (tensor<1x4x2x2x2xf32>, tensor<1x4x1x1x1xf32>) -> tensor<1x4x2x2x2xf32>
  return %3 : tensor<1x4x2x2x2xf32>
}

// -----

// Master-weight math (med.fp32) and activation math do not mix; the mark carries over.
// CHECK-LABEL: func.func @precision_marks
// CHECK: %[[F:.*]] = med.fusion "elementwise"(%{{.*}}, %{{.*}}, %{{.*}}) {med.fp32}
// CHECK: med.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[Y:.*]] = med.mul %[[F]], %{{.*}} : (
func.func @precision_marks(%p: tensor<6xf32>, %e: tensor<6xf32>, %d: tensor<f32>) -> tensor<6xf32> {
  %0 = med.sub %p, %e {med.fp32} : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %1 = med.mul %0, %d {med.fp32} : (tensor<6xf32>, tensor<f32>) -> tensor<6xf32>
  %2 = med.mul %1, %p : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  return %2 : tensor<6xf32>
}
