// RUN: med-opt %s --split-input-file --med-recompute=budget-gib=0.000062 | FileCheck %s
// RUN: med-opt %s --split-input-file --med-recompute=budget-gib=0.000062 --test-med-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: not med-opt %s --split-input-file --med-recompute=budget-gib=0.00005 -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIGHT
// RUN: med-opt %s --split-input-file --test-med-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=UNBUDGETED

// Five 16 KiB values are live at the peak (step 3: x, g, a, b, c). g is an elementwise op's
// result read before the peak and again after it, and its input x is live there anyway:
// under a budget of 0.000062 GiB (65011 bytes, four values) med-recompute places a copy of
// the GELU before the reader after the peak, and the original dies before it. The copy of
// b's producer would not help (its input a is read no later), so it is not made.
// CHECK-LABEL: func.func @saved
// CHECK-NEXT: %[[G:.*]] = med.gelu %arg0
// CHECK-NEXT: %[[A:.*]] = med.mul %[[G]], %[[G]]
// CHECK-NEXT: %[[B:.*]] = med.gelu %[[A]]
// CHECK-NEXT: %[[C:.*]] = med.add %[[B]], %[[A]]
// CHECK-NEXT: %[[G2:.*]] = med.gelu %arg0
// CHECK-NEXT: %[[D:.*]] = med.add %[[C]], %[[G2]]
// CHECK-NEXT: %[[E:.*]] = med.add %[[D]], %arg0
// CHECK-NEXT: return %[[E]]
// PLAN: arena = 65536, resident = 0
// UNBUDGETED: arena = 81920, resident = 0
// TIGHT: error: memory budget of 5e-05 GiB (53687 bytes) cannot be met: the best planned peak med-recompute reaches is 65536 bytes (0.00 GiB: arena 65536, resident state 0)
func.func @saved(%x: tensor<4096xf32>) -> tensor<4096xf32> {
  %g = med.gelu %x : tensor<4096xf32>
  %a = med.mul %g, %g : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %b = med.gelu %a : tensor<4096xf32>
  %c = med.add %b, %a : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %d = med.add %c, %g : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %e = med.add %d, %x : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  return %e : tensor<4096xf32>
}
