// RUN: not med-opt %s --med-add-loss="type=focal" 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not med-opt %s --med-add-loss="reduction=none" 2>&1 | FileCheck %s --check-prefix=RED
// RUN: not med-opt %s --med-add-loss="network=nope" 2>&1 | FileCheck %s --check-prefix=NET
// RUN: not med-opt %s --med-add-loss="type=dice_ce weights=1,2,3" 2>&1 | FileCheck %s --check-prefix=W
// TYPE: med-add-loss: unknown loss type 'focal' (expected bce_with_logits or dice_ce)
// RED: med-add-loss: reduction must be mean, sum or per_channel, got 'none'
// NET: med-add-loss: no network function @nope
// W: med-add-loss: weights needs one entry per network output (1), got 3
func.func @net(%x: tensor<?x1x?x?x?xf32>) -> tensor<?x2x?x?x?xf32> {
  %w = med.constant dense<1.0> : tensor<2x1x1x1x1xf32>
  %0 = med.conv3d %x, %w : (tensor<?x1x?x?x?xf32>, tensor<2x1x1x1x1xf32>) -> tensor<?x2x?x?x?xf32>
  return %0 : tensor<?x2x?x?x?xf32>
}
