// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 3 | FileCheck %s
// RUN: medc compile %s --grad -o %t-grad.medc
// RUN: medcheck %t-grad.medc --grad | FileCheck %s --check-prefix=GRAD
// RUN: medcheck %t-grad.medc --fd 3 | FileCheck %s --check-prefix=FD

// med.softmax against torch.softmax: over the channels of a segmentation head (3 classes,
// odd spatial sizes), over the last and the first axis, and on logits large enough that
// exp overflows without the max taken out; its gradient y·(dy − Σ dy·y) against torch
// autograd (f32) and finite differences (f64). Losses are sum(y * r) for random r.

// CHECK: heads  out0  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: heads  out1  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: heads  out2  2x3x5x4x7  max_abs {{.*}}  ok
// CHECK: heads  out3  2x3x5x4x7  max_abs {{.*}}  ok
func.func @heads(%x: tensor<2x3x5x4x7xf32>) -> (tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>) {
  %0 = med.softmax %x : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x5x4x7xf32>
  %1 = med.softmax %x {axis = 4 : i64} : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x5x4x7xf32>
  %2 = med.softmax %x {axis = 0 : i64} : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x5x4x7xf32>
  %c = med.constant dense<200.0> : tensor<f32>
  %big = med.mul %x, %c : (tensor<2x3x5x4x7xf32>, tensor<f32>) -> tensor<2x3x5x4x7xf32>
  %3 = med.softmax %big : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x5x4x7xf32>
  return %0, %1, %2, %3 : tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>, tensor<2x3x5x4x7xf32>
}

// CHECK: 5 outputs checked, 0 failed

// GRAD: softmax_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: softmax_loss_grad  grad.arg0  2x5x3x4x3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: softmax_loss_grad  grad.arg1  2x5x3x4x3  max_abs {{.*}}  ok{{$}}
// FD: softmax_loss_grad  grad.arg0  2x5x3x4x3  fd 3 of 360  max_abs {{.*}}  ok
func.func @softmax_loss(%x: tensor<2x5x3x4x3xf32>, %r: tensor<2x5x3x4x3xf32>) -> tensor<f32> {
  %v1 = med.softmax %x : (tensor<2x5x3x4x3xf32>) -> tensor<2x5x3x4x3xf32>
  %v2 = med.mul %v1, %r : (tensor<2x5x3x4x3xf32>, tensor<2x5x3x4x3xf32>) -> tensor<2x5x3x4x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x5x3x4x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}
