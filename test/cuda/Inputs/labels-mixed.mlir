// The label transforms in a bf16-mixed function (test/cuda/labels.test): the f32 labels are
// stored in bf16, read as stored by both backends (never rounded again), the results in bf16.
func.func @mixed(%f: tensor<2x1x9x11x7xf32>, %i: tensor<2x1x9x11x7xi32>) -> (tensor<2x3x6x8x4xf32>, tensor<2x3x6x8x4xf32>, tensor<2x1x9x11x7xf32>, tensor<2x2x9x11x7xf32>, tensor<2x1x5x6x4xf32>) attributes {med.precision = "bf16-mixed"} {
  %a, %m = med.affinities %f {offsets = array<i64: 1, 0, 0, 0, 3, 0, 0, 0, 3>, crop_size = array<i64: 6, 8, 4>} : (tensor<2x1x9x11x7xf32>) -> (tensor<2x3x6x8x4xf32>, tensor<2x3x6x8x4xf32>)
  %r = med.remove_label %f {label = -1 : i64, replace_with = 0 : i64} : (tensor<2x1x9x11x7xf32>) -> tensor<2x1x9x11x7xf32>
  %g = med.label_regions %r {regions = [array<i64: 1, 2>, array<i64: 2>]} : (tensor<2x1x9x11x7xf32>) -> tensor<2x2x9x11x7xf32>
  %d = med.downsample_nearest %r {size = array<i64: 5, 6, 4>} : (tensor<2x1x9x11x7xf32>) -> tensor<2x1x5x6x4xf32>
  return %a, %m, %r, %g, %d : tensor<2x3x6x8x4xf32>, tensor<2x3x6x8x4xf32>, tensor<2x1x9x11x7xf32>, tensor<2x2x9x11x7xf32>, tensor<2x1x5x6x4xf32>
}

// Ids 999..1004 computed in f32 (med.fp32) and stored so: read in bf16 (spacing 8 there)
// they would merge; read as stored they stay apart.
func.func @mixed_f32_ids(%f: tensor<2x1x9x11x7xf32>) -> (tensor<2x2x9x11x7xf32>, tensor<2x2x9x11x7xf32>) attributes {med.precision = "bf16-mixed"} {
  %c = med.constant dense<1000.0> : tensor<f32>
  %ids = med.add %f, %c {med.fp32} : (tensor<2x1x9x11x7xf32>, tensor<f32>) -> tensor<2x1x9x11x7xf32>
  %a, %m = med.affinities %ids {offsets = array<i64: 1, 0, 0, 0, 0, 1>, unlabelled_below = 1000 : i64} : (tensor<2x1x9x11x7xf32>) -> (tensor<2x2x9x11x7xf32>, tensor<2x2x9x11x7xf32>)
  return %a, %m : tensor<2x2x9x11x7xf32>, tensor<2x2x9x11x7xf32>
}

// Deep-supervision targets as nnU-Net's pipeline makes them in the step: class indices (−1
// outside) stored in bf16 under bf16-mixed, the coarser level computed from the finer,
// both read by dice_ce as class indices.
func.func @dice_bf16_targets(%x: tensor<2x3x10x12x8xf32>, %x2: tensor<2x3x5x6x4xf32>, %t: tensor<2x1x10x12x8xf32>) -> tensor<f32> attributes {med.precision = "bf16-mixed"} {
  %d = med.downsample_nearest %t {size = array<i64: 5, 6, 4>} : (tensor<2x1x10x12x8xf32>) -> tensor<2x1x5x6x4xf32>
  %l = med.dice_ce logits(%x, %x2) targets(%t, %d) {weights = array<f64: 0.6, 0.4>, batch_dice = false} : (tensor<2x3x10x12x8xf32>, tensor<2x3x5x6x4xf32>, tensor<2x1x10x12x8xf32>, tensor<2x1x5x6x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
