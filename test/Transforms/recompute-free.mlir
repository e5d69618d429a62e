// RUN: med-opt %s --split-input-file --med-recompute | FileCheck %s
// RUN: med-opt %s --split-input-file --med-recompute --test-med-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: med-opt %s --split-input-file --test-med-print-memory-plan -o /dev/null | FileCheck %s --check-prefix=BEFORE

// Without a budget, med-recompute recomputes only what costs no memory: a value live across
// the peak that can be computed from values live across it anyway. Here the fusion yields
// the pre-activation h (read again by the gradient at the end) and g = gelu(h), read before
// the peak (steps 1-3) and after it: g's slice of the fusion's body, cut at h, is copied
// before g's reader after the peak, and g dies there. The planned arena falls from five
// values to four.
// CHECK-LABEL: func.func @free
// CHECK: %[[F:.*]]:2 = med.fusion "elementwise"
// CHECK: med.add
// CHECK: med.gelu
// CHECK: %[[A:.*]] = med.mul %[[F]]#1, %[[F]]#1
// CHECK: %[[G:.*]] = med.fusion "elementwise"(%[[F]]#0) : (tensor<4096xf32>) -> tensor<4096xf32>
// CHECK-NEXT: ^bb0(%[[H:.*]]: tensor<4096xf32>):
// CHECK-NEXT: %[[G1:.*]] = med.gelu %[[H]]
// CHECK-NEXT: med.yield %[[G1]]
// CHECK: %[[E:.*]] = med.add %{{.*}}, %[[G]]
// CHECK: med.gelu_grad %[[F]]#0, %[[E]]
// PLAN-LABEL: memory plan @free
// PLAN: arena = 65536, resident = 0
// BEFORE-LABEL: memory plan @free
// BEFORE: arena = 81920, resident = 0
func.func @free(%x: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<4096xf32> {
  %f:2 = med.fusion "elementwise"(%x, %b) : (tensor<4096xf32>, tensor<4096xf32>) -> (tensor<4096xf32>, tensor<4096xf32>) {
  ^bb0(%p: tensor<4096xf32>, %q: tensor<4096xf32>):
    %h = med.add %p, %q : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %g = med.gelu %h : tensor<4096xf32>
    med.yield %h, %g : tensor<4096xf32>, tensor<4096xf32>
  }
  %a = med.mul %f#1, %f#1 : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %c = med.exp %a : tensor<4096xf32>
  %d = med.add %c, %a : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %e = med.add %d, %f#1 : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %r = med.gelu_grad %f#0, %e : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}

// -----

// Negative control: nothing reads h after the peak, so recomputing g would keep h alive
// in its place; no copy is made and the plan stays.
// CHECK-LABEL: func.func @not_free
// CHECK-NOT: med.fusion "elementwise"(%{{.*}}#0)
// CHECK: return
// PLAN-LABEL: memory plan @not_free
// PLAN: arena = 65536, resident = 0
// BEFORE-LABEL: memory plan @not_free
// BEFORE: arena = 65536, resident = 0
func.func @not_free(%x: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<4096xf32> {
  %f:2 = med.fusion "elementwise"(%x, %b) : (tensor<4096xf32>, tensor<4096xf32>) -> (tensor<4096xf32>, tensor<4096xf32>) {
  ^bb0(%p: tensor<4096xf32>, %q: tensor<4096xf32>):
    %h = med.add %p, %q : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %g = med.gelu %h : tensor<4096xf32>
    med.yield %h, %g : tensor<4096xf32>, tensor<4096xf32>
  }
  %a = med.mul %f#1, %f#0 : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %c = med.exp %a : tensor<4096xf32>
  %d = med.add %c, %a : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %e = med.add %d, %f#1 : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  return %e : tensor<4096xf32>
}
