// log(−exp(x)) is NaN for every x: a result that is NaN everywhere.
func.func @nowhere(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %e = med.exp %x : tensor<3x5xf32>
  %n = med.neg %e : tensor<3x5xf32>
  %y = med.log %n : tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}
// The chain without the negation: finite everywhere (the positive control).
func.func @finite(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %e = med.exp %x : tensor<3x5xf32>
  %y = med.log %e : tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}
