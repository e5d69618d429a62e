// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc --tolerance 1e-2 | FileCheck %s

// med.spatial_transform of bf16 images (beside test/check/spatial-transform.mlir, whose
// functions the CUDA backend runs in f32): computed in f32 and rounded once, against torch
// in f64 rounded once, so within about one bf16 rounding; nearest copies values exactly.
// CHECK: bf16  out0  2x3x5x6x7  max_abs {{.*}}  ok
// CHECK: bf16  out1  2x3x5x6x7  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @bf16(%x: tensor<2x3x9x11x7xbf16>) -> (tensor<2x3x5x6x7xbf16>, tensor<2x3x5x6x7xbf16>) {
  %m = med.constant dense<[[[0.6466457, -0.3502078, -0.1031221, 0.7000000], [0.3532641, 0.6795607, -0.4128187, -1.2000000], [0.3115347, 0.2644839, 0.6821632, 0.4000000]], [[1.1109555, -0.4295100, -0.0007694, -0.6000000], [0.6110592, 0.9346567, 0.6376788, 0.9000000], [-0.3616413, -0.4093447, 1.0751117, -1.1000000]]]> : tensor<2x3x4xf32>
  %0 = med.spatial_transform linear %x, %m border reflection {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xbf16>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xbf16>
  %1 = med.spatial_transform nearest %x, %m {shape = array<i64: 5, 6, 7>} : (tensor<2x3x9x11x7xbf16>, tensor<2x3x4xf32>) -> tensor<2x3x5x6x7xbf16>
  return %0, %1 : tensor<2x3x5x6x7xbf16>, tensor<2x3x5x6x7xbf16>
}
