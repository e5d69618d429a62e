// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc --tolerance 1e-5 | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 5 --tolerance 1e-10 | FileCheck %s --check-prefix=F64

// med.spatial_transform against LibTorch: torch::grid_sampler (align_corners=False) on the
// grid of the op's positions, in f64 (tools/medcheck/TorchReference.cpp); linear_argmax as
// nnU-Net composes it (one-hot masks resampled, argmax, -1 outside). Linear to 1e-5; nearest
// samples and labels exactly (max_abs 0). test/cuda/spatial-transform.test runs this file on
// the CUDA backend, with wrong variants of the kernel that must fail.

// Odd sizes (9x11x7 -> 5x6x7, B=2, C=3), per sample a rotation Rz.Ry.Rx, a scaling, a shear
// and a translation; parts of the output sample outside the input (every border counts).
// CHECK: generic  out0  2x3x5x6x7  max_abs {{.*}}  ok
// CHECK: generic  out1  2x3x5x6x7  max_abs {{.*}}  ok
// CHECK: generic  out2  2x3x5x6x7  max_abs {{.*}}  ok
// CHECK: generic  out3  2x3x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: generic  out4  2x3x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: generic  out5  2x3x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: generic  out6  2x1x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: generic  out7  2x1x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: generic  out8  2x1x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
// F64: generic  out0  2x3x5x6x7  max_abs {{.*}}  ok
// F64: generic  out8  2x1x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
// F64: crop  out0  2x3x7x6x5  max_abs {{.*}}  ok
func.func @generic(%x: tensor<2x3x9x11x7xf32>, %s: tensor<2x1x9x11x7xf32>, %si: tensor<2x1x9x11x7xi32>) -> (tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x1x5x6x7xi32>, tensor<2x1x5x6x7xf32>, tensor<2x1x5x6x7xi32>) {
  %m = med.constant dense<[[[0.6466457, -0.3502078, -0.1031221, 0.7000000], [0.3532641, 0.6795607, -0.4128187, -1.2000000], [0.3115347, 0.2644839, 0.6821632, 0.4000000]], [[1.1109555, -0.4295100, -0.0007694, -0.6000000], [0.6110592, 0.9346567, 0.6376788, 0.9000000], [-0.3616413, -0.4093447, 1.0751117, -1.1000000]]]> : tensor<2x3x4xf32>
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %1 = med.spatial_transform linear %x, %m border constant {shape = array<i64: 5, 6, 7>, value = 0.75} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %2 = med.spatial_transform linear %x, %m border reflection {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %3 = med.spatial_transform nearest %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %4 = med.spatial_transform nearest %x, %m border constant {shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %5 = med.spatial_transform nearest %x, %m border reflection {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xf32>
  %6 = med.spatial_transform nearest %si, %m border constant {shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  %7 = med.spatial_transform linear_argmax %s, %m {labels = array<i64: -1, 0, 1, 2, 3>, shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x1x9x11x7xf32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xf32>
  %8 = med.spatial_transform linear_argmax %si, %m {labels = array<i64: -1, 0, 1, 2, 3>, shape = array<i64: 5, 6, 7>, value = -1.0} : (tensor<2x1x9x11x7xi32>, tensor<2x3x4xf32>) -> tensor<2x1x5x6x7xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x3x5x6x7xf32>, tensor<2x1x5x6x7xi32>, tensor<2x1x5x6x7xf32>, tensor<2x1x5x6x7xi32>
}

// Random N(0, 1) matrices (a general affine map, often far outside the input: reflection
// folds positions several times).
// CHECK: random_matrix  out0  2x2x6x5x4  max_abs {{.*}}  ok
// CHECK: random_matrix  out1  2x2x6x5x4  max_abs {{.*}}  ok
// CHECK: random_matrix  out2  2x2x6x5x4  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @random_matrix(%x: tensor<2x2x7x5x9xf32>, %m: tensor<2x3x4xf32>) -> (tensor<2x2x6x5x4xf32>, tensor<2x2x6x5x4xf32>, tensor<2x2x6x5x4xf32>) {
  %s = med.constant dense<3.0> : tensor<f32>
  %m3 = med.mul %m, %s : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 6, 5, 4>} : (tensor<2x2x7x5x9xf32>, tensor<2x3x4xf32>) -> tensor<2x2x6x5x4xf32>
  %1 = med.spatial_transform linear %x, %m3 border reflection {shape = array<i64: 6, 5, 4>} : (tensor<2x2x7x5x9xf32>, tensor<2x3x4xf32>) -> tensor<2x2x6x5x4xf32>
  %2 = med.spatial_transform nearest %x, %m3 border reflection {shape = array<i64: 6, 5, 4>} : (tensor<2x2x7x5x9xf32>, tensor<2x3x4xf32>) -> tensor<2x2x6x5x4xf32>
  return %0, %1, %2 : tensor<2x2x6x5x4xf32>, tensor<2x2x6x5x4xf32>, tensor<2x2x6x5x4xf32>
}

// M = [I | 0] from 13x12x9 to 7x6x5 (margins 6, 6, 4) is the centre crop exactly, on both
// sides: out0-out2 are 1 + the differences from med.slice at offsets (3, 3, 2), all 1 (one
// plus, so that --precision f64 compares them relatively: torch's f64 coordinates carry
// 1e-15 of rounding there, ours none). A wrong centre moves them by whole values.
// CHECK: crop  out0  2x3x7x6x5  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: crop  out1  2x3x7x6x5  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: crop  out2  2x1x7x6x5  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: crop  out3  2x3x7x6x5  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @crop(%x: tensor<2x3x13x12x9xf32>, %s: tensor<2x1x13x12x9xf32>) -> (tensor<2x3x7x6x5xf32>, tensor<2x3x7x6x5xf32>, tensor<2x1x7x6x5xf32>, tensor<2x3x7x6x5xf32>) {
  %m = med.constant dense<[[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]]> : tensor<2x3x4xf32>
  %c = med.slice %x {offsets = array<i64: 0, 0, 3, 3, 2>, sizes = array<i64: 2, 3, 7, 6, 5>} : (tensor<2x3x13x12x9xf32>) -> tensor<2x3x7x6x5xf32>
  %cs = med.slice %s {offsets = array<i64: 0, 0, 3, 3, 2>, sizes = array<i64: 2, 1, 7, 6, 5>} : (tensor<2x1x13x12x9xf32>) -> tensor<2x1x7x6x5xf32>
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 7, 6, 5>} : (tensor<2x3x13x12x9xf32>, tensor<2x3x4xf32>) -> tensor<2x3x7x6x5xf32>
  %1 = med.spatial_transform nearest %x, %m {shape = array<i64: 7, 6, 5>} : (tensor<2x3x13x12x9xf32>, tensor<2x3x4xf32>) -> tensor<2x3x7x6x5xf32>
  %2 = med.spatial_transform linear_argmax %s, %m {labels = array<i64: -1, 0, 1, 2, 3>, shape = array<i64: 7, 6, 5>, value = -1.0} : (tensor<2x1x13x12x9xf32>, tensor<2x3x4xf32>) -> tensor<2x1x7x6x5xf32>
  %one = med.constant dense<1.0> : tensor<f32>
  %e0 = med.sub %0, %c : (tensor<2x3x7x6x5xf32>, tensor<2x3x7x6x5xf32>) -> tensor<2x3x7x6x5xf32>
  %e1 = med.sub %1, %c : (tensor<2x3x7x6x5xf32>, tensor<2x3x7x6x5xf32>) -> tensor<2x3x7x6x5xf32>
  %e2 = med.sub %2, %cs : (tensor<2x1x7x6x5xf32>, tensor<2x1x7x6x5xf32>) -> tensor<2x1x7x6x5xf32>
  %d0 = med.add %e0, %one : (tensor<2x3x7x6x5xf32>, tensor<f32>) -> tensor<2x3x7x6x5xf32>
  %d1 = med.add %e1, %one : (tensor<2x3x7x6x5xf32>, tensor<f32>) -> tensor<2x3x7x6x5xf32>
  %d2 = med.add %e2, %one : (tensor<2x1x7x6x5xf32>, tensor<f32>) -> tensor<2x1x7x6x5xf32>
  return %d0, %d1, %d2, %0 : tensor<2x3x7x6x5xf32>, tensor<2x3x7x6x5xf32>, tensor<2x1x7x6x5xf32>, tensor<2x3x7x6x5xf32>
}

// 13x12x9 to 8x7x6: odd margins (5, 5, 3), as nnU-Net's 205 -> 128, put the output grid half
// a voxel off the input's: linear is the mean of two neighbours on each axis.
// CHECK: crop_odd  out0  1x2x8x7x6  max_abs {{.*}}  ok
func.func @crop_odd(%x: tensor<1x2x13x12x9xf32>) -> tensor<1x2x8x7x6xf32> {
  %m = med.constant dense<[[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]]> : tensor<1x3x4xf32>
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 8, 7, 6>} : (tensor<1x2x13x12x9xf32>, tensor<1x3x4xf32>) -> tensor<1x2x8x7x6xf32>
  return %0 : tensor<1x2x8x7x6xf32>
}

// Exact ties: on an 8^3 input (power-of-two sizes: torch's grid coordinates are exact too),
// a zoom by 2 (M = diag(0.5)) and half-voxel translations put samples half-way between
// voxels. linear_argmax with 3 labels then meets ties (the lowest label wins, in torch's
// argmax as in ours), and nearest rounds .5 to even as grid_sample does.
// CHECK: ties  out0  2x2x7x7x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: ties  out1  2x1x7x7x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: ties  out2  2x1x7x7x7  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: ties  out3  2x2x7x7x7  max_abs {{.*}}  ok
// F64: ties  out1  2x1x7x7x7  max_abs 0.0e+00  rel 0.0e+00  ok
// F64: 21 outputs checked, 0 failed (tolerance 1.0e-10, precision f64)
func.func @ties(%x: tensor<2x2x8x8x8xf32>, %s: tensor<2x1x8x8x8xf32>, %si: tensor<2x1x8x8x8xi32>) -> (tensor<2x2x7x7x7xf32>, tensor<2x1x7x7x7xf32>, tensor<2x1x7x7x7xi32>, tensor<2x2x7x7x7xf32>) {
  %m = med.constant dense<[[[0.5, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.0]], [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, -0.5]]]> : tensor<2x3x4xf32>
  %0 = med.spatial_transform nearest %x, %m {shape = array<i64: 7, 7, 7>} : (tensor<2x2x8x8x8xf32>, tensor<2x3x4xf32>) -> tensor<2x2x7x7x7xf32>
  %1 = med.spatial_transform linear_argmax %s, %m {labels = array<i64: 0, 1, 2>, shape = array<i64: 7, 7, 7>, value = -1.0} : (tensor<2x1x8x8x8xf32>, tensor<2x3x4xf32>) -> tensor<2x1x7x7x7xf32>
  %2 = med.spatial_transform linear_argmax %si, %m {labels = array<i64: 0, 1, 2>, shape = array<i64: 7, 7, 7>, value = -1.0} : (tensor<2x1x8x8x8xi32>, tensor<2x3x4xf32>) -> tensor<2x1x7x7x7xi32>
  %3 = med.spatial_transform linear %x, %m border reflection {shape = array<i64: 7, 7, 7>} : (tensor<2x2x8x8x8xf32>, tensor<2x3x4xf32>) -> tensor<2x2x7x7x7xf32>
  return %0, %1, %2, %3 : tensor<2x2x7x7x7xf32>, tensor<2x1x7x7x7xf32>, tensor<2x1x7x7x7xi32>, tensor<2x2x7x7x7xf32>
}
