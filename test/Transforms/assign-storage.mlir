// RUN: med-opt %s --split-input-file --med-assign-storage | FileCheck %s

// bf16-mixed: non-scalar f32 arguments and the results of ops computing in bf16 are stored
// in bf16; scalars, master-weight math (med.fp32), a parameter read only as a norm's gamma
// or beta, and the norm's statistics stay f32; a reshape is stored as its source.
module {
  med.parameter @"c.weight" : tensor<2x1x1x1x1xf32> init uniform(1)
  med.parameter @"n.weight" : tensor<2xf32> init ones
  med.parameter @"n.bias" : tensor<2xf32> init zeros
  // CHECK-LABEL: func.func @mixed
  // CHECK-SAME: med.arg_storage = [bf16, f32, bf16]
  func.func @mixed(%x: tensor<1x1x2x2x2xf32>, %lr: tensor<f32>, %w3: tensor<2x1x3x3x3xf32>) -> (tensor<f32>, tensor<2x8xf32>, tensor<16xf32>)
      attributes {med.precision = "bf16-mixed"} {
    // CHECK: med.param @c.weight {med.storage = [bf16]}
    %w = med.param @"c.weight" : tensor<2x1x1x1x1xf32>
    // CHECK: med.param @n.weight {med.storage = [f32]}
    %g = med.param @"n.weight" : tensor<2xf32>
    // CHECK: med.param @n.bias {med.storage = [f32]}
    %b = med.param @"n.bias" : tensor<2xf32>
    // CHECK: med.conv3d {{.*}} {med.storage = [bf16]}
    %c = med.conv3d %x, %w : (tensor<1x1x2x2x2xf32>, tensor<2x1x1x1x1xf32>) -> tensor<1x2x2x2x2xf32>
    // CHECK: med.group_norm {{.*}} {groups = 2 : i64, med.storage = [bf16, f32, f32], save_statistics}
    %n:3 = med.group_norm %c, %g, %b {groups = 2 : i64, save_statistics} : (tensor<1x2x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x2x2x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>)
    // Both results of the statistics op are statistics.
    // CHECK: med.group_norm_stats {{.*}} {groups = 2 : i64, med.storage = [f32, f32]}
    %st:2 = med.group_norm_stats %c {groups = 2 : i64} : (tensor<1x2x2x2x2xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>)
    // So are a stencil fusion's that its body yields from them; its stencil's result is an
    // activation.
    // CHECK: med.fusion "stencil"{{.*}} {med.storage = [bf16, f32, f32], roles = {statistics = 1 : i64, stencil = 0 : i64}}
    %sf:3 = med.fusion "stencil"(%c, %w3) {roles = {statistics = 1, stencil = 0}} : (tensor<1x2x2x2x2xf32>, tensor<2x1x3x3x3xf32>) -> (tensor<1x2x2x2x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>) {
    ^bb0(%a: tensor<1x2x2x2x2xf32>, %k: tensor<2x1x3x3x3xf32>):
      %y = med.shift_sum %a, %k : (tensor<1x2x2x2x2xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x2x2x2xf32>
      %m, %v = med.group_norm_stats %y {groups = 2 : i64} : (tensor<1x2x2x2x2xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>)
      med.yield %y, %m, %v : tensor<1x2x2x2x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>
    }
    // CHECK: med.reduce sum {{.*}} {axes = array<i64: 0, 1, 2, 3, 4>, med.storage = [f32]}
    %s = med.reduce sum %n#0 {axes = array<i64: 0, 1, 2, 3, 4>} : (tensor<1x2x2x2x2xf32>) -> tensor<f32>
    // CHECK: med.mul {{.*}} {med.fp32, med.storage = [f32]}
    %m = med.mul %s, %lr {med.fp32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    // CHECK: med.reshape {{.*}} {med.storage = [f32], shape = array<i64: 2, 1>}
    %r = med.reshape %n#1 {shape = array<i64: 2, 1>} : (tensor<1x2xf32>) -> tensor<2x1xf32>
    // CHECK: med.reshape {{.*}} {med.storage = [bf16], shape = array<i64: 2, 8>}
    %r2 = med.reshape %c {shape = array<i64: 2, 8>} : (tensor<1x2x2x2x2xf32>) -> tensor<2x8xf32>
    // CHECK: med.reshape {{.*}} {med.storage = [bf16], shape = array<i64: 16>}
    %r3 = med.reshape %r2 {shape = array<i64: 16>} : (tensor<2x8xf32>) -> tensor<16xf32>
    return %m, %r2, %r3 : tensor<f32>, tensor<2x8xf32>, tensor<16xf32>
  }
}

// -----

// fp16-mixed: the same rule with f16.
// CHECK-LABEL: func.func @half
// CHECK-SAME: med.arg_storage = [f16]
// CHECK: med.gelu {{.*}} {med.storage = [f16]}
func.func @half(%x: tensor<3x5xf32>) -> tensor<3x5xf32> attributes {med.precision = "fp16-mixed"} {
  %y = med.gelu %x : tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// Without a mixed precision nothing is decided: every value is stored as its type.
// CHECK-LABEL: func.func @plain
// CHECK-NOT: med.storage
// CHECK-NOT: med.arg_storage
// CHECK: return
func.func @plain(%x: tensor<3x5xf32>) -> tensor<3x5xf32> attributes {med.precision = "fp32"} {
  %y = med.gelu %x : tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}
