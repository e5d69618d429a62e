// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 3 --fd-params '^(arg|tie)' | FileCheck %s --check-prefix=FD
// RUN: medcheck %t.medc | FileCheck %s --check-prefix=FWD

// Gradients of med.max / med.min (med.extremum_grad, with broadcasting) and of med.reduce
// max / min (med.reduce_extremum_grad) against torch autograd of torch.maximum / minimum /
// amax / amin (--grad, f32) and central finite differences (--fd, f64). Losses are
// sum(y * r) for random r.
//
// Ties: torch gives each side of a tied max / min half the gradient, and an amax / amin
// shares it evenly among the tied elements. Parameters initialized to zeros or ones tie
// exactly. A central difference at a binary tie is half the gradient too, so --fd checks
// the tie.* parameters as well; at a reduction tie of k > 2 elements it is not 1/k (the
// function has a kink there), so --fd leaves the flat.* parameters out.

med.parameter @"tie.a" : tensor<3x1x5xf32> init zeros
med.parameter @"tie.b" : tensor<4x1xf32> init zeros
med.parameter @"flat.w" : tensor<3x4x5xf32> init ones

// max with broadcasting on both sides: (2x3x4x5) vs (3x1x5).
// CHECK: max_broadcast_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_broadcast_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_broadcast_grad  grad.arg1  3x1x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_broadcast_grad  grad.arg2  2x3x4x5  max_abs {{.*}}  ok{{$}}
// FD: max_broadcast_grad  grad.arg0  2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
// FD-NEXT: max_broadcast_grad  grad.arg1  3x1x5  fd 3 of 15  max_abs {{.*}}  ok
// FD-NEXT: max_broadcast_grad  grad.arg2  2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
func.func @max_broadcast(%a: tensor<2x3x4x5xf32>, %b: tensor<3x1x5xf32>, %r: tensor<2x3x4x5xf32>) -> tensor<f32> {
  %v1 = med.max %a, %b : (tensor<2x3x4x5xf32>, tensor<3x1x5xf32>) -> tensor<2x3x4x5xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// min of a rank-0 argument (lhs) and a tensor; the scalar's gradient sums over everything.
// CHECK: min_scalar_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: min_scalar_grad  grad.arg0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: min_scalar_grad  grad.arg1  3x5x7  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: min_scalar_grad  grad.arg2  3x5x7  max_abs {{.*}}  ok{{$}}
// FD: min_scalar_grad  grad.arg0  scalar  fd 1 of 1  max_abs {{.*}}  ok
// FD-NEXT: min_scalar_grad  grad.arg1  3x5x7  fd 3 of 105  max_abs {{.*}}  ok
// FD-NEXT: min_scalar_grad  grad.arg2  3x5x7  fd 3 of 105  max_abs {{.*}}  ok
func.func @min_scalar(%s: tensor<f32>, %a: tensor<3x5x7xf32>, %r: tensor<3x5x7xf32>) -> tensor<f32> {
  %v1 = med.min %s, %a : (tensor<f32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  %v2 = med.mul %v1, %r : (tensor<3x5x7xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2>} : (tensor<3x5x7xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// A clamp (max with the constant 0, then min with 1) followed by GELU: the constants get
// nothing, x only where it lies inside.
// CHECK: clamp_gelu_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: clamp_gelu_grad  grad.arg0  2x3x5x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: clamp_gelu_grad  grad.arg1  2x3x5x3  max_abs {{.*}}  ok{{$}}
// FD: clamp_gelu_grad  grad.arg0  2x3x5x3  fd 3 of 90  max_abs {{.*}}  ok
// FD-NEXT: clamp_gelu_grad  grad.arg1  2x3x5x3  fd 3 of 90  max_abs {{.*}}  ok
func.func @clamp_gelu(%x: tensor<2x3x5x3xf32>, %r: tensor<2x3x5x3xf32>) -> tensor<f32> {
  %zero = med.constant dense<0.0> : tensor<f32>
  %one = med.constant dense<1.0> : tensor<f32>
  %v1 = med.max %x, %zero : (tensor<2x3x5x3xf32>, tensor<f32>) -> tensor<2x3x5x3xf32>
  %v2 = med.min %v1, %one : (tensor<2x3x5x3xf32>, tensor<f32>) -> tensor<2x3x5x3xf32>
  %v3 = med.gelu %v2 : tensor<2x3x5x3xf32>
  %v4 = med.mul %v3, %r : (tensor<2x3x5x3xf32>, tensor<2x3x5x3xf32>) -> tensor<2x3x5x3xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x5x3xf32>) -> tensor<f32>
  return %v5 : tensor<f32>
}

// Ties: tie.a (3x1x5) and tie.b (4x1) are zeros, so max(a, b) ties at every element and each
// side gets half; then max with x keeps that gradient where x < 0. min(b, a) likewise.
// CHECK: max_ties_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_ties_grad  grad.tie.a  3x1x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_ties_grad  grad.tie.b  4x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_ties_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_ties_grad  grad.arg1  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: max_ties_grad  grad.arg2  3x4x5  max_abs {{.*}}  ok{{$}}
// FD: max_ties_grad  grad.tie.a  3x1x5  fd 3 of 15  max_abs {{.*}}  ok
// FD-NEXT: max_ties_grad  grad.tie.b  4x1  fd 3 of 4  max_abs {{.*}}  ok
// FD-NEXT: max_ties_grad  grad.arg0  2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
// FD-NEXT: max_ties_grad  grad.arg1  2x3x4x5  fd 3 of 120  max_abs {{.*}}  ok
// FD-NEXT: max_ties_grad  grad.arg2  3x4x5  fd 3 of 60  max_abs {{.*}}  ok
func.func @max_ties(%x: tensor<2x3x4x5xf32>, %r: tensor<2x3x4x5xf32>, %r2: tensor<3x4x5xf32>) -> tensor<f32> {
  %a = med.param @"tie.a" : tensor<3x1x5xf32>
  %b = med.param @"tie.b" : tensor<4x1xf32>
  %v1 = med.max %a, %b : (tensor<3x1x5xf32>, tensor<4x1xf32>) -> tensor<3x4x5xf32>
  %v2 = med.max %v1, %x : (tensor<3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v3 = med.mul %v2, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v4 = med.reduce sum %v3 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  %v5 = med.min %b, %a : (tensor<4x1xf32>, tensor<3x1x5xf32>) -> tensor<3x4x5xf32>
  %v6 = med.mul %v5, %r2 : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  %v7 = med.reduce sum %v6 {axes = array<i64: 0, 1, 2>} : (tensor<3x4x5xf32>) -> tensor<f32>
  %v8 = med.add %v4, %v7 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %v8 : tensor<f32>
}

// reduce max over one axis (dropped) and reduce min over two axes (kept).
// CHECK: reduce_max_drop_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_max_drop_grad  grad.arg0  2x5x3x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_max_drop_grad  grad.arg1  2x3x4  max_abs {{.*}}  ok{{$}}
// FD: reduce_max_drop_grad  grad.arg0  2x5x3x4  fd 3 of 120  max_abs {{.*}}  ok
// FD-NEXT: reduce_max_drop_grad  grad.arg1  2x3x4  fd 3 of 24  max_abs {{.*}}  ok
func.func @reduce_max_drop(%x: tensor<2x5x3x4xf32>, %r: tensor<2x3x4xf32>) -> tensor<f32> {
  %v1 = med.reduce max %x {axes = array<i64: 1>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x4xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// CHECK: reduce_min_keep_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_min_keep_grad  grad.arg0  3x4x5x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_min_keep_grad  grad.arg1  1x4x1x3  max_abs {{.*}}  ok{{$}}
// FD: reduce_min_keep_grad  grad.arg0  3x4x5x3  fd 3 of 180  max_abs {{.*}}  ok
// FD-NEXT: reduce_min_keep_grad  grad.arg1  1x4x1x3  fd 3 of 12  max_abs {{.*}}  ok
func.func @reduce_min_keep(%x: tensor<3x4x5x3xf32>, %r: tensor<1x4x1x3xf32>) -> tensor<f32> {
  %v1 = med.reduce min %x {axes = array<i64: 0, 2>, keepdims} : (tensor<3x4x5x3xf32>) -> tensor<1x4x1x3xf32>
  %v2 = med.mul %v1, %r : (tensor<1x4x1x3xf32>, tensor<1x4x1x3xf32>) -> tensor<1x4x1x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x4x1x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Reduction ties: flat.w is all ones, so every element of each reduced set ties and gets an
// equal share; x * w (distinct values) next to it checks the untied case on the same axes.
// CHECK: reduce_ties_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_ties_grad  grad.flat.w  3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_ties_grad  grad.arg0  3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_ties_grad  grad.arg1  3x5  max_abs {{.*}}  ok{{$}}
// FD: reduce_ties_grad  grad.arg0  3x4x5  fd 3 of 60  max_abs {{.*}}  ok
// FD-NEXT: reduce_ties_grad  grad.arg1  3x5  fd 3 of 15  max_abs {{.*}}  ok
func.func @reduce_ties(%x: tensor<3x4x5xf32>, %r: tensor<3x5xf32>) -> tensor<f32> {
  %w = med.param @"flat.w" : tensor<3x4x5xf32>
  %v1 = med.reduce max %w {axes = array<i64: 1>} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>
  %v2 = med.mul %x, %w : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  %v3 = med.reduce min %v2 {axes = array<i64: 1>} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>
  %v4 = med.add %v1, %v3 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %v5 = med.mul %v4, %r : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %v6 = med.reduce sum %v5 {axes = array<i64: 0, 1>} : (tensor<3x5xf32>) -> tensor<f32>
  return %v6 : tensor<f32>
}

// CHECK: 27 gradient outputs checked against torch autograd, 0 failed (tolerance 1.0e-04, precision f32)
// FD: 19 gradients checked by finite differences (55 elements), 0 failed (tolerance 1.0e-06, f64)
// FWD-NOT: FAIL
// FWD: 34 outputs checked, 0 failed (tolerance 1.0e-04, precision f32)
