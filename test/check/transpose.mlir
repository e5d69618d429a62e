// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 7 | FileCheck %s
// RUN: medc compile %s --grad -o %t-grad.medc
// RUN: medcheck %t-grad.medc --grad | FileCheck %s --check-prefix=GRAD
// RUN: medcheck %t-grad.medc --fd 4 | FileCheck %s --check-prefix=FD
// Negative control: cycle_loss's gradient transposed by the permutation instead of its
// inverse (the plan edited; the same shape on a cube) fails both gradient checks.
// RUN: %python %S/../medrun/Inputs/edit_plan.py %t-grad.medc %t-bad.medc --func cycle_loss_grad --op transpose --where 'permutation=[1, 2, 0]' --set 'permutation=[2, 0, 1]'
// RUN: not medcheck %t-bad.medc --grad --func cycle_loss | FileCheck %s --check-prefix=BADGRAD
// RUN: not medcheck %t-bad.medc --fd 4 --func cycle_loss | FileCheck %s --check-prefix=BADFD

// med.transpose against torch permute: ranks 3 to 5, odd sizes, the identity, cycles,
// the reversal and an N×C×D×H×W tensor to channels-last (N×D×H×W×C) and back; its
// gradient (the output gradient transposed by the inverse permutation) against torch
// autograd (f32) and central finite differences (f64). Losses are sum(y * r) for random r.
// test/cuda/emulated.test runs this file on the CUDA backend under the emulation (with a
// wrong variant of the kernel that must fail).

// CHECK: rank3  out0  3x5x7  max_abs {{.*}}  ok
// CHECK: rank3  out1  7x3x5  max_abs {{.*}}  ok
// CHECK: rank3  out2  5x7x3  max_abs {{.*}}  ok
// CHECK: rank3  out3  7x5x3  max_abs {{.*}}  ok
func.func @rank3(%x: tensor<3x5x7xf32>) -> (tensor<3x5x7xf32>, tensor<7x3x5xf32>, tensor<5x7x3xf32>, tensor<7x5x3xf32>) {
  %0 = med.transpose %x {permutation = array<i64: 0, 1, 2>} : (tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  %1 = med.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<3x5x7xf32>) -> tensor<7x3x5xf32>
  %2 = med.transpose %x {permutation = array<i64: 1, 2, 0>} : (tensor<3x5x7xf32>) -> tensor<5x7x3xf32>
  %3 = med.transpose %x {permutation = array<i64: 2, 1, 0>} : (tensor<3x5x7xf32>) -> tensor<7x5x3xf32>
  return %0, %1, %2, %3 : tensor<3x5x7xf32>, tensor<7x3x5xf32>, tensor<5x7x3xf32>, tensor<7x5x3xf32>
}

// CHECK: rank4  out0  7x3x2x5  max_abs {{.*}}  ok
// CHECK: rank4  out1  2x5x7x3  max_abs {{.*}}  ok
func.func @rank4(%x: tensor<2x3x5x7xf32>) -> (tensor<7x3x2x5xf32>, tensor<2x5x7x3xf32>) {
  %0 = med.transpose %x {permutation = array<i64: 3, 1, 0, 2>} : (tensor<2x3x5x7xf32>) -> tensor<7x3x2x5xf32>
  %1 = med.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x5x7xf32>) -> tensor<2x5x7x3xf32>
  return %0, %1 : tensor<7x3x2x5xf32>, tensor<2x5x7x3xf32>
}

// NCDHW -> NDHWC, NDHWC -> NCDHW of that (the input again), the reversal, and two axes of
// equal size swapped (D and W, both 5): the check sees a swap the shapes do not.
// CHECK: rank5  out0  2x5x4x5x3  max_abs {{.*}}  ok
// CHECK: rank5  out1  2x3x5x4x5  max_abs {{.*}}  ok
// CHECK: rank5  out2  5x4x5x3x2  max_abs {{.*}}  ok
// CHECK: rank5  out3  2x3x5x4x5  max_abs {{.*}}  ok
func.func @rank5(%x: tensor<2x3x5x4x5xf32>) -> (tensor<2x5x4x5x3xf32>, tensor<2x3x5x4x5xf32>, tensor<5x4x5x3x2xf32>, tensor<2x3x5x4x5xf32>) {
  %0 = med.transpose %x {permutation = array<i64: 0, 2, 3, 4, 1>} : (tensor<2x3x5x4x5xf32>) -> tensor<2x5x4x5x3xf32>
  %1 = med.transpose %0 {permutation = array<i64: 0, 4, 1, 2, 3>} : (tensor<2x5x4x5x3xf32>) -> tensor<2x3x5x4x5xf32>
  %2 = med.transpose %x {permutation = array<i64: 4, 3, 2, 1, 0>} : (tensor<2x3x5x4x5xf32>) -> tensor<5x4x5x3x2xf32>
  %3 = med.transpose %x {permutation = array<i64: 0, 1, 4, 3, 2>} : (tensor<2x3x5x4x5xf32>) -> tensor<2x3x5x4x5xf32>
  return %0, %1, %2, %3 : tensor<2x5x4x5x3xf32>, tensor<2x3x5x4x5xf32>, tensor<5x4x5x3x2xf32>, tensor<2x3x5x4x5xf32>
}

// CHECK: 14 outputs checked, 0 failed

// Channels-last and back around a per-channel scale (the scale broadcast along the last
// axis of the channels-last tensor), so the gradient passes both transposes.
// GRAD: ndhwc_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: ndhwc_loss_grad  grad.arg0  2x3x5x4x5  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: ndhwc_loss_grad  grad.arg1  3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: ndhwc_loss_grad  grad.arg2  2x3x5x4x5  max_abs {{.*}}  ok{{$}}
// FD: ndhwc_loss_grad  grad.arg0  2x3x5x4x5  fd 4 of 600  max_abs {{.*}}  ok
// FD-NEXT: ndhwc_loss_grad  grad.arg1  3  fd 3 of 3  max_abs {{.*}}  ok
// FD-NEXT: ndhwc_loss_grad  grad.arg2  2x3x5x4x5  fd 4 of 600  max_abs {{.*}}  ok
func.func @ndhwc_loss(%x: tensor<2x3x5x4x5xf32>, %s: tensor<3xf32>, %r: tensor<2x3x5x4x5xf32>) -> tensor<f32> {
  %v0 = med.transpose %x {permutation = array<i64: 0, 2, 3, 4, 1>} : (tensor<2x3x5x4x5xf32>) -> tensor<2x5x4x5x3xf32>
  %v1 = med.mul %v0, %s : (tensor<2x5x4x5x3xf32>, tensor<3xf32>) -> tensor<2x5x4x5x3xf32>
  %v2 = med.transpose %v1 {permutation = array<i64: 0, 4, 1, 2, 3>} : (tensor<2x5x4x5x3xf32>) -> tensor<2x3x5x4x5xf32>
  %v3 = med.mul %v2, %r : (tensor<2x3x5x4x5xf32>, tensor<2x3x5x4x5xf32>) -> tensor<2x3x5x4x5xf32>
  %v4 = med.reduce sum %v3 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x5x4x5xf32>) -> tensor<f32>
  return %v4 : tensor<f32>
}

// A 3-cycle (its inverse is another permutation) on a cube, so that a gradient transposed
// by the permutation instead of its inverse has the right shape but wrong values.
// GRAD: cycle_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: cycle_loss_grad  grad.arg0  3x3x3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: cycle_loss_grad  grad.arg1  3x3x3  max_abs {{.*}}  ok{{$}}
// FD: cycle_loss_grad  grad.arg0  3x3x3  fd 4 of 27  max_abs {{.*}}  ok
// FD-NEXT: cycle_loss_grad  grad.arg1  3x3x3  fd 4 of 27  max_abs {{.*}}  ok
// BADGRAD: cycle_loss_grad  grad.arg0  3x3x3  max_abs {{.*}}  FAIL
// BADGRAD: 3 gradient outputs checked against torch autograd, 1 failed
// BADFD: cycle_loss_grad  grad.arg0  3x3x3  fd 4 of 27  max_abs {{.*}}  FAIL
func.func @cycle_loss(%x: tensor<3x3x3xf32>, %r: tensor<3x3x3xf32>) -> tensor<f32> {
  %v0 = med.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<3x3x3xf32>) -> tensor<3x3x3xf32>
  %v1 = med.mul %v0, %r : (tensor<3x3x3xf32>, tensor<3x3x3xf32>) -> tensor<3x3x3xf32>
  %v2 = med.reduce sum %v1 {axes = array<i64: 0, 1, 2>} : (tensor<3x3x3xf32>) -> tensor<f32>
  return %v2 : tensor<f32>
}

// A rank-4 permutation with every axis moved, odd sizes.
// GRAD: rank4_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: rank4_loss_grad  grad.arg0  3x5x2x7  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: rank4_loss_grad  grad.arg1  7x2x3x5  max_abs {{.*}}  ok{{$}}
// FD: rank4_loss_grad  grad.arg0  3x5x2x7  fd 4 of 210  max_abs {{.*}}  ok
// FD-NEXT: rank4_loss_grad  grad.arg1  7x2x3x5  fd 4 of 210  max_abs {{.*}}  ok
func.func @rank4_loss(%x: tensor<3x5x2x7xf32>, %r: tensor<7x2x3x5xf32>) -> tensor<f32> {
  %v0 = med.transpose %x {permutation = array<i64: 3, 2, 0, 1>} : (tensor<3x5x2x7xf32>) -> tensor<7x2x3x5xf32>
  %v1 = med.mul %v0, %r : (tensor<7x2x3x5xf32>, tensor<7x2x3x5xf32>) -> tensor<7x2x3x5xf32>
  %v2 = med.reduce sum %v1 {axes = array<i64: 0, 1, 2, 3>} : (tensor<7x2x3x5xf32>) -> tensor<f32>
  return %v2 : tensor<f32>
}

// GELU before a transpose: the gradient reaching the GELU comes back through the
// transpose (LibTorch's f32 GELU backward is wrong for a gradient in another layout than
// its input, which the reference avoids; our gradient is checked by --fd too).
// GRAD: gelu_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: gelu_loss_grad  grad.arg0  2x4x5x3x3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: gelu_loss_grad  grad.arg1  2x3x4x5x3  max_abs {{.*}}  ok{{$}}
// FD: gelu_loss_grad  grad.arg0  2x4x5x3x3  fd 4 of 360  max_abs {{.*}}  ok
func.func @gelu_loss(%x: tensor<2x4x5x3x3xf32>, %r: tensor<2x3x4x5x3xf32>) -> tensor<f32> {
  %v0 = med.gelu %x : tensor<2x4x5x3x3xf32>
  %v1 = med.transpose %v0 {permutation = array<i64: 0, 4, 1, 2, 3>} : (tensor<2x4x5x3x3xf32>) -> tensor<2x3x4x5x3xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5x3xf32>, tensor<2x3x4x5x3xf32>) -> tensor<2x3x4x5x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x4x5x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}
