//===- Passes.td - passes of the med compiler ----------------------------------===//
#ifndef MED_TRANSFORMS_PASSES_TD
#define MED_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MedSpecialize : Pass<"med-specialize", "::mlir::ModuleOp"> {
  let summary = "fixes the batch and patch size of entry functions and inlines their calls";
  let description = [{
    Model files describe a network for any batch and patch size (`?` dimensions) as a network
    function that calls one function per block shape. This pass prepares one concrete
    instance:

    1. inlines every call reachable from the entry function — the one named by `entry`, or
       else every public function (the block functions stay in the module; `symbol-dce`
       removes them);
    2. sets the batch (axis 0) and the patch (the last three axes) of every entry argument of
       rank 5 whose size there is `?` — divided by `f` for an argument with the attribute
       `med.downsample = f` (deep-supervision targets);
    3. re-infers the result type of every op in order and updates the function's result types.

    An inconsistent size (a patch not divisible by the network's downsampling factor, say) is
    reported by the op where the shapes stop matching.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "function to specialize (default: every public function)">,
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "batch size for axis 0 of rank-5 arguments (0: leave as is)">,
    ListOption<"patch", "patch", "int64_t",
               "D,H,W for the last three axes of rank-5 arguments (empty: leave as is)">,
  ];
}

def MedAutodiff : Pass<"med-autodiff", "::mlir::ModuleOp"> {
  let summary = "builds the gradient function of a loss function (reverse mode)";
  let description = [{
    For each selected function whose first result is a scalar loss, adds a public function
    `<name>_grad` with the same arguments that returns the original results, then the
    gradient of the loss with respect to every parameter the function reads (in declaration
    order), then with respect to every floating-point argument. Its `med.output_names`
    attribute names the results (`out0`, …, `grad.<parameter>`, `grad.arg<i>`).

    The algorithm: values that depend on a parameter or an argument and on which the loss
    depends are active; an active op whose gradient reuses forward work is first replaced
    by a form that keeps it (a group norm saves its mean and rstd); ops are visited in
    reverse order, each active op's GradientOpInterface builds its operands' gradients from
    its results', and several contributions to one value are summed. Ops marked
    NotDifferentiable (constants, gradient ops) stop the gradient; backward ops nobody uses
    are dropped. A parameter or argument the loss does not depend on gets a zero gradient and
    a warning. Needs static shapes: run med-specialize first.
  }];
  let options = [
    Option<"function", "func", "std::string", /*default=*/"\"\"",
           "function to differentiate (default: every public function returning a scalar first)">,
  ];
}

def MedAddLoss : Pass<"med-add-loss", "::mlir::ModuleOp"> {
  let summary = "wraps a network in a loss function @loss";
  let description = [{
    Adds `@loss(%image, <targets>) -> tensor<f32>` that calls the network function and
    applies the loss to its output(s); `med-train-step` then differentiates it.

    - `type=bce_with_logits` (BANIS): `@loss(%image, %target[, %mask])`, the target shaped
      like the logits; options `mask`, `reduction` (mean, sum, per_channel),
      `auto-pos-weight`, `max-pos-weight` (BANIS+: per_channel with automatic pos_weight
      ≤ 10).
    - `type=dice_ce` (nnU-Net): one target of class indices (N×1×D×H×W, f32) per network
      output, `@loss(%image, %t0, %t1, …)`, target i marked `med.downsample = 2^i` (the
      resolution of output i), deep-supervision `weights` (default 1, ½, ¼, …
      normalized to sum 1 over the outputs), `batch-dice`, `include-background`,
      `ignore-label` (nnU-Net's `ignore` label: voxels holding it count nowhere; -1: none).

    A network that drops out (`med.dropout`, docs/import.md) takes the step's key as a
    second argument (a rank-0 i64): the loss then takes it last, as its input `rng`, and
    passes it on.

    It also adds `@infer(%image)`, the network's forward pass (a network with a train form,
    BatchNorm's or dropout's, through an eval copy that sets no state and takes no key); the
    network and its other public functions become private.
  }];
  let options = [
    Option<"network", "network", "std::string", /*default=*/"\"\"",
           "network function (default: the only public function)">,
    Option<"type", "type", "std::string", /*default=*/"\"bce_with_logits\"",
           "bce_with_logits or dice_ce">,
    Option<"mask", "mask", "bool", /*default=*/"false", "BCE: take a mask argument">,
    Option<"reduction", "reduction", "std::string", /*default=*/"\"mean\"",
           "BCE: mean, sum or per_channel">,
    Option<"autoPosWeight", "auto-pos-weight", "bool", /*default=*/"false",
           "BCE: pos_weight = min(neg/pos, max-pos-weight) per channel">,
    Option<"maxPosWeight", "max-pos-weight", "double", /*default=*/"10.0",
           "BCE: cap of the automatic pos_weight">,
    ListOption<"weights", "weights", "double",
               "Dice+CE: weight per network output (default 1, 1/2, 1/4, ... normalized)">,
    Option<"batchDice", "batch-dice", "bool", /*default=*/"true", "Dice+CE: batch dice">,
    Option<"includeBackground", "include-background", "bool", /*default=*/"false",
           "Dice+CE: count class 0 in the dice term">,
    Option<"ignoreLabel", "ignore-label", "int64_t", /*default=*/"-1",
           "Dice+CE: the target value left out of CE and Dice (-1: none)">,
  ];
}

def MedTrainStep : Pass<"med-train-step", "::mlir::ModuleOp"> {
  let summary = "links a loss function, its gradient and an optimizer into @train_step";
  let description = [{
    Builds `@train_step` from the loss function `loss` (its first result a scalar):

    ```
    @train_step(<loss arguments>, %lr, %step[, %ema_decay][, %loss_scale, %growth_tracker], %rng)
        -> (loss, grad_norm[, loss_scale, growth_tracker, found_inf])
    ```

    1. gradients of every trainable parameter (`med-autodiff`, reusing `<loss>_grad`);
    2. the global gradient norm ‖g‖₂ over all parameters and, with `clip` > 0, scaling by
       min(clip / (‖g‖₂ + 1e-6), 1), as `torch.nn.utils.clip_grad_norm_`;
    3. one `med.adamw` or `med.sgd` per parameter; its state is declared as frozen
       parameters `optimizer.exp_avg.<p>`, `optimizer.exp_avg_sq.<p>` (AdamW) or
       `optimizer.momentum_buffer.<p>` (SGD), initialized to zeros;
    4. with `ema`, `ema.<p> ← ema.<p> + (1 − d)·(p − ema.<p>)` on the updated parameters,
       where `d` is the `%ema_decay` input (0 during warm-up, computed by the runtime);
       `ema.<p>` starts as a copy of `p`;
    5. `med.assign` of every updated tensor.

    With `ema`, it also adds `@eval_step_ema`: the loss function evaluated with the EMA
    weights (BANIS+ validates with them).

    `precision` is recorded as the step's `med.precision` attribute (the runtime runs the
    step in it). `fp16-mixed` adds dynamic loss scaling as `torch.amp.GradScaler`: the
    gradient is that of `loss · loss_scale` (`<loss>_scaled_grad`), `found_inf` is
    `med.any_non_finite` of those gradients, which are then multiplied by 1/`loss_scale`
    before the norm; when `found_inf` is 1, `med.select` keeps every parameter, moment,
    EMA tensor and the AdamW step count `optimizer.step` (a frozen scalar: the updates
    applied, which AdamW uses instead of `%step`, as torch's skipped steps do not count);
    `med.update_loss_scale` returns the next scale and growth tracker (`growth-factor`,
    `backoff-factor`, `growth-interval`; `init-scale` is recorded as `med.init_loss_scale`
    for the runtime's first step).

    With `guard-update` (recipes set it: `medc compile --recipe`, `medrun train`) the step
    also returns `update_nonfinite`:
    `med.any_non_finite` (marked `med.update_guard`) of every value it assigns. A finite
    gradient can still overflow the update (a learning rate too large); the runtime then
    drops the step's assignments, so the state stays as before the step, and counts it,
    as GradScaler skips an overflowed step. The flag is an output read with the loss, at
    the step's end: no host synchronization inside the step.

    `lr`, `step` (1 for the first step), `ema_decay`, `loss_scale` and `growth_tracker` are
    rank-0 f32 inputs and `rng` a rank-0 i64 (the key of the step's random numbers, which
    `med.random` and `med.dropout` ops read; `medrun` derives it from the seed, the rank and the step), so nothing that changes per step is a constant.
    A loss with an input `rng` (its network drops out) is given the step's key there:
    without `augment` that input is the step's `rng`, in its place among the batch inputs.
    `@eval_step` and `@eval_step_ema` drop nothing and take no key. Every op the pass adds
    to the step carries `med.fp32`: under mixed precision it computes in f32 (master
    weights, optimizer state, norms, loss scaling). With `exempt-norm-bias`, parameters of
    rank ≤ 1 (biases, norm affines) and GRN parameters get no weight decay. Calls remain;
    run `inline` and `symbol-dce` afterwards.

    With `augment`, the step starts with that function (an augmentation pipeline,
    docs/augment.md): the step's batch inputs are the pipeline's inputs other than its
    rank-0 i64 key, which is the step's `%rng`; the pipeline's results feed the loss
    function's inputs of the same names (`med.output_names` against `med.input_names`,
    types equal). The pipeline's ops carry `med.fp32` except those whose values it returns,
    so under mixed precision its per-sample parameters, matrices and labels stay f32 while
    what reaches the network is stored as a batch input would be. The pipeline becomes
    public, so that the artifact also holds it on its own.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"loss\"", "loss function">,
    Option<"augment", "augment", "std::string", /*default=*/"\"\"",
           "augmentation pipeline run first (\"\": none)">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"", "adamw or sgd">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW β1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW β2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW ε">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"1e-2", "weight decay">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"exemptNormBias", "exempt-norm-bias", "bool", /*default=*/"false",
           "no weight decay for biases, norm affines and GRN parameters">,
    Option<"clip", "clip", "double", /*default=*/"0.0",
           "max global gradient norm (0: no clipping)">,
    Option<"ema", "ema", "bool", /*default=*/"false", "keep an EMA of the parameters">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "fp32, bf16-mixed or fp16-mixed (dynamic loss scaling)">,
    Option<"initScale", "init-scale", "double", /*default=*/"65536.0",
           "fp16-mixed: the loss scale of the first step (recorded for the runtime)">,
    Option<"growthFactor", "growth-factor", "double", /*default=*/"2.0",
           "fp16-mixed: scale factor after growth-interval steps without inf/NaN">,
    Option<"backoffFactor", "backoff-factor", "double", /*default=*/"0.5",
           "fp16-mixed: scale factor after a step with inf/NaN gradients">,
    Option<"growthInterval", "growth-interval", "int64_t", /*default=*/"2000",
           "fp16-mixed: successful steps before the scale grows">,
    Option<"guardUpdate", "guard-update", "bool", /*default=*/"false",
           "return update_nonfinite: whether any assigned value is inf or NaN (the runtime "
           "then skips the step)">,
  ];
}

def MedFlattenOptimizer : Pass<"med-flatten-optimizer", "::mlir::ModuleOp"> {
  let summary = "one update over flat buffers for all parameters that update alike";
  let description = [{
    A training step updates each parameter with its own chain of elementwise ops: the
    clipped gradient, AdamW or SGD, the EMA, the selects that keep the state of a skipped
    step. The pass finds these chains ("lanes") and replaces the lanes that are the same up
    to shapes by one chain over flat tensors:

    1. A lane grows backwards from each `med.assign` of an f32 state tensor, over ops that
       access their operands elementwise or broadcast scalars (FusionOpInterface), produce
       the lane's shape and whose results are used only inside the lane. Its leaves are
       state reads (`med.param`), values of the lane's shape computed elsewhere (the
       gradients) and scalars (learning rate, step, clip coefficient).
    2. Lanes with the same ops, attributes and scalar operands form a group (AdamW with and
       without weight decay are two groups). Each state tensor of a group's lanes becomes a
       member of a `med.flat_buffer` (members in step order, each at a multiple of
       `alignment` elements); the gradients are laid out the same way by `med.pack`.
    3. One chain over the flat tensors replaces the group's lanes, reading and assigning the
       flat buffers. Ops that reduce the multiset of every gradient element
       (`med.sum_squares`, `med.any_non_finite`) read the packed gradients instead, and the
       training step's guard on its updated state (`med.any_non_finite` marked
       `med.update_guard`) reads the flat updates instead of each lane's (a padding element
       is 0 and every update keeps it 0).

    Groups of a single lane are left alone. The members keep their names, so checkpoints do
    not change.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "members start at a multiple of this many elements (64 f32: 256 bytes)">,
  ];
}

def MedDataParallel : Pass<"med-data-parallel", "::mlir::func::FuncOp"> {
  let summary = "sums the flat gradients over the ranks of a data-parallel job, in buckets";
  let description = [{
    Prepares a training step for data-parallel training (`medc compile --data-parallel`;
    docs/data-parallel.md). It runs after `med-flatten-optimizer`, on functions that assign
    state, and needs every assigned tensor to be a flat buffer: each gradient then reaches
    the optimizer through a `med.pack` (the flat gradient buffer).

    1. **Buckets.** The members of each pack are split into buckets: contiguous slices of
       the packed gradients of at most `bucket-mb` MiB (a member larger than that is a bucket
       of its own), formed in the order backward produces the gradients (from the end of
       the buffer when its last member is produced first, as backward produces the last
       layers' gradients first).
    2. **All-reduce.** Right after the last producer of its members, each bucket gets a
       `med.all_reduce` of its members (their offsets within the bucket's slice recorded), and
       the pack reads its results. Buckets are numbered in program order, the order every rank
       reduces them in.
    3. **Averaging.** The function takes one more scalar input, `inv_world_size`
       (1 / the number of ranks, fed by the runtime), folded into the optimizer's scale: each
       elementwise use of the packed gradients (the clip coefficient's product, the optimizer)
       reads them multiplied by it, which `med-form-fusions` fuses into the optimizer's chain,
       and each `med.sum_squares` of them (the gradient norm) is multiplied by its square, so
       the norm and the clipping see the averaged gradients. `med.any_non_finite` reads the
       sums as they are (scaling does not change finiteness). With one rank the factor is 1
       and the step computes exactly what it computes without the pass.

    A function that assigns a tensor outside a flat buffer is rejected (its gradient would
    not be reduced), as is one with no `med.pack`.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25",
           "the largest bucket, in MiB of f32 gradients (25, as PyTorch DDP)">,
  ];
}

def MedShiftSum : Pass<"med-shift-sum", "::mlir::func::FuncOp"> {
  let summary = "rewrites stride-1 depthwise convolutions into shift-sums (med.shift_sum)";
  let description = [{
    A depthwise convolution of stride 1 with "same" padding (`med.conv3d` with
    `groups` = input channels = output channels, weight C×1×kD×kH×kW with every k odd,
    stride and dilation 1, padding k/2 on each axis; with or without bias) becomes
    `med.shift_sum`: the output as the kD·kH·kW shifted copies of the input, each scaled per
    channel, summed (docs/dialect.md). Its gradient rule then builds the backward pass as
    shift-sums too: the input gradient is the `mirrored` shift-sum of the output gradient
    (the taps reversed), the weight gradient one reduction per tap
    (`med.shift_sum_grad_weight`), the bias gradient a sum. These ops are `Stencil` ops
    (FusionOpInterface), each run as one stencil kernel.

    Every other convolution is left as it is: dense or grouped, 1×1×1 with groups < C,
    strided (MedNeXt's down blocks), dilated, transposed (its up blocks), even kernels, or
    padding other than k/2.

    medc runs it on the forward program, after `med-specialize` and before `med-autodiff` /
    `med-train-step`, so that the gradients are built from the shift-sum rules
    (`--disable-pass=med-shift-sum` leaves the convolutions and their gradients as
    `med.conv3d`, `med.conv3d_transpose` and `med.conv3d_grad_weight`).
  }];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedSinkAssigns : Pass<"med-sink-assigns", "::mlir::func::FuncOp"> {
  let summary = "moves med.assign ops to the end of their block";
  let description = [{
    An assign takes effect when the function returns (reads of the parameter in the same
    function see the old value), so where it sits in the block does not change what the
    function computes. Moving every assign to the end, in their order, leaves the values it
    stores free of early uses: the updates of a training step (AdamW's new parameter and
    moments, the EMA) can then be formed into one fusion per parameter by
    `med-form-fusions`, the assigns reading its results after it.
  }];
}

def MedRecompute : Pass<"med-recompute", "::mlir::func::FuncOp"> {
  let summary = "recomputes saved values in the backward: those that cost no memory, and more "
                "until the planned memory fits a budget";
  let description = [{
    A training step saves forward values for its backward; while they wait, they hold
    device memory. When the function's planned peak exceeds `above-gib` (medc: 16 GiB, the
    recipe key `recompute_above_gib`; small steps keep their speed) or under a budget (it
    is on by default; `--disable-pass med-recompute` leaves it out, which a budget
    forbids), a value live across the step where the planned bytes
    peak that can be computed again from values live across that step anyway gets a copy
    before its first reader after the peak: an op cheap to run again (below) whose inputs
    are read at or after that reader, or the slice of an `elementwise` or `stencil` fusion
    that yields it, cut at the fusion's inputs and its other results (GELU's output from
    the saved pre-activation it is fused with; a depthwise stencil's output from the block
    input its weight gradient keeps, and the group norm applied to it). Copies may read
    copies. The peak loses those bytes and no step gains any; the pass repeats at the new
    peak while the plan falls. It costs time only: each copy is one more pass over its
    elements in the backward. A copy that is an elementwise kernel then runs in one kernel
    with a later elementwise kernel of its shape that reads one of its inputs and can stand
    where the copy does (GELU's output beside its gradient, which reads the same
    pre-activation: read once), where no step's live bytes then exceed the peak's. Under a
    budget (`medc compile --memory-budget GiB`, recipe key
    `memory_budget_gib`), this pass lowers the function's planned peak — medc's memory plan
    over its ops (the arena, `lib/Analysis/MemoryPlan.cpp`) plus the resident state it
    reads — until it fits: a value computed by an op that is cheap to run again (no side
    effects, elementwise or broadcasting by FusionOpInterface, or an `elementwise` fusion:
    an activation such as GELU) and read both before and after the step where the live
    bytes peak gets a copy of its op placed before its first reader after the peak, which
    reads the copy instead. The original then dies before the peak. Candidates are taken
    greedily by bytes freed per element computed again, each kept only when the re-planned
    peak falls; when none helps and the budget is still exceeded, the pass fails naming
    the budget and the best peak it reached; the copies that cost no memory are undone
    before that work (the block MLPs' templates match the original values) and made again
    after it. It runs last (after `med-assign-storage`, whose decisions the copies carry).
  }];
  let options = [
    Option<"budgetGib", "budget-gib", "double", /*default=*/"0",
           "the planned peak to reach, in GiB (0: no budget, only the recomputation that costs no memory)">,
    Option<"aboveGib", "above-gib", "double", /*default=*/"0",
           "without a budget, recompute only when the function's planned peak exceeds this "
           "many GiB (medc: 16, the recipe key recompute_above_gib; 0: always)">,
    Option<"soft", "soft", "bool", /*default=*/"false",
           "a budget that is not an error to miss: the best plan reached is kept (medc's "
           "memory target, --recompute-above)">,
    Option<"mergeKernels", "merge-kernels", "bool", /*default=*/"true",
           "run a copy in one kernel with a later elementwise kernel reading its input (medc: "
           "only with med-form-fusions)">,
  ];
}

def MedFormMlpFusions : Pass<"med-form-mlp-fusions", "::mlir::func::FuncOp"> {
  let summary = "the block MLP (contraction → activation → contraction) and its gradients "
                "into `mlp` and `mlp_grad` fusions";
  let description = [{
    MedNeXt's block ends in a 1×1×1 convolution expanding the channels (2×–8×), an
    elementwise activation (GELU) and a 1×1×1 convolution compressing them back, usually
    followed by the residual add. Unfused, the expansion and its activation go to memory
    twice in the forward pass and are read again in the backward; they are the largest
    tensors of the step.

    The pass finds, through FusionOpInterface (no op is matched by name), a contraction
    (a 1×1×1 convolution) whose input is the result of a one-operand elementwise op of
    another contraction. The ops of the backward that read the expansion `h` or its
    activation `g` — the activation's gradient, the transposed contraction producing its
    other operand, the weight gradient of the compression and the contractions and
    reductions of the activation's gradient — become one `mlp_grad` fusion placed at the
    first of them, whose body recomputes `h` and `g` from the block's input and weights
    instead of reading them. Then `h` and `g` are read by the forward chain only, and it
    becomes an `mlp` fusion (with the one elementwise op reading the compression, the
    residual add, as its epilogue) that yields the block's output alone. The templates'
    matchers decide: a group a template cannot run stays unfused.

    Runs on bf16-mixed and fp16-mixed functions only: the template multiplies 16-bit
    operands on tensor cores, as torch autocast's convolutions do. Runs after
    `med-train-step` and before `med-form-fusions`.

    With `max-channels` and `max-expanded`, only the blocks within those sizes (the input
    and output channels, the expanded channels) become fusions: medc's
    `--mlp-fusions one-kernel` asks for the blocks whose backward the CUDA template runs in
    one kernel with the expanded channels split across warps, and leaves the others to the
    library products (and to `med-recompute`, which fuses any block a budget needs).
  }];
  let options = [
    Option<"maxChannels", "max-channels", "int64_t", /*default=*/"0",
           "fuse only blocks with at most this many input and output channels (0: any)">,
    Option<"maxExpanded", "max-expanded", "int64_t", /*default=*/"0",
           "fuse only blocks with at most this many expanded channels (0: any)">,
  ];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedSplitContractionBias : Pass<"med-split-contraction-bias", "::mlir::func::FuncOp"> {
  let summary = "moves the bias of a 1×1×1 convolution into an add its consumers' fusion absorbs";
  let description = [{
    A convolution of `Contraction` access (a 1×1×1 `med.conv3d` or `med.conv3d_transpose`,
    run as a library matrix product on the CUDA backend) with a bias, outside any fusion,
    whose result only elementwise or broadcast ops read (the GELU after a block's expansion
    and its gradient, the residual add after a compression), becomes the convolution
    without the bias and `med.add` of the bias (reshaped to C×1×1×1). `med-form-fusions`
    then fuses that add into the consumers' kernel. Why: in NCDHW the bias is per row of the
    output's C×S matrices, which cuBLASLt's BIAS epilogue cannot add (it adds per row of
    the column-major D, and it refuses a row-major D with that epilogue), so the library
    path broadcasts the bias into the output and accumulates onto it — two more passes over
    the largest tensors of the step (docs/perf.md).

    The sum is rounded once more under mixed precision: the product is stored in bf16/f16
    before the add (as an unfused `conv → add` program would). Convolutions read by
    anything else (a loss, a norm, a fusion) keep their bias. medc runs it after
    `med-form-mlp-fusions` and only together with `med-form-fusions`, which makes the
    split a gain (alone it adds a kernel per convolution), and not under
    `--memory-budget` (`med-recompute` forms block MLPs from convolutions with their bias).
  }];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedSplitNorms : Pass<"med-split-norms", "::mlir::func::FuncOp"> {
  let summary = "group norms before elementwise consumers as statistics and a broadcast "
                "epilogue that med-form-fusions takes into the consumer's fusion";
  let description = [{
    A conv block (a convolution by the library, then an instance or group norm, then an
    activation) unfused writes the normalised tensor and reads it back for the activation,
    and the same again in the backward step. The pass rewrites a `med.group_norm` whose
    every consumer is of elementwise or broadcast access (FusionOpInterface: the
    activation, a residual add) and whose input the fusion passes cannot compute in a
    fusion (a convolution, a function argument) into:

    - `med.group_norm_stats` of the input: one reduction, its mean and rstd (N × groups);
    - per-(sample, channel) coefficients in f32 (`med.fp32`, as autocast's group norm
      computes): the mean and `rstd·gamma` as N×C×1×… tensors (reshape, broadcast over
      the channels of a group, a multiply: N·C values);
    - `(x − mean)·(rstd·gamma) + beta` in broadcast-elementwise ops, which
      `med-form-fusions` joins with the consumer: the normalised tensor is never stored
      (`2 · elements · bytes` saved per norm, one launch fewer).

    The statistics a `save_statistics` norm returned for its gradient are those of
    `med.group_norm_stats`, computed by the same chunked merge. A norm read by a
    contraction (MedNeXt's 1×1×1 convolution) or of an elementwise producer stays.
    Runs after `med-form-stencil-fusions`, before `med-form-fusions`. Off by default
    (`medc compile --enable-pass=med-split-norms`): our CPU backend computes the same
    bits with and without it (the imported PlainConvUNet's step, every function,
    compared exactly), but medcheck's f32 LibTorch reference of the split graph (the
    statistics from torch's group norm, applied by separate f32 ops) moves by up to
    ~1e-3 relative in the first layers' gradients, beyond a fixed f32 tolerance. Judged
    against torch f64 instead (`medcheck --against-f64`), two steps of the small
    PlainConvUNet and ResEncUNet and of MedNeXt-S pass with it on the CPU (largest ratio
    to torch f32's own error 2.00); it stays off until the same rows pass on the GPU.
  }];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedFormStencilFusions : Pass<"med-form-stencil-fusions", "::mlir::func::FuncOp"> {
  let summary = "group-norm statistics into the epilogue of the stencil that produces the "
                "normalized value (`stencil` fusions), a stencil's weight and bias gradients "
                "into one kernel (`stencil_grad` fusions)";
  let description = [{
    In MedNeXt every depthwise convolution (a `med.shift_sum` after `med-shift-sum`) is
    followed by a group norm. Unfused, the norm reads the stencil's output twice (its
    statistics, then normalize and affine). The pass finds, through FusionOpInterface, a
    `med.group_norm` whose input is the result of a stencil op and rewrites it:

    - the stencil and `med.group_norm_stats` of its result become one `stencil` fusion
      yielding the result, the mean and rstd. Its CUDA kernel writes the stencil's output
      and, in the same kernel, the per-chunk partials (count, mean, M2) of that output —
      an output tile of the stencil template is a chunk of the statistics
      (`runtime/include/medrun/NormStats.h`) —, and a second kernel merges them in the
      fixed tree (no float atomics);
    - the group norm becomes `med.group_norm_apply` of the result with those statistics: one
      kernel that normalizes as it reads the value (the consumer of a MedNeXt norm is a
      1×1×1 convolution, a library GEMM or the `mlp` template, so normalize and affine stay
      a kernel of their own);
    - the statistics a `save_statistics` group norm returned for its gradient are the
      fusion's.

    A stencil whose result only a two-operand elementwise op reads becomes a `stencil`
    fusion with that op where the matcher takes it: an add of another value (a residual
    block's input gradient, the mirrored shift-sum plus the other path's gradient). The
    kernel (streamed or tiled) adds that value in f32 as it stores each output, so the
    shift-sum alone is never stored nor read back.

    It also finds, through FusionOpInterface, each weight gradient of a stencil
    (`med.shift_sum_grad_weight`) and a reduction of the same output gradient in its block;
    where the `stencil_grad` template's matcher takes the pair (the sum over N, D, H, W: the
    depthwise convolution's bias gradient, as med-autodiff writes it), they become one
    fusion at the later of the two (the earlier one's result read only after it). Its CUDA
    kernel, the streamed weight gradient, sums dy as it loads it for the taps: one read of
    dy and the reduction's kernels fewer; where that kernel does not apply, the staged
    weight gradient and a split sum run as before.

    Runs after `med-train-step` (autodiff reads the unfused group norm) and
    `med-form-mlp-fusions`, before `med-form-fusions`.
    `medc compile --disable-pass=med-form-stencil-fusions` leaves it out.
  }];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedFormResampleFusions : Pass<"med-form-resample-fusions", "::mlir::func::FuncOp"> {
  let summary = "spatial transforms with their epilogues or affinities (`resample` fusions)";
  let description = [{
    Augmentation resamples whole volumes and then transforms them voxel by voxel; unfused,
    each step writes the volume and the next reads it back. The pass finds each op of gather
    access that the `resample` template anchors (`med.spatial_transform`) and, through
    FusionOpInterface (no op matched by name), makes one `resample` fusion of it and:

    - where its result (`nearest` labels) is read by one op only, of stencil access, which
      the template takes (`med.affinities`): that op; the kernel samples the labels at both
      ends of each affinity, and the resampled labels are never stored;
    - else its epilogue: the following ops of elementwise, broadcast or generate access
      (the noise's random numbers) producing the transform's shape that read its result or
      an epilogue value, with the generators and chains of inputs they read (computed per
      voxel in the kernel), as long as every other use of an epilogue value comes after the
      fusion; and a slice of the last value over the spatial axes when nothing else escapes
      (the kernel then samples only the box).

    A transform with nothing to take stays as it is. Each fusion saves at least one write
    and one read of the volume and a launch. Runs before `med-form-fusions`, which would
    otherwise take the epilogue's ops into `elementwise` fusions.
    `medc compile --disable-pass=med-form-resample-fusions` leaves it out.
  }];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedFormReduceFusions : Pass<"med-form-reduce-fusions", "::mlir::func::FuncOp"> {
  let summary = "sibling reductions of one value into one pass (`reduce` fusions)";
  let description = [{
    The intensity transforms of augmentation take whole-volume statistics: contrast the mean,
    minimum and maximum of a volume, gamma the same and a sum of squared deviations. Unfused,
    each statistic reads the volume again. The pass finds, through FusionOpInterface, the ops
    of reduction access that reduce one value with the same attributes but their kind (axes,
    keepdims) and the same precision mark, and makes each such group of two or more one
    `reduce` fusion at the first of them (they read nothing else, so every use follows it).
    Its CUDA template runs one split sum with an accumulator per reduction: the value is read
    once, and each result has the bits of its own reduce kernel. A group the template cannot
    run (the innermost axis kept) stays as it is.
    `medc compile --disable-pass=med-form-reduce-fusions` leaves it out.
  }];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedFormFusions : Pass<"med-form-fusions", "::mlir::func::FuncOp"> {
  let summary = "groups producer-consumer chains of elementwise ops into med.fusion ops";
  let description = [{
    Forms `elementwise` fusions (`med.fusion`) in each function. Ops say how they fuse
    through FusionOpInterface (elementwise, broadcast or generate access: random numbers,
    drawn in the kernel by each element's counter); no op is matched by name. The scalar
    f32 constants a fusion reads are copied into its body: literals in the kernel, and a
    constant nothing else reads any more is gone (one launch fewer).

    Walking the function in order, an op joins the fusion of each producer group it reads
    whose ops produce the op's shape and mark master-weight math (`med.fp32`) as the op does,
    when every other use of the group's results comes after the op. Each join saves at least
    the load of the producer's result by the op and one launch; a result used only inside
    the group is never stored (`2 · elements · bytes` saved). Nothing is computed twice: a
    result used elsewhere too becomes one more result of the fusion, stored once. Chains that
    result: bias + GELU, residual adds, the clipped gradient + AdamW (or SGD) + the EMA update
    `e + (1 − d)(p − e)` of one parameter, the gradient norm's sum of squares, loss-scaling
    arithmetic. A fusion reads and writes at most 60 values (its kernel takes a pointer to
    each), so a longer chain becomes several fusions. A group of one op stays as it is.

    Each group becomes a `med.fusion "elementwise"` at its last op: the inputs are the
    values the group reads from outside (once each, in order of first use), the body clones
    the ops, and the results are those of the group's results used outside it, in op order.
    The ops' `med.fp32` mark carries over.

    Runs after `med-train-step` (autodiff and the training step read unfused ops).
  }];
  let dependentDialects = ["::mlir::med::MedDialect"];
}

def MedAssignStorage : Pass<"med-assign-storage", "::mlir::func::FuncOp"> {
  let summary = "decides the storage type of every value of a mixed-precision function";
  let description = [{
    Under bf16-mixed or fp16-mixed (the function's `med.precision`), values are of two kinds,
    as under torch autocast. Activations are stored in bf16 or f16: the function's
    non-scalar f32 arguments, and the f32 results of every op that computes in that type.
    An op computes in it unless it is master-weight math (`med.fp32`: the optimizer, the EMA,
    the gradient norm, loss scaling), has no non-scalar float result, or is a `med.param`
    read only in f32; a normalization (NormalizationOpInterface) reads its affine parameters
    and statistics in f32, and its results after the first stay in f32. A view
    (ViewLikeOpInterface: `med.reshape`) is stored as its source, and each result of a
    `med.all_reduce` (summed in place) as its input. Everything else stays f32.

    The decision is written once, as `med.storage` on each op (one element type per result)
    and `med.arg_storage` on the function; the artifact records it per value, and the CPU
    backend, the CUDA code generator and medcheck store each value as it says. Functions
    without a mixed precision are left alone. Values inside a `med.fusion` are f32 and
    never stored: only the fusion's results get a storage type.

    Runs last, after the passes that create or remove ops; medc always runs it.
  }];
}

#endif // MED_TRANSFORMS_PASSES_TD
