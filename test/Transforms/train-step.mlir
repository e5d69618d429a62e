// RUN: med-opt %s --split-input-file --med-train-step="clip=1.0 ema=true exempt-norm-bias=true weight-decay=0.05" | FileCheck %s
// RUN: med-opt %s --split-input-file --med-train-step="optimizer=sgd momentum=0.99 nesterov=true weight-decay=3e-5" | FileCheck %s --check-prefix=SGD

// The loss's gradient feeds the global norm, clipping, one AdamW per parameter (biases
// exempt from weight decay), the EMA on the updated parameters, and assigns of everything.

med.parameter @"c.weight" : tensor<4x2x1x1x1xf32> init uniform(2)
med.parameter @"c.bias" : tensor<4xf32> init uniform(2)
med.parameter @"frozen.weight" : tensor<4x1x1x1xf32> init ones frozen

// CHECK-DAG: med.parameter @optimizer.exp_avg.c.weight : tensor<4x2x1x1x1xf32> init zeros frozen
// CHECK-DAG: med.parameter @optimizer.exp_avg_sq.c.weight : tensor<4x2x1x1x1xf32> init zeros frozen
// CHECK-DAG: med.parameter @ema.c.weight : tensor<4x2x1x1x1xf32> init copy from @c.weight frozen
// CHECK-DAG: med.parameter @optimizer.exp_avg.c.bias : tensor<4xf32> init zeros frozen
// CHECK-NOT: med.parameter @optimizer.exp_avg.frozen.weight
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<2x2x3x3x3xf32>, %[[Y:.*]]: tensor<2x4x3x3x3xf32>, %[[LR:.*]]: tensor<f32>, %[[T:.*]]: tensor<f32>, %[[D:.*]]: tensor<f32>, %{{.*}}: tensor<i64>) -> (tensor<f32>, tensor<f32>)
// CHECK-SAME: med.input_names = ["arg0", "arg1", "lr", "step", "ema_decay", "rng"]
// CHECK-SAME: med.output_names = ["loss", "grad_norm"]
// CHECK-SAME: med.precision = "fp32"
// CHECK: %[[G:.*]]:5 = call @loss_grad(%[[X]], %[[Y]])
// CHECK: %[[SQ:.*]] = med.sum_squares %[[G]]#1, %[[G]]#2 {med.fp32}
// CHECK: %[[NORM:.*]] = med.sqrt %[[SQ]]
// CHECK: %[[COEF:.*]] = med.min
// CHECK: %[[GW:.*]] = med.mul %[[G]]#1, %[[COEF]]
// CHECK: %[[GB:.*]] = med.mul %[[G]]#2, %[[COEF]]
// CHECK: %[[ONEMINUS:.*]] = med.sub %{{.*}}, %[[D]]
// CHECK: %[[W:.*]] = med.param @c.weight
// CHECK: %[[NW:[a-z_]+]], %[[M:[a-z_0-9]+]], %[[V:[a-z_0-9]+]] = med.adamw %[[W]], %[[GW]], %{{.*}}, %{{.*}}, %[[LR]], %[[T]] {med.fp32, weight_decay = 5.000000e-02 : f64}
// CHECK: med.assign @optimizer.exp_avg.c.weight, %[[M]]
// CHECK: med.assign @optimizer.exp_avg_sq.c.weight, %[[V]]
// CHECK: med.assign @c.weight, %[[NW]]
// CHECK: %[[E:.*]] = med.param @ema.c.weight
// CHECK: %[[DIFF:.*]] = med.sub %[[NW]], %[[E]]
// CHECK: %[[STEP:.*]] = med.mul %[[DIFF]], %[[ONEMINUS]]
// CHECK: %[[NE:.*]] = med.add %[[E]], %[[STEP]]
// CHECK: med.assign @ema.c.weight, %[[NE]]
// CHECK: med.adamw %{{.*}}, %[[GB]], {{.*}} {med.fp32, weight_decay = 0.000000e+00 : f64}
// CHECK: return %[[G]]#0, %[[NORM]]
// The loss with the current weights, then with the EMA weights; frozen parameters are read
// as they are.
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: med.output_names = ["loss"]
// CHECK: med.param @c.weight
// CHECK: med.bce_with_logits
// CHECK-NOT: med.assign
// CHECK-LABEL: func.func @eval_step_ema
// CHECK: med.param @ema.c.weight
// CHECK: med.param @ema.c.bias
// CHECK: med.param @frozen.weight
// CHECK: med.bce_with_logits
// SGD-NOT: func.func @eval_step_ema

// SGD-LABEL: func.func @train_step
// SGD-SAME: (%{{.*}}: tensor<2x2x3x3x3xf32>, %{{.*}}: tensor<2x4x3x3x3xf32>, %[[LR:.*]]: tensor<f32>, %{{.*}}: tensor<f32>, %{{.*}}: tensor<i64>) -> (tensor<f32>, tensor<f32>)
// SGD: med.param @optimizer.momentum_buffer.c.weight
// SGD: med.sgd %{{.*}}, %[[LR]] {med.fp32, momentum = 0.98999999999999999 : f64, nesterov, weight_decay = 3.000000e-05 : f64}
// SGD: med.assign @optimizer.momentum_buffer.c.weight
// SGD-NOT: med.min
// SGD: func.func @eval_step(
func.func @loss(%x: tensor<2x2x3x3x3xf32>, %y: tensor<2x4x3x3x3xf32>) -> tensor<f32> {
  %w = med.param @"c.weight" : tensor<4x2x1x1x1xf32>
  %b = med.param @"c.bias" : tensor<4xf32>
  %f = med.param @"frozen.weight" : tensor<4x1x1x1xf32>
  %0 = med.conv3d %x, %w, %b : (tensor<2x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>, tensor<4xf32>) -> tensor<2x4x3x3x3xf32>
  %1 = med.mul %0, %f : (tensor<2x4x3x3x3xf32>, tensor<4x1x1x1xf32>) -> tensor<2x4x3x3x3xf32>
  %l = med.bce_with_logits %1, %y : (tensor<2x4x3x3x3xf32>, tensor<2x4x3x3x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
