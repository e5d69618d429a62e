//===- MedRandomOps.td - counter-based random numbers -----------------------------===//
//
// The random numbers of a training step (augmentation parameters and noise): each element a
// pure function of the step's key and of what it is for, so that the CPU and CUDA backends,
// any thread count and a resumed run draw the same numbers (DESIGN.md §4).
//
//===----------------------------------------------------------------------------------===//

#ifndef MED_RANDOM_OPS_TD
#define MED_RANDOM_OPS_TD

def Med_RandomDistribution : I32EnumAttr<"RandomDistribution", "distribution of med.random", [
    I32EnumAttrCase<"uniform", 0>,
    I32EnumAttrCase<"normal", 1>,
    I32EnumAttrCase<"bernoulli", 2>]> {
  let cppNamespace = "::mlir::med";
  let genSpecializedAttr = 0;
}
def Med_RandomDistributionAttr : EnumAttr<Med_Dialect, Med_RandomDistribution, "distribution">;

def Med_RandomOp : Med_ShapedOp<"random", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{random($key, $like, $stream, $probability, $sample_shape)}];
  let summary = "counter-based random numbers (Philox 4x32-10), one per element";
  let description = [{
    An f32 tensor of random numbers. Its shape is that of `like` (only its shape is read), or,
    with `sample_shape`, `like`'s first size (the batch) followed by `sample_shape`: one set
    of per-sample parameters of a transform.

    Element `i` of sample `n` (the first index) is a pure function of the scalar `key` (an
    i64, the step's key: `train_step`'s `rng` input, which `medrun` derives from the run's
    seed, the rank and the step; `docs/augment.md`), of `stream` (which draw this is: each
    random op of a program has its own) and of (n, i), with `i` the element's row-major
    index within its sample (below 2³²): Philox 4x32-10 (Salmon et al., SC'11) with the key
    words (low, high 32 bits of `key`) and the counter (i, n, stream, 0) gives four words
    w0..w3.

    - `uniform`: (w0 >> 8) · 2⁻²⁴, in [0, 1) on a grid of 2⁻²⁴; exact, the same bits on
      every backend.
    - `normal`: Box–Muller, √(−2 ln u₁) · cos(2π u₂) with u₁ = ((w0 >> 8) + 1) · 2⁻²⁴ in
      (0, 1] and u₂ = (w1 >> 8) · 2⁻²⁴; backends agree to the rounding of their `log`,
      `sqrt` and `cos`.
    - `bernoulli`: 1 where the uniform number is below `probability` (in [0, 1]), else 0:
      a transform's gate. Exact, the same on every backend.

    Ranges and other distributions are ordinary arithmetic on these (a uniform number
    times the width plus the low end), which the fusion passes fuse.

    Not differentiable; not fused (its value depends on the element's index).

    ```mlir
    %angles = med.random %key, %image {stream = 3 : i64, distribution = #med<distribution uniform>, sample_shape = array<i64: 3>} : (tensor<i64>, tensor<2x1x8x8x8xf32>) -> tensor<2x3xf32>
    %gate = med.random %key, %image {stream = 5 : i64, distribution = #med<distribution bernoulli>, probability = 0.2, sample_shape = array<i64: 1>} : (tensor<i64>, tensor<2x1x8x8x8xf32>) -> tensor<2x1xf32>
    %noise = med.random %key, %image {stream = 4 : i64, distribution = #med<distribution normal>} : (tensor<i64>, tensor<2x1x8x8x8xf32>) -> tensor<2x1x8x8x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I64]>:$key, Med_LabelTensor:$like,
                       I64Attr:$stream,
                       DefaultValuedAttr<Med_RandomDistributionAttr,
                                         "::mlir::med::RandomDistribution::uniform">:$distribution,
                       DefaultValuedAttr<F64Attr, "0.5">:$probability,
                       OptionalAttr<DenseI64ArrayAttr>:$sample_shape);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$key `,` $like attr-dict `:` functional-type(operands, results)";
}

def Med_DropoutOp : Med_ShapedOp<"dropout", [Med_Differentiable, Med_Fusible]> {
  let shapeRule = [{dropout($input, $key, $stream, $p)}];
  let flops = "1"; // the scaling multiply (the Philox rounds are integer work)
  let summary = "dropout of a training step: each element kept with probability 1 − p, scaled by 1/(1 − p)";
  let description = [{
    `torch.nn.Dropout(p)` in train mode (ONNX `Dropout` with `training_mode` true): element
    `i` of sample `n` (the first index) is `x · s` where it is kept, else 0, with
    `s = 1/(1 − p)` rounded to f32 once (the product is taken in f32, or f64 under f64). The
    element is kept when the uniform number of `med.random` drawn for it is at least `p`:
    (w0 >> 8) · 2⁻²⁴ ≥ p, where w0 is the first word of Philox 4x32-10 under the step's `key`
    (an i64 scalar: `train_step`'s `rng`) with the counter (i, n, `stream`, 1). The fourth
    counter word 1 keeps the network's draws apart from the augmentation's `med.random`
    (word 0) under the same key; `stream` numbers the dropout ops of a network. So the mask
    is a pure function of (seed, step, rank, sample, op, element): the CPU and CUDA backends
    draw the same one, and `p` is kept on the 2⁻²⁴ grid (a fraction ⌈p·2²⁴⌉/2²⁴ dropped).

    `p` is in [0, 1); `p = 0` is the identity. The mask is never stored: the gradient is
    `med.dropout` of the result's gradient with the same key, stream and `p` (dropout is
    linear in `x`, so dx = dy · mask · s), which draws the mask again. Recomputing it costs
    one Philox block per element of an elementwise kernel that is memory-bound anyway; a
    stored mask would keep one byte (or bit) per element alive from the forward pass to the
    backward pass, for each dropout of the network.

    Only training steps drop: `@infer`, `@eval_step` and `@eval_step_ema` run the network
    with every `med.dropout` replaced by its input (`med::toEvalForm`), as PyTorch's
    `net.eval()`.

    ```mlir
    %y = med.dropout %x, %key {p = 0.2 : f64, stream = 0 : i64} : (tensor<2x32x8x8x8xf32>, tensor<i64>) -> tensor<2x32x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, RankedTensorOf<[I64]>:$key, F64Attr:$p,
                       I64Attr:$stream);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $key attr-dict `:` functional-type(operands, results)";
}

#endif // MED_RANDOM_OPS_TD
