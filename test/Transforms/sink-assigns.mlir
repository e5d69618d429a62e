// RUN: med-opt %s --split-input-file --med-sink-assigns | FileCheck %s

// Assigns move to the end of the block in their order; what they store is unchanged, and
// the ops between keep their order.
// CHECK-LABEL: func.func @step
// CHECK: %[[NP:[a-z_0-9]+]], %[[NM:[a-z_0-9]+]], %[[NV:[a-z_0-9]+]] = med.adamw
// CHECK-NEXT: %[[E:.*]] = med.param @e
// CHECK-NEXT: %[[D:.*]] = med.sub %[[NP]], %[[E]] :
// CHECK-NEXT: %[[U:.*]] = med.add %[[E]], %[[D]] :
// CHECK-NEXT: med.assign @m, %[[NM]]
// CHECK-NEXT: med.assign @v, %[[NV]]
// CHECK-NEXT: med.assign @p, %[[NP]]
// CHECK-NEXT: med.assign @e, %[[U]]
// CHECK-NEXT: return
module {
  med.parameter @p : tensor<4xf32> init zeros
  med.parameter @m : tensor<4xf32> init zeros
  med.parameter @v : tensor<4xf32> init zeros
  med.parameter @e : tensor<4xf32> init zeros
  func.func @step(%g: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>) {
    %p = med.param @p : tensor<4xf32>
    %m = med.param @m : tensor<4xf32>
    %v = med.param @v : tensor<4xf32>
    %n:3 = med.adamw %p, %g, %m, %v, %lr, %t : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    med.assign @m, %n#1 : tensor<4xf32>
    med.assign @v, %n#2 : tensor<4xf32>
    med.assign @p, %n#0 : tensor<4xf32>
    %e = med.param @e : tensor<4xf32>
    %d = med.sub %n#0, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %u = med.add %e, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    med.assign @e, %u : tensor<4xf32>
    return
  }
}
