// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc --tolerance 1e-5 | FileCheck %s

// med.gaussian_blur, med.simulate_low_resolution and med.mirror with given parameters
// against LibTorch: the blur from its definition (reflected copies, folded step by step, in
// f64), the low resolution as nnU-Net composes it (torch's nearest-exact interpolation to
// round(n·s), trilinear back with align_corners=False), the mirror by torch::flip. Odd sizes;
// sigmas of 0 (an axis left alone), of nnU-Net's range [0.5, 1] (3 to 7 taps), at a tie
// (6σ + ½ = 3.5: 3 taps) and of 2.5 (15 taps, wider than an axis of 6: the reflection
// folds); scales of 1 (unchanged), 0.5 at a tie (4.5 → 4 voxels) and below. test/cuda/
// intensity.test runs this file on the CUDA backend (with wrong variants that must fail).

// CHECK: blur  out0  2x2x9x6x7  max_abs {{.*}}  ok
func.func @blur(%x: tensor<2x2x9x6x7xf32>) -> tensor<2x2x9x6x7xf32> {
  %s = med.constant dense<[[[0.5, 0.75, 1.0], [0.0, 0.6, 0.0]], [[2.5, 0.0, 0.9], [-1.0, 1.0, 0.55]]]> : tensor<2x2x3xf32>
  %y = med.gaussian_blur %x, %s : (tensor<2x2x9x6x7xf32>, tensor<2x2x3xf32>) -> tensor<2x2x9x6x7xf32>
  return %y : tensor<2x2x9x6x7xf32>
}

// CHECK: low_resolution  out0  2x2x9x6x7  max_abs {{.*}}  ok
// CHECK: low_resolution  out1  2x2x9x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @low_resolution(%x: tensor<2x2x9x6x7xf32>) -> (tensor<2x2x9x6x7xf32>, tensor<2x2x9x6x7xf32>) {
  %s = med.constant dense<[[[0.5, 0.5, 0.5], [1.0, 1.0, 1.0]], [[0.7, 0.33, 0.9], [0.25, 0.8, 0.6]]]> : tensor<2x2x3xf32>
  %y = med.simulate_low_resolution %x, %s : (tensor<2x2x9x6x7xf32>, tensor<2x2x3xf32>) -> tensor<2x2x9x6x7xf32>
  // A scale of 1 everywhere: the input itself.
  %one = med.constant dense<1.0> : tensor<2x2x3xf32>
  %same = med.simulate_low_resolution %x, %one : (tensor<2x2x9x6x7xf32>, tensor<2x2x3xf32>) -> tensor<2x2x9x6x7xf32>
  %d = med.sub %same, %x : (tensor<2x2x9x6x7xf32>, tensor<2x2x9x6x7xf32>) -> tensor<2x2x9x6x7xf32>
  return %y, %d : tensor<2x2x9x6x7xf32>, tensor<2x2x9x6x7xf32>
}

// CHECK: mirror  out0  3x2x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @mirror(%x: tensor<3x2x5x4x3xf32>) -> tensor<3x2x5x4x3xf32> {
  %f = med.constant dense<[[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]> : tensor<3x3xf32>
  %y = med.mirror %x, %f : (tensor<3x2x5x4x3xf32>, tensor<3x3xf32>) -> tensor<3x2x5x4x3xf32>
  return %y : tensor<3x2x5x4x3xf32>
}

// Labels move as they are (an integer element type).
// CHECK: mirror_labels  out0  2x1x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @mirror_labels(%l: tensor<2x1x5x4x3xi32>) -> tensor<2x1x5x4x3xi32> {
  %f = med.constant dense<[[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]> : tensor<2x3xf32>
  %y = med.mirror %l, %f : (tensor<2x1x5x4x3xi32>, tensor<2x3xf32>) -> tensor<2x1x5x4x3xi32>
  return %y : tensor<2x1x5x4x3xi32>
}

// Slices rolled within their plane with wrap-around (np.roll): shifts floored, negative,
// zero, larger than the plane, and a label volume.
// CHECK: shift_slices  out0  2x2x3x5x4  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: shift_slices  out1  2x1x3x5x4  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @shift_slices(%x: tensor<2x2x3x5x4xf32>, %l: tensor<2x1x3x5x4xi32>) -> (tensor<2x2x3x5x4xf32>, tensor<2x1x3x5x4xi32>) {
  %s = med.constant dense<[[[0.0, 0.0], [1.7, -2.2], [-10.0, 9.0]], [[4.0, 0.5], [-0.5, 3.99], [12.0, -7.0]]]> : tensor<2x3x2xf32>
  %y = med.shift_slices %x, %s : (tensor<2x2x3x5x4xf32>, tensor<2x3x2xf32>) -> tensor<2x2x3x5x4xf32>
  %m = med.shift_slices %l, %s : (tensor<2x1x3x5x4xi32>, tensor<2x3x2xf32>) -> tensor<2x1x3x5x4xi32>
  return %y, %m : tensor<2x2x3x5x4xf32>, tensor<2x1x3x5x4xi32>
}

// Matrices of a spatial transform: rotations, shears and scales drawn at random (N(0, 1)),
// with and without shear, against MONAI's matrices built with torch in f64.
// CHECK: affine_matrix  out0  3x3x4  max_abs {{.*}}  ok
// CHECK: affine_matrix  out1  3x3x4  max_abs {{.*}}  ok
func.func @affine_matrix(%a: tensor<3x3xf32>, %k: tensor<3x3xf32>, %s: tensor<3x6xf32>) -> (tensor<3x3x4xf32>, tensor<3x3x4xf32>) {
  %m = med.affine_matrix %a, %k shear %s : (tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x6xf32>) -> tensor<3x3x4xf32>
  %r = med.affine_matrix %a, %k : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3x4xf32>
  return %m, %r : tensor<3x3x4xf32>, tensor<3x3x4xf32>
}

// Orientations: each of the 48 elements (u = (k + ½)/48) and the edges (0, the largest
// float below 1, 1 and a negative u clamp to the first and last), exactly.
// CHECK: orientation  out0  52x3x4  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @orientation() -> tensor<52x3x4xf32> {
  %u = med.constant dense<[0.010416666666666666, 0.03125, 0.052083333333333336, 0.07291666666666667, 0.09375, 0.11458333333333333, 0.13541666666666666, 0.15625, 0.17708333333333334, 0.19791666666666666, 0.21875, 0.23958333333333334, 0.2604166666666667, 0.28125, 0.3020833333333333, 0.3229166666666667, 0.34375, 0.3645833333333333, 0.3854166666666667, 0.40625, 0.4270833333333333, 0.4479166666666667, 0.46875, 0.4895833333333333, 0.5104166666666666, 0.53125, 0.5520833333333334, 0.5729166666666666, 0.59375, 0.6145833333333334, 0.6354166666666666, 0.65625, 0.6770833333333334, 0.6979166666666666, 0.71875, 0.7395833333333334, 0.7604166666666666, 0.78125, 0.8020833333333334, 0.8229166666666666, 0.84375, 0.8645833333333334, 0.8854166666666666, 0.90625, 0.9270833333333334, 0.9479166666666666, 0.96875, 0.9895833333333334, 0.0, 0.99999994, 1.0, -0.25]> : tensor<52xf32>
  %o = med.orientation_matrix %u : (tensor<52xf32>) -> tensor<52x3x4xf32>
  return %o : tensor<52x3x4xf32>
}

// Parameters outside the transforms' ranges: a σ that is not finite leaves its axis alone,
// one of 10⁶ is cut at twice the axis (its taps fold back onto the same voxels); a scale
// above 1 or not finite leaves the channel, one at or below 0 keeps a single voxel.
// CHECK: extreme_parameters  out0  1x2x5x4x3  max_abs {{.*}}  ok
// CHECK: extreme_parameters  out1  1x2x5x4x3  max_abs {{.*}}  ok
func.func @extreme_parameters(%x: tensor<1x2x5x4x3xf32>) -> (tensor<1x2x5x4x3xf32>, tensor<1x2x5x4x3xf32>) {
  %s = med.constant dense<[[[0x7F800000, 0x7FC00000, 1.0e6], [0xFF800000, 3.0, 0.0]]]> : tensor<1x2x3xf32>
  %b = med.gaussian_blur %x, %s : (tensor<1x2x5x4x3xf32>, tensor<1x2x3xf32>) -> tensor<1x2x5x4x3xf32>
  %k = med.constant dense<[[[1.7, 0x7FC00000, -1.0], [0.0, 0x7F800000, 0.5]]]> : tensor<1x2x3xf32>
  %l = med.simulate_low_resolution %x, %k : (tensor<1x2x5x4x3xf32>, tensor<1x2x3xf32>) -> tensor<1x2x5x4x3xf32>
  return %b, %l : tensor<1x2x5x4x3xf32>, tensor<1x2x5x4x3xf32>
}
