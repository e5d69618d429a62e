// The loss of vectorized.test's mixed-precision training steps: with patch 3,5,7 and batch
// 1 every activation has 315 elements (no multiple of 8 bf16 or f16 per vector) and planes
// of 105 (a thread's elements span two channels), so the elementwise kernels and their
// gradients run the remainder path and find each element's channel; f32 parameters
// broadcast into bf16 values (vectors of 4).
med.parameter @"stem.weight" : tensor<3x2x1x1x1xf32> init uniform(2)
med.parameter @"stem.bias" : tensor<3xf32> init uniform(2)
med.parameter @"norm.weight" : tensor<3xf32> init uniform(3)
med.parameter @"norm.bias" : tensor<3xf32> init uniform(3)
med.parameter @"scale" : tensor<1x3x1x1x1xf32> init uniform(2)
med.parameter @"row" : tensor<7xf32> init uniform(2)
func.func @loss(%x: tensor<?x2x?x?x?xf32>, %y: tensor<?x3x?x?x?xf32>, %m: tensor<?x3x?x?x?xf32>) -> tensor<f32> {
  %sw = med.param @"stem.weight" : tensor<3x2x1x1x1xf32>
  %sb = med.param @"stem.bias" : tensor<3xf32>
  %g = med.param @"norm.weight" : tensor<3xf32>
  %be = med.param @"norm.bias" : tensor<3xf32>
  %s = med.param @"scale" : tensor<1x3x1x1x1xf32>
  %r = med.param @"row" : tensor<7xf32>
  %0 = med.conv3d %x, %sw, %sb : (tensor<?x2x?x?x?xf32>, tensor<3x2x1x1x1xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  %1 = med.group_norm %0, %g, %be {groups = 3 : i64} : (tensor<?x3x?x?x?xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<?x3x?x?x?xf32>
  %2 = med.gelu %1 : tensor<?x3x?x?x?xf32>
  %3 = med.add %2, %0 : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  %4 = med.mul %3, %s : (tensor<?x3x?x?x?xf32>, tensor<1x3x1x1x1xf32>) -> tensor<?x3x?x?x?xf32>
  %5 = med.mul %4, %r : (tensor<?x3x?x?x?xf32>, tensor<7xf32>) -> tensor<?x3x?x?x?xf32>
  %6 = med.sub %5, %1 : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  %l = med.bce_with_logits %6, %y mask %m : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
