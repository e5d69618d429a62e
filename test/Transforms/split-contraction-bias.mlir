// RUN: med-opt %s --med-split-contraction-bias --split-input-file | FileCheck %s
// A second run finds nothing more: the convolutions have no bias left.
// RUN: med-opt %s --med-split-contraction-bias --med-split-contraction-bias --split-input-file | FileCheck %s

// A block's MLP: the expansion's bias moves into an add before the GELU (and its
// gradient), the compression's into an add before the residual add.

// CHECK-LABEL: func.func @block
// CHECK:       %[[H:.*]] = med.conv3d %arg0, %arg1 :
// CHECK-NEXT:  %[[B1:.*]] = med.reshape %arg2 {shape = array<i64: 12, 1, 1, 1>}
// CHECK-NEXT:  %[[HB:.*]] = med.add %[[H]], %[[B1]] : (tensor<2x12x3x5x4xf32>, tensor<12x1x1x1xf32>)
// CHECK-NEXT:  %[[G:.*]] = med.gelu %[[HB]]
// CHECK-NEXT:  %[[Y:.*]] = med.conv3d %[[G]], %arg3 :
// CHECK-NEXT:  %[[B2:.*]] = med.reshape %arg4 {shape = array<i64: 4, 1, 1, 1>}
// CHECK-NEXT:  %[[YB:.*]] = med.add %[[Y]], %[[B2]]
// CHECK-NEXT:  %[[R:.*]] = med.add %arg0, %[[YB]]
// CHECK-NEXT:  %[[DH:.*]] = med.gelu_grad %[[HB]], %arg5
// CHECK-NEXT:  return %[[R]], %[[DH]]
func.func @block(%x: tensor<2x4x3x5x4xf32>, %w1: tensor<12x4x1x1x1xf32>, %b1: tensor<12xf32>,
                 %w2: tensor<4x12x1x1x1xf32>, %b2: tensor<4xf32>, %dg: tensor<2x12x3x5x4xf32>)
    -> (tensor<2x4x3x5x4xf32>, tensor<2x12x3x5x4xf32>) {
  %h = med.conv3d %x, %w1, %b1 : (tensor<2x4x3x5x4xf32>, tensor<12x4x1x1x1xf32>, tensor<12xf32>) -> tensor<2x12x3x5x4xf32>
  %g = med.gelu %h : tensor<2x12x3x5x4xf32>
  %y = med.conv3d %g, %w2, %b2 : (tensor<2x12x3x5x4xf32>, tensor<4x12x1x1x1xf32>, tensor<4xf32>) -> tensor<2x4x3x5x4xf32>
  %r = med.add %x, %y : (tensor<2x4x3x5x4xf32>, tensor<2x4x3x5x4xf32>) -> tensor<2x4x3x5x4xf32>
  %dh = med.gelu_grad %h, %dg : (tensor<2x12x3x5x4xf32>, tensor<2x12x3x5x4xf32>) -> tensor<2x12x3x5x4xf32>
  return %r, %dh : tensor<2x4x3x5x4xf32>, tensor<2x12x3x5x4xf32>
}

// -----

// Left alone: a convolution whose result a non-elementwise op reads (a loss, a norm) or the
// function returns, a depthwise or k3 convolution (not a contraction), and one without bias.

// CHECK-LABEL: func.func @kept
// CHECK:       med.conv3d %arg0, %arg1, %arg2 :
// CHECK-NEXT:  med.reduce
// CHECK-NEXT:  med.conv3d %arg0, %arg1, %arg2 :
// CHECK-NEXT:  med.conv3d %arg0, %arg3, %arg4 {padding
// CHECK-NEXT:  med.gelu
// CHECK-NEXT:  med.conv3d %arg0, %arg1 :
// CHECK-NEXT:  med.gelu
// CHECK-NOT:   med.reshape
func.func @kept(%x: tensor<2x4x3x5x4xf32>, %w: tensor<12x4x1x1x1xf32>, %b: tensor<12xf32>,
                %k: tensor<4x4x3x3x3xf32>, %kb: tensor<4xf32>)
    -> (tensor<f32>, tensor<2x12x3x5x4xf32>, tensor<2x4x3x5x4xf32>, tensor<2x12x3x5x4xf32>) {
  %a = med.conv3d %x, %w, %b : (tensor<2x4x3x5x4xf32>, tensor<12x4x1x1x1xf32>, tensor<12xf32>) -> tensor<2x12x3x5x4xf32>
  %s = med.reduce sum %a {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x12x3x5x4xf32>) -> tensor<f32>
  %c = med.conv3d %x, %w, %b : (tensor<2x4x3x5x4xf32>, tensor<12x4x1x1x1xf32>, tensor<12xf32>) -> tensor<2x12x3x5x4xf32>
  %d = med.conv3d %x, %k, %kb {padding = array<i64: 1, 1, 1>} : (tensor<2x4x3x5x4xf32>, tensor<4x4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x3x5x4xf32>
  %e = med.gelu %d : tensor<2x4x3x5x4xf32>
  %f = med.conv3d %x, %w : (tensor<2x4x3x5x4xf32>, tensor<12x4x1x1x1xf32>) -> tensor<2x12x3x5x4xf32>
  %g = med.gelu %f : tensor<2x12x3x5x4xf32>
  return %s, %c, %e, %g : tensor<f32>, tensor<2x12x3x5x4xf32>, tensor<2x4x3x5x4xf32>, tensor<2x12x3x5x4xf32>
}
