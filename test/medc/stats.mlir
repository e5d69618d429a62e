// RUN: medc stats %s --batch 2 --patch 8,6,4 | FileCheck %s
// RUN: medc stats %s --batch 2 --patch 8,6,4 --json | FileCheck %s --check-prefix=JSON

// Counts by hand: conv 2x4x8x6x4 outputs x 3 inputs per output = 4608 multiply-adds,
// its bias 1536 adds and GELU 1536 elements (elementwise); parameters 4x3x1x1x1 + 4 = 16;
// two results of 1536 floats = 12 KiB, both alive while GELU runs. The memory plan: the
// conv's result and GELU's (6 KiB each, both live at GELU) side by side; x (4.5 KiB, live
// from the upload to the conv) in GELU's bytes, which it frees before GELU runs: 12 KiB of
// arena, 64 bytes of parameters resident.

med.parameter @"head.weight" : tensor<4x3x1x1x1xf32> init uniform(3)
med.parameter @"head.bias" : tensor<4xf32> init uniform(3)

func.func private @act(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = med.gelu %x : tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}

func.func @net(%x: tensor<?x3x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %w = med.param @"head.weight" : tensor<4x3x1x1x1xf32>
  %b = med.param @"head.bias" : tensor<4xf32>
  %0 = med.conv3d %x, %w, %b : (tensor<?x3x?x?x?xf32>, tensor<4x3x1x1x1xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = call @act(%0) : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %1 : tensor<?x4x?x?x?xf32>
}

// CHECK: function    @net
// CHECK-NEXT: input       tensor<2x3x8x6x4xf32>
// CHECK-NEXT: parameters  16 in 2 tensors
// CHECK: conv 1x1x1 9.22 kFLOP 75.0%
// CHECK: elementwise 3.07 kFLOP 25.0%
// CHECK: total 12.29 kFLOP
// CHECK: convolutions: 4.61 k multiply-adds
// CHECK: all op results 12.00 KiB
// CHECK: peak live 12.00 KiB
// CHECK: arena 12.00 KiB
// CHECK-NEXT: resident state 64.00 B
// CHECK-NEXT: planned peak 12.06 KiB

// JSON: "activation_bytes": 12288,
// JSON: "conv_multiply_adds": 4608,
// JSON: "conv 1x1x1": 9216,
// JSON: "elementwise": 3072,
// JSON: "forward_flops": 12288,
// JSON: "parameters": 16,
// JSON: "peak_live_bytes": 12288,
// JSON: "planned_arena_bytes": 12288,
// JSON: "planned_peak_bytes": 12352,
// JSON: "resident_bytes": 64
