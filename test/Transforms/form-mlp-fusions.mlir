// RUN: med-opt %s --med-form-mlp-fusions --split-input-file | FileCheck %s
// A second run finds nothing more (it does not look inside fusions).
// RUN: med-opt %s --med-form-mlp-fusions --med-form-mlp-fusions --split-input-file | FileCheck %s
// Bounds on the blocks' sizes (medc --mlp-fusions one-kernel): inclusive, so 7 channels and
// 11 expanded fuse every block here as above; one channel or one expanded channel fewer
// fuses none (every block has 5 input channels and 11 expanded; one has 7 outputs).
// RUN: med-opt %s --med-form-mlp-fusions="max-channels=7 max-expanded=11" --split-input-file | FileCheck %s
// RUN: med-opt %s --med-form-mlp-fusions="max-channels=4 max-expanded=11" --split-input-file | FileCheck %s --check-prefix=BOUNDED
// RUN: med-opt %s --med-form-mlp-fusions="max-channels=7 max-expanded=10" --split-input-file | FileCheck %s --check-prefix=BOUNDED
// BOUNDED-NOT: med.fusion

// A block's MLP and its gradients (as med-autodiff builds them) under bf16-mixed: the
// backward ops that read the expansion %h or its GELU %g become one mlp_grad fusion at the
// first of them, recomputing %h and %g; the forward chain with the residual add becomes an
// mlp fusion yielding the block's output alone. db2 (the reduction of dy) stays outside.

// CHECK-LABEL: func.func @block
// CHECK:       %[[Y:.*]] = med.fusion "mlp"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5)
// CHECK-SAME:    {roles = {activation = 1 : i64, compress = 2 : i64, epilogue = 3 : i64, expand = 0 : i64}}
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<2x5x3x4x5xf32>, %[[W1:.*]]: tensor<11x5x1x1x1xf32>, %[[B1:.*]]: tensor<11xf32>, %[[W2:.*]]: tensor<5x11x1x1x1xf32>, %[[B2:.*]]: tensor<5xf32>, %[[R:.*]]: tensor<2x5x3x4x5xf32>):
// CHECK-NEXT:    %[[H:.*]] = med.conv3d %[[X]], %[[W1]], %[[B1]]
// CHECK-NEXT:    %[[G:.*]] = med.gelu %[[H]]
// CHECK-NEXT:    %[[M:.*]] = med.conv3d %[[G]], %[[W2]], %[[B2]]
// CHECK-NEXT:    %[[S:.*]] = med.add %[[R]], %[[M]]
// CHECK-NEXT:    med.yield %[[S]]
// CHECK:       %[[GR:.*]]:4 = med.fusion "mlp_grad"(%arg0, %arg1, %arg2, %arg6, %arg3)
// CHECK-SAME:    {roles = {activation = 1 : i64, db1 = 7 : i64, dg = 2 : i64, dh = 4 : i64, dw1 = 6 : i64, dw2 = 3 : i64, dx = 5 : i64, expand = 0 : i64}}
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<2x5x3x4x5xf32>, %[[W1:.*]]: tensor<11x5x1x1x1xf32>, %[[B1:.*]]: tensor<11xf32>, %[[DY:.*]]: tensor<2x5x3x4x5xf32>, %[[W2:.*]]: tensor<5x11x1x1x1xf32>):
// CHECK-NEXT:    %[[H:.*]] = med.conv3d %[[X]], %[[W1]], %[[B1]]
// CHECK-NEXT:    %[[G:.*]] = med.gelu %[[H]]
// CHECK-NEXT:    %[[DG:.*]] = med.conv3d_transpose %[[DY]], %[[W2]]
// CHECK-NEXT:    %[[DW2:.*]] = med.conv3d_grad_weight %[[G]], %[[DY]]
// CHECK-NEXT:    %[[DH:.*]] = med.gelu_grad %[[H]], %[[DG]]
// CHECK-NEXT:    %[[DX:.*]] = med.conv3d_transpose %[[DH]], %[[W1]]
// CHECK-NEXT:    %[[DW1:.*]] = med.conv3d_grad_weight %[[X]], %[[DH]]
// CHECK-NEXT:    %[[DB1:.*]] = med.reduce sum %[[DH]]
// CHECK-NEXT:    med.yield %[[DW2]], %[[DX]], %[[DW1]], %[[DB1]]
// CHECK:       %[[DB2:.*]] = med.reduce sum %arg6
// CHECK:       return %[[Y]], %[[GR]]#1, %[[GR]]#2, %[[GR]]#3, %[[GR]]#0, %[[DB2]]
func.func @block(%x: tensor<2x5x3x4x5xf32>, %w1: tensor<11x5x1x1x1xf32>, %b1: tensor<11xf32>,
                 %w2: tensor<5x11x1x1x1xf32>, %b2: tensor<5xf32>, %r: tensor<2x5x3x4x5xf32>,
                 %dy: tensor<2x5x3x4x5xf32>)
    -> (tensor<2x5x3x4x5xf32>, tensor<2x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>, tensor<11xf32>,
        tensor<5x11x1x1x1xf32>, tensor<5xf32>) attributes {med.precision = "bf16-mixed"} {
  %h = med.conv3d %x, %w1, %b1 : (tensor<2x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>, tensor<11xf32>) -> tensor<2x11x3x4x5xf32>
  %g = med.gelu %h : tensor<2x11x3x4x5xf32>
  %m = med.conv3d %g, %w2, %b2 : (tensor<2x11x3x4x5xf32>, tensor<5x11x1x1x1xf32>, tensor<5xf32>) -> tensor<2x5x3x4x5xf32>
  %y = med.add %r, %m : (tensor<2x5x3x4x5xf32>, tensor<2x5x3x4x5xf32>) -> tensor<2x5x3x4x5xf32>
  %dg = med.conv3d_transpose %dy, %w2 : (tensor<2x5x3x4x5xf32>, tensor<5x11x1x1x1xf32>) -> tensor<2x11x3x4x5xf32>
  %dw2 = med.conv3d_grad_weight %g, %dy {kernel = array<i64: 1, 1, 1>} : (tensor<2x11x3x4x5xf32>, tensor<2x5x3x4x5xf32>) -> tensor<5x11x1x1x1xf32>
  %db2 = med.reduce sum %dy {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x5x3x4x5xf32>) -> tensor<5xf32>
  %dh = med.gelu_grad %h, %dg : (tensor<2x11x3x4x5xf32>, tensor<2x11x3x4x5xf32>) -> tensor<2x11x3x4x5xf32>
  %dx = med.conv3d_transpose %dh, %w1 : (tensor<2x11x3x4x5xf32>, tensor<11x5x1x1x1xf32>) -> tensor<2x5x3x4x5xf32>
  %dw1 = med.conv3d_grad_weight %x, %dh {kernel = array<i64: 1, 1, 1>} : (tensor<2x5x3x4x5xf32>, tensor<2x11x3x4x5xf32>) -> tensor<11x5x1x1x1xf32>
  %db1 = med.reduce sum %dh {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x11x3x4x5xf32>) -> tensor<11xf32>
  return %y, %dx, %dw1, %db1, %dw2, %db2 : tensor<2x5x3x4x5xf32>, tensor<2x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>, tensor<11xf32>, tensor<5x11x1x1x1xf32>, tensor<5xf32>
}

// -----

// Without a backward (inference) the chain becomes an mlp fusion; a compression whose
// result is read twice keeps its epilogue outside.

// CHECK-LABEL: func.func @forward_only
// CHECK:       %[[M:.*]] = med.fusion "mlp"(%arg0, %arg1, %arg2, %arg3, %arg4)
// CHECK-SAME:    {roles = {activation = 1 : i64, compress = 2 : i64, expand = 0 : i64}}
// CHECK:         med.conv3d
// CHECK-NEXT:    med.gelu
// CHECK-NEXT:    med.conv3d
// CHECK-NEXT:    med.yield
// CHECK:       med.add %[[M]], %[[M]]
func.func @forward_only(%x: tensor<1x5x3x4x5xf32>, %w1: tensor<11x5x1x1x1xf32>, %b1: tensor<11xf32>,
                        %w2: tensor<7x11x1x1x1xf32>, %b2: tensor<7xf32>) -> tensor<1x7x3x4x5xf32>
    attributes {med.precision = "fp16-mixed"} {
  %h = med.conv3d %x, %w1, %b1 : (tensor<1x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>, tensor<11xf32>) -> tensor<1x11x3x4x5xf32>
  %g = med.gelu %h : tensor<1x11x3x4x5xf32>
  %m = med.conv3d %g, %w2, %b2 : (tensor<1x11x3x4x5xf32>, tensor<7x11x1x1x1xf32>, tensor<7xf32>) -> tensor<1x7x3x4x5xf32>
  %y = med.add %m, %m : (tensor<1x7x3x4x5xf32>, tensor<1x7x3x4x5xf32>) -> tensor<1x7x3x4x5xf32>
  return %y : tensor<1x7x3x4x5xf32>
}

// -----

// Left alone: an f32 function (the template multiplies 16-bit operands); a GELU read by
// another op than the block's own gradient; a strided compression (no contraction).

// CHECK-LABEL: func.func @fp32
// CHECK-NOT:   med.fusion
func.func @fp32(%x: tensor<1x5x3x4x5xf32>, %w1: tensor<11x5x1x1x1xf32>,
                %w2: tensor<5x11x1x1x1xf32>) -> tensor<1x5x3x4x5xf32> {
  %h = med.conv3d %x, %w1 : (tensor<1x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>) -> tensor<1x11x3x4x5xf32>
  %g = med.gelu %h : tensor<1x11x3x4x5xf32>
  %m = med.conv3d %g, %w2 : (tensor<1x11x3x4x5xf32>, tensor<5x11x1x1x1xf32>) -> tensor<1x5x3x4x5xf32>
  return %m : tensor<1x5x3x4x5xf32>
}

// CHECK-LABEL: func.func @gelu_read_elsewhere
// CHECK-NOT:   med.fusion
func.func @gelu_read_elsewhere(%x: tensor<1x5x3x4x5xf32>, %w1: tensor<11x5x1x1x1xf32>,
                               %w2: tensor<5x11x1x1x1xf32>) -> (tensor<1x5x3x4x5xf32>, tensor<1x11x3x4x5xf32>)
    attributes {med.precision = "bf16-mixed"} {
  %h = med.conv3d %x, %w1 : (tensor<1x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>) -> tensor<1x11x3x4x5xf32>
  %g = med.gelu %h : tensor<1x11x3x4x5xf32>
  %m = med.conv3d %g, %w2 : (tensor<1x11x3x4x5xf32>, tensor<5x11x1x1x1xf32>) -> tensor<1x5x3x4x5xf32>
  %e = med.exp %g : tensor<1x11x3x4x5xf32>
  return %m, %e : tensor<1x5x3x4x5xf32>, tensor<1x11x3x4x5xf32>
}

// CHECK-LABEL: func.func @strided
// CHECK-NOT:   med.fusion
func.func @strided(%x: tensor<1x5x4x4x4xf32>, %w1: tensor<11x5x1x1x1xf32>,
                   %w2: tensor<5x11x1x1x1xf32>) -> tensor<1x5x2x2x2xf32>
    attributes {med.precision = "bf16-mixed"} {
  %h = med.conv3d %x, %w1 : (tensor<1x5x4x4x4xf32>, tensor<11x5x1x1x1xf32>) -> tensor<1x11x4x4x4xf32>
  %g = med.gelu %h : tensor<1x11x4x4x4xf32>
  %m = med.conv3d %g, %w2 {stride = array<i64: 2, 2, 2>} : (tensor<1x11x4x4x4xf32>, tensor<5x11x1x1x1xf32>) -> tensor<1x5x2x2x2xf32>
  return %m : tensor<1x5x2x2x2xf32>
}

// CHECK-LABEL: func.func @too_wide
// CHECK-NOT:   med.fusion
func.func @too_wide(%x: tensor<1x136x2x2x2xf32>, %w1: tensor<272x136x1x1x1xf32>,
                    %w2: tensor<136x272x1x1x1xf32>) -> tensor<1x136x2x2x2xf32>
    attributes {med.precision = "bf16-mixed"} {
  %h = med.conv3d %x, %w1 : (tensor<1x136x2x2x2xf32>, tensor<272x136x1x1x1xf32>) -> tensor<1x272x2x2x2xf32>
  %g = med.gelu %h : tensor<1x272x2x2x2xf32>
  %m = med.conv3d %g, %w2 : (tensor<1x272x2x2x2xf32>, tensor<136x272x1x1x1xf32>) -> tensor<1x136x2x2x2xf32>
  return %m : tensor<1x136x2x2x2xf32>
}

// An activation with attributes (leaky_relu's slope) is left alone: the template composes
// the activation's scalar form from its input only. ReLU, which has none, is fused.
// CHECK-LABEL: func.func @leaky_relu_act
// CHECK-NOT:   med.fusion
func.func @leaky_relu_act(%x: tensor<1x5x3x4x5xf32>, %w1: tensor<11x5x1x1x1xf32>,
                          %w2: tensor<5x11x1x1x1xf32>) -> tensor<1x5x3x4x5xf32>
    attributes {med.precision = "bf16-mixed"} {
  %h = med.conv3d %x, %w1 : (tensor<1x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>) -> tensor<1x11x3x4x5xf32>
  %g = med.leaky_relu %h : tensor<1x11x3x4x5xf32>
  %m = med.conv3d %g, %w2 : (tensor<1x11x3x4x5xf32>, tensor<5x11x1x1x1xf32>) -> tensor<1x5x3x4x5xf32>
  return %m : tensor<1x5x3x4x5xf32>
}

// CHECK-LABEL: func.func @relu_act
// CHECK:       med.fusion "mlp"
func.func @relu_act(%x: tensor<1x5x3x4x5xf32>, %w1: tensor<11x5x1x1x1xf32>,
                    %w2: tensor<5x11x1x1x1xf32>) -> tensor<1x5x3x4x5xf32>
    attributes {med.precision = "bf16-mixed"} {
  %h = med.conv3d %x, %w1 : (tensor<1x5x3x4x5xf32>, tensor<11x5x1x1x1xf32>) -> tensor<1x11x3x4x5xf32>
  %g = med.relu %h : tensor<1x11x3x4x5xf32>
  %m = med.conv3d %g, %w2 : (tensor<1x11x3x4x5xf32>, tensor<5x11x1x1x1xf32>) -> tensor<1x5x3x4x5xf32>
  return %m : tensor<1x5x3x4x5xf32>
}
