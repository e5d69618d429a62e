// RUN: med-opt %s --split-input-file --verify-diagnostics --med-recompute=budget-gib=0.00006 | FileCheck %s
// RUN: med-opt %s --split-input-file --verify-diagnostics --med-recompute=budget-gib=0.00006 --test-med-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: med-opt %s --split-input-file --test-med-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=UNBUDGETED

// A contraction (by FusionOpInterface: a 1×1×1 convolution, the expansion of a block MLP)
// is recomputed like an elementwise op. %h (16 KiB) is read before the peak (step 3: %x,
// %h, %a, %b, %c live) and again after it; its input %x is live to the end anyway. Under
// 0.00006 GiB (64424 bytes) med-recompute places a copy of the convolution before the
// reader after the peak: the plan falls from 69632 to 53504 bytes.
// CHECK-LABEL: func.func @expanded
// CHECK-NEXT: %[[H:.*]] = med.conv3d %arg0, %arg1
// CHECK-NEXT: %[[A:.*]] = med.mul %[[H]], %[[H]]
// CHECK-NEXT: %[[B:.*]] = med.gelu %[[A]]
// CHECK-NEXT: %[[C:.*]] = med.add %[[B]], %[[A]]
// CHECK-NEXT: %[[H2:.*]] = med.conv3d %arg0, %arg1
// CHECK-NEXT: %[[D:.*]] = med.add %[[C]], %[[H2]]
// PLAN: memory plan @expanded
// PLAN: arena = 53504, resident = 0
// UNBUDGETED: memory plan @expanded
// UNBUDGETED: arena = 69632, resident = 0
// UNBUDGETED: memory plan @window
// UNBUDGETED: arena = 69632, resident = 0
func.func @expanded(%x: tensor<1x1x8x8x16xf32>, %w: tensor<4x1x1x1x1xf32>) -> tensor<1x4x8x8x16xf32> {
  %h = med.conv3d %x, %w : (tensor<1x1x8x8x16xf32>, tensor<4x1x1x1x1xf32>) -> tensor<1x4x8x8x16xf32>
  %a = med.mul %h, %h : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %b = med.gelu %a : tensor<1x4x8x8x16xf32>
  %c = med.add %b, %a : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %d = med.add %c, %h : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %e = med.add %d, %x : (tensor<1x4x8x8x16xf32>, tensor<1x1x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  return %e : tensor<1x4x8x8x16xf32>
}

// -----

// Negative control: the same program with a 3×3×3 convolution, a window (opaque by
// FusionOpInterface), is not recomputed: the budget cannot be met.
// expected-error @+1 {{memory budget of 6e-05 GiB (64424 bytes) cannot be met: the best planned peak med-recompute reaches is 69632 bytes}}
func.func @window(%x: tensor<1x1x8x8x16xf32>, %w: tensor<4x1x3x3x3xf32>) -> tensor<1x4x8x8x16xf32> {
  %h = med.conv3d %x, %w {padding = array<i64: 1, 1, 1>} : (tensor<1x1x8x8x16xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x8x8x16xf32>
  %a = med.mul %h, %h : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %b = med.gelu %a : tensor<1x4x8x8x16xf32>
  %c = med.add %b, %a : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %d = med.add %c, %h : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %e = med.add %d, %x : (tensor<1x4x8x8x16xf32>, tensor<1x1x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  return %e : tensor<1x4x8x8x16xf32>
}
