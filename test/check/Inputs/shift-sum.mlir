// The losses of shift-sum.test, not a test itself: depthwise convolutions that
// med-shift-sum makes shift-sums, each loss sum(y · r) for a random r so that every output
// element carries its own weight. Odd sizes (7x9x11) and channel counts (5, 3, 7).
med.parameter @"k3.weight" : tensor<5x1x3x3x3xf32> init uniform(27)
med.parameter @"k3.bias" : tensor<5xf32> init uniform(27)
med.parameter @"k5.weight" : tensor<3x1x5x5x5xf32> init uniform(125)

// k3 with bias, weight and bias as parameters.
func.func @k3_bias(%x: tensor<2x5x7x9x11xf32>, %r: tensor<2x5x7x9x11xf32>) -> tensor<f32> {
  %w = med.param @"k3.weight" : tensor<5x1x3x3x3xf32>
  %b = med.param @"k3.bias" : tensor<5xf32>
  %0 = med.conv3d %x, %w, %b {groups = 5 : i64, padding = array<i64: 1, 1, 1>} : (tensor<2x5x7x9x11xf32>, tensor<5x1x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x7x9x11xf32>
  %1 = med.mul %0, %r : (tensor<2x5x7x9x11xf32>, tensor<2x5x7x9x11xf32>) -> tensor<2x5x7x9x11xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x5x7x9x11xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// k5 without bias, applied twice (the second reads the first's result).
func.func @k5_twice(%x: tensor<1x3x7x9x11xf32>, %r: tensor<1x3x7x9x11xf32>) -> tensor<f32> {
  %w = med.param @"k5.weight" : tensor<3x1x5x5x5xf32>
  %0 = med.conv3d %x, %w {groups = 3 : i64, padding = array<i64: 2, 2, 2>} : (tensor<1x3x7x9x11xf32>, tensor<3x1x5x5x5xf32>) -> tensor<1x3x7x9x11xf32>
  %1 = med.conv3d %0, %w {groups = 3 : i64, padding = array<i64: 2, 2, 2>} : (tensor<1x3x7x9x11xf32>, tensor<3x1x5x5x5xf32>) -> tensor<1x3x7x9x11xf32>
  %2 = med.mul %1, %r : (tensor<1x3x7x9x11xf32>, tensor<1x3x7x9x11xf32>) -> tensor<1x3x7x9x11xf32>
  %3 = med.reduce sum %2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x3x7x9x11xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// A kernel of a different odd size per axis (3, 5, 1), weight and bias as arguments.
func.func @mixed(%x: tensor<2x7x5x7x9xf32>, %w: tensor<7x1x3x5x1xf32>, %b: tensor<7xf32>, %r: tensor<2x7x5x7x9xf32>) -> tensor<f32> {
  %0 = med.conv3d %x, %w, %b {groups = 7 : i64, padding = array<i64: 1, 2, 0>} : (tensor<2x7x5x7x9xf32>, tensor<7x1x3x5x1xf32>, tensor<7xf32>) -> tensor<2x7x5x7x9xf32>
  %1 = med.mul %0, %r : (tensor<2x7x5x7x9xf32>, tensor<2x7x5x7x9xf32>) -> tensor<2x7x5x7x9xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x7x5x7x9xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
