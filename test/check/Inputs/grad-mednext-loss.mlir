// Appended to a generated MedNeXt-S file by grad-mednext.test (not a test itself): a training
// loss around the network, BCE with logits of its 3 output channels against a target.
// The network function is made private there, so that med-specialize inlines it into this
// one and the artifact holds only train_loss and train_loss_grad.

func.func @train_loss(%x: tensor<?x1x?x?x?xf32>, %y: tensor<?x3x?x?x?xf32>) -> tensor<f32> {
  %logits = func.call @mednext_s(%x) : (tensor<?x1x?x?x?xf32>) -> tensor<?x3x?x?x?xf32>
  %l = med.bce_with_logits %logits, %y : (tensor<?x3x?x?x?xf32>, tensor<?x3x?x?x?xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
