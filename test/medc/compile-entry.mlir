// RUN: medc compile %s --entry loss --patch 4,4,4 | FileCheck %s
// RUN: medc compile %s --patch 4,4,4 | FileCheck %s --check-prefix=ALL

// --entry compiles just that function: the other public functions become private and,
// once inlined, are dropped. Without it every public function is compiled.

// CHECK-NOT: func.func @net
// CHECK: func.func @loss(%{{.*}}: tensor<1x4x4x4x4xf32>) -> tensor<f32>
// CHECK-NOT: func.func @net
// ALL-DAG: func.func @net(%{{.*}}: tensor<1x4x4x4x4xf32>) -> tensor<1x4x4x4x4xf32>
// ALL-DAG: func.func @loss(%{{.*}}: tensor<1x4x4x4x4xf32>) -> tensor<f32>
func.func @net(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = med.gelu %x : tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}
func.func @loss(%x: tensor<?x4x?x?x?xf32>) -> tensor<f32> {
  %0 = call @net(%x) : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = med.reduce sum %0 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<?x4x?x?x?xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
