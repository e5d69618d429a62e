// RUN: med-opt %s --split-input-file --med-train-step="augment=augment precision=bf16-mixed" | FileCheck %s

// With augment=NAME, the step's batch is the pipeline's inputs without its key; the key is
// the step's %rng; the pipeline's results feed the loss by name (here in the other order);
// the pipeline's ops compute in f32 (med.fp32) except those whose values it returns, and it
// stays public.

med.parameter @"c.weight" : tensor<4x2x1x1x1xf32> init uniform(2)

// CHECK-LABEL: func.func @augment
// CHECK-SAME: med.input_names = ["image", "seg", "rng"]
// CHECK: med.constant {{.*}}{med.fp32}
// CHECK-NEXT: med.random {{.*}}med.fp32
// CHECK-NEXT: med.mul
// CHECK-NOT: med.fp32
// CHECK-SAME: tensor<2x4x3x3x3xf32>
// CHECK-NEXT: med.slice
// CHECK-NOT: med.fp32
// CHECK-SAME: tensor<2x2x3x3x3xf32>
// CHECK-NEXT: return
func.func @augment(%image: tensor<2x2x5x5x5xf32>, %seg: tensor<2x1x5x5x5xi32>, %key: tensor<i64>) -> (tensor<2x4x3x3x3xf32>, tensor<2x2x3x3x3xf32>) attributes {med.input_names = ["image", "seg", "rng"], med.output_names = ["target", "image"]} {
  %like = med.constant dense<0.0> : tensor<2x4x3x3x3xf32>
  %r = med.random %key, %like {stream = 1 : i64} : (tensor<i64>, tensor<2x4x3x3x3xf32>) -> tensor<2x4x3x3x3xf32>
  %t = med.mul %r, %r : (tensor<2x4x3x3x3xf32>, tensor<2x4x3x3x3xf32>) -> tensor<2x4x3x3x3xf32>
  %i = med.slice %image {offsets = array<i64: 0, 0, 1, 1, 1>, sizes = array<i64: 2, 2, 3, 3, 3>} : (tensor<2x2x5x5x5xf32>) -> tensor<2x2x3x3x3xf32>
  return %t, %i : tensor<2x4x3x3x3xf32>, tensor<2x2x3x3x3xf32>
}

func.func @loss(%x: tensor<2x2x3x3x3xf32>, %y: tensor<2x4x3x3x3xf32>) -> tensor<f32> attributes {med.input_names = ["image", "target"]} {
  %w = med.param @"c.weight" : tensor<4x2x1x1x1xf32>
  %0 = med.conv3d %x, %w : (tensor<2x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>) -> tensor<2x4x3x3x3xf32>
  %1 = med.sub %0, %y : (tensor<2x4x3x3x3xf32>, tensor<2x4x3x3x3xf32>) -> tensor<2x4x3x3x3xf32>
  %2 = med.mul %1, %1 : (tensor<2x4x3x3x3xf32>, tensor<2x4x3x3x3xf32>) -> tensor<2x4x3x3x3xf32>
  %3 = med.reduce mean %2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x4x3x3x3xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[IMG:.*]]: tensor<2x2x5x5x5xf32>, %[[SEG:.*]]: tensor<2x1x5x5x5xi32>, %{{.*}}: tensor<f32>, %{{.*}}: tensor<f32>, %[[RNG:.*]]: tensor<i64>)
// CHECK-SAME: med.input_names = ["image", "seg", "lr", "step", "rng"]
// CHECK: %[[A:.*]]:2 = call @augment(%[[IMG]], %[[SEG]], %[[RNG]])
// CHECK: call @loss_grad(%[[A]]#1, %[[A]]#0)
