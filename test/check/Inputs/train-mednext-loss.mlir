// Appended to a generated MedNeXt-S file by train-mednext.test (not a test itself): the
// training loss, BCE with logits of the network's 3 output channels against a target.
func.func @loss(%x: tensor<?x1x?x?x?xf32>, %y: tensor<?x3x?x?x?xf32>) -> tensor<f32> {
  %logits = func.call @mednext_s(%x) : (tensor<?x1x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  %l = med.bce_with_logits %logits, %y : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
