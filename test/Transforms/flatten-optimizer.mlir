// RUN: med-opt %s --split-input-file --med-flatten-optimizer | FileCheck %s

// Two parameters updated alike (clip, AdamW, EMA, scalars shared): their state becomes four
// flat buffers (members at multiples of 64 elements), their gradients one pack in the same
// layout, the norm reads the pack, and one chain updates both.
// CHECK: med.flat_buffer @flat.0 : tensor<128xf32> members [@p, @q] offsets [0, 64] alignment 64
// CHECK: med.flat_buffer @flat.1 : tensor<128xf32> members [@m, @mq] offsets [0, 64]
// CHECK: med.flat_buffer @flat.2 : tensor<128xf32> members [@v, @vq] offsets [0, 64]
// CHECK: med.flat_buffer @flat.3 : tensor<128xf32> members [@e, @eq] offsets [0, 64]
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[G:.*]]: tensor<4x3xf32>, %[[H:.*]]: tensor<5xf32>,
// CHECK: %[[PK:.*]] = med.pack %[[G]], %[[H]] offsets [0, 64] size 128 {med.fp32}
// CHECK: %[[SQ:.*]] = med.sum_squares %[[PK]] : (tensor<128xf32>) -> tensor<f32>
// CHECK: %[[C:.*]] = med.min
// CHECK: %[[GC:.*]] = med.mul %[[PK]], %[[C]] : (tensor<128xf32>, tensor<f32>) -> tensor<128xf32>
// CHECK: %[[P:.*]] = med.param @flat.0 {med.fp32} : tensor<128xf32>
// CHECK: %[[NP:[a-z_0-9]+]], %[[NM:[a-z_0-9]+]], %[[NV:[a-z_0-9]+]] = med.adamw %[[P]], %[[GC]], %{{.*}}, %{{.*}} : (tensor<128xf32>,
// CHECK-DAG: med.assign @flat.0, %[[NP]] : tensor<128xf32>
// CHECK-DAG: med.assign @flat.1, %[[NM]] : tensor<128xf32>
// CHECK-DAG: med.assign @flat.2, %[[NV]] : tensor<128xf32>
// CHECK-DAG: med.assign @flat.3, %{{.*}} : tensor<128xf32>
// CHECK-NOT: med.adamw
// CHECK: return
module {
  med.parameter @p : tensor<4x3xf32> init zeros
  med.parameter @q : tensor<5xf32> init zeros
  med.parameter @m : tensor<4x3xf32> init zeros frozen
  med.parameter @v : tensor<4x3xf32> init zeros frozen
  med.parameter @e : tensor<4x3xf32> init zeros frozen
  med.parameter @mq : tensor<5xf32> init zeros frozen
  med.parameter @vq : tensor<5xf32> init zeros frozen
  med.parameter @eq : tensor<5xf32> init zeros frozen
  func.func @step(%g: tensor<4x3xf32>, %h: tensor<5xf32>, %lr: tensor<f32>, %t: tensor<f32>, %rate: tensor<f32>) -> tensor<f32> {
    %one = med.constant dense<1.0> : tensor<f32>
    %sq = med.sum_squares %g, %h : (tensor<4x3xf32>, tensor<5xf32>) -> tensor<f32>
    %c = med.min %sq, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %g1 = med.mul %g, %c : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
    %p = med.param @p : tensor<4x3xf32>
    %m = med.param @m : tensor<4x3xf32>
    %v = med.param @v : tensor<4x3xf32>
    %np:3 = med.adamw %p, %g1, %m, %v, %lr, %t : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
    med.assign @m, %np#1 : tensor<4x3xf32>
    med.assign @v, %np#2 : tensor<4x3xf32>
    med.assign @p, %np#0 : tensor<4x3xf32>
    %e = med.param @e : tensor<4x3xf32>
    %d = med.sub %np#0, %e : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %s = med.mul %d, %rate : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
    %u = med.add %e, %s : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    med.assign @e, %u : tensor<4x3xf32>
    %h1 = med.mul %h, %c : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
    %q = med.param @q : tensor<5xf32>
    %mq = med.param @mq : tensor<5xf32>
    %vq = med.param @vq : tensor<5xf32>
    %nq:3 = med.adamw %q, %h1, %mq, %vq, %lr, %t : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    med.assign @mq, %nq#1 : tensor<5xf32>
    med.assign @vq, %nq#2 : tensor<5xf32>
    med.assign @q, %nq#0 : tensor<5xf32>
    %eq = med.param @eq : tensor<5xf32>
    %dq = med.sub %nq#0, %eq : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %sq2 = med.mul %dq, %rate : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
    %uq = med.add %eq, %sq2 : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    med.assign @eq, %uq : tensor<5xf32>
    return %sq : tensor<f32>
  }
}

// -----

// Different weight decay: two groups of two, two sets of flat buffers; one norm over both
// packs. Two parameters with one gradient value get a slice each.
// CHECK: med.flat_buffer @flat.0 : tensor<128xf32> members [@a, @b]
// CHECK: med.flat_buffer @flat.2 : tensor<128xf32> members [@c, @d]
// CHECK-LABEL: func.func @groups
// CHECK-DAG: %[[P0:.*]] = med.pack %arg0, %arg0 offsets [0, 64] size 128
// CHECK-DAG: %[[P1:.*]] = med.pack %arg1, %arg2 offsets [0, 64] size 128
// CHECK-DAG: med.sgd {{.*}}weight_decay = 1.000000e-01
// CHECK-DAG: med.sgd {{.*}} {momentum = 9.000000e-01 : f64} :
// CHECK: med.sum_squares %[[P0]], %[[P1]] :
// CHECK-NOT: med.sgd
module {
  med.parameter @a : tensor<3xf32> init zeros
  med.parameter @b : tensor<3xf32> init zeros
  med.parameter @c : tensor<2x2xf32> init zeros
  med.parameter @d : tensor<7xf32> init zeros
  med.parameter @ba : tensor<3xf32> init zeros frozen
  med.parameter @bb : tensor<3xf32> init zeros frozen
  med.parameter @bc : tensor<2x2xf32> init zeros frozen
  med.parameter @bd : tensor<7xf32> init zeros frozen
  func.func @groups(%ga: tensor<3xf32>, %gc: tensor<2x2xf32>, %gd: tensor<7xf32>, %lr: tensor<f32>) -> tensor<f32> {
    %sq = med.sum_squares %ga, %ga, %gc, %gd : (tensor<3xf32>, tensor<3xf32>, tensor<2x2xf32>, tensor<7xf32>) -> tensor<f32>
    %a = med.param @a : tensor<3xf32>
    %ba = med.param @ba : tensor<3xf32>
    %na:2 = med.sgd %a, %ga, %ba, %lr {momentum = 0.9 : f64, weight_decay = 0.1 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
    med.assign @a, %na#0 : tensor<3xf32>
    med.assign @ba, %na#1 : tensor<3xf32>
    %b = med.param @b : tensor<3xf32>
    %bb = med.param @bb : tensor<3xf32>
    %nb:2 = med.sgd %b, %ga, %bb, %lr {momentum = 0.9 : f64, weight_decay = 0.1 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
    med.assign @b, %nb#0 : tensor<3xf32>
    med.assign @bb, %nb#1 : tensor<3xf32>
    %c = med.param @c : tensor<2x2xf32>
    %bc = med.param @bc : tensor<2x2xf32>
    %nc:2 = med.sgd %c, %gc, %bc, %lr {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
    med.assign @c, %nc#0 : tensor<2x2xf32>
    med.assign @bc, %nc#1 : tensor<2x2xf32>
    %d = med.param @d : tensor<7xf32>
    %bd = med.param @bd : tensor<7xf32>
    %nd:2 = med.sgd %d, %gd, %bd, %lr {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : (tensor<7xf32>, tensor<7xf32>, tensor<7xf32>, tensor<f32>) -> (tensor<7xf32>, tensor<7xf32>)
    med.assign @d, %nd#0 : tensor<7xf32>
    med.assign @bd, %nd#1 : tensor<7xf32>
    return %sq : tensor<f32>
  }
}

// -----

// Left alone: a lane whose value is used outside the updates (the new parameter returned),
// a lane alone in its group, and a lane with a scalar of its own.
// CHECK-NOT: med.flat_buffer
// CHECK-LABEL: func.func @alone
// CHECK-COUNT-3: med.sgd
// CHECK-NOT: med.pack
module {
  med.parameter @a : tensor<3xf32> init zeros
  med.parameter @b : tensor<3xf32> init zeros
  med.parameter @c : tensor<3xf32> init zeros
  med.parameter @ba : tensor<3xf32> init zeros frozen
  med.parameter @bb : tensor<3xf32> init zeros frozen
  med.parameter @bc : tensor<3xf32> init zeros frozen
  func.func @alone(%g: tensor<3xf32>, %lr: tensor<f32>, %lr2: tensor<f32>) -> tensor<3xf32> {
    %a = med.param @a : tensor<3xf32>
    %ba = med.param @ba : tensor<3xf32>
    %na:2 = med.sgd %a, %g, %ba, %lr {momentum = 0.9 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
    med.assign @a, %na#0 : tensor<3xf32>
    med.assign @ba, %na#1 : tensor<3xf32>
    %b = med.param @b : tensor<3xf32>
    %bb = med.param @bb : tensor<3xf32>
    %nb:2 = med.sgd %b, %g, %bb, %lr {momentum = 0.9 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
    med.assign @b, %nb#0 : tensor<3xf32>
    med.assign @bb, %nb#1 : tensor<3xf32>
    %c = med.param @c : tensor<3xf32>
    %bc = med.param @bc : tensor<3xf32>
    %nc:2 = med.sgd %c, %g, %bc, %lr2 {momentum = 0.9 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
    med.assign @c, %nc#0 : tensor<3xf32>
    med.assign @bc, %nc#1 : tensor<3xf32>
    return %nb#0 : tensor<3xf32>
  }
}
