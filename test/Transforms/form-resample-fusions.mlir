// RUN: med-opt %s --pass-pipeline='builtin.module(func.func(med-form-resample-fusions))' --split-input-file | FileCheck %s

// BANIS's last steps: the image resampled, then its first voxels kept; the labels resampled,
// then their affinities. Two fusions: the crop's box is all the image kernel samples, and
// the resampled labels are never a value of the function.
// CHECK-LABEL: func.func @banis
// CHECK:      %[[AFF:.*]]:2 = med.fusion "resample"(%arg1, %arg2)
// CHECK-SAME:   {roles = {affinities = 1 : i64, transform = 0 : i64}}
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   %[[L:.*]] = med.spatial_transform nearest
// CHECK-NEXT:   %[[A:.*]], %[[M:.*]] = med.affinities %[[L]]
// CHECK-NEXT:   med.yield %[[A]], %[[M]]
// CHECK:      %[[IMG:.*]] = med.fusion "resample"(%arg0, %arg2)
// CHECK-SAME:   {roles = {crop = 1 : i64, transform = 0 : i64}}
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   med.spatial_transform linear
// CHECK-NEXT:   %[[C:.*]] = med.slice
// CHECK-NEXT:   med.yield %[[C]] : tensor<2x1x4x4x4xf32>
// CHECK:      return %[[IMG]], %[[AFF]]#0, %[[AFF]]#1
func.func @banis(%x: tensor<2x1x6x6x6xf32>, %s: tensor<2x1x6x6x6xi32>, %m: tensor<2x3x4xf32>) -> (tensor<2x1x4x4x4xf32>, tensor<2x2x4x4x4xf32>, tensor<2x2x4x4x4xf32>) {
  %0 = med.spatial_transform linear %x, %m border reflection {shape = array<i64: 6, 6, 6>} : (tensor<2x1x6x6x6xf32>, tensor<2x3x4xf32>) -> tensor<2x1x6x6x6xf32>
  %1 = med.spatial_transform nearest %s, %m border reflection {shape = array<i64: 6, 6, 6>} : (tensor<2x1x6x6x6xi32>, tensor<2x3x4xf32>) -> tensor<2x1x6x6x6xi32>
  %a, %k = med.affinities %1 {offsets = array<i64: 1, 0, 0, 0, 0, 2>, crop_size = array<i64: 4, 4, 4>} : (tensor<2x1x6x6x6xi32>) -> (tensor<2x2x4x4x4xf32>, tensor<2x2x4x4x4xf32>)
  %2 = med.slice %0 {offsets = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: 2, 1, 4, 4, 4>} : (tensor<2x1x6x6x6xf32>) -> tensor<2x1x4x4x4xf32>
  return %2, %a, %k : tensor<2x1x4x4x4xf32>, tensor<2x2x4x4x4xf32>, tensor<2x2x4x4x4xf32>
}

// -----

// nnU-Net's noise after the spatial transform: the random numbers (generate access, shaped
// like the image) and the per-sample standard deviation join the kernel; the per-sample
// parameter math (other shapes) stays outside. The transform's result is read after the
// fusion too: it is a second result.
// CHECK-LABEL: func.func @noise
// CHECK:      med.mul %arg2, %arg3 : (tensor<2x1x1x1x1xf32>, tensor<f32>)
// CHECK:      %[[F:.*]]:2 = med.fusion "resample"(%arg0, %arg1, %arg4, %{{[0-9]+}}) {roles = {transform = 0 : i64}}
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   %[[T:.*]] = med.spatial_transform linear
// CHECK-NEXT:   %[[R:.*]] = med.random %{{.*}}, %[[T]] {distribution = #med<distribution normal>, stream = 3 : i64}
// CHECK-NEXT:   med.mul %[[R]]
// CHECK-NEXT:   %[[Y:.*]] = med.add %[[T]]
// CHECK-NEXT:   med.yield %[[T]], %[[Y]]
// CHECK-NOT:  med.random
// CHECK:      return %[[F]]#1, %[[F]]#0
func.func @noise(%x: tensor<2x1x9x9x9xf32>, %m: tensor<2x3x4xf32>, %u: tensor<2x1x1x1x1xf32>, %w: tensor<f32>, %key: tensor<i64>) -> (tensor<2x1x5x5x5xf32>, tensor<2x1x5x5x5xf32>) {
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 5, 5, 5>} : (tensor<2x1x9x9x9xf32>, tensor<2x3x4xf32>) -> tensor<2x1x5x5x5xf32>
  %std = med.mul %u, %w : (tensor<2x1x1x1x1xf32>, tensor<f32>) -> tensor<2x1x1x1x1xf32>
  %r = med.random %key, %0 {stream = 3 : i64, distribution = #med<distribution normal>} : (tensor<i64>, tensor<2x1x5x5x5xf32>) -> tensor<2x1x5x5x5xf32>
  %n = med.mul %r, %std : (tensor<2x1x5x5x5xf32>, tensor<2x1x1x1x1xf32>) -> tensor<2x1x5x5x5xf32>
  %1 = med.add %0, %n : (tensor<2x1x5x5x5xf32>, tensor<2x1x5x5x5xf32>) -> tensor<2x1x5x5x5xf32>
  return %1, %0 : tensor<2x1x5x5x5xf32>, tensor<2x1x5x5x5xf32>
}

// -----

// An epilogue value read by an op outside (a reduction) before a later epilogue op: the
// fusion would sit at that op, after the reader, so that op stays out and the fusion ends
// where every outside use follows it. The crop is not taken: two values leave the fusion.
// CHECK-LABEL: func.func @order
// CHECK:      %[[F:.*]]:2 = med.fusion "resample"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   med.spatial_transform nearest
// CHECK-NEXT:   med.mul
// CHECK-NEXT:   med.yield
// CHECK:      %[[R:.*]] = med.reduce sum %[[F]]#1
// CHECK:      med.add %[[F]]#1, %[[R]]
// CHECK:      med.slice %[[F]]#0
func.func @order(%x: tensor<1x2x5x5x5xf32>, %m: tensor<1x3x4xf32>, %c: tensor<1x2x1x1x1xf32>) -> (tensor<1x2x5x5x5xf32>, tensor<1x2x2x2x2xf32>) {
  %0 = med.spatial_transform nearest %x, %m {shape = array<i64: 5, 5, 5>} : (tensor<1x2x5x5x5xf32>, tensor<1x3x4xf32>) -> tensor<1x2x5x5x5xf32>
  %1 = med.mul %0, %c : (tensor<1x2x5x5x5xf32>, tensor<1x2x1x1x1xf32>) -> tensor<1x2x5x5x5xf32>
  %2 = med.reduce sum %1 {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<1x2x5x5x5xf32>) -> tensor<1x2x1x1x1xf32>
  %3 = med.add %1, %2 : (tensor<1x2x5x5x5xf32>, tensor<1x2x1x1x1xf32>) -> tensor<1x2x5x5x5xf32>
  %4 = med.slice %0 {offsets = array<i64: 0, 0, 1, 1, 1>, sizes = array<i64: 1, 2, 2, 2, 2>} : (tensor<1x2x5x5x5xf32>) -> tensor<1x2x2x2x2xf32>
  return %3, %4 : tensor<1x2x5x5x5xf32>, tensor<1x2x2x2x2xf32>
}

// -----

// Nothing to take: a transform read by another transform, an epilogue of another precision
// mark (master-weight math), a strided crop, labels read by two ops.
// CHECK-LABEL: func.func @alone
// CHECK-NOT:  med.fusion
func.func @alone(%x: tensor<1x1x6x6x6xf32>, %s: tensor<1x1x6x6x6xi32>, %m: tensor<1x3x4xf32>) -> (tensor<1x1x6x6x6xf32>, tensor<1x1x6x6x6xf32>, tensor<1x1x3x3x3xf32>, tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>, tensor<1x1x6x6x6xi32>) {
  %0 = med.spatial_transform linear %x, %m {shape = array<i64: 6, 6, 6>} : (tensor<1x1x6x6x6xf32>, tensor<1x3x4xf32>) -> tensor<1x1x6x6x6xf32>
  %1 = med.spatial_transform linear %0, %m {shape = array<i64: 6, 6, 6>} : (tensor<1x1x6x6x6xf32>, tensor<1x3x4xf32>) -> tensor<1x1x6x6x6xf32>
  %2 = med.exp %1 {med.fp32} : tensor<1x1x6x6x6xf32>
  %3 = med.spatial_transform nearest %x, %m {shape = array<i64: 6, 6, 6>} : (tensor<1x1x6x6x6xf32>, tensor<1x3x4xf32>) -> tensor<1x1x6x6x6xf32>
  %4 = med.slice %3 {offsets = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: 1, 1, 3, 3, 3>, strides = array<i64: 1, 1, 2, 2, 2>} : (tensor<1x1x6x6x6xf32>) -> tensor<1x1x3x3x3xf32>
  %5 = med.spatial_transform nearest %s, %m {shape = array<i64: 6, 6, 6>} : (tensor<1x1x6x6x6xi32>, tensor<1x3x4xf32>) -> tensor<1x1x6x6x6xi32>
  %a, %k = med.affinities %5 {offsets = array<i64: 1, 0, 0>, crop_size = array<i64: 4, 4, 4>} : (tensor<1x1x6x6x6xi32>) -> (tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>)
  return %0, %2, %4, %a, %k, %5 : tensor<1x1x6x6x6xf32>, tensor<1x1x6x6x6xf32>, tensor<1x1x3x3x3xf32>, tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>, tensor<1x1x6x6x6xi32>
}
