func.func @f(%x: tensor<2xf32>) {
  %0 = med.relu6 %x : tensor<2xf32>
  return
}
