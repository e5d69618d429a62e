// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 13 | FileCheck %s

// med.bce_with_logits (torch::binary_cross_entropy_with_logits with the mask rule, pos_weight,
// auto pos_weight and the reductions composed around it) and med.dice_ce (torch's
// cross_entropy + nnU-Net's soft Dice in torch ops). Targets of BCE are U(0,1), masks {0,1},
// Dice targets class indices.

// CHECK: bce_reductions  out0  scalar  max_abs {{.*}}  ok
// CHECK: bce_reductions  out1  scalar  max_abs {{.*}}  ok
// CHECK: bce_reductions  out2  2x3x5x4x3  max_abs {{.*}}  ok
// CHECK: bce_reductions  out3  scalar  max_abs {{.*}}  ok
func.func @bce_reductions(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>) {
  %0 = med.bce_with_logits %x, %y : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %1 = med.bce_with_logits %x, %y {reduction = #med<reduction sum>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %2 = med.bce_with_logits %x, %y {reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %3 = med.bce_with_logits %x, %y {reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>
}

// CHECK: bce_mask  out0  scalar  max_abs {{.*}}  ok
// CHECK: bce_mask  out1  scalar  max_abs {{.*}}  ok
// CHECK: bce_mask  out2  2x3x5x4x3  max_abs {{.*}}  ok
// CHECK: bce_mask  out3  scalar  max_abs {{.*}}  ok
func.func @bce_mask(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>) {
  %0 = med.bce_with_logits %x, %y mask %m : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %1 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction sum>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %2 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %3 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>
}

// An explicit pos_weight (made positive with exp), with and without mask; rank 3.
// CHECK: bce_pos_weight  out0  scalar  max_abs {{.*}}  ok
// CHECK: bce_pos_weight  out1  2x3x5x4x3  max_abs {{.*}}  ok
// CHECK: bce_pos_weight  out2  scalar  max_abs {{.*}}  ok
// CHECK: bce_pos_weight  out3  scalar  max_abs {{.*}}  ok
func.func @bce_pos_weight(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>, %p: tensor<3xf32>, %x3: tensor<4x3x7xf32>, %y3: tensor<4x3x7xf32>) -> (tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>) {
  %pw = med.exp %p : tensor<3xf32>
  %0 = med.bce_with_logits %x, %y pos_weight %pw : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<3xf32>) -> tensor<f32>
  %1 = med.bce_with_logits %x, %y mask %m pos_weight %pw {reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<3xf32>) -> tensor<2x3x5x4x3xf32>
  %2 = med.bce_with_logits %x, %y mask %m pos_weight %pw {reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<3xf32>) -> tensor<f32>
  %3 = med.bce_with_logits %x3, %y3 pos_weight %pw {reduction = #med<reduction sum>} : (tensor<4x3x7xf32>, tensor<4x3x7xf32>, tensor<3xf32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>
}

// auto_pos_weight (BANIS+): p_c = min(neg_c / pos_c, max_pos_weight) from the counted
// targets; the default cap, and a cap of 1.0 that is hit in some channels.
// CHECK: bce_auto  out0  scalar  max_abs {{.*}}  ok
// CHECK: bce_auto  out1  scalar  max_abs {{.*}}  ok
// CHECK: bce_auto  out2  2x3x5x4x3  max_abs {{.*}}  ok
// CHECK: bce_auto  out3  scalar  max_abs {{.*}}  ok
// CHECK: bce_auto  out4  scalar  max_abs {{.*}}  ok
func.func @bce_auto(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>) {
  %0 = med.bce_with_logits %x, %y {auto_pos_weight} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %1 = med.bce_with_logits %x, %y mask %m {auto_pos_weight, reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %2 = med.bce_with_logits %x, %y mask %m {auto_pos_weight, max_pos_weight = 1.0, reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %3 = med.bce_with_logits %x, %y mask %m {auto_pos_weight, max_pos_weight = 1.0, reduction = #med<reduction sum>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %4 = med.bce_with_logits %x, %y mask %m {auto_pos_weight, max_pos_weight = 1.0} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>
}

// Edge cases: a channel without positives (p_c = max_pos_weight), a channel without
// counted elements (contributes 0 to per_channel), a mask with no counted element (0).
// CHECK: bce_edges  out0  scalar  max_abs {{.*}}  ok
// CHECK: bce_edges  out1  scalar  max_abs {{.*}}  ok
// CHECK: bce_edges  out2  2x3x5x4x3  max_abs {{.*}}  ok
// CHECK: bce_edges  out3  scalar  max_abs {{.*}}  ok
// CHECK: bce_edges  out4  scalar  max_abs {{.*}}  ok
func.func @bce_edges(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>) {
  %0 = med.bce_with_logits %x, %y mask %m {auto_pos_weight} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %keep = med.constant dense<[[[[[1.0]]], [[[0.0]]], [[[1.0]]]]]> : tensor<1x3x1x1x1xf32>
  %y1 = med.mul %y, %keep : (tensor<2x3x5x4x3xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x4x3xf32>
  %1 = med.bce_with_logits %x, %y1 mask %m {auto_pos_weight, max_pos_weight = 3.0, reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %2 = med.bce_with_logits %x, %y1 {auto_pos_weight, max_pos_weight = 3.0, reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %m1 = med.mul %m, %keep : (tensor<2x3x5x4x3xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x4x3xf32>
  %3 = med.bce_with_logits %x, %y mask %m1 {auto_pos_weight, reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %zero = med.constant dense<0.0> : tensor<f32>
  %m0 = med.mul %m, %zero : (tensor<2x3x5x4x3xf32>, tensor<f32>) -> tensor<2x3x5x4x3xf32>
  %4 = med.bce_with_logits %x, %y mask %m0 : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>
}

// A mask that is not {0,1} (m * sigmoid(x): 0 where m is, in (0, 1) elsewhere): an
// element counts iff mask != 0, unweighted, for the loss, the counts and auto pos_weight.
// CHECK: bce_soft_mask  out0  scalar  max_abs {{.*}}  ok
// CHECK: bce_soft_mask  out1  2x3x5x4x3  max_abs {{.*}}  ok
// CHECK: bce_soft_mask  out2  scalar  max_abs {{.*}}  ok
// CHECK: bce_soft_mask  out3  scalar  max_abs {{.*}}  ok
func.func @bce_soft_mask(%x: tensor<2x3x5x4x3xf32>, %y: tensor<2x3x5x4x3xf32>, %m: tensor<2x3x5x4x3xf32>) -> (tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>) {
  %s = med.sigmoid %x : tensor<2x3x5x4x3xf32>
  %soft = med.mul %m, %s : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %0 = med.bce_with_logits %x, %y mask %soft : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %1 = med.bce_with_logits %x, %y mask %soft {reduction = #med<reduction none>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %2 = med.bce_with_logits %x, %y mask %soft {auto_pos_weight, reduction = #med<reduction per_channel>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  %3 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction sum>} : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<2x3x5x4x3xf32>, tensor<f32>, tensor<f32>
}

// ---- Dice + CE ----

// One level: batch Dice (the default), per-sample Dice, with the background.
// CHECK: dice_ce_one  out0  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_one  out1  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_one  out2  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_one  out3  scalar  max_abs {{.*}}  ok
func.func @dice_ce_one(%x: tensor<2x3x5x4x6xf32>, %t: tensor<2x1x5x4x6xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  %1 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = false} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  %2 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, include_background} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  %3 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = false, include_background} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// Two deep-supervision levels (integer targets on one), other weights and smooth; two
// classes; rank 4 (2D).
// CHECK: dice_ce_levels  out0  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_levels  out1  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_levels  out2  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_levels  out3  scalar  max_abs {{.*}}  ok
func.func @dice_ce_levels(%l0: tensor<2x4x6x5x4xf32>, %l1: tensor<2x4x3x3x2xf32>, %t0: tensor<2x1x6x5x4xi32>, %t1: tensor<2x1x3x3x2xf32>, %b: tensor<3x2x7x5xf32>, %bt: tensor<3x1x7x5xi64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = med.dice_ce logits(%l0, %l1) targets(%t0, %t1) {weights = array<f64: 0.66666666666666663, 0.33333333333333331>} : (tensor<2x4x6x5x4xf32>, tensor<2x4x3x3x2xf32>, tensor<2x1x6x5x4xi32>, tensor<2x1x3x3x2xf32>) -> tensor<f32>
  %1 = med.dice_ce logits(%l0, %l1) targets(%t0, %t1) {weights = array<f64: 0.25, 2.0>, batch_dice = false, include_background, smooth = 1.0, ce_weight = 0.5, dice_weight = 2.0} : (tensor<2x4x6x5x4xf32>, tensor<2x4x3x3x2xf32>, tensor<2x1x6x5x4xi32>, tensor<2x1x3x3x2xf32>) -> tensor<f32>
  %2 = med.dice_ce logits(%b) targets(%bt) {weights = array<f64: 1.0>} : (tensor<3x2x7x5xf32>, tensor<3x1x7x5xi64>) -> tensor<f32>
  %3 = med.dice_ce logits(%b) targets(%bt) {weights = array<f64: 1.0>, batch_dice = false, ce_weight = 0.0} : (tensor<3x2x7x5xf32>, tensor<3x1x7x5xi64>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// nnU-Net's ignore label: targets 1..C with ignore_index = C (the label above the classes, as
// nnU-Net requires), batch and per-sample Dice, background in or out, two levels; a class
// inside [0, C) ignored (background targets present; these targets are the inputs
// themselves, so that medcheck draws class indices for them); every voxel ignored (no CE, Dice of
// empty sums 1).
// CHECK: dice_ce_ignore  out0  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_ignore  out1  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_ignore  out2  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_ignore  out3  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_ignore  out4  scalar  max_abs {{.*}}  ok
func.func @dice_ce_ignore(%x: tensor<2x3x5x4x6xf32>, %t: tensor<2x1x5x4x6xf32>, %l1: tensor<2x3x3x2x3xf32>, %t1: tensor<2x1x3x2x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %one = med.constant dense<1.0> : tensor<f32>
  %ti = med.add %t, %one : (tensor<2x1x5x4x6xf32>, tensor<f32>) -> tensor<2x1x5x4x6xf32>
  %t1i = med.add %t1, %one : (tensor<2x1x3x2x3xf32>, tensor<f32>) -> tensor<2x1x3x2x3xf32>
  %0 = med.dice_ce logits(%x) targets(%ti) {weights = array<f64: 1.0>, ignore_index = 3} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  %1 = med.dice_ce logits(%x) targets(%ti) {weights = array<f64: 1.0>, batch_dice = false, include_background, ignore_index = 3} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  %2 = med.dice_ce logits(%x, %l1) targets(%ti, %t1i) {weights = array<f64: 0.6666666666666666, 0.3333333333333333>, ignore_index = 3} : (tensor<2x3x5x4x6xf32>, tensor<2x3x3x2x3xf32>, tensor<2x1x5x4x6xf32>, tensor<2x1x3x2x3xf32>) -> tensor<f32>
  %3 = med.dice_ce logits(%x, %l1) targets(%t, %t1) {weights = array<f64: 1.0, 0.5>, batch_dice = false, ignore_index = 1} : (tensor<2x3x5x4x6xf32>, tensor<2x3x3x2x3xf32>, tensor<2x1x5x4x6xf32>, tensor<2x1x3x2x3xf32>) -> tensor<f32>
  %zero = med.constant dense<0.0> : tensor<f32>
  %three = med.constant dense<3.0> : tensor<f32>
  %t0 = med.mul %t, %zero : (tensor<2x1x5x4x6xf32>, tensor<f32>) -> tensor<2x1x5x4x6xf32>
  %tall = med.add %t0, %three : (tensor<2x1x5x4x6xf32>, tensor<f32>) -> tensor<2x1x5x4x6xf32>
  %4 = med.dice_ce logits(%x) targets(%tall) {weights = array<f64: 1.0>, ignore_index = 3} : (tensor<2x3x5x4x6xf32>, tensor<2x1x5x4x6xf32>) -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// More than 16 classes (the CUDA kernel's block-per-class sums) with an ignore label.
// CHECK: dice_ce_ignore_many  out0  scalar  max_abs {{.*}}  ok
// CHECK: dice_ce_ignore_many  out1  scalar  max_abs {{.*}}  ok
func.func @dice_ce_ignore_many(%x: tensor<2x17x3x2x2xf32>, %t: tensor<2x1x3x2x2xf32>) -> (tensor<f32>, tensor<f32>) {
  %0 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, ignore_index = 5} : (tensor<2x17x3x2x2xf32>, tensor<2x1x3x2x2xf32>) -> tensor<f32>
  %1 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>, batch_dice = false, ignore_index = 0} : (tensor<2x17x3x2x2xf32>, tensor<2x1x3x2x2xf32>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// CHECK: 41 outputs checked, 0 failed
