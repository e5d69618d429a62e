// RUN: med-opt %s --med-optimize | FileCheck %s
// RUN: med-opt %s --med-optimize="disable=med-form-fusions" | FileCheck %s --check-prefix=NOFUSE

// med-optimize is medc compile's optimizing pipeline (canonicalize, cse, med-sink-assigns,
// med-form-fusions) as medc builds it. On two parameters' updates as med-train-step writes
// them: the two `1 - decay` become one (cse), the assigns move to the end, and each
// parameter's AdamW + EMA becomes one fusion.
// CHECK-LABEL: func.func @step
// CHECK: %[[K:.*]] = med.sub %{{.*}}, %{{.*}} {med.fp32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NOT: med.sub {{.*}} -> tensor<f32>
// CHECK: %[[A:.*]]:4 = med.fusion "elementwise"({{.*}}%[[K]]{{.*}}) {med.fp32}
// CHECK: %[[B:.*]]:4 = med.fusion "elementwise"({{.*}}%[[K]]{{.*}}) {med.fp32}
// CHECK: med.assign @p, %[[A]]#0
// CHECK: med.assign @e, %[[A]]#3
// CHECK: med.assign @q, %[[B]]#0
// CHECK: med.assign @f, %[[B]]#3
// CHECK-NEXT: return

// NOFUSE-NOT: med.fusion
// NOFUSE-COUNT-2: med.adamw
module {
  med.parameter @p : tensor<4x3xf32> init zeros
  med.parameter @m : tensor<4x3xf32> init zeros
  med.parameter @v : tensor<4x3xf32> init zeros
  med.parameter @e : tensor<4x3xf32> init zeros
  med.parameter @q : tensor<5xf32> init zeros
  med.parameter @n : tensor<5xf32> init zeros
  med.parameter @w : tensor<5xf32> init zeros
  med.parameter @f : tensor<5xf32> init zeros
  func.func @step(%g: tensor<4x3xf32>, %h: tensor<5xf32>, %lr: tensor<f32>, %t: tensor<f32>, %d: tensor<f32>) {
    %one = med.constant dense<1.0> : tensor<f32>
    %p = med.param @p {med.fp32} : tensor<4x3xf32>
    %m = med.param @m {med.fp32} : tensor<4x3xf32>
    %v = med.param @v {med.fp32} : tensor<4x3xf32>
    %np:3 = med.adamw %p, %g, %m, %v, %lr, %t {med.fp32} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
    med.assign @m, %np#1 : tensor<4x3xf32>
    med.assign @v, %np#2 : tensor<4x3xf32>
    med.assign @p, %np#0 : tensor<4x3xf32>
    %e = med.param @e {med.fp32} : tensor<4x3xf32>
    %k1 = med.sub %one, %d {med.fp32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %d1 = med.sub %np#0, %e {med.fp32} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %s1 = med.mul %d1, %k1 {med.fp32} : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
    %u1 = med.add %e, %s1 {med.fp32} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    med.assign @e, %u1 : tensor<4x3xf32>
    %q = med.param @q {med.fp32} : tensor<5xf32>
    %n = med.param @n {med.fp32} : tensor<5xf32>
    %w = med.param @w {med.fp32} : tensor<5xf32>
    %nq:3 = med.adamw %q, %h, %n, %w, %lr, %t {med.fp32} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    med.assign @n, %nq#1 : tensor<5xf32>
    med.assign @w, %nq#2 : tensor<5xf32>
    med.assign @q, %nq#0 : tensor<5xf32>
    %f = med.param @f {med.fp32} : tensor<5xf32>
    %k2 = med.sub %one, %d {med.fp32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %d2 = med.sub %nq#0, %f {med.fp32} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %s2 = med.mul %d2, %k2 {med.fp32} : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
    %u2 = med.add %f, %s2 {med.fp32} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    med.assign @f, %u2 : tensor<5xf32>
    return
  }
}
