//===- MedFusionOps.td - fusions: one kernel for a group of ops ----------------===//
//
// A fusion holds ordinary med ops in an isolated region; the passes that form fusions
// decide what goes in (lib/Transforms/FormFusions.cpp), and a template named by the op runs
// the body as one kernel on the GPU (lib/Target). The CPU backend and the LibTorch checker
// run the body op by op, so all three executors run the same body.
//
//===----------------------------------------------------------------------------------===//

#ifndef MED_FUSION_OPS_TD
#define MED_FUSION_OPS_TD

def Med_YieldOp : Med_Op<"yield", [Pure, Terminator, ReturnLike, HasParent<"FusionOp">]> {
  let inPlan = 0;
  let summary = "the results of a fusion's body";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
}

def Med_FusionOp : Med_Op<"fusion", [Pure, IsolatedFromAbove, Med_NotDifferentiable,
                                      SingleBlockImplicitTerminator<"YieldOp">]> {
  let flops = "fusion";
  // The plan names the template and the body's entry in the fusion table (Artifact.cpp).
  let planAttributeNames = ["template:string", "body:int"];
  let summary = "ops run as one kernel by a template";
  let description = [{
    The body computes the results from the block arguments, which are the op's inputs in
    order; it may not use values from outside. `template_name` names the template that runs
    it as one kernel, and the template's matcher is the verifier: a body it cannot run is
    rejected with the reason.

    - `elementwise`: ops of elementwise, broadcast or generate access (FusionOpInterface)
      that all produce the shape of the fusion's results, and scalar f32 `med.constant`s
      (literals in the kernel); a block argument may broadcast to that shape, or be only a
      generator's key or shape (never read as elements).
    - `mlp`: a block's MLP, `y = W2·act(W1·x + b1) + b2`, optionally followed by one
      elementwise op of `y` and a body argument of its shape (the residual add): 1×1×1
      convolutions (contractions over channels) of body arguments, a one-operand
      elementwise activation between them; one result. The input and the compression have
      at most 128 channels (the template keeps them in registers); the expansion has any
      number.
    - `mlp_grad`: the gradients of an `mlp` from its output gradient `dy`, recomputing the
      expansion `h = W1·x + b1` and `g = act(h)` instead of reading them:
      `dg = W2ᵀ·dy`, `dW2 = Σ dy·gᵀ`, `dh = act'(h, dg)`, `dW1 = Σ dh·xᵀ`, and optionally
      `dx = W1ᵀ·dh` and `db1 = Σ dh`; it yields both weight gradients and neither `h` nor
      `g`.

    - `reduce`: two or more reductions of one body argument over the same axes, the
      innermost axis of size above 1 among them, each yielded in order: one pass over the
      argument with an accumulator per reduction.
    - `resample`: a `med.spatial_transform` of body arguments first (one thread per output
      voxel computes its position and neighbours once), then either an epilogue — ops of
      elementwise, broadcast or generate access (`med.random`) producing floats of the
      transform's shape from its result, each other and body arguments — optionally closed
      by a `med.slice` of the last value over the spatial axes with stride 1, which is then
      the only result (the kernel samples that box alone); or `med.affinities` of a
      `nearest` transform's result, yielding the affinities and the mask (the labels are
      sampled at both ends of each affinity and never stored).
    - `stencil`: a shift-sum of body arguments (kernel at most 7 along each axis),
      optionally with `med.group_norm_stats` of its result, yielding the result, then the
      mean and rstd.

    `roles` records what the template's matcher found, once, when the fusion is formed:
    each role's op by its index in the body (the verifier checks it against the matcher;
    the plan carries it, and the code generators read it instead of matching again).
    `mlp`: `expand`, `activation`, `compress`, `epilogue`?; `mlp_grad`: `expand`,
    `activation`, `dg`, `dw2`, `dh`, `dw1`, `dx`?, `db1`?; `stencil`: `stencil`,
    `statistics`?; `resample`: `transform`, then `affinities` or `crop`? (the epilogue is
    the ops between). `elementwise` and `reduce` have none (the attribute is absent).

    Numerics: values inside a fusion are f32 and never stored; only the results are rounded
    to their storage type (under bf16-mixed or fp16-mixed), and the inputs are read as the
    ops of their kind read them. One exception, under bf16-mixed and fp16-mixed: the factors
    of a convolution's products (input and weight; input and output gradient) and the
    operand of a reduction are rounded to the 16-bit type, as tensor cores take them (the
    `mlp_grad` template sums `db1` as one more column of `dW1`'s product) and as the
    unfused ops read them from memory; the products and sums are accumulated in f32.
    A fusion marked `med.fp32` (master-weight math, augmentation) computes in f32 and reads
    its inputs unrounded even where a result is stored in the 16-bit type.

    ```mlir
    %y = med.fusion "elementwise" (%x, %b) : (tensor<2x8x4x4x4xf32>, tensor<1x8x1x1x1xf32>) -> tensor<2x8x4x4x4xf32> {
    ^bb0(%a: tensor<2x8x4x4x4xf32>, %c: tensor<1x8x1x1x1xf32>):
      %0 = med.add %a, %c : (tensor<2x8x4x4x4xf32>, tensor<1x8x1x1x1xf32>) -> tensor<2x8x4x4x4xf32>
      %1 = med.gelu %0 : tensor<2x8x4x4x4xf32>
      med.yield %1 : tensor<2x8x4x4x4xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$template_name, OptionalAttr<DictionaryAttr>:$roles,
                       Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $template_name `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    // An empty body with one block argument per input; the caller fills it and yields.
    OpBuilder<(ins "::llvm::StringRef":$templateName, "::mlir::TypeRange":$results,
                   "::mlir::ValueRange":$inputs)>
  ];
}

#endif // MED_FUSION_OPS_TD
