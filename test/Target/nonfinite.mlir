// RUN: medc compile %s -o %t.medc
// RUN: strings %t.medc | FileCheck %s --check-prefix=JSON
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medc compile %s --target cuda --cuda-ptx=false -o %t.cuda.medc

// Numbers JSON cannot spell (±inf, NaN) in constants and attributes: medc writes them as
// {"nonfinite": ...} (docs/artifact.md), the runtime reads them back, and the CUDA code
// generator puts them in a constant table as bits (a float initializer would call
// __int_as_float, which a device table cannot). Before, the artifact was not JSON.

// JSON: {"nonfinite":"inf"}
// JSON: {"nonfinite":"nan"}
// JSON: {"nonfinite":"-inf"}
// CHECK: values  out0  5  max_abs {{.*}}  ok
// CHECK: values  out1  1x1x3x1x1  max_abs {{.*}}  ok
func.func @values(%x: tensor<1x1x1x1x1xf32>) -> (tensor<5xf32>, tensor<1x1x3x1x1xf32>) {
  %c = med.constant dense<[1.0, 0x7F800000, 0x7FC00000, 0xFF800000, -2.5]> : tensor<5xf32>
  %p = med.pad %x {low = array<i64: 0, 0, 1, 0, 0>, high = array<i64: 0, 0, 1, 0, 0>, value = 0xFFF0000000000000 : f64} : (tensor<1x1x1x1x1xf32>) -> tensor<1x1x3x1x1xf32>
  return %c, %p : tensor<5xf32>, tensor<1x1x3x1x1xf32>
}
