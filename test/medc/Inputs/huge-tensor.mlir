// A static tensor of 2^80 elements: counting its bytes would overflow int64.
func.func @f(%x: tensor<1099511627776x1099511627776xf32>) -> tensor<1099511627776x1099511627776xf32> {
  return %x : tensor<1099511627776x1099511627776xf32>
}
