// RUN: not med-opt %s --med-train-step="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not med-opt %s --med-train-step="loss=nope" 2>&1 | FileCheck %s --check-prefix=LOSS
// OPT: error: med-train-step: unknown optimizer 'lion' (expected adamw or sgd)
// LOSS: error: med-train-step: no loss function @nope
func.func @loss(%x: tensor<3xf32>) -> tensor<f32> {
  %0 = med.reduce sum %x {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
