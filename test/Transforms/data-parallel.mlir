// RUN: med-opt %s --split-input-file --verify-diagnostics --med-data-parallel | FileCheck %s
// RUN: med-opt %s --split-input-file --verify-diagnostics --med-data-parallel=bucket-mb=0.0003 | FileCheck %s --check-prefix=SMALL

// Three gradients in one flat buffer, produced last member first (as backward produces
// them). One bucket of 25 MiB holds them all: one all-reduce right after the last producer
// (%a, the first member), the pack reads its results. The step takes inv_world_size; the
// optimizer's elementwise uses read the packed sums times it, the norm is scaled by its
// square, any_non_finite reads the sums.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[S:[a-z0-9_]+]]: tensor<f32>) -> tensor<f32> attributes {med.input_names = ["x", "lr", "t", "inv_world_size"]}
// CHECK: %[[C:.*]] = med.mul %{{.*}}, %{{.*}} : (tensor<5xf32>, tensor<5xf32>)
// CHECK: %[[B:.*]] = med.mul
// CHECK: %[[A:.*]] = med.mul
// CHECK-NEXT: %[[R:.*]]:3 = med.all_reduce %[[A]], %[[B]], %[[C]] bucket 0 offsets [0, 64, 128] size 133 : (tensor<4x3xf32>, tensor<5xf32>, tensor<5xf32>) -> (tensor<4x3xf32>, tensor<5xf32>, tensor<5xf32>)
// CHECK: %[[P:.*]] = med.pack %[[R]]#0, %[[R]]#1, %[[R]]#2 offsets [0, 64, 128] size 192
// CHECK: %[[SQ:.*]] = med.sum_squares %[[P]]
// CHECK-NEXT: %[[S2:.*]] = med.mul %[[S]], %[[S]] {med.fp32}
// CHECK-NEXT: %[[SQS:.*]] = med.mul %[[SQ]], %[[S2]] {med.fp32}
// CHECK: med.any_non_finite %[[P]]
// CHECK: med.min %[[SQS]]
// CHECK: %[[AVG:.*]] = med.mul %[[P]], %[[S]] {med.fp32}
// CHECK-NEXT: med.mul %[[AVG]], %{{.*}} : (tensor<192xf32>, tensor<f32>)
// CHECK: %[[AVG2:.*]] = med.mul %[[P]], %[[S]] {med.fp32}
// CHECK-NEXT: med.sgd %{{.*}}, %[[AVG2]]
// CHECK: return %[[SQS]]

// With buckets of 0.0003 MiB (78 elements) the walk from the last member gives [b, c] (69
// elements with the gap) and [a] (12): [b, c] is complete after %b, [a] after %a; numbered in
// program order.
// SMALL-LABEL: func.func @step
// SMALL: med.mul %arg0, %arg0
// SMALL-NEXT: %[[B:.*]] = med.mul
// SMALL-NEXT: %[[R0:.*]]:2 = med.all_reduce %[[B]], %{{.*}} bucket 0 offsets [0, 64] size 69
// SMALL: %[[A:.*]] = med.mul
// SMALL-NEXT: %[[R1:.*]] = med.all_reduce %[[A]] bucket 1 offsets [0] size 12
// SMALL: med.pack %[[R1]], %[[R0]]#0, %[[R0]]#1 offsets [0, 64, 128] size 192
module {
  med.flat_buffer @flat.0 : tensor<192xf32> members [@a, @b, @c] offsets [0, 64, 128] alignment 64
  med.flat_buffer @flat.1 : tensor<192xf32> members [@ma, @mb, @mc] offsets [0, 64, 128] alignment 64
  med.parameter @a : tensor<4x3xf32> init zeros
  med.parameter @b : tensor<5xf32> init zeros
  med.parameter @c : tensor<5xf32> init zeros
  med.parameter @ma : tensor<4x3xf32> init zeros frozen
  med.parameter @mb : tensor<5xf32> init zeros frozen
  med.parameter @mc : tensor<5xf32> init zeros frozen
  func.func @step(%x: tensor<5xf32>, %lr: tensor<f32>, %t: tensor<f32>) -> tensor<f32> attributes {med.input_names = ["x", "lr", "t"]} {
    %one = med.constant dense<1.0> : tensor<f32>
    %gc = med.mul %x, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %gb = med.mul %gc, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %w = med.param @a : tensor<4x3xf32>
    %ga = med.mul %w, %w : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %g = med.pack %ga, %gb, %gc offsets [0, 64, 128] size 192 {med.fp32} : (tensor<4x3xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<192xf32>
    %sq = med.sum_squares %g {med.fp32} : (tensor<192xf32>) -> tensor<f32>
    %bad = med.any_non_finite %g : (tensor<192xf32>) -> tensor<f32>
    %c = med.min %sq, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %g1 = med.mul %g, %c : (tensor<192xf32>, tensor<f32>) -> tensor<192xf32>
    %p = med.param @flat.0 : tensor<192xf32>
    %m = med.param @flat.1 : tensor<192xf32>
    %np:2 = med.sgd %p, %g1, %m, %lr {momentum = 0.9} : (tensor<192xf32>, tensor<192xf32>, tensor<192xf32>, tensor<f32>) -> (tensor<192xf32>, tensor<192xf32>)
    %np2:2 = med.sgd %p, %g, %m, %lr {momentum = 0.9} : (tensor<192xf32>, tensor<192xf32>, tensor<192xf32>, tensor<f32>) -> (tensor<192xf32>, tensor<192xf32>)
    %sum = med.add %np#0, %np2#0 : (tensor<192xf32>, tensor<192xf32>) -> tensor<192xf32>
    med.assign @flat.0, %sum : tensor<192xf32>
    med.assign @flat.1, %np#1 : tensor<192xf32>
    return %sq : tensor<f32>
  }
}

// -----

// A function that assigns nothing is not a training step: left alone.
// CHECK-LABEL: func.func @forward(%arg0: tensor<5xf32>) -> tensor<5xf32> {
// CHECK-NOT: all_reduce
module {
  func.func @forward(%x: tensor<5xf32>) -> tensor<5xf32> {
    %y = med.mul %x, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    return %y : tensor<5xf32>
  }
}

// -----

// A tensor updated outside a flat buffer: its gradient would not be reduced.
module {
  med.parameter @w : tensor<5xf32> init zeros
  func.func @step(%g: tensor<5xf32>) {
    %w = med.param @w : tensor<5xf32>
    %n = med.sub %w, %g : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    // expected-error @+1 {{assigns 'w' outside a flat buffer: med-data-parallel reduces only the gradients of the flat gradient buffer}}
    med.assign @w, %n : tensor<5xf32>
    return
  }
}

// -----

// A step with flat state but no packed gradients.
module {
  med.flat_buffer @flat.0 : tensor<64xf32> members [@w] offsets [0] alignment 64
  med.parameter @w : tensor<5xf32> init zeros
  // expected-error @+1 {{assigns state but has no flat gradient buffer (med.pack) to reduce}}
  func.func @step(%g: tensor<64xf32>) {
    %w = med.param @flat.0 : tensor<64xf32>
    %n = med.sub %w, %g : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    med.assign @flat.0, %n : tensor<64xf32>
    return
  }
}
