// RUN: med-opt %s --pass-pipeline='builtin.module(func.func(med-form-reduce-fusions))' --split-input-file | FileCheck %s

// A contrast transform's statistics: the mean, minimum and maximum of each channel's volume
// become one fusion at the first of them; the sum over other axes and the reduction of
// another value stay alone.
// CHECK-LABEL: func.func @contrast
// CHECK:      %[[F:.*]]:3 = med.fusion "reduce"(%arg0) :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   %[[A:.*]] = med.reduce mean
// CHECK-NEXT:   %[[B:.*]] = med.reduce min
// CHECK-NEXT:   %[[C:.*]] = med.reduce max
// CHECK-NEXT:   med.yield %[[A]], %[[B]], %[[C]]
// CHECK:      med.sub %arg0, %[[F]]#0
// CHECK:      med.reduce sum %arg0 {axes = array<i64: 1, 2, 3, 4>, keepdims}
// CHECK:      med.reduce max %arg1
// CHECK:      med.max
// CHECK:      med.min
func.func @contrast(%x: tensor<2x1x6x5x4xf32>, %y: tensor<2x1x6x5x4xf32>) -> (tensor<2x1x6x5x4xf32>, tensor<2x1x1x1x1xf32>, tensor<2x1x1x1x1xf32>) {
  %mean = med.reduce mean %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x1x6x5x4xf32>) -> tensor<2x1x1x1x1xf32>
  %d = med.sub %x, %mean : (tensor<2x1x6x5x4xf32>, tensor<2x1x1x1x1xf32>) -> tensor<2x1x6x5x4xf32>
  %s = med.reduce sum %x {axes = array<i64: 1, 2, 3, 4>, keepdims} : (tensor<2x1x6x5x4xf32>) -> tensor<2x1x1x1x1xf32>
  %lo = med.reduce min %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x1x6x5x4xf32>) -> tensor<2x1x1x1x1xf32>
  %o = med.reduce max %y {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x1x6x5x4xf32>) -> tensor<2x1x1x1x1xf32>
  %hi = med.reduce max %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x1x6x5x4xf32>) -> tensor<2x1x1x1x1xf32>
  %m = med.max %d, %lo : (tensor<2x1x6x5x4xf32>, tensor<2x1x1x1x1xf32>) -> tensor<2x1x6x5x4xf32>
  %c = med.min %m, %hi : (tensor<2x1x6x5x4xf32>, tensor<2x1x1x1x1xf32>) -> tensor<2x1x6x5x4xf32>
  return %c, %s, %o : tensor<2x1x6x5x4xf32>, tensor<2x1x1x1x1xf32>, tensor<2x1x1x1x1xf32>
}

// -----

// Not taken: the innermost axis kept (no split sum), precision marks that differ.
// CHECK-LABEL: func.func @alone
// CHECK-NOT:  med.fusion
func.func @alone(%x: tensor<3x5x7xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>, tensor<3xf32>, tensor<3xf32>) {
  %a = med.reduce sum %x {axes = array<i64: 0>} : (tensor<3x5x7xf32>) -> tensor<5x7xf32>
  %b = med.reduce max %x {axes = array<i64: 0>} : (tensor<3x5x7xf32>) -> tensor<5x7xf32>
  %c = med.reduce sum %x {axes = array<i64: 1, 2>} : (tensor<3x5x7xf32>) -> tensor<3xf32>
  %d = med.reduce max %x {axes = array<i64: 1, 2>, med.fp32} : (tensor<3x5x7xf32>) -> tensor<3xf32>
  return %a, %b, %c, %d : tensor<5x7xf32>, tensor<5x7xf32>, tensor<3xf32>, tensor<3xf32>
}
