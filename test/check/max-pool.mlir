// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 9 | FileCheck %s
// RUN: medc compile %s --grad -o %t-grad.medc
// RUN: medcheck %t-grad.medc --grad | FileCheck %s --check-prefix=GRAD
// RUN: medcheck %t-grad.medc --fd 3 | FileCheck %s --check-prefix=FD

// med.max_pool (stride = kernel, no padding, floor) against torch's max_pool3d: BasicUNet's
// 2x2x2, an anisotropic 1x2x2 and a 3x1x2 window, on odd sizes where the last element of an
// axis lies past the last whole window. Its gradient med.max_pool_grad against torch
// autograd (f32) and finite differences (f64; random inputs have no ties); the elements
// past the last window get 0. Losses are sum(y * r) for random r.

// CHECK: pool_kernels  out0  2x3x2x3x2  max_abs {{.*}}  ok
// CHECK: pool_kernels  out1  2x3x5x3x2  max_abs {{.*}}  ok
// CHECK: pool_kernels  out2  2x3x1x7x2  max_abs {{.*}}  ok
func.func @pool_kernels(%x: tensor<2x3x5x7x5xf32>) -> (tensor<2x3x2x3x2xf32>, tensor<2x3x5x3x2xf32>, tensor<2x3x1x7x2xf32>) {
  %0 = med.max_pool %x {kernel = array<i64: 2, 2, 2>} : (tensor<2x3x5x7x5xf32>) -> tensor<2x3x2x3x2xf32>
  %1 = med.max_pool %x {kernel = array<i64: 1, 2, 2>} : (tensor<2x3x5x7x5xf32>) -> tensor<2x3x5x3x2xf32>
  %2 = med.max_pool %x {kernel = array<i64: 3, 1, 2>} : (tensor<2x3x5x7x5xf32>) -> tensor<2x3x1x7x2xf32>
  return %0, %1, %2 : tensor<2x3x2x3x2xf32>, tensor<2x3x5x3x2xf32>, tensor<2x3x1x7x2xf32>
}

// CHECK: 4 outputs checked, 0 failed

// GRAD: pool_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: pool_loss_grad  grad.arg0  1x2x5x4x7  max_abs {{.*}}  ok{{$}}
// FD: pool_loss_grad  grad.arg0  1x2x5x4x7  fd 3 of 280  max_abs {{.*}}  ok
func.func @pool_loss(%x: tensor<1x2x5x4x7xf32>, %r: tensor<1x2x2x2x2xf32>) -> tensor<f32> {
  %v1 = med.max_pool %x {kernel = array<i64: 2, 2, 3>} : (tensor<1x2x5x4x7xf32>) -> tensor<1x2x2x2x2xf32>
  %v2 = med.mul %v1, %r : (tensor<1x2x2x2x2xf32>, tensor<1x2x2x2x2xf32>) -> tensor<1x2x2x2x2xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x2x2x2xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}
