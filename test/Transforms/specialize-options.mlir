// RUN: not med-opt %s --med-specialize="entry=missing" 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: not med-opt %s --med-specialize="patch=8,8" 2>&1 | FileCheck %s --check-prefix=PATCH
// RUN: not med-opt %s --med-specialize="batch=-2" 2>&1 | FileCheck %s --check-prefix=SIZES
// RUN: med-opt %s --med-specialize="entry=second patch=4,4,4" | FileCheck %s
// RUN: med-opt %s --med-specialize="patch=4,4,4" | FileCheck %s --check-prefix=ALL

// ENTRY: error: med-specialize: no function @missing with a body
// PATCH: error: med-specialize: patch needs 3 sizes (D,H,W), got 2
// SIZES: error: med-specialize: batch and patch sizes must be positive

// CHECK-LABEL: func.func @first
// CHECK-SAME: tensor<?x1x?x?x?xf32>
func.func @first(%x: tensor<?x1x?x?x?xf32>) -> tensor<?x1x?x?x?xf32> {
  return %x : tensor<?x1x?x?x?xf32>
}
// CHECK-LABEL: func.func @second
// CHECK-SAME: tensor<?x1x4x4x4xf32>
func.func @second(%x: tensor<?x1x?x?x?xf32>) -> tensor<?x1x?x?x?xf32> {
  return %x : tensor<?x1x?x?x?xf32>
}

// ALL-LABEL: func.func @first
// ALL-SAME: tensor<?x1x4x4x4xf32>
// ALL-LABEL: func.func @second
// ALL-SAME: tensor<?x1x4x4x4xf32>
