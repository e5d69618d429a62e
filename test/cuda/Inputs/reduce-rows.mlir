// Reductions of many outputs over a few terms each (reduce-rows.test): a sum over three
// channels, a maximum over the batch (one thread per output), and a mean over W (1632
// outputs: a block per output).
func.func @f(%x: tensor<2x3x17x16x19xf32>) -> (tensor<2x1x17x16x19xf32>, tensor<1x3x17x16x19xf32>, tensor<2x3x17x16x1xf32>) {
  %0 = med.reduce sum %x {axes = array<i64: 1>, keepdims} : (tensor<2x3x17x16x19xf32>) -> tensor<2x1x17x16x19xf32>
  %1 = med.reduce max %x {axes = array<i64: 0>, keepdims} : (tensor<2x3x17x16x19xf32>) -> tensor<1x3x17x16x19xf32>
  %2 = med.reduce mean %x {axes = array<i64: 4>, keepdims} : (tensor<2x3x17x16x19xf32>) -> tensor<2x3x17x16x1xf32>
  return %0, %1, %2 : tensor<2x1x17x16x19xf32>, tensor<1x3x17x16x19xf32>, tensor<2x3x17x16x1xf32>
}
