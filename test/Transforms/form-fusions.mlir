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

// A producer read by several ops of the chain is computed once inside and never stored
// (the fusion yields what is read outside: both results); an opaque op (conv3d) stays out.
// A value read twice by one op joins.
// CHECK-LABEL: func.func @shared_producer
// CHECK: %[[C:.*]] = med.conv3d
// CHECK-NEXT: %[[F:.*]]:2 = med.fusion "elementwise"(%[[C]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<1x2x3x3x3xf32>):
// CHECK-NEXT: %[[G:.*]] = med.gelu %[[A]]
// CHECK-NEXT: %[[E:.*]] = med.exp %[[G]]
// CHECK-NEXT: %[[M:.*]] = med.mul %[[E]], %[[E]]
// CHECK-NEXT: %[[N:.*]] = med.neg %[[G]]
// CHECK-NEXT: med.yield %[[M]], %[[N]]
// CHECK: return %[[F]]#0, %[[F]]#1
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

// -----

// One parameter's update: the clipped gradient, AdamW and the EMA become one fusion with
// several results (the new parameter, moments and EMA), each stored once; the assigns after
// it read them. The step's scalars are broadcast inputs.
// CHECK-LABEL: func.func @optimizer
// CHECK: %[[F:.*]]:4 = med.fusion "elementwise"(%{{.*}}) {med.fp32}
// CHECK: med.mul
// CHECK-NEXT: %[[NP:[a-z_0-9]+]], %[[NM:[a-z_0-9]+]], %[[NV:[a-z_0-9]+]] = med.adamw
// CHECK-NEXT: %[[D:.*]] = med.sub %[[NP]]
// CHECK-NEXT: %[[S:.*]] = med.mul %[[D]]
// CHECK-NEXT: %[[U:.*]] = med.add %{{.*}}, %[[S]]
// CHECK-NEXT: med.yield %[[NP]], %[[NM]], %[[NV]], %[[U]]
// CHECK: med.assign @m, %[[F]]#1
// CHECK-NEXT: med.assign @v, %[[F]]#2
// CHECK-NEXT: med.assign @p, %[[F]]#0
// CHECK-NEXT: med.assign @e, %[[F]]#3
module {
  med.parameter @p : tensor<4x3xf32> init zeros
  med.parameter @m : tensor<4x3xf32> init zeros
  med.parameter @v : tensor<4x3xf32> init zeros
  med.parameter @e : tensor<4x3xf32> init zeros
  func.func @optimizer(%g: tensor<4x3xf32>, %c: tensor<f32>, %lr: tensor<f32>, %t: tensor<f32>, %k: tensor<f32>) {
    %p = med.param @p {med.fp32} : tensor<4x3xf32>
    %m = med.param @m {med.fp32} : tensor<4x3xf32>
    %v = med.param @v {med.fp32} : tensor<4x3xf32>
    %e = med.param @e {med.fp32} : tensor<4x3xf32>
    %cg = med.mul %g, %c {med.fp32} : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
    %n:3 = med.adamw %p, %cg, %m, %v, %lr, %t {med.fp32} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
    %d = med.sub %n#0, %e {med.fp32} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %s = med.mul %d, %k {med.fp32} : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
    %u = med.add %e, %s {med.fp32} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    med.assign @m, %n#1 : tensor<4x3xf32>
    med.assign @v, %n#2 : tensor<4x3xf32>
    med.assign @p, %n#0 : tensor<4x3xf32>
    med.assign @e, %u : tensor<4x3xf32>
    return
  }
}

// -----

// A result read before the consumer by another op cannot escape: the consumer would define
// it too late. The producer stays outside.
// CHECK-LABEL: func.func @early_use
// CHECK: %[[E:.*]] = med.exp
// CHECK-NEXT: %[[R:.*]] = med.reduce
// CHECK-NEXT: %[[N:.*]] = med.neg %[[E]]
func.func @early_use(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %e = med.exp %x : tensor<4xf32>
  %r = med.reduce sum %e {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  %n = med.neg %e : tensor<4xf32>
  return %n, %r : tensor<4xf32>, tensor<f32>
}

// -----

// Random numbers (generate access) join the fusion of the ops that read them: a per-sample
// parameter drawn and scaled into its range, and noise added to a volume. The draws' shape
// operand (%v, another shape) is an input the kernel does not read; the noise's (%x) is read
// by the add too.
// CHECK-LABEL: func.func @draws
// CHECK: med.fusion "elementwise"(%arg1, %arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: med.constant
// CHECK-NEXT: med.constant
// CHECK-NEXT: med.random
// CHECK-NEXT: med.mul
// CHECK-NEXT: med.add
// CHECK-NEXT: med.yield
// CHECK: med.fusion "elementwise"(%arg1, %arg2)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: med.constant
// CHECK-NEXT: med.random
// CHECK-NEXT: med.mul
// CHECK-NEXT: med.add
// CHECK-NEXT: med.yield
func.func @draws(%v: tensor<2x1x9x9x9xf32>, %key: tensor<i64>, %x: tensor<2x1x4x4x4xf32>) -> (tensor<2x3xf32>, tensor<2x1x4x4x4xf32>) {
  %w = med.constant dense<0.4> : tensor<f32>
  %lo = med.constant dense<0.8> : tensor<f32>
  %u = med.random %key, %v {stream = 1 : i64, sample_shape = array<i64: 3>} : (tensor<i64>, tensor<2x1x9x9x9xf32>) -> tensor<2x3xf32>
  %s = med.mul %u, %w : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %p = med.add %s, %lo : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %r = med.random %key, %x {stream = 2 : i64, distribution = #med<distribution normal>} : (tensor<i64>, tensor<2x1x4x4x4xf32>) -> tensor<2x1x4x4x4xf32>
  %n = med.mul %r, %w : (tensor<2x1x4x4x4xf32>, tensor<f32>) -> tensor<2x1x4x4x4xf32>
  %y = med.add %x, %n : (tensor<2x1x4x4x4xf32>, tensor<2x1x4x4x4xf32>) -> tensor<2x1x4x4x4xf32>
  return %p, %y : tensor<2x3xf32>, tensor<2x1x4x4x4xf32>
}

// -----

// Scalar f32 constants the group reads are copied into the body: literals in the kernel,
// no inputs. One that another op still reads stays for it; a constant of another shape
// (stored as an activation under mixed precision) stays an input.
// CHECK-LABEL: func.func @literals
// CHECK: %[[K:.*]] = med.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[B:.*]] = med.constant dense<1.000000e+00> : tensor<1x4xf32>
// CHECK: med.fusion "elementwise"(%arg0, %[[B]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: med.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: med.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NEXT: med.mul
// CHECK-NEXT: med.add
// CHECK-NEXT: med.sub
// CHECK-NEXT: med.yield
// CHECK-NOT: dense<3.000000e+00>
// CHECK: med.reduce sum %[[K]]
func.func @literals(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<f32>) {
  %k = med.constant dense<2.0> : tensor<f32>
  %c = med.constant dense<3.0> : tensor<f32>
  %b = med.constant dense<1.0> : tensor<1x4xf32>
  %0 = med.mul %x, %k : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %1 = med.add %0, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %2 = med.sub %1, %b : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %r = med.reduce sum %k {axes = array<i64>} : (tensor<f32>) -> tensor<f32>
  return %2, %r : tensor<2x4xf32>, tensor<f32>
}
