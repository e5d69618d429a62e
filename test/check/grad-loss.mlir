// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 16 | FileCheck %s --check-prefix=FD
// RUN: medcheck %t.medc | FileCheck %s --check-prefix=FWD

// Gradients of the losses (med.bce_with_logits_grad, med.dice_ce_grad) against torch autograd
// of torch::binary_cross_entropy_with_logits / cross_entropy + soft Dice (--grad, f32) and
// central finite differences (--fd, f64): every BCE reduction, mask, pos_weight,
// auto_pos_weight (capped or not), rank 3; Dice + CE with 1 and 2 levels, batch_dice on and
// off, background, weights, rank 4. Targets, masks and pos_weight are data: our gradient for
// them must be zero (torch: detached; --fd: not perturbed).

med.parameter @"head.weight" : tensor<3x2x1x1x1xf32> init uniform(2)
med.parameter @"head.bias" : tensor<3xf32> init uniform(2)

// BCE with logits, reduction mean. y gets no gradient (data).
// CHECK: bce_mean_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mean_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mean_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_mean_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_mean_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_mean(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// BCE with logits, reduction sum.
// CHECK: bce_sum_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_sum_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_sum_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_sum_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_sum_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_sum(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y {reduction = #med<reduction sum>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// BCE with logits, reduction per_channel.
// CHECK: bce_per_channel_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_per_channel_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_per_channel_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_per_channel_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_per_channel_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_per_channel(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y {reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Reduction none: the upstream gradient has the logits' shape.
// CHECK: bce_none_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_none_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_none_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_none_grad  grad.arg2  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// FD: bce_none_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_none_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_none_grad  grad.arg2  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
func.func @bce_none(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %r: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y {reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Masked BCE (m in {0, 1}: left out of the loss and the count), reduction mean.
// CHECK: bce_mask_mean_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_mean_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_mean_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_mask_mean_grad  grad.arg2  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_mask_mean_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_mask_mean_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_mask_mean_grad  grad.arg2  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_mask_mean(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y mask %m : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Masked BCE (m in {0, 1}: left out of the loss and the count), reduction sum.
// CHECK: bce_mask_sum_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_sum_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_sum_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_mask_sum_grad  grad.arg2  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_mask_sum_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_mask_sum_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_mask_sum_grad  grad.arg2  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_mask_sum(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction sum>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Masked BCE (m in {0, 1}: left out of the loss and the count), reduction per_channel.
// CHECK: bce_mask_per_channel_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_per_channel_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_per_channel_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_mask_per_channel_grad  grad.arg2  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_mask_per_channel_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_mask_per_channel_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_mask_per_channel_grad  grad.arg2  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_mask_per_channel(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Masked BCE, reduction none.
// CHECK: bce_mask_none_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_none_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_none_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_mask_none_grad  grad.arg2  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_mask_none_grad  grad.arg3  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// FD: bce_mask_none_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_mask_none_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_mask_none_grad  grad.arg2  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_mask_none_grad  grad.arg3  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
func.func @bce_mask_none(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>, %r: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// pos_weight per channel (an argument: data, no gradient), reduction mean.
// CHECK: bce_pos_weight_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_pos_weight_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_pos_weight_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_pos_weight_grad  grad.arg2  3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_pos_weight_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_pos_weight_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_pos_weight_grad  grad.arg2  3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_pos_weight(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %pw: tensor<3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y pos_weight %pw : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// mask and pos_weight, reduction per_channel.
// CHECK: bce_mask_pos_weight_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_pos_weight_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_mask_pos_weight_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_mask_pos_weight_grad  grad.arg2  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_mask_pos_weight_grad  grad.arg3  3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_mask_pos_weight_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_mask_pos_weight_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_mask_pos_weight_grad  grad.arg2  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_mask_pos_weight_grad  grad.arg3  3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_mask_pos_weight(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>, %pw: tensor<3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y mask %m pos_weight %pw {reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Rank 3 (N x C x L), pos_weight, reduction sum.
// CHECK: bce_rank3_pos_weight_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_rank3_pos_weight_grad  grad.arg0  4x3x7  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_rank3_pos_weight_grad  grad.arg1  4x3x7  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_rank3_pos_weight_grad  grad.arg2  3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_rank3_pos_weight_grad  grad.arg0  4x3x7  fd 16 of 84  max_abs {{.*}}  ok
// FD-NEXT: bce_rank3_pos_weight_grad  grad.arg1  4x3x7  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_rank3_pos_weight_grad  grad.arg2  3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_rank3_pos_weight(%x: tensor<4x3x7xf32>, %y: tensor<4x3x7xf32>, %pw: tensor<3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y pos_weight %pw {reduction = #med<reduction sum>} : (tensor<4x3x7xf32>, tensor<4x3x7xf32>, tensor<3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// auto_pos_weight (neg/pos per channel from the targets, a constant for the gradient).
// CHECK: bce_auto_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_auto_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_auto_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_auto_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_auto_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_auto(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y {auto_pos_weight} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// auto_pos_weight from the masked targets, reduction per_channel (BANIS+).
// CHECK: bce_auto_mask_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_auto_mask_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_auto_mask_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_auto_mask_grad  grad.arg2  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_auto_mask_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_auto_mask_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_auto_mask_grad  grad.arg2  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_auto_mask(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y mask %m {auto_pos_weight, reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// auto_pos_weight capped by max_pos_weight = 1, reduction sum.
// CHECK: bce_auto_capped_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_auto_capped_grad  grad.arg0  2x3x5x4x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_auto_capped_grad  grad.arg1  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: bce_auto_capped_grad  grad.arg2  2x3x5x4x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_auto_capped_grad  grad.arg0  2x3x5x4x3  fd 16 of 360  max_abs {{.*}}  ok
// FD-NEXT: bce_auto_capped_grad  grad.arg1  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
// FD-NEXT: bce_auto_capped_grad  grad.arg2  2x3x5x4x3  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_auto_capped(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> tensor<f32> {
  %v1 = med.bce_with_logits %x, %y mask %m {auto_pos_weight, max_pos_weight = 1.0, reduction = #med<reduction sum>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Logits from a 1x1x1 convolution with parameters: the loss gradient reaches them.
// CHECK: bce_network_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_network_grad  grad.head.weight  3x2x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_network_grad  grad.head.bias  3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_network_grad  grad.arg0  2x2x4x3x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: bce_network_grad  grad.arg1  2x3x4x3x5  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: bce_network_grad  grad.head.weight  3x2x1x1x1  fd 6 of 6  max_abs {{.*}}  ok
// FD-NEXT: bce_network_grad  grad.head.bias  3  fd 3 of 3  max_abs {{.*}}  ok
// FD-NEXT: bce_network_grad  grad.arg0  2x2x4x3x5  fd 16 of 240  max_abs {{.*}}  ok
// FD-NEXT: bce_network_grad  grad.arg1  2x3x4x3x5  data, not perturbed  max_abs 0.0e+00  ok
func.func @bce_network(%x: tensor<2x2x4x3x5xf32>, %y: tensor<2x3x4x3x5xf32>) -> tensor<f32> {
  %v1 = med.param @"head.weight" : tensor<3x2x1x1x1xf32>
  %v2 = med.param @"head.bias" : tensor<3xf32>
  %v3 = med.conv3d %x, %v1, %v2 : (tensor<2x2x4x3x5xf32>, tensor<3x2x1x1x1xf32>, tensor<3xf32>) -> tensor<2x3x4x3x5xf32>
  %v4 = med.bce_with_logits %v3, %y {auto_pos_weight} : (tensor<2x3x4x3x5xf32>, tensor<2x3x4x3x5xf32>) -> tensor<f32>
  return %v4 : tensor<f32>
}

// Dice + CE, one level, batch_dice (float class-index targets: data).
// CHECK: dice_batch_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_batch_grad  grad.arg0  2x3x5x4x6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_batch_grad  grad.arg1  2x1x5x4x6  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: dice_batch_grad  grad.arg0  2x3x5x4x6  fd 16 of 720  max_abs {{.*}}  ok
// FD-NEXT: dice_batch_grad  grad.arg1  2x1x5x4x6  data, not perturbed  max_abs 0.0e+00  ok
func.func @dice_batch(%x: tensor<2x3x5x4x6xf32>, %t: tensor<2x1x5x4x6xf32>) -> tensor<f32> {
  %v1 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = true} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Dice + CE, one level, per-sample dice, background included.
// CHECK: dice_sample_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_sample_grad  grad.arg0  2x3x5x4x6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_sample_grad  grad.arg1  2x1x5x4x6  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: dice_sample_grad  grad.arg0  2x3x5x4x6  fd 16 of 720  max_abs {{.*}}  ok
// FD-NEXT: dice_sample_grad  grad.arg1  2x1x5x4x6  data, not perturbed  max_abs 0.0e+00  ok
func.func @dice_sample(%x: tensor<2x3x5x4x6xf32>, %t: tensor<2x1x5x4x6xf32>) -> tensor<f32> {
  %v1 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = false, include_background} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Two deep-supervision levels, batch_dice, integer and float targets.
// CHECK: dice_levels_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_levels_grad  grad.arg0  2x4x6x5x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_levels_grad  grad.arg1  2x4x3x3x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_levels_grad  grad.arg3  2x1x3x3x2  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: dice_levels_grad  grad.arg0  2x4x6x5x4  fd 16 of 960  max_abs {{.*}}  ok
// FD-NEXT: dice_levels_grad  grad.arg1  2x4x3x3x2  fd 16 of 144  max_abs {{.*}}  ok
// FD-NEXT: dice_levels_grad  grad.arg3  2x1x3x3x2  data, not perturbed  max_abs 0.0e+00  ok
func.func @dice_levels(%l0: tensor<2x4x6x5x4xf32>, %l1: tensor<2x4x3x3x2xf32>, %t0: tensor<2x1x6x5x4xi32>, %t1: tensor<2x1x3x3x2xf32>) -> tensor<f32> {
  %v1 = med.dice_ce logits(%l0, %l1) targets(%t0, %t1) {weights = array<f64: 0.6666666666666666, 0.3333333333333333>, batch_dice = true} : (tensor<2x4x6x5x4xf32>, tensor<2x4x3x3x2xf32>, tensor<2x1x6x5x4xi32>, tensor<2x1x3x3x2xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Two levels, per-sample dice, background included, smooth 1, ce_weight 0.5, dice_weight 2.
// CHECK: dice_levels_sample_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_levels_sample_grad  grad.arg0  2x4x6x5x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_levels_sample_grad  grad.arg1  2x4x3x3x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_levels_sample_grad  grad.arg3  2x1x3x3x2  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: dice_levels_sample_grad  grad.arg0  2x4x6x5x4  fd 16 of 960  max_abs {{.*}}  ok
// FD-NEXT: dice_levels_sample_grad  grad.arg1  2x4x3x3x2  fd 16 of 144  max_abs {{.*}}  ok
// FD-NEXT: dice_levels_sample_grad  grad.arg3  2x1x3x3x2  data, not perturbed  max_abs 0.0e+00  ok
func.func @dice_levels_sample(%l0: tensor<2x4x6x5x4xf32>, %l1: tensor<2x4x3x3x2xf32>, %t0: tensor<2x1x6x5x4xi32>, %t1: tensor<2x1x3x3x2xf32>) -> tensor<f32> {
  %v1 = med.dice_ce logits(%l0, %l1) targets(%t0, %t1) {weights = array<f64: 0.25, 2.0>, batch_dice = false, include_background, smooth = 1.0, ce_weight = 0.5, dice_weight = 2.0} : (tensor<2x4x6x5x4xf32>, tensor<2x4x3x3x2xf32>, tensor<2x1x6x5x4xi32>, tensor<2x1x3x3x2xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Rank 4 (2D), two classes, dice only (ce_weight 0), per-sample.
// CHECK: dice_rank4_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_rank4_grad  grad.arg0  3x2x7x5  max_abs {{.*}}  ok{{$}}
// FD: dice_rank4_grad  grad.arg0  3x2x7x5  fd 16 of 210  max_abs {{.*}}  ok
func.func @dice_rank4(%x: tensor<3x2x7x5xf32>, %t: tensor<3x1x7x5xi64>) -> tensor<f32> {
  %v1 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = false, ce_weight = 0.0} : (tensor<3x2x7x5xf32>, tensor<3x1x7x5xi64>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Dice + CE with an ignore label (class 2 of 3; the targets are the inputs, so that
// medcheck draws class indices): ignored voxels get no gradient; two levels, batch dice.
// CHECK: dice_ignore_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_ignore_grad  grad.arg0  2x3x5x4x6  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_ignore_grad  grad.arg1  2x3x3x2x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_ignore_grad  grad.arg2  2x1x5x4x6  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// CHECK-NEXT: dice_ignore_grad  grad.arg3  2x1x3x2x3  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: dice_ignore_grad  grad.arg0  2x3x5x4x6  fd 16 of 720  max_abs {{.*}}  ok
// FD-NEXT: dice_ignore_grad  grad.arg1  2x3x3x2x3  fd 16 of 108  max_abs {{.*}}  ok
// FD-NEXT: dice_ignore_grad  grad.arg2  2x1x5x4x6  data, not perturbed  max_abs 0.0e+00  ok
func.func @dice_ignore(%x: tensor<2x3x5x4x6xf32>, %l1: tensor<2x3x3x2x3xf32>, %t: tensor<2x1x5x4x6xf32>, %t1: tensor<2x1x3x2x3xf32>) -> tensor<f32> {
  %v1 = med.dice_ce logits(%x, %l1) targets(%t, %t1) {weights = array<f64: 0.6666666666666666, 0.3333333333333333>, ignore_index = 2} : (tensor<2x3x5x4x6xf32>, tensor<2x3x3x2x3xf32>, tensor<2x1x5x4x6xf32>, tensor<2x1x3x2x3xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Every voxel ignored: no CE, Dice of empty sums; the logits get a zero gradient.
// CHECK: dice_all_ignored_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_all_ignored_grad  grad.arg0  2x3x5x4x6  max_abs 0.0e+00  rel 0.0e+00  ok{{$}}
// CHECK-NEXT: dice_all_ignored_grad  grad.arg1  2x1x5x4x6  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: dice_all_ignored_grad  grad.arg0  2x3x5x4x6  fd 16 of 720  max_abs 0.0e+00  {{.*}}  ok
func.func @dice_all_ignored(%x: tensor<2x3x5x4x6xf32>, %t: tensor<2x1x5x4x6xf32>) -> tensor<f32> {
  %zero = med.constant dense<0.0> : tensor<f32>
  %three = med.constant dense<3.0> : tensor<f32>
  %t0 = med.mul %t, %zero : (tensor<2x1x5x4x6xf32>, tensor<f32>) -> tensor<2x1x5x4x6xf32>
  %tall = med.add %t0, %three : (tensor<2x1x5x4x6xf32>, tensor<f32>) -> tensor<2x1x5x4x6xf32>
  %v1 = med.dice_ce logits(%x) targets(%tall) {weights = array<f64: 1.0>, ignore_index = 3} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  return %v1 : tensor<f32>
}

// Logits from a 1x1x1 convolution with parameters, one level.
// CHECK: dice_network_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_network_grad  grad.head.weight  3x2x1x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_network_grad  grad.head.bias  3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_network_grad  grad.arg0  2x2x4x3x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: dice_network_grad  grad.arg1  2x1x4x3x5  max_abs 0.0e+00  rel 0.0e+00  ok (data, zero)
// FD: dice_network_grad  grad.head.weight  3x2x1x1x1  fd 6 of 6  max_abs {{.*}}  ok
// FD-NEXT: dice_network_grad  grad.head.bias  3  fd 3 of 3  max_abs {{.*}}  ok
// FD-NEXT: dice_network_grad  grad.arg0  2x2x4x3x5  fd 16 of 240  max_abs {{.*}}  ok
// FD-NEXT: dice_network_grad  grad.arg1  2x1x4x3x5  data, not perturbed  max_abs 0.0e+00  ok
func.func @dice_network(%x: tensor<2x2x4x3x5xf32>, %t: tensor<2x1x4x3x5xf32>) -> tensor<f32> {
  %v1 = med.param @"head.weight" : tensor<3x2x1x1x1xf32>
  %v2 = med.param @"head.bias" : tensor<3xf32>
  %v3 = med.conv3d %x, %v1, %v2 : (tensor<2x2x4x3x5xf32>, tensor<3x2x1x1x1xf32>, tensor<3xf32>) -> tensor<2x3x4x3x5xf32>
  %v4 = med.dice_ce logits(%v3) targets(%t) {weights = array<f64: 1.0>, batch_dice = true} : (tensor<2x3x4x3x5xf32>, tensor<2x1x4x3x5xf32>) -> tensor<f32>
  return %v4 : tensor<f32>
}

// CHECK: 88 gradient outputs checked against torch autograd, 0 failed (tolerance 1.0e-04, precision f32)
// FD: 65 gradients checked by finite differences (466 elements), 0 failed (tolerance 1.0e-06, f64)
// FWD-NOT: FAIL
// FWD: 111 outputs checked, 0 failed (tolerance 1.0e-04, precision f32)
