// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --tolerance 1e-6 | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 5 --tolerance 1e-6 | FileCheck %s
// RUN: medcheck %t.medc --grad --tolerance 1e-6 | FileCheck %s --check-prefix=GRAD
// RUN: medcheck %t.medc --fd 4 | FileCheck %s --check-prefix=FD

// med.dropout against LibTorch: the input times torch's form of the noise (mask / (1 − p)),
// the mask drawn by the second definition of Philox in torch's int64 arithmetic
// (tools/medcheck/TorchReference.cpp, counter word 3 = 1), for random 64-bit keys. Exact
// (max_abs 0) in f32 and f64: the same mask and one product. Odd sizes, several samples,
// the largest stream, p = 0 (the identity) and p near 1. The gradient (med.dropout of dy with
// the same key: the mask drawn again) against torch autograd of input · noise and against
// central finite differences in f64 (the mask fixed by the key). test/cuda/dropout.test runs
// this file on the CUDA backend under the emulation (with wrong variants that must fail);
// test/runtime/DropoutTest.cpp checks the mask's statistics and the scaling.

// CHECK: rates  out0  3x2x5x7x3  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: rates  out1  3x2x5x7x3  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: rates  out2  3x2x5x7x3  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: rates  out3  3x2x5x7x3  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @rates(%x: tensor<3x2x5x7x3xf32>, %key: tensor<i64>) -> (tensor<3x2x5x7x3xf32>, tensor<3x2x5x7x3xf32>, tensor<3x2x5x7x3xf32>, tensor<3x2x5x7x3xf32>) {
  %a = med.dropout %x, %key {p = 0.1 : f64, stream = 0 : i64} : (tensor<3x2x5x7x3xf32>, tensor<i64>) -> tensor<3x2x5x7x3xf32>
  %b = med.dropout %x, %key {p = 0.5 : f64, stream = 4294967295 : i64} : (tensor<3x2x5x7x3xf32>, tensor<i64>) -> tensor<3x2x5x7x3xf32>
  %c = med.dropout %x, %key {p = 0.0 : f64, stream = 2 : i64} : (tensor<3x2x5x7x3xf32>, tensor<i64>) -> tensor<3x2x5x7x3xf32>
  %d = med.dropout %x, %key {p = 0.97 : f64, stream = 3 : i64} : (tensor<3x2x5x7x3xf32>, tensor<i64>) -> tensor<3x2x5x7x3xf32>
  return %a, %b, %c, %d : tensor<3x2x5x7x3xf32>, tensor<3x2x5x7x3xf32>, tensor<3x2x5x7x3xf32>, tensor<3x2x5x7x3xf32>
}

// A chain as a network has it (dropout after an activation, before a product): the
// elementwise fusion applies the mask in its kernel on the CUDA backend.
// CHECK: chain  out0  2x4x3x5x6  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @chain(%x: tensor<2x4x3x5x6xf32>, %w: tensor<2x4x3x5x6xf32>, %key: tensor<i64>) -> tensor<2x4x3x5x6xf32> {
  %r = med.relu %x : tensor<2x4x3x5x6xf32>
  %d = med.dropout %r, %key {p = 0.25 : f64, stream = 1 : i64} : (tensor<2x4x3x5x6xf32>, tensor<i64>) -> tensor<2x4x3x5x6xf32>
  %y = med.mul %d, %w : (tensor<2x4x3x5x6xf32>, tensor<2x4x3x5x6xf32>) -> tensor<2x4x3x5x6xf32>
  return %y : tensor<2x4x3x5x6xf32>
}

// GRAD: drop_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: drop_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: drop_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: drop_loss_grad  grad.arg0  2x3x4x5  fd 4 of 120  max_abs {{.*}}  ok
func.func @drop_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>, %key: tensor<i64>) -> tensor<f32> {
  %v1 = med.dropout %x, %key {p = 0.3 : f64, stream = 7 : i64} : (tensor<2x3x4x5xf32>, tensor<i64>) -> tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// A dropout after a spatial transform: on the CUDA backend it is the epilogue of a resample
// fusion, drawn by the voxel's counter there (the transform itself is checked to rounding).
// CHECK: resampled  out0  2x3x5x6x7  max_abs {{.*}}  ok
func.func @resampled(%x: tensor<2x3x9x8x7xf32>, %key: tensor<i64>) -> tensor<2x3x5x6x7xf32> {
  %m = med.constant dense<[[[0.6466457, -0.3502078, -0.1031221, 0.7000000], [0.3532641, 0.6795607, -0.4128187, -1.2000000], [0.3115347, 0.2644839, 0.6821632, 0.4000000]], [[1.1109555, -0.4295100, -0.0007694, -0.6000000], [0.6110592, 0.9346567, 0.6376788, 0.9000000], [-0.3616413, -0.4093447, 1.0751117, -1.1000000]]]> : tensor<2x3x4xf32>
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x8x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %1 = med.dropout %0, %key {p = 0.4 : f64, stream = 9 : i64} : (tensor<2x3x5x6x7xf32>, tensor<i64>) -> tensor<2x3x5x6x7xf32>
  return %1 : tensor<2x3x5x6x7xf32>
}
