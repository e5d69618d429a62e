// RUN: medc compile %s -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --precision f64 --seed 9 | FileCheck %s
// RUN: medc compile %s --grad -o %t-grad.medc
// RUN: medcheck %t-grad.medc --grad | FileCheck %s --check-prefix=GRAD
// RUN: medcheck %t-grad.medc --fd 3 | FileCheck %s --check-prefix=FD

// med.batch_norm against torch's batch_norm: the training form (the batch's statistics over
// N, D, H, W; the running statistics moved by momentum 0.3 towards the batch's mean and
// unbiased variance) and the eval form (the running statistics normalize and pass through),
// on odd sizes. The running variance is exp of an input, so positive. Its gradient (built
// from forward ops) against torch autograd (f32) and finite differences (f64), in both
// forms; losses are sum(y * r) for random r.

// CHECK: bn_train  out0  2x3x4x5x3  max_abs {{.*}}  ok
// CHECK: bn_train  out1  3  max_abs {{.*}}  ok
// CHECK: bn_train  out2  3  max_abs {{.*}}  ok
func.func @bn_train(%x: tensor<2x3x4x5x3xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %rm: tensor<3xf32>, %a: tensor<3xf32>) -> (tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %rv = med.exp %a : tensor<3xf32>
  %y, %m, %v = med.batch_norm %x, %g, %b, %rm, %rv {training, momentum = 0.3 : f64, epsilon = 1.0e-3 : f64} : (tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y, %m, %v : tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK: bn_eval  out0  2x3x4x5x3  max_abs {{.*}}  ok
// CHECK: bn_eval  out1  3  max_abs {{.*}}  ok
// CHECK: bn_eval  out2  3  max_abs {{.*}}  ok
func.func @bn_eval(%x: tensor<2x3x4x5x3xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %rm: tensor<3xf32>, %a: tensor<3xf32>) -> (tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %rv = med.exp %a : tensor<3xf32>
  %y, %m, %v = med.batch_norm %x, %g, %b, %rm, %rv {momentum = 0.3 : f64} : (tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y, %m, %v : tensor<2x3x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK: 8 outputs checked, 0 failed

// GRAD: bn_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: bn_loss_grad  grad.arg0  2x3x3x4x2  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: bn_loss_grad  grad.arg1  3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: bn_loss_grad  grad.arg2  3  max_abs {{.*}}  ok{{$}}
// FD: bn_loss_grad  grad.arg0  2x3x3x4x2  fd 3 of 144  max_abs {{.*}}  ok
func.func @bn_loss(%x: tensor<2x3x3x4x2xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %r: tensor<2x3x3x4x2xf32>) -> tensor<f32> {
  %rm = med.constant dense<[0.5, -0.25, 1.0]> : tensor<3xf32>
  %rv = med.constant dense<[1.5, 0.75, 2.0]> : tensor<3xf32>
  %y, %m, %v = med.batch_norm %x, %g, %b, %rm, %rv {training} : (tensor<2x3x3x4x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x3x4x2xf32>, tensor<3xf32>, tensor<3xf32>)
  %p = med.mul %y, %r : (tensor<2x3x3x4x2xf32>, tensor<2x3x3x4x2xf32>) -> tensor<2x3x3x4x2xf32>
  %l = med.reduce sum %p {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x3x4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// GRAD: bn_eval_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: bn_eval_loss_grad  grad.arg0  2x3x3x4x2  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: bn_eval_loss_grad  grad.arg1  3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: bn_eval_loss_grad  grad.arg2  3  max_abs {{.*}}  ok{{$}}
// FD: bn_eval_loss_grad  grad.arg0  2x3x3x4x2  fd 3 of 144  max_abs {{.*}}  ok
func.func @bn_eval_loss(%x: tensor<2x3x3x4x2xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %r: tensor<2x3x3x4x2xf32>) -> tensor<f32> {
  %rm = med.constant dense<[0.5, -0.25, 1.0]> : tensor<3xf32>
  %rv = med.constant dense<[1.5, 0.75, 2.0]> : tensor<3xf32>
  %y, %m, %v = med.batch_norm %x, %g, %b, %rm, %rv : (tensor<2x3x3x4x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x3x4x2xf32>, tensor<3xf32>, tensor<3xf32>)
  %p = med.mul %y, %r : (tensor<2x3x3x4x2xf32>, tensor<2x3x3x4x2xf32>) -> tensor<2x3x3x4x2xf32>
  %l = med.reduce sum %p {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x3x4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
