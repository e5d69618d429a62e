// RUN: med-opt %s --split-input-file --med-specialize="batch=2 patch=8,6,4" | FileCheck %s
// RUN: med-opt %s --split-input-file --med-specialize="batch=2 patch=8,6,4" --symbol-dce | FileCheck %s --check-prefix=DCE

// Calls are inlined, rank-5 inputs get batch and patch, and every type is re-inferred,
// including the function's results.

med.parameter @"down.weight" : tensor<4x1x3x3x3xf32> init uniform(27)
med.parameter @"up.weight" : tensor<4x1x3x3x3xf32> init uniform(27)

func.func private @down(%x: tensor<?x4x?x?x?xf32>, %w: tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = med.conv3d %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}

func.func private @up(%x: tensor<?x4x?x?x?xf32>, %w: tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = med.conv3d_transpose %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = med.pad %0 {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %1 : tensor<?x4x?x?x?xf32>
}

func.func private @unet(%x: tensor<?x4x?x?x?xf32>, %wd: tensor<4x1x3x3x3xf32>, %wu: tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = call @down(%x, %wd) : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = call @up(%0, %wu) : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %2 = med.add %1, %x : (tensor<?x4x?x?x?xf32>, tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %2 : tensor<?x4x?x?x?xf32>
}

// CHECK-LABEL: func.func @net
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8x6x4xf32>) -> tensor<2x4x8x6x4xf32>
// CHECK-NOT: call
// CHECK: %[[D:.*]] = med.conv3d %[[X]], %{{.*}} {{.*}} -> tensor<2x4x4x3x2xf32>
// CHECK: %[[U:.*]] = med.conv3d_transpose %[[D]], %{{.*}} {{.*}} -> tensor<2x4x7x5x3xf32>
// CHECK: %[[P:.*]] = med.pad %[[U]] {{.*}} -> tensor<2x4x8x6x4xf32>
// CHECK: %[[S:.*]] = med.add %[[P]], %[[X]] : {{.*}} -> tensor<2x4x8x6x4xf32>
// CHECK: return %[[S]] : tensor<2x4x8x6x4xf32>
// DCE-NOT: func.func private
func.func @net(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %wd = med.param @"down.weight" : tensor<4x1x3x3x3xf32>
  %wu = med.param @"up.weight" : tensor<4x1x3x3x3xf32>
  %0 = call @unet(%x, %wd, %wu) : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}

// -----

// Static sizes are kept; arguments of other ranks are left alone.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%{{.*}}: tensor<3x2x5x5x5xf32>, %{{.*}}: tensor<2x2x8x6x4xf32>, %{{.*}}: tensor<2xf32>) -> tensor<f32>
func.func @loss(%x: tensor<3x2x5x5x5xf32>, %y: tensor<?x2x?x?x?xf32>, %pw: tensor<2xf32>) -> tensor<f32> {
  %0 = med.reduce mean %y {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<?x2x?x?x?xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// An entry that calls another entry: both are inlined before any signature changes, in
// either order of definition.
// CHECK-LABEL: func.func @net
// CHECK-SAME: tensor<2x4x8x6x4xf32>
// CHECK-LABEL: func.func @loss
// CHECK-SAME: tensor<2x4x8x6x4xf32>
// CHECK-NOT: call
// CHECK: med.gelu
func.func @net(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = med.gelu %x : tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}
func.func @loss(%x: tensor<?x4x?x?x?xf32>) -> tensor<f32> {
  %0 = call @net(%x) : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = med.reduce sum %0 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<?x4x?x?x?xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
