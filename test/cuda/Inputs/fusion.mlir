// Elementwise fusions the CUDA backend runs as one kernel each (test/cuda/fusion.test), at
// odd sizes: remainders of the vector lanes, inputs broadcast per channel (read once per
// thread), along inner axes (read element by element) and as scalars.
func.func @bias_gelu_residual(%x: tensor<2x5x3x7x3xf32>, %b: tensor<1x5x1x1x1xf32>, %r: tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32> {
  %0 = med.add %x, %b : (tensor<2x5x3x7x3xf32>, tensor<1x5x1x1x1xf32>) -> tensor<2x5x3x7x3xf32>
  %1 = med.gelu %0 : tensor<2x5x3x7x3xf32>
  %2 = med.add %1, %r : (tensor<2x5x3x7x3xf32>, tensor<2x5x3x7x3xf32>) -> tensor<2x5x3x7x3xf32>
  return %2 : tensor<2x5x3x7x3xf32>
}
func.func @ema(%e: tensor<3x5x7xf32>, %p: tensor<3x5x7xf32>, %d: tensor<f32>) -> tensor<3x5x7xf32> {
  %0 = med.sub %p, %e : (tensor<3x5x7xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  %1 = med.mul %0, %d : (tensor<3x5x7xf32>, tensor<f32>) -> tensor<3x5x7xf32>
  %2 = med.add %e, %1 : (tensor<3x5x7xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  return %2 : tensor<3x5x7xf32>
}
func.func @inner_broadcast(%x: tensor<2x3x5x7xf32>, %w: tensor<1x1x5x1xf32>, %v: tensor<7xf32>, %g: tensor<2x3x5x7xf32>) -> tensor<2x3x5x7xf32> {
  %0 = med.mul %x, %w : (tensor<2x3x5x7xf32>, tensor<1x1x5x1xf32>) -> tensor<2x3x5x7xf32>
  %1 = med.sigmoid %0 : tensor<2x3x5x7xf32>
  %2 = med.sub %1, %v : (tensor<2x3x5x7xf32>, tensor<7xf32>) -> tensor<2x3x5x7xf32>
  %3 = med.max %2, %x : (tensor<2x3x5x7xf32>, tensor<2x3x5x7xf32>) -> tensor<2x3x5x7xf32>
  %4 = med.gelu_grad %3, %g : (tensor<2x3x5x7xf32>, tensor<2x3x5x7xf32>) -> tensor<2x3x5x7xf32>
  %5 = med.neg %4 : tensor<2x3x5x7xf32>
  %6 = med.exp %5 : tensor<2x3x5x7xf32>
  %7 = med.div %6, %w : (tensor<2x3x5x7xf32>, tensor<1x1x5x1xf32>) -> tensor<2x3x5x7xf32>
  return %7 : tensor<2x3x5x7xf32>
}
