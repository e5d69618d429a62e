// RUN: not med-opt %s --med-train-step="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not med-opt %s --med-train-step="loss=nope" 2>&1 | FileCheck %s --check-prefix=LOSS
// OPT: error: med-train-step: unknown optimizer 'lion' (expected adamw or sgd)
// LOSS: error: med-train-step: no loss function @nope
func.func @loss(%x: tensor<3xf32>) -> tensor<f32> {
  %0 = med.reduce sum %x {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
// RUN: not med-opt %s --med-train-step="precision=fp8" 2>&1 | FileCheck %s --check-prefix=PREC
// PREC: error: med-train-step: unknown precision 'fp8' (expected fp32, bf16-mixed or fp16-mixed)
// RUN: not med-opt %s --med-train-step="precision=fp16-mixed growth-factor=1" 2>&1 | FileCheck %s --check-prefix=GROWTH
// GROWTH: error: med-train-step: growth-factor must be > 1, got 1
// RUN: not med-opt %s --med-train-step="precision=fp16-mixed backoff-factor=1.5" 2>&1 | FileCheck %s --check-prefix=BACKOFF
// BACKOFF: error: med-train-step: backoff-factor must be in (0, 1), got 1.5
// RUN: not med-opt %s --med-train-step="precision=fp16-mixed growth-interval=0" 2>&1 | FileCheck %s --check-prefix=INTERVAL
// INTERVAL: error: med-train-step: growth-interval must be at least 1, got 0
// RUN: not med-opt %s --med-train-step="precision=fp16-mixed init-scale=1e39" 2>&1 | FileCheck %s --check-prefix=INIT
// INIT: error: med-train-step: init-scale must be a positive f32 number, got 1.000000e+39
