// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc --tolerance 1e-5 | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 5 --tolerance 1e-5 | FileCheck %s

// med.random against a second definition of Philox 4x32-10 written in torch's int64
// arithmetic (tools/medcheck/TorchReference.cpp), for random 64-bit keys: uniform numbers
// exactly, normal ones to the rounding of log, sqrt and cos (torch computes them in f64).
// Odd sizes, several samples, the largest stream, per-sample shapes. test/cuda/random.test
// runs this file on the CUDA backend (with wrong variants that must fail).

// CHECK: uniform  out0  3x2x5x7x3  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: uniform  out1  3x4  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: uniform  out2  3x2x2  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @uniform(%key: tensor<i64>, %x: tensor<3x2x5x7x3xf32>) -> (tensor<3x2x5x7x3xf32>, tensor<3x4xf32>, tensor<3x2x2xf32>) {
  %u = med.random %key, %x {stream = 0 : i64} : (tensor<i64>, tensor<3x2x5x7x3xf32>) -> tensor<3x2x5x7x3xf32>
  %p = med.random %key, %x {stream = 4294967295 : i64, sample_shape = array<i64: 4>} : (tensor<i64>, tensor<3x2x5x7x3xf32>) -> tensor<3x4xf32>
  %q = med.random %key, %x {stream = 17 : i64, distribution = #med<distribution uniform>, sample_shape = array<i64: 2, 2>} : (tensor<i64>, tensor<3x2x5x7x3xf32>) -> tensor<3x2x2xf32>
  return %u, %p, %q : tensor<3x2x5x7x3xf32>, tensor<3x4xf32>, tensor<3x2x2xf32>
}

// CHECK: gates  out0  4x3  max_abs 0.0e+00  rel 0.0e+00  ok
// CHECK: gates  out1  4x2x3x5x2  max_abs 0.0e+00  rel 0.0e+00  ok
func.func @gates(%key: tensor<i64>, %x: tensor<4x2x3x5x2xf32>) -> (tensor<4x3xf32>, tensor<4x2x3x5x2xf32>) {
  %g = med.random %key, %x {stream = 5 : i64, distribution = #med<distribution bernoulli>, probability = 0.3, sample_shape = array<i64: 3>} : (tensor<i64>, tensor<4x2x3x5x2xf32>) -> tensor<4x3xf32>
  %h = med.random %key, %x {stream = 6 : i64, distribution = #med<distribution bernoulli>, probability = 0.75} : (tensor<i64>, tensor<4x2x3x5x2xf32>) -> tensor<4x2x3x5x2xf32>
  return %g, %h : tensor<4x3xf32>, tensor<4x2x3x5x2xf32>
}

// CHECK: normal  out0  2x3x9x4x5  max_abs {{.*}}  ok
// CHECK: normal  out1  2x6  max_abs {{.*}}  ok
func.func @normal(%key: tensor<i64>, %labels: tensor<2x3x9x4x5xi32>) -> (tensor<2x3x9x4x5xf32>, tensor<2x6xf32>) {
  %z = med.random %key, %labels {stream = 2 : i64, distribution = #med<distribution normal>} : (tensor<i64>, tensor<2x3x9x4x5xi32>) -> tensor<2x3x9x4x5xf32>
  %w = med.random %key, %labels {stream = 3 : i64, distribution = #med<distribution normal>, sample_shape = array<i64: 6>} : (tensor<i64>, tensor<2x3x9x4x5xi32>) -> tensor<2x6xf32>
  return %z, %w : tensor<2x3x9x4x5xf32>, tensor<2x6xf32>
}
