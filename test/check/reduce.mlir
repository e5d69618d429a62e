// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 2 | FileCheck %s

// med.reduce: every kind over spatial axes (keepdims), over batch + spatial (channel
// statistics), over one axis, over unsorted axes and over everything (a scalar). Sums and
// means reduce exp(x) > 0, so that no result is a near-total cancellation whose relative
// error would measure rounding rather than the kernel.

// CHECK: reduce_sum  out0  2x3x1x1x1  max_abs {{.*}}  ok
// CHECK: reduce_sum  out1  3  max_abs {{.*}}  ok
// CHECK: reduce_sum  out2  2x5x4x7  max_abs {{.*}}  ok
// CHECK: reduce_sum  out3  2x1x5x4x1  max_abs {{.*}}  ok
// CHECK: reduce_sum  out4  scalar  max_abs {{.*}}  ok
func.func @reduce_sum(%x: tensor<2x3x5x4x7xf32>) -> (tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<f32>) {
  %p = med.exp %x : tensor<2x3x5x4x7xf32>
  %0 = med.reduce sum %p {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x1x1x1xf32>
  %1 = med.reduce sum %p {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x5x4x7xf32>) -> tensor<3xf32>
  %2 = med.reduce sum %p {axes = array<i64: 1>} : (tensor<2x3x5x4x7xf32>) -> tensor<2x5x4x7xf32>
  %3 = med.reduce sum %p {axes = array<i64: 4, 1>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x1x5x4x1xf32>
  %4 = med.reduce sum %p {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x5x4x7xf32>) -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<f32>
}

// CHECK: reduce_mean  out0  2x3x1x1x1  max_abs {{.*}}  ok
// CHECK: reduce_mean  out1  3  max_abs {{.*}}  ok
// CHECK: reduce_mean  out2  2x5x4x7  max_abs {{.*}}  ok
// CHECK: reduce_mean  out3  2x1x5x4x1  max_abs {{.*}}  ok
// CHECK: reduce_mean  out4  1x1x1x1x1  max_abs {{.*}}  ok
func.func @reduce_mean(%x: tensor<2x3x5x4x7xf32>) -> (tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<1x1x1x1x1xf32>) {
  %p = med.exp %x : tensor<2x3x5x4x7xf32>
  %0 = med.reduce mean %p {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x1x1x1xf32>
  %1 = med.reduce mean %p {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x5x4x7xf32>) -> tensor<3xf32>
  %2 = med.reduce mean %p {axes = array<i64: 1>} : (tensor<2x3x5x4x7xf32>) -> tensor<2x5x4x7xf32>
  %3 = med.reduce mean %p {axes = array<i64: 4, 1>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x1x5x4x1xf32>
  %4 = med.reduce mean %p {axes = array<i64: 0, 1, 2, 3, 4>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<1x1x1x1x1xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<1x1x1x1x1xf32>
}

// CHECK: reduce_max  out0  2x3x1x1x1  max_abs {{.*}}  ok
// CHECK: reduce_max  out1  3  max_abs {{.*}}  ok
// CHECK: reduce_max  out2  2x5x4x7  max_abs {{.*}}  ok
// CHECK: reduce_max  out3  2x1x5x4x1  max_abs {{.*}}  ok
// CHECK: reduce_max  out4  scalar  max_abs {{.*}}  ok
func.func @reduce_max(%x: tensor<2x3x5x4x7xf32>) -> (tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<f32>) {
  %0 = med.reduce max %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x1x1x1xf32>
  %1 = med.reduce max %x {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x5x4x7xf32>) -> tensor<3xf32>
  %2 = med.reduce max %x {axes = array<i64: 1>} : (tensor<2x3x5x4x7xf32>) -> tensor<2x5x4x7xf32>
  %3 = med.reduce max %x {axes = array<i64: 4, 1>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x1x5x4x1xf32>
  %4 = med.reduce max %x {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x5x4x7xf32>) -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<f32>
}

// CHECK: reduce_min  out0  2x3x1x1x1  max_abs {{.*}}  ok
// CHECK: reduce_min  out1  3  max_abs {{.*}}  ok
// CHECK: reduce_min  out2  2x5x4x7  max_abs {{.*}}  ok
// CHECK: reduce_min  out3  2x1x5x4x1  max_abs {{.*}}  ok
// CHECK: reduce_min  out4  scalar  max_abs {{.*}}  ok
func.func @reduce_min(%x: tensor<2x3x5x4x7xf32>) -> (tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<f32>) {
  %0 = med.reduce min %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x3x1x1x1xf32>
  %1 = med.reduce min %x {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x5x4x7xf32>) -> tensor<3xf32>
  %2 = med.reduce min %x {axes = array<i64: 1>} : (tensor<2x3x5x4x7xf32>) -> tensor<2x5x4x7xf32>
  %3 = med.reduce min %x {axes = array<i64: 4, 1>, keepdims} : (tensor<2x3x5x4x7xf32>) -> tensor<2x1x5x4x1xf32>
  %4 = med.reduce min %x {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x5x4x7xf32>) -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<2x3x1x1x1xf32>, tensor<3xf32>, tensor<2x5x4x7xf32>, tensor<2x1x5x4x1xf32>, tensor<f32>
}

// Rank 2 and a long axis (many chunks), and a reduction of a reduction.
// CHECK: reduce_misc  out0  3  max_abs {{.*}}  ok
// CHECK: reduce_misc  out1  1x1  max_abs {{.*}}  ok
// CHECK: reduce_misc  out2  scalar  max_abs {{.*}}  ok
func.func @reduce_misc(%x: tensor<3x20001xf32>) -> (tensor<3xf32>, tensor<1x1xf32>, tensor<f32>) {
  %p = med.exp %x : tensor<3x20001xf32>
  %0 = med.reduce mean %p {axes = array<i64: 1>} : (tensor<3x20001xf32>) -> tensor<3xf32>
  %1 = med.reduce sum %p {axes = array<i64: 1, 0>, keepdims} : (tensor<3x20001xf32>) -> tensor<1x1xf32>
  %2 = med.reduce max %0 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  return %0, %1, %2 : tensor<3xf32>, tensor<1x1xf32>, tensor<f32>
}

// max and min propagate NaN (sqrt of negative values), as torch's amax / amin do.
// CHECK: reduce_nan  out0  scalar  max_abs {{.*}}  ok
// CHECK: reduce_nan  out1  4  max_abs {{.*}}  ok
func.func @reduce_nan(%x: tensor<4x9xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %s = med.sqrt %x : tensor<4x9xf32>
  %0 = med.reduce max %s {axes = array<i64: 0, 1>} : (tensor<4x9xf32>) -> tensor<f32>
  %1 = med.reduce min %s {axes = array<i64: 1>} : (tensor<4x9xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<f32>, tensor<4xf32>
}

// Few outputs over many terms, as bias gradients (a channel over N·D·H·W voxels): the CUDA
// kernels split each output's terms in fixed parts and combine the partials.
// CHECK: reduce_large  out0  3  max_abs {{.*}}  ok
// CHECK: reduce_large  out1  3  max_abs {{.*}}  ok
// CHECK: reduce_large  out2  3  max_abs {{.*}}  ok
func.func @reduce_large(%x: tensor<2x3x40x40x41xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %p = med.exp %x : tensor<2x3x40x40x41xf32>
  %0 = med.reduce sum %p {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x40x40x41xf32>) -> tensor<3xf32>
  %1 = med.reduce mean %p {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x40x40x41xf32>) -> tensor<3xf32>
  %2 = med.reduce max %x {axes = array<i64: 0, 2, 3, 4>} : (tensor<2x3x40x40x41xf32>) -> tensor<3xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK: 28 outputs checked, 0 failed
