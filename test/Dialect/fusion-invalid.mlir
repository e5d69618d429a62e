// RUN: med-opt %s --split-input-file --verify-diagnostics

// A body its template cannot run: a convolution is not elementwise.
func.func @opaque_op(%x: tensor<1x2x3x3x3xf32>, %w: tensor<2x2x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  // expected-error @+1 {{template 'elementwise' cannot run 'med.conv3d': expected ops of elementwise or broadcast access}}
  %0 = med.fusion "elementwise"(%x, %w) : (tensor<1x2x3x3x3xf32>, tensor<2x2x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  ^bb0(%a: tensor<1x2x3x3x3xf32>, %b: tensor<2x2x1x1x1xf32>):
    %c = med.conv3d %a, %b : (tensor<1x2x3x3x3xf32>, tensor<2x2x1x1x1xf32>) -> tensor<1x2x3x3x3xf32>
    med.yield %c : tensor<1x2x3x3x3xf32>
  }
  return %0 : tensor<1x2x3x3x3xf32>
}

// -----

// A capture of an outer value: the body may read its block arguments only.
func.func @capture(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = med.fusion "elementwise"(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{using value defined outside the region}}
    %s = med.add %a, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    med.yield %s : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// An unknown template.
func.func @unknown_template(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown fusion template 'mlp' (expected one of: elementwise)}}
  %0 = med.fusion "mlp"(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %s = med.neg %a : tensor<4xf32>
    med.yield %s : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A body op of another shape than the results (it would need its own iteration space).
func.func @small_intermediate(%x: tensor<2x4xf32>, %v: tensor<1x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{template 'elementwise': 'med.exp' produces 'tensor<1x4xf32>', expected floats of the results' shape 'tensor<2x4xf32>'}}
  %0 = med.fusion "elementwise"(%x, %v) : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<1x4xf32>):
    %e = med.exp %b : tensor<1x4xf32>
    %s = med.mul %a, %e : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
    med.yield %s : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

// An input that does not broadcast to the results' shape.
func.func @no_broadcast(%x: tensor<2x4xf32>, %v: tensor<3x1xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{does not broadcast to the results' shape}}
  %0 = med.fusion "elementwise"(%x, %v) : (tensor<2x4xf32>, tensor<3x1xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<3x1xf32>):
    %e = med.exp %a : tensor<2x4xf32>
    med.yield %e : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

// Body arguments must match the inputs.
func.func @argument_types(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body argument #0 has type 'tensor<5xf32>', input #0 'tensor<4xf32>'}}
  %0 = med.fusion "elementwise"(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<5xf32>):
    %s = med.neg %a : tensor<5xf32>
    med.yield %s : tensor<5xf32>
  }
  return %0 : tensor<4xf32>
}
