// RUN: med-opt %s --split-input-file --canonicalize | FileCheck %s
// The folds `canonicalize` applies at the head of medc's pipeline (lib/IR/MedFolds.cpp).
// What a program computes before and after: canonicalize-run.test.

// A zero gradient (med-autodiff's for a parameter that does not influence the loss) through
// clipping and the gradient norm: its clipped value is zeros, its square sums to zero, and
// adding that to the norm is the norm.
// CHECK-LABEL: func.func @zero_gradient
// CHECK-SAME: (%[[S:.*]]: tensor<f32>, %[[N:.*]]: tensor<f32>)
// CHECK-NEXT: %[[Z:.*]] = med.constant dense<0.000000e+00> : tensor<4x3xf32>
// CHECK-NEXT: return %[[Z]], %[[N]]
func.func @zero_gradient(%s: tensor<f32>, %n: tensor<f32>) -> (tensor<4x3xf32>, tensor<f32>) {
  %g = med.constant dense<0.0> : tensor<4x3xf32>
  %clipped = med.mul %g, %s : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %sq = med.mul %g, %g : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %sum = med.reduce sum %sq {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
  %norm = med.add %n, %sum : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %clipped, %norm : tensor<4x3xf32>, tensor<f32>
}

// -----

// Identities on either side, and zeros broadcast from a scalar (x · 0 takes the result's
// shape).
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>)
// CHECK-NEXT: %[[Z:.*]] = med.constant dense<0.000000e+00> : tensor<4x3xf32>
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[Z]], %[[Z]]
func.func @identities(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %zero = med.constant dense<0.0> : tensor<f32>
  %one = med.constant dense<1.0> : tensor<f32>
  %ones = med.constant dense<1.0> : tensor<1x3xf32>
  %0 = med.add %x, %zero : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %1 = med.add %zero, %x : (tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %2 = med.sub %x, %zero : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %3 = med.mul %x, %one : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %4 = med.mul %ones, %x : (tensor<1x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %5 = med.div %x, %one : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %6 = med.mul %x, %zero : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %7 = med.mul %zero, %x : (tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// What must stay: an identity that would change the shape (the result broadcasts x), 0 − x,
// 1 / x, 0 / x (NaN at x = 0), x · 2, and a constant that is not one splat value.
// CHECK-LABEL: func.func @kept
// CHECK: med.add %{{.*}}, %{{.*}} : (tensor<1x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK: med.sub
// CHECK: med.div
// CHECK: med.div
// CHECK: med.mul
// CHECK: med.add %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: return
func.func @kept(%x: tensor<1x3xf32>, %y: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %zeros = med.constant dense<0.0> : tensor<4x3xf32>
  %zero = med.constant dense<0.0> : tensor<f32>
  %one = med.constant dense<1.0> : tensor<f32>
  %two = med.constant dense<2.0> : tensor<f32>
  %mixed = med.constant dense<[0.0, 1.0, 0.0]> : tensor<3xf32>
  %0 = med.add %x, %zeros : (tensor<1x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = med.sub %zero, %y : (tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %2 = med.div %one, %y : (tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %3 = med.div %zero, %y : (tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %4 = med.mul %y, %two : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %5 = med.add %y, %mixed : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Reductions of zeros, of every kind, are zeros of the result's shape.
// CHECK-LABEL: func.func @reduce_zeros
// CHECK-DAG: %[[A:.*]] = med.constant dense<0.000000e+00> : tensor<f32>
// CHECK-DAG: %[[B:.*]] = med.constant dense<0.000000e+00> : tensor<4x1xf32>
// CHECK-DAG: %[[C:.*]] = med.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %[[A]], %[[B]], %[[C]], %[[C]]
func.func @reduce_zeros() -> (tensor<f32>, tensor<4x1xf32>, tensor<3xf32>, tensor<3xf32>) {
  %z = med.constant dense<0.0> : tensor<4x3xf32>
  %0 = med.reduce sum %z {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
  %1 = med.reduce mean %z {axes = array<i64: 1>, keepdims} : (tensor<4x3xf32>) -> tensor<4x1xf32>
  %2 = med.reduce max %z {axes = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<3xf32>
  %3 = med.reduce min %z {axes = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<3xf32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<4x1xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Shape chains: a reshape or broadcast to its own type is its input, two in a row are one,
// and either of a splat constant is a constant.
// CHECK-LABEL: func.func @shape_chains
// CHECK-SAME: (%[[X:.*]]: tensor<2x6xf32>, %[[B:.*]]: tensor<3xf32>)
// CHECK-DAG: %[[C:.*]] = med.constant dense<5.000000e-01> : tensor<2x3x4xf32>
// CHECK-DAG: %[[R:.*]] = med.reshape %[[X]] {shape = array<i64: 3, 4>} : (tensor<2x6xf32>) -> tensor<3x4xf32>
// CHECK-DAG: %[[BB:.*]] = med.broadcast %[[B]] {shape = array<i64: 2, 4, 3>} : (tensor<3xf32>) -> tensor<2x4x3xf32>
// CHECK: return %[[X]], %[[R]], %[[B]], %[[BB]], %[[C]]
func.func @shape_chains(%x: tensor<2x6xf32>, %b: tensor<3xf32>) -> (tensor<2x6xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<2x4x3xf32>, tensor<2x3x4xf32>) {
  %0 = med.reshape %x {shape = array<i64: 2, 6>} : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %1 = med.reshape %x {shape = array<i64: 12>} : (tensor<2x6xf32>) -> tensor<12xf32>
  %2 = med.reshape %1 {shape = array<i64: 3, 4>} : (tensor<12xf32>) -> tensor<3x4xf32>
  %3 = med.broadcast %b {shape = array<i64: 3>} : (tensor<3xf32>) -> tensor<3xf32>
  %4 = med.broadcast %b {shape = array<i64: 4, 3>} : (tensor<3xf32>) -> tensor<4x3xf32>
  %5 = med.broadcast %4 {shape = array<i64: 2, 4, 3>} : (tensor<4x3xf32>) -> tensor<2x4x3xf32>
  %h = med.constant dense<0.5> : tensor<1x3x1xf32>
  %6 = med.broadcast %h {shape = array<i64: 2, 3, 4>} : (tensor<1x3x1xf32>) -> tensor<2x3x4xf32>
  return %0, %2, %3, %5, %6 : tensor<2x6xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<2x4x3xf32>, tensor<2x3x4xf32>
}
