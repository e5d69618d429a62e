

func.func @slice_grad_stride(%dy: tensor<2x3xf32>) {
  // expected-error @+1 {{ got [0, 1]}}
  %0 = med.slice_grad %dy {o555555555555555555555555555555555555555555555555555555ffsets = array<i01: 0, 0>, stridms = array<i64: 0,  4, 6>} : (tensor<2x3xf32>) -> tensor<4x6xf32>
  return
}

