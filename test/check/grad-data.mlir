// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc --grad | FileCheck %s
// RUN: medcheck %t.medc --fd 2 | FileCheck %s --check-prefix=FD
// RUN: medcheck %t.medc | FileCheck %s --check-prefix=FWD

// Gradients of data movement and shape ops (pad, slice with stride 1, concat, reduce sum and
// mean with and without keepdims, reshape, broadcast) against torch autograd (--grad, f32)
// and central finite differences (--fd, f64). Losses are sum(y * r) for random r.

// pad, asymmetric on every axis (batch and channels too), value -1.5: the gradient
// is the slice of the interior.
// CHECK: pad_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: pad_loss_grad  grad.arg0  1x3x4x5x3  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: pad_loss_grad  grad.arg1  2x4x7x8x4  max_abs {{.*}}  ok{{$}}
// FD: pad_loss_grad  grad.arg0  1x3x4x5x3  fd 2 of 180  max_abs {{.*}}  ok
// FD-NEXT: pad_loss_grad  grad.arg1  2x4x7x8x4  fd 2 of 1792  max_abs {{.*}}  ok
func.func @pad_loss(%x: tensor<1x3x4x5x3xf32>, %r: tensor<2x4x7x8x4xf32>) -> tensor<f32> {
  %v1 = med.pad %x {low = array<i64: 0, 1, 2, 0, 1>, high = array<i64: 1, 0, 1, 3, 0>, value = -1.5} : (tensor<1x3x4x5x3xf32>) -> tensor<2x4x7x8x4xf32>
  %v2 = med.mul %v1, %r : (tensor<2x4x7x8x4xf32>, tensor<2x4x7x8x4xf32>) -> tensor<2x4x7x8x4xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x4x7x8x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// MedNeXt's up-block pad: (1, 0) on each spatial axis, zeros.
// CHECK: pad_mednext_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: pad_mednext_grad  grad.arg0  2x3x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: pad_mednext_grad  grad.arg1  2x3x4x5x6  max_abs {{.*}}  ok{{$}}
// FD: pad_mednext_grad  grad.arg0  2x3x3x4x5  fd 2 of 360  max_abs {{.*}}  ok
// FD-NEXT: pad_mednext_grad  grad.arg1  2x3x4x5x6  fd 2 of 720  max_abs {{.*}}  ok
func.func @pad_mednext(%x: tensor<2x3x3x4x5xf32>, %r: tensor<2x3x4x5x6xf32>) -> tensor<f32> {
  %v1 = med.pad %x {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<2x3x3x4x5xf32>) -> tensor<2x3x4x5x6xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5x6xf32>, tensor<2x3x4x5x6xf32>) -> tensor<2x3x4x5x6xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x4x5x6xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// slice with stride 1 and offsets on every axis: the gradient pads with zeros.
// CHECK: slice_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: slice_loss_grad  grad.arg0  2x5x9x8x7  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: slice_loss_grad  grad.arg1  2x3x4x5x3  max_abs {{.*}}  ok{{$}}
// FD: slice_loss_grad  grad.arg0  2x5x9x8x7  fd 2 of 5040  max_abs {{.*}}  ok
// FD-NEXT: slice_loss_grad  grad.arg1  2x3x4x5x3  fd 2 of 360  max_abs {{.*}}  ok
func.func @slice_loss(%x: tensor<2x5x9x8x7xf32>, %r: tensor<2x3x4x5x3xf32>) -> tensor<f32> {
  %v1 = med.slice %x {offsets = array<i64: 0, 2, 3, 1, 4>, sizes = array<i64: 2, 3, 4, 5, 3>} : (tensor<2x5x9x8x7xf32>) -> tensor<2x3x4x5x3xf32>
  %v2 = med.mul %v1, %r : (tensor<2x3x4x5x3xf32>, tensor<2x3x4x5x3xf32>) -> tensor<2x3x4x5x3xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x3x4x5x3xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// Crop then pad back (MedNeXt-like), x also feeds a second, overlapping slice.
// CHECK: slice_pad_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: slice_pad_grad  grad.arg0  1x2x6x5x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: slice_pad_grad  grad.arg1  1x2x4x4x4  max_abs {{.*}}  ok{{$}}
// FD: slice_pad_grad  grad.arg0  1x2x6x5x4  fd 2 of 240  max_abs {{.*}}  ok
// FD-NEXT: slice_pad_grad  grad.arg1  1x2x4x4x4  fd 2 of 128  max_abs {{.*}}  ok
func.func @slice_pad(%x: tensor<1x2x6x5x4xf32>, %r: tensor<1x2x4x4x4xf32>) -> tensor<f32> {
  %v1 = med.slice %x {offsets = array<i64: 0, 0, 1, 0, 1>, sizes = array<i64: 1, 2, 4, 4, 3>} : (tensor<1x2x6x5x4xf32>) -> tensor<1x2x4x4x3xf32>
  %v2 = med.pad %v1 {low = array<i64: 0, 0, 0, 0, 1>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<1x2x4x4x3xf32>) -> tensor<1x2x4x4x4xf32>
  %v3 = med.slice %x {offsets = array<i64: 0, 0, 2, 1, 0>, sizes = array<i64: 1, 2, 4, 4, 4>} : (tensor<1x2x6x5x4xf32>) -> tensor<1x2x4x4x4xf32>
  %v4 = med.mul %v2, %v3 : (tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
  %v5 = med.mul %v4, %r : (tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
  %v6 = med.reduce sum %v5 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x4x4x4xf32>) -> tensor<f32>
  return %v6 : tensor<f32>
}

// concat of three inputs along the channels (skip connections).
// CHECK: concat_channels_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: concat_channels_grad  grad.arg0  2x3x4x3x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: concat_channels_grad  grad.arg1  2x1x4x3x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: concat_channels_grad  grad.arg2  2x2x4x3x2  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: concat_channels_grad  grad.arg3  2x6x4x3x2  max_abs {{.*}}  ok{{$}}
// FD: concat_channels_grad  grad.arg0  2x3x4x3x2  fd 2 of 144  max_abs {{.*}}  ok
// FD-NEXT: concat_channels_grad  grad.arg1  2x1x4x3x2  fd 2 of 48  max_abs {{.*}}  ok
// FD-NEXT: concat_channels_grad  grad.arg2  2x2x4x3x2  fd 2 of 96  max_abs {{.*}}  ok
// FD-NEXT: concat_channels_grad  grad.arg3  2x6x4x3x2  fd 2 of 288  max_abs {{.*}}  ok
func.func @concat_channels(%a: tensor<2x3x4x3x2xf32>, %b: tensor<2x1x4x3x2xf32>, %c: tensor<2x2x4x3x2xf32>, %r: tensor<2x6x4x3x2xf32>) -> tensor<f32> {
  %v1 = med.concat %a, %b, %c {axis = 1 : i64} : (tensor<2x3x4x3x2xf32>, tensor<2x1x4x3x2xf32>, tensor<2x2x4x3x2xf32>) -> tensor<2x6x4x3x2xf32>
  %v2 = med.mul %v1, %r : (tensor<2x6x4x3x2xf32>, tensor<2x6x4x3x2xf32>) -> tensor<2x6x4x3x2xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<2x6x4x3x2xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// concat along axis 0 with an input used twice: a's gradient sums two slices.
// CHECK: concat_self_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: concat_self_grad  grad.arg0  3x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: concat_self_grad  grad.arg1  2x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: concat_self_grad  grad.arg2  8x4  max_abs {{.*}}  ok{{$}}
// FD: concat_self_grad  grad.arg0  3x4  fd 2 of 12  max_abs {{.*}}  ok
// FD-NEXT: concat_self_grad  grad.arg1  2x4  fd 2 of 8  max_abs {{.*}}  ok
// FD-NEXT: concat_self_grad  grad.arg2  8x4  fd 2 of 32  max_abs {{.*}}  ok
func.func @concat_self(%a: tensor<3x4xf32>, %b: tensor<2x4xf32>, %r: tensor<8x4xf32>) -> tensor<f32> {
  %v1 = med.concat %a, %b, %a {axis = 0 : i64} : (tensor<3x4xf32>, tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  %v2 = med.mul %v1, %r : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1>} : (tensor<8x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// reduce sum over axes 1 and 3, keepdims.
// CHECK: reduce_sum_keep_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_sum_keep_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_sum_keep_grad  grad.arg1  2x1x4x1  max_abs {{.*}}  ok{{$}}
// FD: reduce_sum_keep_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: reduce_sum_keep_grad  grad.arg1  2x1x4x1  fd 2 of 8  max_abs {{.*}}  ok
func.func @reduce_sum_keep(%x: tensor<2x3x4x5xf32>, %r: tensor<2x1x4x1xf32>) -> tensor<f32> {
  %v1 = med.reduce sum %x {axes = array<i64: 1, 3>, keepdims} : (tensor<2x3x4x5xf32>) -> tensor<2x1x4x1xf32>
  %v2 = med.mul %v1, %r : (tensor<2x1x4x1xf32>, tensor<2x1x4x1xf32>) -> tensor<2x1x4x1xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x1x4x1xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// reduce sum over axes 0 and 2, dropped.
// CHECK: reduce_sum_drop_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_sum_drop_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_sum_drop_grad  grad.arg1  3x5  max_abs {{.*}}  ok{{$}}
// FD: reduce_sum_drop_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: reduce_sum_drop_grad  grad.arg1  3x5  fd 2 of 15  max_abs {{.*}}  ok
func.func @reduce_sum_drop(%x: tensor<2x3x4x5xf32>, %r: tensor<3x5xf32>) -> tensor<f32> {
  %v1 = med.reduce sum %x {axes = array<i64: 0, 2>} : (tensor<2x3x4x5xf32>) -> tensor<3x5xf32>
  %v2 = med.mul %v1, %r : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1>} : (tensor<3x5xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// reduce mean over axes 0, 2, 3, keepdims.
// CHECK: reduce_mean_keep_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_mean_keep_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_mean_keep_grad  grad.arg1  1x3x1x1  max_abs {{.*}}  ok{{$}}
// FD: reduce_mean_keep_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: reduce_mean_keep_grad  grad.arg1  1x3x1x1  fd 2 of 3  max_abs {{.*}}  ok
func.func @reduce_mean_keep(%x: tensor<2x3x4x5xf32>, %r: tensor<1x3x1x1xf32>) -> tensor<f32> {
  %v1 = med.reduce mean %x {axes = array<i64: 0, 2, 3>, keepdims} : (tensor<2x3x4x5xf32>) -> tensor<1x3x1x1xf32>
  %v2 = med.mul %v1, %r : (tensor<1x3x1x1xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x1x1xf32>
  %v3 = med.reduce sum %v2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x3x1x1xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// reduce mean over axes 1 and 3, dropped, then a mean over everything as the loss.
// CHECK: reduce_mean_drop_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_mean_drop_grad  grad.arg0  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reduce_mean_drop_grad  grad.arg1  2x4  max_abs {{.*}}  ok{{$}}
// FD: reduce_mean_drop_grad  grad.arg0  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: reduce_mean_drop_grad  grad.arg1  2x4  fd 2 of 8  max_abs {{.*}}  ok
func.func @reduce_mean_drop(%x: tensor<2x3x4x5xf32>, %r: tensor<2x4xf32>) -> tensor<f32> {
  %v1 = med.reduce mean %x {axes = array<i64: 1, 3>} : (tensor<2x3x4x5xf32>) -> tensor<2x4xf32>
  %v2 = med.mul %v1, %r : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %v3 = med.reduce mean %v2 {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  return %v3 : tensor<f32>
}

// reshape, and a sigmoid after it so the gradient is not just r.
// CHECK: reshape_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reshape_loss_grad  grad.arg0  2x3x4  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: reshape_loss_grad  grad.arg1  6x2x2  max_abs {{.*}}  ok{{$}}
// FD: reshape_loss_grad  grad.arg0  2x3x4  fd 2 of 24  max_abs {{.*}}  ok
// FD-NEXT: reshape_loss_grad  grad.arg1  6x2x2  fd 2 of 24  max_abs {{.*}}  ok
func.func @reshape_loss(%x: tensor<2x3x4xf32>, %r: tensor<6x2x2xf32>) -> tensor<f32> {
  %v1 = med.reshape %x {shape = array<i64: 6, 2, 2>} : (tensor<2x3x4xf32>) -> tensor<6x2x2xf32>
  %v2 = med.sigmoid %v1 : tensor<6x2x2xf32>
  %v3 = med.mul %v2, %r : (tensor<6x2x2xf32>, tensor<6x2x2xf32>) -> tensor<6x2x2xf32>
  %v4 = med.reduce sum %v3 {axes = array<i64: 0, 1, 2>} : (tensor<6x2x2xf32>) -> tensor<f32>
  return %v4 : tensor<f32>
}

// broadcast to a higher rank and over size-1 axes; a second one from 4x1.
// CHECK: broadcast_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: broadcast_loss_grad  grad.arg0  3x1x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: broadcast_loss_grad  grad.arg1  4x1  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: broadcast_loss_grad  grad.arg2  2x3x4x5  max_abs {{.*}}  ok{{$}}
// CHECK-NEXT: broadcast_loss_grad  grad.arg3  2x4x3  max_abs {{.*}}  ok{{$}}
// FD: broadcast_loss_grad  grad.arg0  3x1x5  fd 2 of 15  max_abs {{.*}}  ok
// FD-NEXT: broadcast_loss_grad  grad.arg1  4x1  fd 2 of 4  max_abs {{.*}}  ok
// FD-NEXT: broadcast_loss_grad  grad.arg2  2x3x4x5  fd 2 of 120  max_abs {{.*}}  ok
// FD-NEXT: broadcast_loss_grad  grad.arg3  2x4x3  fd 2 of 24  max_abs {{.*}}  ok
func.func @broadcast_loss(%x: tensor<3x1x5xf32>, %s: tensor<4x1xf32>, %r: tensor<2x3x4x5xf32>, %r2: tensor<2x4x3xf32>) -> tensor<f32> {
  %v1 = med.broadcast %x {shape = array<i64: 2, 3, 4, 5>} : (tensor<3x1x5xf32>) -> tensor<2x3x4x5xf32>
  %v2 = med.broadcast %s {shape = array<i64: 2, 4, 3>} : (tensor<4x1xf32>) -> tensor<2x4x3xf32>
  %v3 = med.gelu %v1 : tensor<2x3x4x5xf32>
  %v4 = med.mul %v3, %r : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %v5 = med.reduce sum %v4 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<f32>
  %v6 = med.mul %v2, %r2 : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %v7 = med.reduce sum %v6 {axes = array<i64: 0, 1, 2>} : (tensor<2x4x3xf32>) -> tensor<f32>
  %v8 = med.add %v5, %v7 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %v8 : tensor<f32>
}

// CHECK: 41 gradient outputs checked against torch autograd, 0 failed (tolerance 1.0e-04, precision f32)
// FD: 29 gradients checked by finite differences (58 elements), 0 failed (tolerance 1.0e-06, f64)
// FWD-NOT: FAIL
// FWD: 53 outputs checked, 0 failed (tolerance 1.0e-04, precision f32)
