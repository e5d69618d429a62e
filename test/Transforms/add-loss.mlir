// RUN: med-opt %s --med-add-loss="network=net mask=true reduction=per_channel auto-pos-weight=true" | FileCheck %s --check-prefix=BCE
// RUN: med-opt %s --med-add-loss="type=dice_ce network=ds" | FileCheck %s --check-prefix=DICE

// Masked binary cross-entropy gives @loss(image, target, mask) calls the network, which becomes private.
// BCE: func.func private @net
// BCE-LABEL: func.func @loss
// BCE-SAME: (%[[X:.*]]: tensor<?x1x?x?x?xf32>, %[[T:.*]]: tensor<?x6x?x?x?xf32>, %[[M:.*]]: tensor<?x6x?x?x?xf32>) -> tensor<f32>
// BCE-SAME: med.input_names = ["image", "target", "mask"]
// BCE: %[[L:.*]] = call @net(%[[X]])
// BCE: med.bce_with_logits %[[L]], %[[T]] mask %[[M]] {auto_pos_weight, reduction = #med<reduction per_channel>}
// BCE-LABEL: func.func @infer
// BCE-SAME: (%[[I:.*]]: tensor<?x1x?x?x?xf32>) -> tensor<?x6x?x?x?xf32>
// BCE-SAME: med.input_names = ["image"]
// BCE: %[[O:.*]] = call @net(%[[I]])
// BCE: return %[[O]]
// BCE: func.func private @ds
func.func @net(%x: tensor<?x1x?x?x?xf32>) -> tensor<?x6x?x?x?xf32> {
  %w = med.constant dense<1.0> : tensor<6x1x1x1x1xf32>
  %0 = med.conv3d %x, %w : (tensor<?x1x?x?x?xf32>, tensor<6x1x1x1x1xf32>) -> tensor<?x6x?x?x?xf32>
  return %0 : tensor<?x6x?x?x?xf32>
}

// Dice+CE over deep-supervision outputs: one class-index target per output, weights
// 1, 1/2 normalized.
// DICE-LABEL: func.func @loss
// DICE-SAME: (%[[X:.*]]: tensor<?x1x?x?x?xf32>, %[[T0:.*]]: tensor<?x1x?x?x?xf32> {med.downsample = 1 : i64}, %[[T1:.*]]: tensor<?x1x?x?x?xf32> {med.downsample = 2 : i64}) -> tensor<f32>
// DICE-SAME: med.input_names = ["image", "target.0", "target.1"]
// DICE: %[[O:.*]]:2 = call @ds(%[[X]])
// DICE: med.dice_ce logits(%[[O]]#0, %[[O]]#1) targets(%[[T0]], %[[T1]]) {weights = array<f64: 0.66666666666666663, 0.33333333333333331>}
func.func @ds(%x: tensor<?x1x?x?x?xf32>) -> (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) {
  %w = med.constant dense<1.0> : tensor<3x1x1x1x1xf32>
  %0 = med.conv3d %x, %w : (tensor<?x1x?x?x?xf32>, tensor<3x1x1x1x1xf32>) -> tensor<?x3x?x?x?xf32>
  %1 = med.conv3d %x, %w {stride = array<i64: 2, 2, 2>} : (tensor<?x1x?x?x?xf32>, tensor<3x1x1x1x1xf32>) -> tensor<?x3x?x?x?xf32>
  return %0, %1 : tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>
}
