// RUN: med-opt %s --split-input-file --verify-diagnostics

// A body its template cannot run: a convolution is not elementwise.
func.func @opaque_op(%x: tensor<1x2x3x3x3xf32>, %w: tensor<2x2x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  // expected-error @+1 {{template 'elementwise' cannot run 'med.conv3d': expected ops of elementwise, broadcast or generate access}}
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
  // expected-error @+1 {{unknown fusion template 'conv' (expected one of: elementwise, mlp, mlp_grad, reduce, resample, stencil, stencil_grad)}}
  %0 = med.fusion "conv"(%x) : (tensor<4xf32>) -> tensor<4xf32> {
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

// -----

// mlp: the compression must read the activation, not the expansion.
func.func @mlp_skips_activation(%x: tensor<1x2x3x3x3xf32>, %w1: tensor<4x2x1x1x1xf32>, %w2: tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  // expected-error @+1 {{template 'mlp': expected a 1×1×1 convolution of the activation (with body arguments as weight and bias) third}}
  %0 = med.fusion "mlp"(%x, %w1, %w2) : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  ^bb0(%a: tensor<1x2x3x3x3xf32>, %b: tensor<4x2x1x1x1xf32>, %c: tensor<2x4x1x1x1xf32>):
    %h = med.conv3d %a, %b : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>) -> tensor<1x4x3x3x3xf32>
    %g = med.gelu %h : tensor<1x4x3x3x3xf32>
    %m = med.conv3d %h, %c : (tensor<1x4x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32>
    med.yield %m : tensor<1x2x3x3x3xf32>
  }
  return %0 : tensor<1x2x3x3x3xf32>
}

// -----

// mlp: a 3×3×3 expansion is a window, not a contraction over channels.
func.func @mlp_window(%x: tensor<1x2x3x3x3xf32>, %w1: tensor<4x2x3x3x3xf32>, %w2: tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  // expected-error @+1 {{template 'mlp': expected a 1×1×1 convolution of body arguments (input, weight, bias) first}}
  %0 = med.fusion "mlp"(%x, %w1, %w2) : (tensor<1x2x3x3x3xf32>, tensor<4x2x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  ^bb0(%a: tensor<1x2x3x3x3xf32>, %b: tensor<4x2x3x3x3xf32>, %c: tensor<2x4x1x1x1xf32>):
    %h = med.conv3d %a, %b {padding = array<i64: 1, 1, 1>} : (tensor<1x2x3x3x3xf32>, tensor<4x2x3x3x3xf32>) -> tensor<1x4x3x3x3xf32>
    %g = med.gelu %h : tensor<1x4x3x3x3xf32>
    %m = med.conv3d %g, %c : (tensor<1x4x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32>
    med.yield %m : tensor<1x2x3x3x3xf32>
  }
  return %0 : tensor<1x2x3x3x3xf32>
}

// -----

// mlp_grad: the activation's gradient must take the expansion and dg in that order.
func.func @mlp_grad_swapped(%x: tensor<1x2x3x3x3xf32>, %w1: tensor<4x2x1x1x1xf32>, %dy: tensor<1x2x3x3x3xf32>, %w2: tensor<2x4x1x1x1xf32>) -> (tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>) {
  // expected-error @+1 {{template 'mlp_grad': the gradients are not wired as the block MLP's}}
  %0:2 = med.fusion "mlp_grad"(%x, %w1, %dy, %w2) : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>, tensor<1x2x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> (tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>) {
  ^bb0(%a: tensor<1x2x3x3x3xf32>, %b: tensor<4x2x1x1x1xf32>, %d: tensor<1x2x3x3x3xf32>, %c: tensor<2x4x1x1x1xf32>):
    %h = med.conv3d %a, %b : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>) -> tensor<1x4x3x3x3xf32>
    %g = med.gelu %h : tensor<1x4x3x3x3xf32>
    %dg = med.conv3d_transpose %d, %c : (tensor<1x2x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x4x3x3x3xf32>
    %dw2 = med.conv3d_grad_weight %g, %d {kernel = array<i64: 1, 1, 1>} : (tensor<1x4x3x3x3xf32>, tensor<1x2x3x3x3xf32>) -> tensor<2x4x1x1x1xf32>
    %dh = med.gelu_grad %dg, %h : (tensor<1x4x3x3x3xf32>, tensor<1x4x3x3x3xf32>) -> tensor<1x4x3x3x3xf32>
    %dw1 = med.conv3d_grad_weight %a, %dh {kernel = array<i64: 1, 1, 1>} : (tensor<1x2x3x3x3xf32>, tensor<1x4x3x3x3xf32>) -> tensor<4x2x1x1x1xf32>
    med.yield %dw2, %dw1 : tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>
  }
  return %0#0, %0#1 : tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>
}

// -----

// mlp_grad: the recomputed expansion stays inside.
func.func @mlp_grad_yields_expansion(%x: tensor<1x2x3x3x3xf32>, %w1: tensor<4x2x1x1x1xf32>, %dy: tensor<1x2x3x3x3xf32>, %w2: tensor<2x4x1x1x1xf32>) -> (tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>, tensor<1x4x3x3x3xf32>) {
  // expected-error @+1 {{template 'mlp_grad': the recomputed expansion may not be yielded}}
  %0:3 = med.fusion "mlp_grad"(%x, %w1, %dy, %w2) : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>, tensor<1x2x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> (tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>, tensor<1x4x3x3x3xf32>) {
  ^bb0(%a: tensor<1x2x3x3x3xf32>, %b: tensor<4x2x1x1x1xf32>, %d: tensor<1x2x3x3x3xf32>, %c: tensor<2x4x1x1x1xf32>):
    %h = med.conv3d %a, %b : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>) -> tensor<1x4x3x3x3xf32>
    %g = med.gelu %h : tensor<1x4x3x3x3xf32>
    %dg = med.conv3d_transpose %d, %c : (tensor<1x2x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x4x3x3x3xf32>
    %dw2 = med.conv3d_grad_weight %g, %d {kernel = array<i64: 1, 1, 1>} : (tensor<1x4x3x3x3xf32>, tensor<1x2x3x3x3xf32>) -> tensor<2x4x1x1x1xf32>
    %dh = med.gelu_grad %h, %dg : (tensor<1x4x3x3x3xf32>, tensor<1x4x3x3x3xf32>) -> tensor<1x4x3x3x3xf32>
    %dw1 = med.conv3d_grad_weight %a, %dh {kernel = array<i64: 1, 1, 1>} : (tensor<1x2x3x3x3xf32>, tensor<1x4x3x3x3xf32>) -> tensor<4x2x1x1x1xf32>
    med.yield %dw2, %dw1, %h : tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>, tensor<1x4x3x3x3xf32>
  }
  return %0#0, %0#1, %0#2 : tensor<2x4x1x1x1xf32>, tensor<4x2x1x1x1xf32>, tensor<1x4x3x3x3xf32>
}

// -----

// mlp: the templates keep a tile's input and output channels in registers (at most 128).
func.func @mlp_too_wide(%x: tensor<1x2x3x3x3xf32>, %w1: tensor<4x2x1x1x1xf32>, %w2: tensor<130x4x1x1x1xf32>) -> tensor<1x130x3x3x3xf32> {
  // expected-error @+1 {{template 'mlp': the compression may have at most 128 channels}}
  %0 = med.fusion "mlp"(%x, %w1, %w2) : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>, tensor<130x4x1x1x1xf32>) -> tensor<1x130x3x3x3xf32> {
  ^bb0(%a: tensor<1x2x3x3x3xf32>, %b: tensor<4x2x1x1x1xf32>, %c: tensor<130x4x1x1x1xf32>):
    %h = med.conv3d %a, %b : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>) -> tensor<1x4x3x3x3xf32>
    %g = med.gelu %h : tensor<1x4x3x3x3xf32>
    %m = med.conv3d %g, %c : (tensor<1x4x3x3x3xf32>, tensor<130x4x1x1x1xf32>) -> tensor<1x130x3x3x3xf32>
    med.yield %m : tensor<1x130x3x3x3xf32>
  }
  return %0 : tensor<1x130x3x3x3xf32>
}

// -----

// The stencil template: its epilogue is the statistics of the stencil's result, nothing else.
func.func @stencil_epilogue(%x: tensor<1x2x3x4x5xf32>, %w: tensor<2x1x3x3x3xf32>) -> (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) {
  // expected-error @+1 {{template 'stencil': the epilogue must be med.group_norm_stats of the stencil's result}}
  %0:2 = med.fusion "stencil"(%x, %w) : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) {
  ^bb0(%a: tensor<1x2x3x4x5xf32>, %b: tensor<2x1x3x3x3xf32>):
    %y = med.shift_sum %a, %b : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x3x4x5xf32>
    %n = med.neg %y : tensor<1x2x3x4x5xf32>
    med.yield %y, %n : tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>
  }
  return %0#0, %0#1 : tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>
}

// -----

// The stencil template: the statistics' results are yielded after the stencil's.
func.func @stencil_yield(%x: tensor<1x2x3x4x5xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<1x2xf32> {
  // expected-error @+1 {{template 'stencil': the body must yield the stencil's result, then the mean and rstd}}
  %0 = med.fusion "stencil"(%x, %w) : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2xf32> {
  ^bb0(%a: tensor<1x2x3x4x5xf32>, %b: tensor<2x1x3x3x3xf32>):
    %y = med.shift_sum %a, %b : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x3x4x5xf32>
    %m, %r = med.group_norm_stats %y {groups = 2 : i64} : (tensor<1x2x3x4x5xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>)
    med.yield %m : tensor<1x2xf32>
  }
  return %0 : tensor<1x2xf32>
}

// -----

// The stencil template: a kernel of more than 7 along an axis may not fit a tile.
func.func @stencil_kernel(%x: tensor<1x2x3x4x9xf32>, %w: tensor<2x1x1x1x9xf32>) -> tensor<1x2x3x4x9xf32> {
  // expected-error @+1 {{template 'stencil': expected a static N×C×D×H×W result and a kernel of at most 7}}
  %0 = med.fusion "stencil"(%x, %w) : (tensor<1x2x3x4x9xf32>, tensor<2x1x1x1x9xf32>) -> tensor<1x2x3x4x9xf32> {
  ^bb0(%a: tensor<1x2x3x4x9xf32>, %b: tensor<2x1x1x1x9xf32>):
    %y = med.shift_sum %a, %b : (tensor<1x2x3x4x9xf32>, tensor<2x1x1x1x9xf32>) -> tensor<1x2x3x4x9xf32>
    med.yield %y : tensor<1x2x3x4x9xf32>
  }
  return %0 : tensor<1x2x3x4x9xf32>
}

// -----

// The stencil template: a residual adds a block argument to the stencil's result, not the
// result to itself.
func.func @stencil_residual_self(%x: tensor<1x2x3x4x5xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<1x2x3x4x5xf32> {
  // expected-error @+1 {{template 'stencil': a residual must add a block argument of the stencil's result type to its result}}
  %0 = med.fusion "stencil"(%x, %w) : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x3x4x5xf32> {
  ^bb0(%a: tensor<1x2x3x4x5xf32>, %b: tensor<2x1x3x3x3xf32>):
    %y = med.shift_sum %a, %b : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x3x4x5xf32>
    %s = med.add %y, %y : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> tensor<1x2x3x4x5xf32>
    med.yield %s : tensor<1x2x3x4x5xf32>
  }
  return %0 : tensor<1x2x3x4x5xf32>
}

// -----

// The stencil template: with a residual the body yields the sum alone.
func.func @stencil_residual_yield(%x: tensor<1x2x3x4x5xf32>, %w: tensor<2x1x3x3x3xf32>, %g: tensor<1x2x3x4x5xf32>) -> (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) {
  // expected-error @+1 {{template 'stencil': the body must yield the stencil's result, then the mean and rstd (or with a residual its sum alone)}}
  %0:2 = med.fusion "stencil"(%x, %w, %g) : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>, tensor<1x2x3x4x5xf32>) -> (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) {
  ^bb0(%a: tensor<1x2x3x4x5xf32>, %b: tensor<2x1x3x3x3xf32>, %c: tensor<1x2x3x4x5xf32>):
    %y = med.shift_sum %a, %b : (tensor<1x2x3x4x5xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x3x4x5xf32>
    %s = med.add %c, %y : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> tensor<1x2x3x4x5xf32>
    med.yield %y, %s : tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>
  }
  return %0#0, %0#1 : tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>
}

// -----

// `stencil_grad`: the epilogue is the sum of the output gradient over N, D, H, W (the bias
// gradient), not over other axes.
func.func @stencil_grad_axes(%x: tensor<1x2x3x4x5xf32>, %dy: tensor<1x2x3x4x5xf32>) -> (tensor<2x1x3x3x3xf32>, tensor<2x3xf32>) {
  // expected-error @+1 {{template 'stencil_grad': the epilogue must be the sum of the output gradient over axes 0, 2, 3, 4}}
  %0:2 = med.fusion "stencil_grad"(%x, %dy) : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> (tensor<2x1x3x3x3xf32>, tensor<2x3xf32>) {
  ^bb0(%a: tensor<1x2x3x4x5xf32>, %g: tensor<1x2x3x4x5xf32>):
    %dw = med.shift_sum_grad_weight %a, %g {kernel = array<i64: 3, 3, 3>} : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> tensor<2x1x3x3x3xf32>
    %db = med.reduce sum %g {axes = array<i64: 0, 3, 4>} : (tensor<1x2x3x4x5xf32>) -> tensor<2x3xf32>
    med.yield %dw, %db : tensor<2x1x3x3x3xf32>, tensor<2x3xf32>
  }
  return %0#0, %0#1 : tensor<2x1x3x3x3xf32>, tensor<2x3xf32>
}

// -----

// `stencil_grad`: the sum is of the weight gradient's output gradient, not of its input.
func.func @stencil_grad_input(%x: tensor<1x2x3x4x5xf32>, %dy: tensor<1x2x3x4x5xf32>) -> (tensor<2x1x3x3x3xf32>, tensor<2xf32>) {
  // expected-error @+1 {{template 'stencil_grad': the epilogue must be the sum of the output gradient over axes 0, 2, 3, 4}}
  %0:2 = med.fusion "stencil_grad"(%x, %dy) : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> (tensor<2x1x3x3x3xf32>, tensor<2xf32>) {
  ^bb0(%a: tensor<1x2x3x4x5xf32>, %g: tensor<1x2x3x4x5xf32>):
    %dw = med.shift_sum_grad_weight %a, %g {kernel = array<i64: 3, 3, 3>} : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> tensor<2x1x3x3x3xf32>
    %db = med.reduce sum %a {axes = array<i64: 0, 2, 3, 4>} : (tensor<1x2x3x4x5xf32>) -> tensor<2xf32>
    med.yield %dw, %db : tensor<2x1x3x3x3xf32>, tensor<2xf32>
  }
  return %0#0, %0#1 : tensor<2x1x3x3x3xf32>, tensor<2xf32>
}

// -----

// `stencil_grad`: the weight gradient is yielded first.
func.func @stencil_grad_yield(%x: tensor<1x2x3x4x5xf32>, %dy: tensor<1x2x3x4x5xf32>) -> (tensor<2xf32>, tensor<2x1x3x3x3xf32>) {
  // expected-error @+1 {{template 'stencil_grad': the body must yield the weight gradient, then the bias gradient}}
  %0:2 = med.fusion "stencil_grad"(%x, %dy) : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> (tensor<2xf32>, tensor<2x1x3x3x3xf32>) {
  ^bb0(%a: tensor<1x2x3x4x5xf32>, %g: tensor<1x2x3x4x5xf32>):
    %dw = med.shift_sum_grad_weight %a, %g {kernel = array<i64: 3, 3, 3>} : (tensor<1x2x3x4x5xf32>, tensor<1x2x3x4x5xf32>) -> tensor<2x1x3x3x3xf32>
    %db = med.reduce sum %g {axes = array<i64: 0, 2, 3, 4>} : (tensor<1x2x3x4x5xf32>) -> tensor<2xf32>
    med.yield %db, %dw : tensor<2xf32>, tensor<2x1x3x3x3xf32>
  }
  return %0#0, %0#1 : tensor<2xf32>, tensor<2x1x3x3x3xf32>
}

// -----

// `resample`: the transform must come first.
func.func @resample_no_transform(%x: tensor<1x1x4x4x4xf32>) -> tensor<1x1x4x4x4xf32> {
  // expected-error @+1 {{template 'resample': expected a med.spatial_transform of body arguments first}}
  %0 = med.fusion "resample"(%x) : (tensor<1x1x4x4x4xf32>) -> tensor<1x1x4x4x4xf32> {
  ^bb0(%a: tensor<1x1x4x4x4xf32>):
    %s = med.neg %a : tensor<1x1x4x4x4xf32>
    med.yield %s : tensor<1x1x4x4x4xf32>
  }
  return %0 : tensor<1x1x4x4x4xf32>
}

// -----

// `resample`: the epilogue computes per voxel; a reduction is not.
func.func @resample_reduction(%x: tensor<1x1x4x4x4xf32>, %m: tensor<1x3x4xf32>) -> tensor<1x1x1x1x1xf32> {
  // expected-error @+1 {{template 'resample': cannot run 'med.reduce' in the epilogue: expected elementwise, broadcast or generate access}}
  %0 = med.fusion "resample"(%x, %m) : (tensor<1x1x4x4x4xf32>, tensor<1x3x4xf32>) -> tensor<1x1x1x1x1xf32> {
  ^bb0(%a: tensor<1x1x4x4x4xf32>, %b: tensor<1x3x4xf32>):
    %t = med.spatial_transform linear %a, %b {shape = array<i64: 4, 4, 4>} : (tensor<1x1x4x4x4xf32>, tensor<1x3x4xf32>) -> tensor<1x1x4x4x4xf32>
    %s = med.reduce sum %t {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<1x1x4x4x4xf32>) -> tensor<1x1x1x1x1xf32>
    med.yield %s : tensor<1x1x1x1x1xf32>
  }
  return %0 : tensor<1x1x1x1x1xf32>
}

// -----

// `resample`: the kernel computes what it yields; an input is no result.
func.func @resample_yields_input(%x: tensor<1x1x4x4x4xf32>, %m: tensor<1x3x4xf32>) -> (tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>) {
  // expected-error @+1 {{template 'resample': the body may yield the transform's result and its epilogue's}}
  %0:2 = med.fusion "resample"(%x, %m) : (tensor<1x1x4x4x4xf32>, tensor<1x3x4xf32>) -> (tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>) {
  ^bb0(%a: tensor<1x1x4x4x4xf32>, %b: tensor<1x3x4xf32>):
    %t = med.spatial_transform linear %a, %b {shape = array<i64: 4, 4, 4>} : (tensor<1x1x4x4x4xf32>, tensor<1x3x4xf32>) -> tensor<1x1x4x4x4xf32>
    med.yield %t, %a : tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>
  }
  return %0#0, %0#1 : tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>
}

// -----

// `resample`: affinities of labels sampled linearly would need every neighbour's label.
func.func @resample_linear_affinities(%s: tensor<1x1x6x6x6xf32>, %m: tensor<1x3x4xf32>) -> (tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>) {
  // expected-error @+1 {{template 'resample': affinities need the labels of a nearest transform}}
  %0:2 = med.fusion "resample"(%s, %m) : (tensor<1x1x6x6x6xf32>, tensor<1x3x4xf32>) -> (tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>) {
  ^bb0(%a: tensor<1x1x6x6x6xf32>, %b: tensor<1x3x4xf32>):
    %t = med.spatial_transform linear %a, %b {shape = array<i64: 6, 6, 6>} : (tensor<1x1x6x6x6xf32>, tensor<1x3x4xf32>) -> tensor<1x1x6x6x6xf32>
    %aff, %k = med.affinities %t {offsets = array<i64: 1, 0, 0>, crop_size = array<i64: 4, 4, 4>} : (tensor<1x1x6x6x6xf32>) -> (tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>)
    med.yield %aff, %k : tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>
  }
  return %0#0, %0#1 : tensor<1x1x4x4x4xf32>, tensor<1x1x4x4x4xf32>
}

// -----

// `resample`: a crop over the batch or channel axes, or one whose input escapes, is not a box
// of the output voxels.
func.func @resample_channel_crop(%x: tensor<1x2x4x4x4xf32>, %m: tensor<1x3x4xf32>) -> tensor<1x1x4x4x4xf32> {
  // expected-error @+1 {{template 'resample': the slice must crop the last value, used by it alone, over the spatial axes with stride 1}}
  %0 = med.fusion "resample"(%x, %m) : (tensor<1x2x4x4x4xf32>, tensor<1x3x4xf32>) -> tensor<1x1x4x4x4xf32> {
  ^bb0(%a: tensor<1x2x4x4x4xf32>, %b: tensor<1x3x4xf32>):
    %t = med.spatial_transform linear %a, %b {shape = array<i64: 4, 4, 4>} : (tensor<1x2x4x4x4xf32>, tensor<1x3x4xf32>) -> tensor<1x2x4x4x4xf32>
    %s = med.slice %t {offsets = array<i64: 0, 1, 0, 0, 0>, sizes = array<i64: 1, 1, 4, 4, 4>} : (tensor<1x2x4x4x4xf32>) -> tensor<1x1x4x4x4xf32>
    med.yield %s : tensor<1x1x4x4x4xf32>
  }
  return %0 : tensor<1x1x4x4x4xf32>
}

// -----

// `reduce`: siblings over the same axes.
func.func @reduce_axes(%x: tensor<2x3x4xf32>) -> (tensor<2x3xf32>, tensor<2xf32>) {
  // expected-error @+1 {{template 'reduce': expected reductions of one body argument over the same axes}}
  %0:2 = med.fusion "reduce"(%x) : (tensor<2x3x4xf32>) -> (tensor<2x3xf32>, tensor<2xf32>) {
  ^bb0(%a: tensor<2x3x4xf32>):
    %s = med.reduce sum %a {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
    %m = med.reduce max %a {axes = array<i64: 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2xf32>
    med.yield %s, %m : tensor<2x3xf32>, tensor<2xf32>
  }
  return %0#0, %0#1 : tensor<2x3xf32>, tensor<2xf32>
}

// -----

// `reduce`: the innermost axis kept is no split sum.
func.func @reduce_inner_kept(%x: tensor<2x3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{template 'reduce': the innermost axis of size above 1 must be reduced}}
  %0:2 = med.fusion "reduce"(%x) : (tensor<2x3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  ^bb0(%a: tensor<2x3x4xf32>):
    %s = med.reduce sum %a {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
    %m = med.reduce max %a {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
    med.yield %s, %m : tensor<3x4xf32>, tensor<3x4xf32>
  }
  return %0#0, %0#1 : tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// The roles a fusion carries are its matcher's: the code generators read them instead of
// matching again. Here expand and compress are swapped.
func.func @mlp_roles_swapped(%x: tensor<1x2x3x3x3xf32>, %w1: tensor<4x2x1x1x1xf32>, %w2: tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  // expected-error @+1 {{template 'mlp': roles {activation = 1 : i64, compress = 0 : i64, expand = 2 : i64}, but its matcher finds {activation = 1 : i64, compress = 2 : i64, expand = 0 : i64}}}
  %0 = med.fusion "mlp"(%x, %w1, %w2) {roles = {activation = 1, compress = 0, expand = 2}} : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32> {
  ^bb0(%a: tensor<1x2x3x3x3xf32>, %b: tensor<4x2x1x1x1xf32>, %c: tensor<2x4x1x1x1xf32>):
    %h = med.conv3d %a, %b : (tensor<1x2x3x3x3xf32>, tensor<4x2x1x1x1xf32>) -> tensor<1x4x3x3x3xf32>
    %g = med.gelu %h : tensor<1x4x3x3x3xf32>
    %m = med.conv3d %g, %c : (tensor<1x4x3x3x3xf32>, tensor<2x4x1x1x1xf32>) -> tensor<1x2x3x3x3xf32>
    med.yield %m : tensor<1x2x3x3x3xf32>
  }
  return %0 : tensor<1x2x3x3x3xf32>
}

// -----

// A template with roles needs them.
func.func @stencil_roles_missing(%x: tensor<1x2x2x2x2xf32>, %w: tensor<2x1x3x3x3xf32>) -> tensor<1x2x2x2x2xf32> {
  // expected-error @+1 {{template 'stencil': roles missing, but its matcher finds {stencil = 0 : i64}}}
  %0 = med.fusion "stencil"(%x, %w) : (tensor<1x2x2x2x2xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x2x2x2xf32> {
  ^bb0(%a: tensor<1x2x2x2x2xf32>, %k: tensor<2x1x3x3x3xf32>):
    %y = med.shift_sum %a, %k : (tensor<1x2x2x2x2xf32>, tensor<2x1x3x3x3xf32>) -> tensor<1x2x2x2x2xf32>
    med.yield %y : tensor<1x2x2x2x2xf32>
  }
  return %0 : tensor<1x2x2x2x2xf32>
}

// -----

// A template without roles takes none.
func.func @elementwise_roles(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{template 'elementwise': roles {expand = 0 : i64}, but its matcher finds none (leave the attribute out)}}
  %0 = med.fusion "elementwise"(%x) {roles = {expand = 0}} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %s = med.neg %a : tensor<4xf32>
    med.yield %s : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
