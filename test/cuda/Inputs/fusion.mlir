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
// One parameter's update as medc forms it: the clipped gradient, AdamW and the EMA as one
// kernel with four results (the step is a constant: at least 1).
func.func @optimizer(%p: tensor<3x5x7xf32>, %g: tensor<3x5x7xf32>, %m: tensor<3x5x7xf32>, %v: tensor<3x5x7xf32>, %e: tensor<3x5x7xf32>, %c: tensor<f32>, %k: tensor<f32>) -> (tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>) {
  %lr = med.constant dense<0.01> : tensor<f32>
  %t = med.constant dense<3.0> : tensor<f32>
  %vv = med.mul %v, %v : (tensor<3x5x7xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  %cg = med.mul %g, %c : (tensor<3x5x7xf32>, tensor<f32>) -> tensor<3x5x7xf32>
  %n:3 = med.adamw %p, %cg, %m, %vv, %lr, %t {weight_decay = 0.05} : (tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<f32>, tensor<f32>) -> (tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>)
  %d = med.sub %n#0, %e : (tensor<3x5x7xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  %s = med.mul %d, %k : (tensor<3x5x7xf32>, tensor<f32>) -> tensor<3x5x7xf32>
  %u = med.add %e, %s : (tensor<3x5x7xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  return %n#0, %n#1, %n#2, %u : tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>
}
func.func @sgd(%p: tensor<2x3x5xf32>, %g: tensor<2x3x5xf32>, %b: tensor<2x3x5xf32>, %lr: tensor<f32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
  %gg = med.neg %g : tensor<2x3x5xf32>
  %n:2 = med.sgd %p, %gg, %b, %lr {momentum = 0.9, weight_decay = 0.01, nesterov} : (tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<f32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>)
  return %n#0, %n#1 : tensor<2x3x5xf32>, tensor<2x3x5xf32>
}
// Random numbers drawn in fused kernels by each element's counter: a per-sample parameter
// scaled into its range (the draws' shape operand is not read), and noise added to a volume
// of odd size (the lanes' remainder).
func.func @draws(%v: tensor<2x1x9x9x9xf32>, %key: tensor<i64>, %x: tensor<2x3x5x4x3xf32>) -> (tensor<2x3xf32>, tensor<2x3x5x4x3xf32>) {
  %w = med.constant dense<0.4> : tensor<f32>
  %lo = med.constant dense<0.8> : tensor<f32>
  %u = med.random %key, %v {stream = 1 : i64, sample_shape = array<i64: 3>} : (tensor<i64>, tensor<2x1x9x9x9xf32>) -> tensor<2x3xf32>
  %s = med.mul %u, %w : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %p = med.add %s, %lo : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %r = med.random %key, %x {stream = 2 : i64, distribution = #med<distribution normal>} : (tensor<i64>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  %n = med.mul %r, %w : (tensor<2x3x5x4x3xf32>, tensor<f32>) -> tensor<2x3x5x4x3xf32>
  %y = med.add %x, %n : (tensor<2x3x5x4x3xf32>, tensor<2x3x5x4x3xf32>) -> tensor<2x3x5x4x3xf32>
  return %p, %y : tensor<2x3xf32>, tensor<2x3x5x4x3xf32>
}
