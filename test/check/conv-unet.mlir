// RUN: medc compile %s --grad -o %t.medc
// RUN: medcheck %t.medc | FileCheck %s
// RUN: medcheck %t.medc --grad | FileCheck %s --check-prefix=GRAD
// RUN: medcheck %t.medc --fd 2 | FileCheck %s --check-prefix=FD

// The dense convolutions of the imported U-Nets (nnU-Net's PlainConvUNet and ResEncUNet,
// MONAI's SegResNet and BasicUNet; reference/networks.md) at their settings, against torch:
// conv3d k3 stride 1 padding 1 with a bias, k3 stride 2 padding 1 (the strided first conv of
// a stage, odd input sizes), k3 stride 2 without bias (SegResNet), transposed conv3d k2
// stride 2 with a bias (the decoders' upsampling), and an anisotropic plan's [1,3,3] kernel
// with stride [1,2,2]. One stage of a decoder end to end: up, concatenated with the skip,
// conv (bias-free: a bias before instance norm has a zero gradient), instance norm, LeakyReLU;
// its gradients against torch autograd and finite differences.

// CHECK: unet_convs  out0  2x5x5x6x7  max_abs {{.*}}  ok
// CHECK: unet_convs  out1  2x5x3x3x4  max_abs {{.*}}  ok
// CHECK: unet_convs  out2  2x5x3x3x4  max_abs {{.*}}  ok
// CHECK: unet_convs  out3  2x3x10x12x14  max_abs {{.*}}  ok
// CHECK: unet_convs  out4  2x5x5x3x4  max_abs {{.*}}  ok
func.func @unet_convs(%x: tensor<2x3x5x6x7xf32>, %w: tensor<5x3x3x3x3xf32>, %b: tensor<5xf32>, %wt: tensor<3x3x2x2x2xf32>, %bt: tensor<3xf32>, %wa: tensor<5x3x1x3x3xf32>) -> (tensor<2x5x5x6x7xf32>, tensor<2x5x3x3x4xf32>, tensor<2x5x3x3x4xf32>, tensor<2x3x10x12x14xf32>, tensor<2x5x5x3x4xf32>) {
  %0 = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>} : (tensor<2x3x5x6x7xf32>, tensor<5x3x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x5x6x7xf32>
  %1 = med.conv3d %x, %w, %b {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>} : (tensor<2x3x5x6x7xf32>, tensor<5x3x3x3x3xf32>, tensor<5xf32>) -> tensor<2x5x3x3x4xf32>
  %2 = med.conv3d %x, %w {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>} : (tensor<2x3x5x6x7xf32>, tensor<5x3x3x3x3xf32>) -> tensor<2x5x3x3x4xf32>
  %3 = med.conv3d_transpose %x, %wt, %bt {stride = array<i64: 2, 2, 2>} : (tensor<2x3x5x6x7xf32>, tensor<3x3x2x2x2xf32>, tensor<3xf32>) -> tensor<2x3x10x12x14xf32>
  %4 = med.conv3d %x, %wa, %b {stride = array<i64: 1, 2, 2>, padding = array<i64: 0, 1, 1>} : (tensor<2x3x5x6x7xf32>, tensor<5x3x1x3x3xf32>, tensor<5xf32>) -> tensor<2x5x5x3x4xf32>
  return %0, %1, %2, %3, %4 : tensor<2x5x5x6x7xf32>, tensor<2x5x3x3x4xf32>, tensor<2x5x3x3x4xf32>, tensor<2x3x10x12x14xf32>, tensor<2x5x5x3x4xf32>
}

// GRAD: decoder_stage_loss_grad  out0  scalar  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: decoder_stage_loss_grad  grad.arg0  1x4x2x3x2  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: decoder_stage_loss_grad  grad.arg1  1x3x4x6x4  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: decoder_stage_loss_grad  grad.arg2  4x3x2x2x2  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: decoder_stage_loss_grad  grad.arg3  3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: decoder_stage_loss_grad  grad.arg4  3x6x3x3x3  max_abs {{.*}}  ok{{$}}
// GRAD-NEXT: decoder_stage_loss_grad  grad.arg5  3  max_abs {{.*}}  ok{{$}}
// FD: decoder_stage_loss_grad  grad.arg0  1x4x2x3x2  fd 2 of 48  max_abs {{.*}}  ok
// FD: decoder_stage_loss_grad  grad.arg2  4x3x2x2x2  fd 2 of 96  max_abs {{.*}}  ok
// FD: decoder_stage_loss_grad  grad.arg4  3x6x3x3x3  fd 2 of 486  max_abs {{.*}}  ok
func.func @decoder_stage_loss(%low: tensor<1x4x2x3x2xf32>, %skip: tensor<1x3x4x6x4xf32>, %wt: tensor<4x3x2x2x2xf32>, %bt: tensor<3xf32>, %w: tensor<3x6x3x3x3xf32>, %g: tensor<3xf32>, %be: tensor<3xf32>, %r: tensor<1x3x4x6x4xf32>) -> tensor<f32> {
  %up = med.conv3d_transpose %low, %wt, %bt {stride = array<i64: 2, 2, 2>} : (tensor<1x4x2x3x2xf32>, tensor<4x3x2x2x2xf32>, tensor<3xf32>) -> tensor<1x3x4x6x4xf32>
  %cat = med.concat %up, %skip {axis = 1 : i64} : (tensor<1x3x4x6x4xf32>, tensor<1x3x4x6x4xf32>) -> tensor<1x6x4x6x4xf32>
  %c = med.conv3d %cat, %w {padding = array<i64: 1, 1, 1>} : (tensor<1x6x4x6x4xf32>, tensor<3x6x3x3x3xf32>) -> tensor<1x3x4x6x4xf32>
  %n = med.group_norm %c, %g, %be {groups = 3 : i64} : (tensor<1x3x4x6x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x6x4xf32>
  %a = med.leaky_relu %n : tensor<1x3x4x6x4xf32>
  %v = med.mul %a, %r : (tensor<1x3x4x6x4xf32>, tensor<1x3x4x6x4xf32>) -> tensor<1x3x4x6x4xf32>
  %l = med.reduce sum %v {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x3x4x6x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
