// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 5 | FileCheck %s

// med.pad against torch::constant_pad_nd, med.slice against strided torch slicing,
// med.concat against torch::cat.

// Asymmetric padding on every axis (batch and channels included), zero and non-zero fill;
// MedNeXt's (1, 0) on the spatial axes.
// CHECK: pad  out0  2x4x7x8x4  max_abs {{.*}}  ok
// CHECK: pad  out1  1x3x4x5x3  max_abs {{.*}}  ok
// CHECK: pad  out2  1x3x5x6x4  max_abs {{.*}}  ok
func.func @pad(%x: tensor<1x3x4x5x3xf32>) -> (tensor<2x4x7x8x4xf32>, tensor<1x3x4x5x3xf32>, tensor<1x3x5x6x4xf32>) {
  %0 = med.pad %x {low = array<i64: 0, 1, 2, 0, 1>, high = array<i64: 1, 0, 1, 3, 0>, value = -1.5} : (tensor<1x3x4x5x3xf32>) -> tensor<2x4x7x8x4xf32>
  %1 = med.pad %x {low = array<i64: 0, 0, 0, 0, 0>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<1x3x4x5x3xf32>) -> tensor<1x3x4x5x3xf32>
  %2 = med.pad %x {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<1x3x4x5x3xf32>) -> tensor<1x3x5x6x4xf32>
  return %0, %1, %2 : tensor<2x4x7x8x4xf32>, tensor<1x3x4x5x3xf32>, tensor<1x3x5x6x4xf32>
}

// CHECK: pad_rank2  out0  5x9  max_abs {{.*}}  ok
func.func @pad_rank2(%x: tensor<3x4xf32>) -> tensor<5x9xf32> {
  %0 = med.pad %x {low = array<i64: 2, 0>, high = array<i64: 0, 5>, value = 2.0} : (tensor<3x4xf32>) -> tensor<5x9xf32>
  return %0 : tensor<5x9xf32>
}

// Strided boxes, offsets on every axis, a plain box (no strides) and a full copy.
// CHECK: slice  out0  1x2x5x3x2  max_abs {{.*}}  ok
// CHECK: slice  out1  2x3x4x5x3  max_abs {{.*}}  ok
// CHECK: slice  out2  2x5x9x8x7  max_abs {{.*}}  ok
// CHECK: slice  out3  1x1x1x1x1  max_abs {{.*}}  ok
func.func @slice(%x: tensor<2x5x9x8x7xf32>) -> (tensor<1x2x5x3x2xf32>, tensor<2x3x4x5x3xf32>, tensor<2x5x9x8x7xf32>, tensor<1x1x1x1x1xf32>) {
  %0 = med.slice %x {offsets = array<i64: 1, 1, 0, 2, 1>, sizes = array<i64: 1, 2, 5, 3, 2>, strides = array<i64: 1, 2, 2, 2, 3>} : (tensor<2x5x9x8x7xf32>) -> tensor<1x2x5x3x2xf32>
  %1 = med.slice %x {offsets = array<i64: 0, 2, 3, 1, 4>, sizes = array<i64: 2, 3, 4, 5, 3>} : (tensor<2x5x9x8x7xf32>) -> tensor<2x3x4x5x3xf32>
  %2 = med.slice %x {offsets = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: 2, 5, 9, 8, 7>} : (tensor<2x5x9x8x7xf32>) -> tensor<2x5x9x8x7xf32>
  %3 = med.slice %x {offsets = array<i64: 1, 4, 8, 7, 6>, sizes = array<i64: 1, 1, 1, 1, 1>, strides = array<i64: 1, 3, 4, 5, 6>} : (tensor<2x5x9x8x7xf32>) -> tensor<1x1x1x1x1xf32>
  return %0, %1, %2, %3 : tensor<1x2x5x3x2xf32>, tensor<2x3x4x5x3xf32>, tensor<2x5x9x8x7xf32>, tensor<1x1x1x1x1xf32>
}

// Pad then crop back (the shape of a sliding-window border), rank 3.
// CHECK: pad_slice  out0  4x3x5  max_abs {{.*}}  ok
func.func @pad_slice(%x: tensor<4x3x5xf32>) -> tensor<4x3x5xf32> {
  %p = med.pad %x {low = array<i64: 0, 2, 3>, high = array<i64: 0, 1, 4>} : (tensor<4x3x5xf32>) -> tensor<4x6x12xf32>
  %s = med.slice %p {offsets = array<i64: 0, 2, 3>, sizes = array<i64: 4, 3, 5>} : (tensor<4x6x12xf32>) -> tensor<4x3x5xf32>
  return %s : tensor<4x3x5xf32>
}

// Concatenation on the channel axis (skip connections), the batch axis, a spatial axis,
// three inputs, and rank 2.
// CHECK: concat  out0  2x8x3x4x5  max_abs {{.*}}  ok
// CHECK: concat  out1  4x3x3x4x5  max_abs {{.*}}  ok
// CHECK: concat  out2  2x3x3x4x12  max_abs {{.*}}  ok
// CHECK: concat  out3  2x11x3x4x5  max_abs {{.*}}  ok
// CHECK: concat  out4  3x7  max_abs {{.*}}  ok
func.func @concat(%a: tensor<2x3x3x4x5xf32>, %b: tensor<2x5x3x4x5xf32>, %c: tensor<2x3x3x4x7xf32>, %d: tensor<3x2xf32>, %e: tensor<3x5xf32>) -> (tensor<2x8x3x4x5xf32>, tensor<4x3x3x4x5xf32>, tensor<2x3x3x4x12xf32>, tensor<2x11x3x4x5xf32>, tensor<3x7xf32>) {
  %0 = med.concat %a, %b {axis = 1 : i64} : (tensor<2x3x3x4x5xf32>, tensor<2x5x3x4x5xf32>) -> tensor<2x8x3x4x5xf32>
  %1 = med.concat %a, %a {axis = 0 : i64} : (tensor<2x3x3x4x5xf32>, tensor<2x3x3x4x5xf32>) -> tensor<4x3x3x4x5xf32>
  %2 = med.concat %a, %c {axis = 4 : i64} : (tensor<2x3x3x4x5xf32>, tensor<2x3x3x4x7xf32>) -> tensor<2x3x3x4x12xf32>
  %3 = med.concat %a, %b, %a {axis = 1 : i64} : (tensor<2x3x3x4x5xf32>, tensor<2x5x3x4x5xf32>, tensor<2x3x3x4x5xf32>) -> tensor<2x11x3x4x5xf32>
  %4 = med.concat %d, %e {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x5xf32>) -> tensor<3x7xf32>
  return %0, %1, %2, %3, %4 : tensor<2x8x3x4x5xf32>, tensor<4x3x3x4x5xf32>, tensor<2x3x3x4x12xf32>, tensor<2x11x3x4x5xf32>, tensor<3x7xf32>
}

// CHECK: 14 outputs checked, 0 failed
