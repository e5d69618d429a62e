func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = med.neg %x {b = array<i01 :1,0>} : tensor<2xf32>
  return %0 : tensor<2xf32>
}
