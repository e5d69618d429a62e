// A comment may say array<i1: 0>, a string too.
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> attributes {s = "array<i1: 0>"} {
  %0 = med.neg %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}
