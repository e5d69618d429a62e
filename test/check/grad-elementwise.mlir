// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 2 | FileCheck %s --check-prefix=FD
// RUN: medcheck %t.medc | FileCheck %s --check-prefix=FWD

// Gradients of the elementwise ops (gelu, sigmoid, neg, exp, log, sqrt; add, sub, mul, div
// with broadcasting: rank differences, size-1 axes, scalars, both sides) against torch
// autograd (--grad, f32) and central finite differences (--fd, f64). Also: a value used
// several times (fan-out), a parameter read twice (accumulation), med.constant in the graph,
// and a loss with a second result. Losses are sum(y * r) for random r.

med.parameter @"e.scale" : tensor<3x1x1xf32> init uniform(2)
med.parameter @"e.shift" : tensor<3x1x1xf32> init uniform(2)

// GELU (exact erf form): med.gelu_grad.
// CHECK: gelu_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gelu_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: gelu_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: gelu_loss_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: gelu_loss_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @gelu_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.gelu %x : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// sigmoid: the rule uses the forward result, s * (1 - s).
// CHECK: sigmoid_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: sigmoid_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: sigmoid_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: sigmoid_loss_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: sigmoid_loss_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @sigmoid_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.sigmoid %x : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// neg.
// CHECK: neg_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: neg_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: neg_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: neg_loss_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: neg_loss_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @neg_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.neg %x : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// exp: the rule uses the forward result.
// CHECK: exp_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: exp_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: exp_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: exp_loss_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: exp_loss_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @exp_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.exp %x : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// log on positive values: log(x * x + 0.5); x is used twice (fan-out), 0.5 is a med.constant.
// CHECK: log_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: log_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: log_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: log_loss_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: log_loss_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @log_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.mul %x, %x : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v2 = med.constant dense<5.000000e-01> : tensor<f32>
  %v3 = med.add %v1, %v2 : (tensor<2x3x4x5xf32>, tensor<f32>) -> tensor<2x3x4x5xf32>
  %v4 = med.log %v3 : tensor<2x3x4x5xf32>
  %v5 = med.mul %v4, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v6 = med.reduce sum %v5 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v6 : tensor<f32>
}

// sqrt on positive values: sqrt(exp(x)); the rule divides by the forward result.
// CHECK: sqrt_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: sqrt_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: sqrt_loss_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: sqrt_loss_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: sqrt_loss_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @sqrt_loss(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.exp %x : tensor<2x3x4x5xf32>
  %v2 = med.sqrt %v1 : tensor<2x3x4x5xf32>
  %v3 = med.mul %v2, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v4 = med.reduce sum %v3 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v4 : tensor<f32>
}

// add with a rank difference: (2x3x4x5) + (4x5); b's gradient sums over the leading axes.
// CHECK: add_rank_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: add_rank_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: add_rank_grad  grad.arg1  4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: add_rank_grad  grad.arg2  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: add_rank_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: add_rank_grad  grad.arg1  4x5  fd 2 of 20  max_abs {{.*}}  ok
// FD-NEXT: add_rank_grad  grad.arg2  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @add_rank(%a: tensor<2x3x4x5xf32>, %b: tensor<4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.add %a, %b : (tensor<2x3x4x5xf32>, tensor<4x5xf32>) -> tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// sub with size-1 axes on the left operand: (2x1x4x1) - (2x3x4x5).
// CHECK: sub_ones_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: sub_ones_grad  grad.arg0  2x1x4x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: sub_ones_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: sub_ones_grad  grad.arg2  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: sub_ones_grad  grad.arg0  2x1x4x1  fd 2 of 8  max_abs {{.*}}  ok
// FD-NEXT: sub_ones_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: sub_ones_grad  grad.arg2  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @sub_ones(%a: tensor<2x1x4x1xf32>, %b: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.sub %a, %b : (tensor<2x1x4x1xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// mul by a rank-0 argument: its gradient sums over everything.
// CHECK: mul_scalar_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: mul_scalar_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: mul_scalar_grad  grad.arg1  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: mul_scalar_grad  grad.arg2  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: mul_scalar_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: mul_scalar_grad  grad.arg1  scalar  fd 1 of 1  max_abs {{.*}}  ok
// FD-NEXT: mul_scalar_grad  grad.arg2  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @mul_scalar(%a: tensor<2x3x4x5xf32>, %s: tensor<f32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.mul %a, %s : (tensor<2x3x4x5xf32>, tensor<f32>) -> tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// mul where both operands broadcast: (2x1x4) * (3x1) -> 2x3x4.
// CHECK: mul_both_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: mul_both_grad  grad.arg0  2x1x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: mul_both_grad  grad.arg1  3x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: mul_both_grad  grad.arg2  2x3x4  max_abs {{.*}}  ok{{$}}
// FD: mul_both_grad  grad.arg0  2x1x4  fd 2 of 8  max_abs {{.*}}  ok
// FD-NEXT: mul_both_grad  grad.arg1  3x1  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: mul_both_grad  grad.arg2  2x3x4  fd 2 of 24  max_abs {{.*}}  ok
func.func @mul_both(%a: tensor<2x1x4xf32>, %b: tensor<3x1xf32>, %r: tensor<2x3x4xf32>) -> tensor<f32> {
  %v1 = med.mul %a, %b : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// div: a / exp(b) (positive denominators, (3x1x1) broadcast) and exp(s) / exp(a)
// (a scalar numerator); a feeds both.
// CHECK: div_broadcast_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: div_broadcast_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: div_broadcast_grad  grad.arg1  3x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: div_broadcast_grad  grad.arg2  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: div_broadcast_grad  grad.arg3  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: div_broadcast_grad  grad.arg4  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: div_broadcast_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: div_broadcast_grad  grad.arg1  3x1x1  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: div_broadcast_grad  grad.arg2  scalar  fd 1 of 1  max_abs {{.*}}  ok
// FD-NEXT: div_broadcast_grad  grad.arg3  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: div_broadcast_grad  grad.arg4  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @div_broadcast(%a: tensor<2x3x4x5xf32>, %b: tensor<3x1x1xf32>, %s: tensor<f32>, %r: tensor<2x3x4x5xf32>, %r2: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.exp %b : tensor<3x1x1xf32>
  %v2 = med.div %a, %v1 : (tensor<2x3x4x5xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.exp %s : tensor<f32>
  %v4 = med.exp %a : tensor<2x3x4x5xf32>
  %v5 = med.div %v3, %v4 : (tensor<f32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v6 = med.mul %v2, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v7 = med.reduce sum %v6 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  %v8 = med.mul %v5, %r2 : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v9 = med.reduce sum %v8 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  %v10 = med.add %v7, %v9 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %v10 : tensor<f32>
}

// A value used three times: y = gelu(x); z = y * y + sigmoid(y).
// CHECK: fan_out_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: fan_out_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: fan_out_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: fan_out_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: fan_out_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @fan_out(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.gelu %x : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %v1 : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.sigmoid %v1 : tensor<2x3x4x5xf32>
  %v4 = med.add %v2, %v3 : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v5 = med.mul %v4, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v6 = med.reduce sum %v5 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v6 : tensor<f32>
}

// A parameter read twice (two med.param of e.scale) and one broadcast from rank 3:
// x * scale + scale * scale + shift; the gradient of scale accumulates three terms.
// CHECK: param_twice_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: param_twice_grad  grad.e.scale  3x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: param_twice_grad  grad.e.shift  3x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: param_twice_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: param_twice_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: param_twice_grad  grad.e.scale  3x1x1  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: param_twice_grad  grad.e.shift  3x1x1  fd 2 of 3  max_abs {{.*}}  ok
// FD-NEXT: param_twice_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: param_twice_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @param_twice(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.param @"e.scale" : tensor<3x1x1xf32>
  %v2 = med.param @"e.scale" : tensor<3x1x1xf32>
  %v3 = med.param @"e.shift" : tensor<3x1x1xf32>
  %v4 = med.mul %x, %v1 : (tensor<2x3x4x5xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x5xf32>
  %v5 = med.mul %v2, %v1 : (tensor<3x1x1xf32>, tensor<3x1x1xf32>) -> tensor<3x1x1xf32>
  %v6 = med.add %v4, %v5 : (tensor<2x3x4x5xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x5xf32>
  %v7 = med.add %v6, %v3 : (tensor<2x3x4x5xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x5xf32>
  %v8 = med.mul %v7, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v9 = med.reduce sum %v8 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v9 : tensor<f32>
}

// A non-splat med.constant in the graph: (x - c) * c * sigmoid(x), c = [0.5, -1, 2].
// CHECK: constant_tensor_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: constant_tensor_grad  grad.arg0  2x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: constant_tensor_grad  grad.arg1  2x3  max_abs {{.*}}  ok{{$}}
// FD: constant_tensor_grad  grad.arg0  2x3  fd 2 of 6  max_abs {{.*}}  ok
// FD-NEXT: constant_tensor_grad  grad.arg1  2x3  fd 2 of 6  max_abs {{.*}}  ok
func.func @constant_tensor(%x: tensor<2x3xf32>, %r: tensor<2x3xf32>) -> tensor<f32> {
  %v1 = med.constant dense<[5.000000e-01, -1.000000e+00, 2.000000e+00]> : tensor<3xf32>
  %v2 = med.sub %x, %v1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %v3 = med.mul %v2, %v1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %v4 = med.sigmoid %x : tensor<2x3xf32>
  %v5 = med.mul %v3, %v4 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %v6 = med.mul %v5, %r : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %v7 = med.reduce sum %v6 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  return %v7 : tensor<f32>
}

// A loss with a second result: f_grad returns out0 and out1, then the gradients.
// CHECK: two_results_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: two_results_grad  out1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: two_results_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: two_results_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: two_results_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: two_results_grad  grad.arg1  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
func.func @two_results(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>) -> (tensor<f32>, tensor<2x3x4x5xf32>) {
  %v1 = med.gelu %x : tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3, %v1 : tensor<f32>, tensor<2x3x4x5xf32>
}

// pow (nnU-Net's gamma: a positive base to a power per sample and channel, broadcast): both
// gradients, b·a^(b−1) for the base and a^b·log a for the power, summed back over the
// broadcast axes. The base is exp(x), positive.
// CHECK: pow_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: pow_loss_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: pow_loss_grad  grad.arg1  2x3x1x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: pow_loss_grad  grad.arg2  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: pow_loss_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: pow_loss_grad  grad.arg1  2x3x1x1  fd 2 of 6  max_abs {{.*}}  ok
// FWD: pow_loss  out0  scalar  max_abs {{.*}}  ok
func.func @pow_loss(%x: tensor<2x3x4x5xf32>, %g: tensor<2x3x1x1xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %b = med.exp %x : tensor<2x3x4x5xf32>
  %v1 = med.pow %b, %g : (tensor<2x3x4x5xf32>, tensor<2x3x1x1xf32>) -> tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// CHECK: 59 gradient outputs checked against torch autograd, 0 failed (tolerance 1.0e-04, precision f32)
// FD: 42 gradients checked by finite differences (82 elements), 0 failed (tolerance 1.0e-06, f64)
// FWD-NOT: FAIL
// FWD: 76 outputs checked, 0 failed (tolerance 1.0e-04, precision f32)

