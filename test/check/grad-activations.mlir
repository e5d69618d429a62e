// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 3 | FileCheck %s --check-prefix=FD

// The rectifiers' gradients (med.prelu_grad for the input; the slope's sum of grad·min(x, 0)
// for prelu) against torch autograd (--grad, f32) and central finite differences (--fd,
// f64). Losses are sum(y * r) for random r.

// CHECK: relu_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: relu_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: relu_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: relu_loss_grad  grad.arg0  2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
func.func @relu_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.relu %x : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// CHECK: leaky_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: leaky_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: leaky_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: leaky_loss_grad  grad.arg0  2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
func.func @leaky_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.leaky_relu %x {negative_slope = 0.1 : f64} : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// PReLU with a per-channel slope (C x 1 x 1 x 1, torch's prelu in the reference) and with
// a slope along the last axis (the reference's where(x > 0, x, a·x)): both operands.
// CHECK: prelu_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: prelu_loss_grad  grad.arg0  2x3x4x5x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: prelu_loss_grad  grad.arg1  3x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: prelu_loss_grad  grad.arg2  3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: prelu_loss_grad  grad.arg3  2x3x4x5x3  max_abs {{.*}}  ok{{$}}
// FD: prelu_loss_grad  grad.arg0  2x3x4x5x3  fd 3 of 360  max_abs {{.*}}  ok
// FD-NEXT: prelu_loss_grad  grad.arg1  3x1x1x1  fd 3 of 3  max_abs {{.*}}  ok
// FD-NEXT: prelu_loss_grad  grad.arg2  3  fd 3 of 3  max_abs {{.*}}  ok
func.func @prelu_loss(%x: tensor<2x3x4x5x3xf32>, %a: tensor<3x1x1x1xf32>, %w: tensor<3xf32>, %r: tensor<2x3x4x5x3xf32>) -> tensor<f32> {
  %v1 = med.prelu %x, %a : (tensor<2x3x4x5x3xf32>, tensor<3x1x1x1xf32>) -> tensor<2x3x4x5x3xf32>
  %v2 = med.prelu %v1, %w : (tensor<2x3x4x5x3xf32>, tensor<3xf32>) -> tensor<2x3x4x5x3xf32>
  %v3 = med.mul %v2, %r : (tensor<2x3x4x5x3xf32>, tensor<2x3x4x5x3xf32>) -> tensor<2x3x4x5x3xf32>
  %v4 = med.reduce sum %v3 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x4x5x3xf32>) -> tensor<f32>
  return %v4 : tensor<f32>
}
