// RUN: med-opt %s --med-train-step="precision=fp16-mixed clip=1.0 ema=true growth-interval=7 growth-factor=4 backoff-factor=0.25 init-scale=1024" | FileCheck %s
// RUN: med-opt %s --med-train-step="precision=fp16-mixed optimizer=sgd momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: med-opt %s --med-train-step="precision=bf16-mixed" | FileCheck %s --check-prefix=BF16

// fp16-mixed: the gradient of loss · loss_scale (a private @loss_scaled and its gradient),
// found_inf over the scaled gradients, unscaling by 1/loss_scale before the norm and
// clipping, AdamW with the count of applied updates (optimizer.step), every assigned
// tensor selected between its old and new value by found_inf, and the next loss scale.
// Every op of the step around the gradient carries med.fp32.

med.parameter @"c.weight" : tensor<4x2x1x1x1xf32> init uniform(2)
med.parameter @"c.bias" : tensor<4xf32> init uniform(2)

// CHECK-DAG: med.parameter @optimizer.step : tensor<f32> init zeros frozen
// CHECK-LABEL: func.func private @loss_scaled(
// CHECK-SAME: %[[SX:.*]]: tensor<2x2x3x3x3xf32>, %[[SY:.*]]: tensor<2x4x3x3x3xf32>, %[[S:.*]]: tensor<f32>) -> (tensor<f32>, tensor<f32>)
// CHECK: %[[L:.*]] = med.bce_with_logits
// CHECK: %[[SL:.*]] = med.mul %[[L]], %[[S]]
// CHECK: return %[[SL]], %[[L]]
// CHECK-LABEL: func.func private @loss_scaled_grad(
// CHECK-SAME: med.output_names = ["out0", "out1", "grad.c.weight", "grad.c.bias"
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x2x3x3x3xf32>, %[[Y:[^:]*]]: tensor<2x4x3x3x3xf32>, %[[LR:[^:]*]]: tensor<f32>, %[[T:[^:]*]]: tensor<f32>, %[[D:[^:]*]]: tensor<f32>, %[[SCALE:[^:]*]]: tensor<f32>, %[[TRACK:[^:]*]]: tensor<f32>, %[[RNG:[^:]*]]: tensor<i64>)
// CHECK-SAME: -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
// CHECK-SAME: med.init_loss_scale = 1.024000e+03 : f64
// CHECK-SAME: med.input_names = ["arg0", "arg1", "lr", "step", "ema_decay", "loss_scale", "growth_tracker", "rng"]
// CHECK-SAME: med.output_names = ["loss", "grad_norm", "loss_scale", "growth_tracker", "found_inf"]
// CHECK-SAME: med.precision = "fp16-mixed"
// CHECK: %[[G:.*]]:7 = call @loss_scaled_grad(%[[X]], %[[Y]], %[[SCALE]])
// CHECK: %[[FOUND:.*]] = med.any_non_finite %[[G]]#2, %[[G]]#3 {med.fp32}
// CHECK: %[[INV:.*]] = med.div %{{.*}}, %[[SCALE]] {med.fp32}
// CHECK: %[[UW:.*]] = med.mul %[[G]]#2, %[[INV]] {med.fp32}
// CHECK: %[[UB:.*]] = med.mul %[[G]]#3, %[[INV]] {med.fp32}
// CHECK: %[[SQ:.*]] = med.sum_squares %[[UW]], %[[UB]] {med.fp32}
// CHECK: %[[NORM:.*]] = med.sqrt %[[SQ]] {med.fp32}
// CHECK: %[[COEF:.*]] = med.min
// CHECK: %[[GW:.*]] = med.mul %[[UW]], %[[COEF]] {med.fp32}
// CHECK: %[[N0:.*]] = med.param @optimizer.step {med.fp32}
// CHECK: %[[N1:.*]] = med.add %[[N0]], %{{.*}} {med.fp32}
// CHECK: %[[W:.*]] = med.param @c.weight {med.fp32}
// CHECK: %[[M:.*]] = med.param @optimizer.exp_avg.c.weight {med.fp32}
// CHECK: %[[V:.*]] = med.param @optimizer.exp_avg_sq.c.weight {med.fp32}
// CHECK: %[[NW:[a-z_0-9]+]], %[[NM:[a-z_0-9]+]], %[[NV:[a-z_0-9]+]] = med.adamw %[[W]], %[[GW]], %[[M]], %[[V]], %[[LR]], %[[N1]] {med.fp32
// CHECK: %[[KM:.*]] = med.select %[[FOUND]], %[[M]], %[[NM]] {med.fp32}
// CHECK: med.assign @optimizer.exp_avg.c.weight, %[[KM]] {med.fp32}
// CHECK: %[[KV:.*]] = med.select %[[FOUND]], %[[V]], %[[NV]]
// CHECK: med.assign @optimizer.exp_avg_sq.c.weight, %[[KV]]
// CHECK: %[[KW:.*]] = med.select %[[FOUND]], %[[W]], %[[NW]]
// CHECK: med.assign @c.weight, %[[KW]]
// CHECK: %[[E:.*]] = med.param @ema.c.weight
// CHECK: %[[NE:.*]] = med.add %[[E]], %{{.*}} {med.fp32}
// CHECK: %[[KE:.*]] = med.select %[[FOUND]], %[[E]], %[[NE]]
// CHECK: med.assign @ema.c.weight, %[[KE]]
// CHECK: med.adamw %{{.*}}, %[[LR]], %[[N1]]
// CHECK: %[[KN:.*]] = med.select %[[FOUND]], %[[N0]], %[[N1]]
// CHECK: med.assign @optimizer.step, %[[KN]]
// CHECK: %[[NS:[a-z_0-9]+]], %[[NT:[a-z_0-9]+]] = med.update_loss_scale %[[SCALE]], %[[TRACK]], %[[FOUND]] {backoff_factor = 2.500000e-01 : f64, growth_factor = 4.000000e+00 : f64, growth_interval = 7 : i64, med.fp32}
// CHECK: return %[[G]]#1, %[[NORM]], %[[NS]], %[[NT]], %[[FOUND]]
// CHECK-NOT: @loss_grad

// With SGD the momentum buffer is kept on a skipped step; SGD needs no step count.
// SGD-NOT: @optimizer.step
// SGD-LABEL: func.func @train_step(
// SGD-SAME: tensor<f32>, %{{[^:]*}}: tensor<f32>, %{{[^:]*}}: tensor<f32>, %{{[^:]*}}: tensor<f32>, %{{[^:]*}}: tensor<i64>)
// SGD: %[[FOUND:.*]] = med.any_non_finite
// SGD: %[[B:.*]] = med.param @optimizer.momentum_buffer.c.weight
// SGD: %{{.*}}, %[[NB:[a-z_0-9]+]] = med.sgd
// SGD: %[[KB:.*]] = med.select %[[FOUND]], %[[B]], %[[NB]]
// SGD: med.assign @optimizer.momentum_buffer.c.weight, %[[KB]]
// SGD: med.update_loss_scale {{.*}} {med.fp32}

// With bf16-mixed the step is the fp32 one, recorded as bf16-mixed; no loss scaling. The
// gradient function it calls is recorded as bf16-mixed too.
// BF16-NOT: @loss_scaled
// BF16-LABEL: func.func @loss_grad(
// BF16-SAME: med.precision = "bf16-mixed"
// BF16-LABEL: func.func @train_step(
// BF16-SAME: tensor<f32>, %{{[^:]*}}: tensor<f32>, %{{[^:]*}}: tensor<i64>) -> (tensor<f32>, tensor<f32>)
// BF16-SAME: med.output_names = ["loss", "grad_norm"], med.precision = "bf16-mixed"
// BF16-NOT: med.select
// BF16-NOT: med.any_non_finite
// BF16: med.adamw {{.*}} {med.fp32
// BF16-NOT: med.update_loss_scale
func.func @loss(%x: tensor<2x2x3x3x3xf32>, %y: tensor<2x4x3x3x3xf32>) -> tensor<f32> {
  %w = med.param @"c.weight" : tensor<4x2x1x1x1xf32>
  %b = med.param @"c.bias" : tensor<4xf32>
  %0 = med.conv3d %x, %w, %b : (tensor<2x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>, tensor<4xf32>) -> tensor<2x4x3x3x3xf32>
  %l = med.bce_with_logits %0, %y : (tensor<2x4x3x3x3xf32>, tensor<2x4x3x3x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
