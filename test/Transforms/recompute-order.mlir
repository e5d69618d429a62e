// RUN: med-opt %s --med-recompute=budget-gib=0.00009 | FileCheck %s --check-prefix=ONE
// RUN: med-opt %s --med-recompute=budget-gib=0.00008 | FileCheck %s --check-prefix=BOTH
// RUN: med-opt %s --med-recompute=budget-gib=0.00008 --test-med-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PLAN

// med-recompute takes the cheapest work per byte freed first. %h (a contraction over 2
// channels: 2 multiply-adds per element) and %g (a GELU: 1 op per element) are both read
// before the peak and after it, and copying either lowers the plan (106496 bytes). Under
// 0.00009 GiB (96636 bytes) one copy is enough: the GELU's (90112 bytes), the contraction
// stays saved. Under 0.00008 GiB (85899 bytes) both are recomputed (73984 bytes).
// ONE-LABEL: func.func @cheapest
// ONE: med.conv3d %arg0, %arg1
// ONE: med.gelu %arg2
// ONE-NOT: med.conv3d
// ONE: med.gelu %arg2
// ONE-NOT: med.conv3d
// BOTH-LABEL: func.func @cheapest
// BOTH: med.conv3d %arg0, %arg1
// BOTH: med.gelu %arg2
// BOTH: med.conv3d %arg0, %arg1
// BOTH: med.gelu %arg2
// PLAN: arena = 73984, resident = 0
func.func @cheapest(%x: tensor<1x2x8x8x16xf32>, %w: tensor<4x2x1x1x1xf32>, %z: tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32> {
  %h = med.conv3d %x, %w : (tensor<1x2x8x8x16xf32>, tensor<4x2x1x1x1xf32>) -> tensor<1x4x8x8x16xf32>
  %g = med.gelu %z : tensor<1x4x8x8x16xf32>
  %a = med.mul %h, %g : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %b = med.gelu %a : tensor<1x4x8x8x16xf32>
  %c = med.add %b, %a : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %d = med.add %c, %h : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %e = med.add %d, %g : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %f = med.add %e, %z : (tensor<1x4x8x8x16xf32>, tensor<1x4x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  %s = med.reduce sum %x {axes = array<i64: 1>, keepdims} : (tensor<1x2x8x8x16xf32>) -> tensor<1x1x8x8x16xf32>
  %r = med.add %f, %s : (tensor<1x4x8x8x16xf32>, tensor<1x1x8x8x16xf32>) -> tensor<1x4x8x8x16xf32>
  return %r : tensor<1x4x8x8x16xf32>
}
