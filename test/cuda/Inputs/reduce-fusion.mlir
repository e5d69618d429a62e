// `reduce` fusions (med-form-reduce-fusions) the CUDA backend runs as one split sum each
// (test/cuda/reduce-fusion.test): a contrast transform's mean, minimum and maximum per
// channel volume (odd sizes, rows that are no multiple of a vector), and a sum with a max
// over a whole sample whose rows are vectors.
func.func @contrast(%x: tensor<2x3x9x8x7xf32>) -> tensor<2x3x9x8x7xf32> {
  %mean = med.reduce mean %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x9x8x7xf32>) -> tensor<2x3x1x1x1xf32>
  %lo = med.reduce min %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x9x8x7xf32>) -> tensor<2x3x1x1x1xf32>
  %hi = med.reduce max %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x3x9x8x7xf32>) -> tensor<2x3x1x1x1xf32>
  %d = med.sub %x, %mean : (tensor<2x3x9x8x7xf32>, tensor<2x3x1x1x1xf32>) -> tensor<2x3x9x8x7xf32>
  %m = med.max %d, %lo : (tensor<2x3x9x8x7xf32>, tensor<2x3x1x1x1xf32>) -> tensor<2x3x9x8x7xf32>
  %c = med.min %m, %hi : (tensor<2x3x9x8x7xf32>, tensor<2x3x1x1x1xf32>) -> tensor<2x3x9x8x7xf32>
  return %c : tensor<2x3x9x8x7xf32>
}
func.func @sample(%x: tensor<3x2x16x8xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %s = med.reduce sum %x {axes = array<i64: 1, 2, 3>} : (tensor<3x2x16x8xf32>) -> tensor<3xf32>
  %m = med.reduce max %x {axes = array<i64: 1, 2, 3>} : (tensor<3x2x16x8xf32>) -> tensor<3xf32>
  return %s, %m : tensor<3xf32>, tensor<3xf32>
}
// Larger volumes: each output's terms split into parts, one block each, then combined.
func.func @large(%x: tensor<2x1x48x48x40xf32>) -> (tensor<2x1x1x1x1xf32>, tensor<2x1x1x1x1xf32>, tensor<2x1x1x1x1xf32>) {
  %mean = med.reduce mean %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x1x48x48x40xf32>) -> tensor<2x1x1x1x1xf32>
  %lo = med.reduce min %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x1x48x48x40xf32>) -> tensor<2x1x1x1x1xf32>
  %hi = med.reduce max %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x1x48x48x40xf32>) -> tensor<2x1x1x1x1xf32>
  return %mean, %lo, %hi : tensor<2x1x1x1x1xf32>, tensor<2x1x1x1x1xf32>, tensor<2x1x1x1x1xf32>
}
