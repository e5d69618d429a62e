// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 9 | FileCheck %s
// RUN: medc compile %s --grad -o %t-grad.medc
// RUN: medcheck %t-grad.medc --grad | FileCheck %s --check-prefix=GRAD
// RUN: medcheck %t-grad.medc --fd 3 | FileCheck %s --check-prefix=FD

// med.resize against torch's upsample_trilinear3d (align_corners false and true) and
// upsample_nearest3d: factor 2 (SegResNet's and the ONNX exports' Resize), explicit sizes
// up and down by odd ratios, and an axis of size 1 (align_corners's single output). Its
// gradient med.resize_grad (the adjoint) against torch autograd (f32) and finite
// differences (f64). Losses are sum(y * r) for random r.

// CHECK: resize_modes  out0  2x3x6x8x10  max_abs {{.*}}  ok
// CHECK: resize_modes  out1  2x3x5x1x7  max_abs {{.*}}  ok
// CHECK: resize_modes  out2  2x3x6x8x10  max_abs {{.*}}  ok
// CHECK: resize_modes  out3  2x3x5x1x7  max_abs {{.*}}  ok
// CHECK: resize_modes  out4  2x3x6x8x10  max_abs {{.*}}  ok
// CHECK: resize_modes  out5  2x3x5x2x7  max_abs {{.*}}  ok
func.func @resize_modes(%x: tensor<2x3x3x4x5xf32>) -> (tensor<2x3x6x8x10xf32>, tensor<2x3x5x1x7xf32>, tensor<2x3x6x8x10xf32>, tensor<2x3x5x1x7xf32>, tensor<2x3x6x8x10xf32>, tensor<2x3x5x2x7xf32>) {
  %0 = med.resize linear %x {size = array<i64: 6, 8, 10>} : (tensor<2x3x3x4x5xf32>) -> tensor<2x3x6x8x10xf32>
  %1 = med.resize linear %x {size = array<i64: 5, 1, 7>} : (tensor<2x3x3x4x5xf32>) -> tensor<2x3x5x1x7xf32>
  %2 = med.resize linear %x {size = array<i64: 6, 8, 10>, align_corners} : (tensor<2x3x3x4x5xf32>) -> tensor<2x3x6x8x10xf32>
  %3 = med.resize linear %x {size = array<i64: 5, 1, 7>, align_corners} : (tensor<2x3x3x4x5xf32>) -> tensor<2x3x5x1x7xf32>
  %4 = med.resize nearest %x {size = array<i64: 6, 8, 10>} : (tensor<2x3x3x4x5xf32>) -> tensor<2x3x6x8x10xf32>
  %5 = med.resize nearest %x {size = array<i64: 5, 2, 7>} : (tensor<2x3x3x4x5xf32>) -> tensor<2x3x5x2x7xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3x6x8x10xf32>, tensor<2x3x5x1x7xf32>, tensor<2x3x6x8x10xf32>, tensor<2x3x5x1x7xf32>, tensor<2x3x6x8x10xf32>, tensor<2x3x5x2x7xf32>
}

// The scale form (imported networks' Resize): whole factors on odd sizes, against torch's
// interpolate(scale_factor=...), which takes its positions from 1/factor.
// CHECK: scale_modes  out0  2x3x6x15x2  max_abs {{.*}}  ok
// CHECK: scale_modes  out1  2x3x9x5x4  max_abs {{.*}}  ok
// CHECK: scale_modes  out2  2x3x6x5x6  max_abs {{.*}}  ok
func.func @scale_modes(%x: tensor<2x3x3x5x2xf32>) -> (tensor<2x3x6x15x2xf32>, tensor<2x3x9x5x4xf32>, tensor<2x3x6x5x6xf32>) {
  %0 = med.resize linear %x {scale = array<i64: 2, 3, 1>} : (tensor<2x3x3x5x2xf32>) -> tensor<2x3x6x15x2xf32>
  %1 = med.resize linear %x {scale = array<i64: 3, 1, 2>, align_corners} : (tensor<2x3x3x5x2xf32>) -> tensor<2x3x9x5x4xf32>
  %2 = med.resize nearest %x {scale = array<i64: 2, 1, 3>} : (tensor<2x3x3x5x2xf32>) -> tensor<2x3x6x5x6xf32>
  return %0, %1, %2 : tensor<2x3x6x15x2xf32>, tensor<2x3x9x5x4xf32>, tensor<2x3x6x5x6xf32>
}

// CHECK: 13 outputs checked, 0 failed

// GRAD: linear_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: linear_loss_grad  grad.arg0  1x2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: linear_loss_grad  grad.arg0  1x2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
func.func @linear_loss(%x: tensor<1x2x3x4x5xf32>, %r: tensor<1x2x6x3x10xf32>) -> tensor<f32> {
  %v1 = med.resize linear %x {size = array<i64: 6, 3, 10>} : (tensor<1x2x3x4x5xf32>) -> tensor<1x2x6x3x10xf32>
  %v2 = med.mul %v1, %r : (tensor<1x2x6x3x10xf32>, tensor<1x2x6x3x10xf32>) -> tensor<1x2x6x3x10xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x6x3x10xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// GRAD: corners_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: corners_loss_grad  grad.arg0  1x2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: corners_loss_grad  grad.arg0  1x2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
func.func @corners_loss(%x: tensor<1x2x3x4x5xf32>, %r: tensor<1x2x7x1x9xf32>) -> tensor<f32> {
  %v1 = med.resize linear %x {size = array<i64: 7, 1, 9>, align_corners} : (tensor<1x2x3x4x5xf32>) -> tensor<1x2x7x1x9xf32>
  %v2 = med.mul %v1, %r : (tensor<1x2x7x1x9xf32>, tensor<1x2x7x1x9xf32>) -> tensor<1x2x7x1x9xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x7x1x9xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// GRAD: nearest_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: nearest_loss_grad  grad.arg0  1x2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: nearest_loss_grad  grad.arg0  1x2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
func.func @nearest_loss(%x: tensor<1x2x3x4x5xf32>, %r: tensor<1x2x6x3x7xf32>) -> tensor<f32> {
  %v1 = med.resize nearest %x {size = array<i64: 6, 3, 7>} : (tensor<1x2x3x4x5xf32>) -> tensor<1x2x6x3x7xf32>
  %v2 = med.mul %v1, %r : (tensor<1x2x6x3x7xf32>, tensor<1x2x6x3x7xf32>) -> tensor<1x2x6x3x7xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x6x3x7xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// GRAD: scale_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: scale_loss_grad  grad.arg0  1x2x3x5x1  max_abs {{.*}}  ok{{$}}
// FD: scale_loss_grad  grad.arg0  1x2x3x5x1  fd 3 of 30  max_abs {{.*}}  ok
func.func @scale_loss(%x: tensor<1x2x3x5x1xf32>, %r: tensor<1x2x9x10x1xf32>) -> tensor<f32> {
  %v1 = med.resize linear %x {scale = array<i64: 3, 2, 1>} : (tensor<1x2x3x5x1xf32>) -> tensor<1x2x9x10x1xf32>
  %v2 = med.mul %v1, %r : (tensor<1x2x9x10x1xf32>, tensor<1x2x9x10x1xf32>) -> tensor<1x2x9x10x1xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x9x10x1xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}
