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

// The augmentation pipeline must exist, take one i64 key and return what the loss takes.
// RUN: not med-opt %s --med-train-step="augment=nope" 2>&1 | FileCheck %s --check-prefix=AUGNONE
// AUGNONE: error: med-train-step: no augmentation function @nope
// RUN: not med-opt %s --med-train-step="augment=twokeys" 2>&1 | FileCheck %s --check-prefix=AUGKEYS
// AUGKEYS: error: med-train-step: the augmentation @twokeys must take exactly one tensor<i64> key (the step's rng), it takes 2
func.func private @twokeys(%x: tensor<3xf32>, %a: tensor<i64>, %b: tensor<i64>) -> tensor<3xf32> attributes {med.output_names = ["arg0"]} {
  return %x : tensor<3xf32>
}
// RUN: not med-opt %s --med-train-step="augment=noname" 2>&1 | FileCheck %s --check-prefix=AUGNAME
// AUGNAME: error: med-train-step: the augmentation @noname returns no 'arg0', which @loss takes (it returns ["image"])
func.func private @noname(%x: tensor<3xf32>, %k: tensor<i64>) -> tensor<3xf32> attributes {med.output_names = ["image"]} {
  return %x : tensor<3xf32>
}
// RUN: not med-opt %s --med-train-step="augment=wrongsize" 2>&1 | FileCheck %s --check-prefix=AUGSIZE
// AUGSIZE: error: med-train-step: the augmentation @wrongsize returns 'arg0' as 'tensor<4xf32>', but @loss takes 'tensor<3xf32>' (generate the pipeline for the recipe's batch and patch)
func.func private @wrongsize(%x: tensor<4xf32>, %k: tensor<i64>) -> tensor<4xf32> attributes {med.output_names = ["arg0"]} {
  return %x : tensor<4xf32>
}
