// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 40 | FileCheck %s --check-prefix=FD
// RUN: medcheck %t.medc | FileCheck %s --check-prefix=FWD

// Gradient of a strided med.slice (med.slice_grad: the output gradient scattered into
// zeros with the stride) against torch autograd of tensor slicing with steps (--grad, f32)
// and central finite differences (--fd, f64; 40 elements per tensor, as most elements of a
// strided slice's input get no gradient). Losses are sum(y * r) for random r.

med.parameter @"s.w" : tensor<3x7x5xf32> init uniform(4)

// A different stride and offset on every axis, odd sizes; the box ends before the input does.
// CHECK: strided_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: strided_grad  grad.arg0  2x3x5x7x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: strided_grad  grad.arg1  2x2x3x2x2  max_abs {{.*}}  ok{{$}}
// FD: strided_grad  grad.arg0  2x3x5x7x5  fd 40 of 1050  max_abs {{.*}}  ok
// FD-NEXT: strided_grad  grad.arg1  2x2x3x2x2  fd 40 of 48  max_abs {{.*}}  ok
func.func @strided(%x: tensor<2x3x5x7x5xf32>, %r: tensor<2x2x3x2x2xf32>) -> tensor<f32> {
  %v1 = med.slice %x {offsets = array<i64: 0, 0, 0, 1, 1>, sizes = array<i64: 2, 2, 3, 2, 2>, strides = array<i64: 1, 2, 2, 4, 3>} : (tensor<2x3x5x7x5xf32>) -> tensor<2x2x3x2x2xf32>
  %v2 = med.mul %v1, %r : (tensor<2x2x3x2x2xf32>, tensor<2x2x3x2x2xf32>) -> tensor<2x2x3x2x2xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x2x3x2x2xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Spatial downsampling by 2 (x[:, :, ::2, ::2, ::2]) and, from the same input, a shifted
// grid (x[:, :, 1::2, 1::2, 1::2]) and an overlapping unit-stride crop: the three gradients
// accumulate into x, the two strided ones on disjoint voxels.
// CHECK: downsample_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: downsample_grad  grad.arg0  2x3x7x5x6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: downsample_grad  grad.arg1  2x3x4x3x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: downsample_grad  grad.arg2  2x3x3x2x3  max_abs {{.*}}  ok{{$}}
// FD: downsample_grad  grad.arg0  2x3x7x5x6  fd 40 of 1260  max_abs {{.*}}  ok
// FD-NEXT: downsample_grad  grad.arg1  2x3x4x3x3  fd 40 of 216  max_abs {{.*}}  ok
// FD-NEXT: downsample_grad  grad.arg2  2x3x3x2x3  fd 40 of 108  max_abs {{.*}}  ok
func.func @downsample(%x: tensor<2x3x7x5x6xf32>, %r: tensor<2x3x4x3x3xf32>, %r2: tensor<2x3x3x2x3xf32>) -> tensor<f32> {
  %v1 = med.slice %x {offsets = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: 2, 3, 4, 3, 3>, strides = array<i64: 1, 1, 2, 2, 2>} : (tensor<2x3x7x5x6xf32>) -> tensor<2x3x4x3x3xf32>
  %v2 = med.slice %x {offsets = array<i64: 0, 0, 1, 1, 1>, sizes = array<i64: 2, 3, 3, 2, 3>, strides = array<i64: 1, 1, 2, 2, 2>} : (tensor<2x3x7x5x6xf32>) -> tensor<2x3x3x2x3xf32>
  %v3 = med.slice %x {offsets = array<i64: 0, 0, 2, 1, 0>, sizes = array<i64: 2, 3, 3, 2, 3>} : (tensor<2x3x7x5x6xf32>) -> tensor<2x3x3x2x3xf32>
  %v4 = med.mul %v1, %r : (tensor<2x3x4x3x3xf32>, tensor<2x3x4x3x3xf32>) -> tensor<2x3x4x3x3xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x4x3x3xf32>) -> tensor<f32>
  %v6 = med.mul %v2, %v3 : (tensor<2x3x3x2x3xf32>, tensor<2x3x3x2x3xf32>) -> tensor<2x3x3x2x3xf32>
  %v7 = med.mul %v6, %r2 : (tensor<2x3x3x2x3xf32>, tensor<2x3x3x2x3xf32>) -> tensor<2x3x3x2x3xf32>
  %v8 = med.reduce sum %v7 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x3x2x3xf32>) -> tensor<f32>
  %v9 = med.add %v5, %v8 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %v9 : tensor<f32>
}

// A parameter sliced with a stride larger than the box (one element on axis 0 from
// offset 2, stride 5) and a stride on the last axis, then padded back and multiplied.
// CHECK: param_strided_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: param_strided_grad  grad.s.w  3x7x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: param_strided_grad  grad.arg0  1x5x5  max_abs {{.*}}  ok{{$}}
// FD: param_strided_grad  grad.s.w  3x7x5  fd 40 of 105  max_abs {{.*}}  ok
// FD-NEXT: param_strided_grad  grad.arg0  1x5x5  fd 25 of 25  max_abs {{.*}}  ok
func.func @param_strided(%r: tensor<1x5x5xf32>) -> tensor<f32> {
  %w = med.param @"s.w" : tensor<3x7x5xf32>
  %v1 = med.slice %w {offsets = array<i64: 2, 1, 0>, sizes = array<i64: 1, 3, 3>, strides = array<i64: 5, 2, 2>} : (tensor<3x7x5xf32>) -> tensor<1x3x3xf32>
  %v2 = med.pad %v1 {low = array<i64: 0, 1, 2>, high = array<i64: 0, 1, 0>} : (tensor<1x3x3xf32>) -> tensor<1x5x5xf32>
  %v3 = med.mul %v2, %v2 : (tensor<1x5x5xf32>, tensor<1x5x5xf32>) -> tensor<1x5x5xf32>
  %v4 = med.mul %v3, %r : (tensor<1x5x5xf32>, tensor<1x5x5xf32>) -> tensor<1x5x5xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2>} : (tensor<1x5x5xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// CHECK: 10 gradient outputs checked against torch autograd, 0 failed (tolerance 1.0e-04, precision f32)
// FD: 7 gradients checked by finite differences (265 elements), 0 failed (tolerance 1.0e-06, f64)
// FWD-NOT: FAIL
// FWD: 13 outputs checked, 0 failed (tolerance 1.0e-04, precision f32)
