// RUN: med-opt %s --split-input-file --med-shift-sum | FileCheck %s
// RUN: med-opt %s --split-input-file --med-shift-sum --med-autodiff 2>/dev/null | FileCheck %s --check-prefix=GRAD

// Stride-1 depthwise convolutions with odd kernels and padding k/2 become shift-sums, with
// and without bias, k3 and k5 (and any odd size per axis); the values they feed read the
// shift-sums. Attributes the convolution does not define (med.fp32) carry over.
// CHECK-LABEL: func.func @rewritten
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x5x7x9x11xf32>, %[[W3:[^:]*]]: tensor<5x1x3x3x3xf32>, %[[B:[^:]*]]: tensor<5xf32>, %[[W5:[^:]*]]: tensor<5x1x5x5x5xf32>, %[[WM:[^:]*]]: tensor<5x1x1x3x5xf32>)
// CHECK-NEXT: %[[K3:.*]] = med.shift_sum %[[X]], %[[W3]], %[[B]] : (tensor<2x5x7x9x11xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x7x9x11xf32>
// CHECK-NEXT: %[[K5:.*]] = med.shift_sum %[[K3]], %[[W5]] : (tensor<2x5x7x9x11xf32>, tensor<5x1x5x5x5xf32>) -> tensor<2x5x7x9x11xf32>
// CHECK-NEXT: %[[KM:.*]] = med.shift_sum %[[K5]], %[[WM]], %[[B]] {med.fp32} :
// CHECK-NEXT: return %[[K3]], %[[K5]], %[[KM]]
func.func @rewritten(%x: tensor<2x5x7x9x11xf32>, %w3: tensor<5x1x3x3x3xf32>, %b: tensor<5xf32>, %w5: tensor<5x1x5x5x5xf32>, %wm: tensor<5x1x1x3x5xf32>) -> (tensor<2x5x7x9x11xf32>, tensor<2x5x7x9x11xf32>, tensor<2x5x7x9x11xf32>) {
  %0 = med.conv3d %x, %w3, %b {groups = 5 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x5x7x9x11xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x7x9x11xf32>
  %1 = med.conv3d %0, %w5 {groups = 5 : i64, padding = array<i64: 2, 2, 2>} : (tensor<2x5x7x9x11xf32>, tensor<5x1x5x5x5xf32>) -> tensor<2x5x7x9x11xf32>
  %2 = med.conv3d %1, %wm, %b {groups = 5 : i64, padding = array<i64: 0, 1, 2>, med.fp32} : (tensor<2x5x7x9x11xf32>, tensor<5x1x1x3x5xf32>, tensor<5xf32>) -> tensor<2x5x7x9x11xf32>
  return %0, %1, %2 : tensor<2x5x7x9x11xf32>, tensor<2x5x7x9x11xf32>, tensor<2x5x7x9x11xf32>
}

// -----

// Everything else stays: strided (MedNeXt's down blocks), dense, grouped with a channel
// multiplier, an even kernel, padding other than k/2, dilation, and transposed (the up
// blocks).
// CHECK-LABEL: func.func @kept
// CHECK-NOT: med.shift_sum
// CHECK: med.conv3d %{{.*}} {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>}
// CHECK: med.conv3d %{{.*}} {padding = array<i64: 1, 1, 1>}
// CHECK: med.conv3d %{{.*}} {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<8x1x3x3x3xf32>)
// CHECK: med.conv3d %{{.*}} {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x1x2x2x2xf32>)
// CHECK: med.conv3d %{{.*}} {groups = 4 : i64} : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x3x3xf32>)
// CHECK: med.conv3d %{{.*}} {dilation = array<i64: 2, 2, 2>, groups = 4 : i64, padding = array<i64: 1, 1, 1>}
// CHECK: med.conv3d_transpose %{{.*}} {groups = 4 : i64, padding = array<i64: 1, 1, 1>}
// CHECK-NOT: med.shift_sum
// CHECK: return
func.func @kept(%x: tensor<1x4x8x8x8xf32>, %w: tensor<4x1x3x3x3xf32>, %wd: tensor<4x4x3x3x3xf32>, %wx: tensor<8x1x3x3x3xf32>, %we: tensor<4x1x2x2x2xf32>) -> (tensor<1x4x4x4x4xf32>, tensor<1x4x8x8x8xf32>, tensor<1x8x8x8x8xf32>, tensor<1x4x9x9x9xf32>, tensor<1x4x6x6x6xf32>, tensor<1x4x6x6x6xf32>, tensor<1x4x8x8x8xf32>) {
  %0 = med.conv3d %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x4x4x4xf32>
  %1 = med.conv3d %x, %wd {padding = array<i64: 1, 1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x4x3x3x3xf32>) -> tensor<1x4x8x8x8xf32>
  %2 = med.conv3d %x, %wx {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<8x1x3x3x3xf32>) -> tensor<1x8x8x8x8xf32>
  %3 = med.conv3d %x, %we {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x1x2x2x2xf32>) -> tensor<1x4x9x9x9xf32>
  %4 = med.conv3d %x, %w {groups = 4 : i64} : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x6x6x6xf32>
  %5 = med.conv3d %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>, dilation = array<i64: 2, 2, 2>} : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x6x6x6xf32>
  %6 = med.conv3d_transpose %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<1x4x8x8x8xf32>, tensor<4x1x3x3x3xf32>) -> tensor<1x4x8x8x8xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<1x4x4x4x4xf32>, tensor<1x4x8x8x8xf32>, tensor<1x8x8x8x8xf32>, tensor<1x4x9x9x9xf32>, tensor<1x4x6x6x6xf32>, tensor<1x4x6x6x6xf32>, tensor<1x4x8x8x8xf32>
}

// -----

// Rewritten before med-autodiff, the backward pass is built from the shift-sum's rule: the
// input gradient is the mirrored shift-sum of the output gradient (no bias), the weight
// gradient one reduction per tap, the bias gradient a sum over all but the channel axis.
// GRAD-LABEL: func.func @loss_grad
// GRAD-SAME: (%[[X:[^:]*]]: tensor<2x3x5x6x7xf32>, %[[R:[^:]*]]: tensor<2x3x5x6x7xf32>)
// GRAD: %[[W:.*]] = med.param @w : tensor<3x1x5x5x5xf32>
// GRAD: %[[B:.*]] = med.param @b : tensor<3xf32>
// GRAD: med.shift_sum %[[X]], %[[W]], %[[B]] :
// GRAD: med.constant dense<1.000000e+00>
// The loss's gradient reaching the shift-sum: d(sum(y·r))/dy = 1·r.
// GRAD: %[[DY:.*]] = med.mul %{{.*}}, %[[R]]
// GRAD-SAME: tensor<2x3x5x6x7xf32>
// GRAD-DAG: %[[DX:.*]] = med.shift_sum %[[DY]], %[[W]] {mirrored} : (tensor<2x3x5x6x7xf32>, tensor<3x1x5x5x5xf32>) -> tensor<2x3x5x6x7xf32>
// GRAD-DAG: %[[DW:.*]] = med.shift_sum_grad_weight %[[X]], %[[DY]] {kernel = array<i64: 5, 5, 5>} : (tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>) -> tensor<3x1x5x5x5xf32>
// GRAD-DAG: %[[DB:.*]] = med.reduce sum %[[DY]] {axes = array<i64: 0, 2, 3, 4>}
// GRAD-NOT: med.conv3d
// GRAD: return %{{.*}}, %[[DW]], %[[DB]], %[[DX]], %{{.*}} :
module {
  med.parameter @w : tensor<3x1x5x5x5xf32> init uniform(125)
  med.parameter @b : tensor<3xf32> init uniform(125)
  func.func @loss(%x: tensor<2x3x5x6x7xf32>, %r: tensor<2x3x5x6x7xf32>) -> tensor<f32> {
    %w = med.param @w : tensor<3x1x5x5x5xf32>
    %b = med.param @b : tensor<3xf32>
    %0 = med.conv3d %x, %w, %b {groups = 3 : i64, padding = array<i64: 2, 2, 2>} : (tensor<2x3x5x6x7xf32>, tensor<3x1x5x5x5xf32>, tensor<3xf32>) -> tensor<2x3x5x6x7xf32>
    %1 = med.mul %0, %r : (tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>) -> tensor<2x3x5x6x7xf32>
    %2 = med.reduce sum %1 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x5x6x7xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// The gradient of a mirrored shift-sum: its transpose is the plain shift-sum, and its weight
// gradient the tap reduction with input and output gradient swapped.
// GRAD-LABEL: func.func @mirrored_grad
// GRAD-SAME: (%[[X:[^:]*]]: tensor<1x2x5x5x5xf32>, %[[W:[^:]*]]: tensor<2x1x3x3x3xf32>)
// GRAD: %[[ONE:.*]] = med.constant
// GRAD-DAG: med.shift_sum %{{.*}}, %[[W]] : (tensor<1x2x5x5x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x5x5xf32>
// GRAD-DAG: med.shift_sum_grad_weight %{{.*}}, %[[X]] {kernel = array<i64: 3, 3, 3>}
func.func @mirrored(%x: tensor<1x2x5x5x5xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<f32> {
  %0 = med.shift_sum %x, %w {mirrored} : (tensor<1x2x5x5x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x5x5x5xf32>
  %1 = med.reduce sum %0 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x5x5x5xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
