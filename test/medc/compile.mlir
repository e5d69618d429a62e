// RUN: medc compile %s --batch 3 --patch 5,5,5 | FileCheck %s
// RUN: medc compile %s --patch 4,4,4 -o %t.mlir && med-opt %t.mlir | FileCheck %s --check-prefix=FILE

// The pipeline so far: inline the blocks, fix batch and patch, drop unused functions.

// CHECK-NOT: func.func private @act
// CHECK-LABEL: func.func @net
// CHECK-SAME: tensor<3x4x5x5x5xf32>
// CHECK: med.sigmoid %{{.*}} : tensor<3x4x5x5x5xf32>
// FILE: func.func @net(%{{.*}}: tensor<1x4x4x4x4xf32>) -> tensor<1x4x4x4x4xf32>

func.func private @act(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = med.sigmoid %x : tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}

func.func @net(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = call @act(%x) : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}
