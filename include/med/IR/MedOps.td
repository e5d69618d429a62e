//===- MedOps.td - operations of the med dialect -------------------------------===//
//
// Every op infers its result type (InferTypeOpAdaptor); the shape rules and their error
// messages live in lib/IR/MedOps.cpp, so an inconsistent op is rejected by the verifier with
// a message naming the operand and the expected vs actual shape.
//
//===----------------------------------------------------------------------------------===//

#ifndef MED_OPS_TD
#define MED_OPS_TD

include "med/IR/MedDialect.td"
include "med/IR/MedInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

// Pure op whose result types are inferred from operands and attributes. Declared result
// types may be less static (`?`) than the inferred ones.
// The shape rule of each op is `inferShapes`, which reports problems when given a location.
// The verifier runs it with the op's location, so an inconsistent op gets exactly one
// error naming the operand; type inference (builders, parser) runs it silently and falls
// back to an unranked type that the verifier then rejects.
defvar Med_Differentiable = DeclareOpInterfaceMethods<Med_GradientOpInterface>;
defvar Med_Normalization = DeclareOpInterfaceMethods<Med_NormalizationOpInterface>;

class Med_ShapedOpDefinitions<string numResultsOnFailure> {
  code body = [{
  // Checked by verify(), which names the result and both types in one message.
  bool $cppClass::isCompatibleReturnTypes(::mlir::TypeRange, ::mlir::TypeRange) {
    return true;
  }
  ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
      std::optional<::mlir::Location>, Adaptor adaptor,
      ::llvm::SmallVectorImpl<::mlir::Type> &out) {
    if (::mlir::failed(inferShapes(context, std::nullopt, adaptor, out))) {
      out.assign(}] # numResultsOnFailure # [{,
                 ::mlir::UnrankedTensorType::get(::mlir::Float32Type::get(context)));
    }
    return ::mlir::success();
  }
  ::llvm::LogicalResult $cppClass::verify() {
    ::llvm::SmallVector<::mlir::Type> types;
    if (::mlir::failed(inferShapes(getContext(), getLoc(), Adaptor(*this), types)))
      return ::mlir::failure();
    return ::mlir::med::verifyResultTypes(getOperation(), types);
  }
}];
}

class Med_ShapedOp<string mnemonic, list<Trait> traits = []>
    : Med_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptorWithIsCompatible])> {
  // How many (unranked) result types inference reports when the shapes do not fit.
  string numResultsOnFailure = "1";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The shape rule: result types from operand types and attributes. With a location,
    /// every inconsistency is reported there.
    static ::llvm::LogicalResult inferShapes(::mlir::MLIRContext *context,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &out);
  }];
  let extraClassDefinition = Med_ShapedOpDefinitions<numResultsOnFailure>.body;
}

// Ops that say how they fuse (FusionOpInterface).
defvar Med_Fusible = DeclareOpInterfaceMethods<Med_FusionOpInterface>;

//===----------------------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------------------===//

def Med_ParameterOp : Med_Op<"parameter", [Symbol, HasParent<"ModuleOp">]> {
  let inPlan = 0;
  let summary = "declares a tensor of the module's state: a parameter, or optimizer/EMA state";
  let description = [{
    Declares a tensor that lives across steps: its name (for model parameters the PyTorch
    `state_dict` key, e.g. `enc_block_0.0.conv1.weight`), its type and how it is
    initialized: `zeros`, `ones`, or `uniform(fan_in)` = U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    which is PyTorch's default initialization of convolution weights and biases.
    `init copy from @other` starts it as a copy of another parameter (EMA weights);
    `init constant value 2.5e-01` sets every element to a finite f32 value (PyTorch's
    PReLU slope starts at 0.25).
    `frozen` marks state that is not trained by gradients (optimizer moments, EMA weights,
    or a parameter the user froze): `med-autodiff` gives it no gradient.

    ```mlir
    med.parameter @"stem.conv.weight" : tensor<32x1x1x1x1xf32> init uniform(1)
    med.parameter @"enc_block_0.0.norm.weight" : tensor<32xf32> init ones
    med.parameter @"optimizer.exp_avg.stem.conv.weight" : tensor<32x1x1x1x1xf32> init zeros frozen
    med.parameter @"ema.stem.conv.weight" : tensor<32x1x1x1x1xf32> init copy from @"stem.conv.weight" frozen
    med.parameter @"act.weight" : tensor<1xf32> init constant value 2.500000e-01
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Med_FloatTensor>:$type,
                       Med_InitKind:$init,
                       OptionalAttr<I64Attr>:$fan_in,
                       OptionalAttr<FlatSymbolRefAttr>:$source,
                       UnitAttr:$frozen,
                       OptionalAttr<F64Attr>:$value);
  let assemblyFormat = [{
    $sym_name `:` $type `init` $init (`(` $fan_in^ `)`)? (`value` $value^)? (`from` $source^)? (`frozen` $frozen^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Med_FlatBufferOp : Med_Op<"flat_buffer", [Symbol, HasParent<"ModuleOp">,
                                              DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let inPlan = 0;
  let summary = "lays out several f32 state tensors in one contiguous buffer";
  let description = [{
    Declares a 1-D f32 tensor whose elements are the state tensors `members` (each a
    `med.parameter` of f32 elements), member i starting at element `offsets[i]`: offsets
    ascend, members do not overlap, and each offset is a multiple of `alignment` elements so
    that every member starts where a vector load may. The elements between members belong
    to no member; updates are elementwise, so no member depends on them. A tensor belongs to at most one flat buffer. `med.param` of the buffer
    reads all its members at once; `med.assign` to it sets them all. The members keep their
    names (checkpoints hold them, not the buffer). `med-flatten-optimizer` creates these
    for the optimizer's state, so that one kernel updates every parameter.

    ```mlir
    med.flat_buffer @"flat.0.param" : tensor<1024xf32> members [@"stem.conv.weight", @"stem.conv.bias"] offsets [0, 64] alignment 64
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Med_FloatTensor>:$type,
                       FlatSymbolRefArrayAttr:$members,
                       DenseI64ArrayAttr:$offsets,
                       I64Attr:$alignment);
  let assemblyFormat = [{
    $sym_name `:` $type `members` $members `offsets` $offsets `alignment` $alignment attr-dict
  }];
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Med_ParamOp : Med_Op<"param", [Pure, Med_NotDifferentiable,
                                   DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let flops = "none";
  let summary = "reads a parameter declared by med.parameter";
  let description = [{
    Produces the current value of the parameter (or flat buffer) `name`. The result type
    must equal the declared type.

    ```mlir
    %w = med.param @"stem.conv.weight" : tensor<32x1x1x1x1xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Med_AssignOp : Med_Op<"assign", [Med_NotDifferentiable,
                                     DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                                     MemoryEffects<[MemWrite]>]> {
  let flops = "none";
  let summary = "sets the value a parameter has after this step";
  let description = [{
    Records `value` as the new value of the module-level tensor `name`; it takes effect when
    the function returns (reads of `name` in the same function see the old value). Training
    steps assign updated parameters, optimizer moments and EMA weights.

    ```mlir
    med.assign @"stem.conv.weight", %new : tensor<32x1x1x1x1xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, Med_FloatTensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

def Med_ConstantOp : Med_ShapedOp<"constant", [ConstantLike, Med_NotDifferentiable]> {
  let flops = "none";
  let planAttributes = [{
    auto elements = ::llvm::dyn_cast<DenseElementsAttr>(o.getValue());
    if (!elements)
      return false;
    attrs["value"] = denseValues(elements);
  }];
  let planAttributeNames = ["value:floats"];
  let summary = "a constant tensor";
  let description = [{
    A tensor of constants, usually a scalar or a splat.

    ```mlir
    %half = med.constant dense<0.5> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs RankedTensorOf<[AnyFloat, AnySignlessInteger]>:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------------------===//

def Med_Conv3dOp : Med_ShapedOp<"conv3d", [Med_Differentiable, Med_Fusible]> {
  let family = "conv";
  let shapeRule = [{conv3d($input, $weight, $bias, $stride, $padding, $dilation, {0, 0, 0}, $groups, false)}];
  let flops = "conv";
  let summary = "3D convolution (cross-correlation), as torch.nn.functional.conv3d";
  let description = [{
    `input` is N×Cin×D×H×W, `weight` Cout×(Cin/groups)×kD×kH×kW, the optional `bias` Cout.
    `stride`, `padding` (zeros, symmetric per axis) and `dilation` give one value per spatial
    axis. Each output size is `(in + 2·padding − dilation·(k−1) − 1) / stride + 1`.
    `groups = Cin = Cout` is a depthwise convolution.

    ```mlir
    %y = med.conv3d %x, %w, %b {groups = 32 : i64, padding = array<i64: 1, 1, 1>}
        : (tensor<?x32x?x?x?xf32>, tensor<32x1x3x3x3xf32>, tensor<32xf32>) -> tensor<?x32x?x?x?xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$weight,
                       Optional<Med_FloatTensor>:$bias,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1, 1}">:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Med_Conv3dTransposeOp : Med_ShapedOp<"conv3d_transpose", [Med_Differentiable, Med_Fusible]> {
  let family = "conv";
  let shapeRule = [{conv3d($input, $weight, $bias, $stride, $padding, $dilation, $output_padding, $groups, true)}];
  let flops = "conv_transpose";
  let summary = "3D transposed convolution, as torch.nn.functional.conv_transpose3d";
  let description = [{
    `input` is N×Cin×D×H×W, `weight` Cin×(Cout/groups)×kD×kH×kW (PyTorch's layout), the
    optional `bias` Cout. Each output size is
    `(in − 1)·stride − 2·padding + dilation·(k−1) + output_padding + 1`;
    `output_padding` must be smaller than `stride` or `dilation`.

    ```mlir
    %y = med.conv3d_transpose %x, %w, %b {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>, groups = 64 : i64}
        : (tensor<?x64x?x?x?xf32>, tensor<64x1x3x3x3xf32>, tensor<64xf32>) -> tensor<?x64x?x?x?xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$weight,
                       Optional<Med_FloatTensor>:$bias,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1, 1}">:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0}">:$output_padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Med_ShiftSumOp : Med_ShapedOp<"shift_sum", [Med_Differentiable,
    DeclareOpInterfaceMethods<Med_FusionOpInterface>]> {
  let family = "conv";
  let shapeRule = [{shiftSum($input, $weight, $bias, $mirrored)}];
  let flops = "conv";
  let summary = "depthwise stride-1 convolution as a sum of shifted multiply-adds";
  let description = [{
    `input` is N×C×D×H×W, `weight` C×1×kD×kH×kW with every k odd, the optional `bias` C.
    With `p = k/2` per axis and the taps `t = (a, b, c)` of the kernel, the result has the
    input's shape and is

    `out[n, ch, z, y, x] = bias[ch] + Σ_t weight[ch, 0, t] · input[n, ch, (z, y, x) + t − p]`

    with input elements outside the tensor read as zero: kD·kH·kW shifted copies of the
    input, each scaled per channel, summed. This is `med.conv3d` with `groups = C`, stride 1
    and padding k/2 (`med-shift-sum` rewrites those into this op); the backends run it as one
    stencil kernel and never materialise the shifted copies. `mirrored` reverses the taps
    (`weight[ch, 0, k − 1 − t]` in place of `weight[ch, 0, t]`): the input gradient of a
    shift-sum is the mirrored shift-sum of the output gradient.

    ```mlir
    %y = med.shift_sum %x, %w, %b : (tensor<2x32x16x16x16xf32>, tensor<32x1x3x3x3xf32>, tensor<32xf32>) -> tensor<2x32x16x16x16xf32>
    %dx = med.shift_sum %dy, %w {mirrored} : (tensor<2x32x16x16x16xf32>, tensor<32x1x3x3x3xf32>) -> tensor<2x32x16x16x16xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$weight,
                       Optional<Med_FloatTensor>:$bias, UnitAttr:$mirrored);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------------------===//

def Med_GroupNormOp : Med_ShapedOp<"group_norm", [
    DeclareOpInterfaceMethods<Med_GradientOpInterface, ["saveForGradient"]>, Med_Normalization]> {
  let family = "normalization";
  let shapeRule = [{groupNorm($input, $gamma, $beta, $groups, $epsilon, $save_statistics)}];
  let flops = "7";
  let wideOperands = ["gamma", "beta"];
  let summary = "group normalization, as torch.nn.GroupNorm";
  let description = [{
    Splits the C channels of an N×C×… input into `groups` groups, normalizes each (sample,
    group) to zero mean and unit variance (biased variance, `epsilon` added to it), then applies
    the per-channel affine `gamma`, `beta` (both of size C). `groups = C` is instance
    normalization with a per-channel affine, as in MedNeXt.

    ```mlir
    %y = med.group_norm %x, %g, %b {groups = 32 : i64}
        : (tensor<?x32x?x?x?xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<?x32x?x?x?xf32>
    ```

    With `save_statistics` it also returns the statistics of each (sample, group), as
    `torch.native_group_norm` does: the mean and `rstd = 1/√(var + epsilon)`, both N × groups
    in the input's element type. `med-autodiff` sets it on the group norms it differentiates,
    so that `med.group_norm_grad` reuses them; the statistics themselves get no gradient.

    ```mlir
    %y, %mean, %rstd = med.group_norm %x, %g, %b {groups = 2 : i64, save_statistics}
        : (tensor<2x4x8x8x8xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8x8xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
    ```
  }];
  let numResultsOnFailure = "(adaptor.getSaveStatistics() ? 3 : 1)";
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$gamma, Med_FloatTensor:$beta,
                       I64Attr:$groups,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       UnitAttr:$save_statistics);
  let results = (outs Med_FloatTensor:$result, Variadic<Med_FloatTensor>:$statistics);
  let assemblyFormat = "$input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)";
}

def Med_GroupNormStatsOp : Med_ShapedOp<"group_norm_stats", [
    Med_NotDifferentiable, DeclareOpInterfaceMethods<Med_NormalizationOpInterface, ["keepsF32Result"]>]> {
  let family = "normalization";
  let shapeRule = [{groupNormStats($input, $groups, $epsilon)}];
  let flops = "4 per input";
  let summary = "the statistics of med.group_norm, by a fixed chunked merge";
  let description = [{
    The mean and `rstd = 1/√(var + epsilon)` (biased variance) of each (sample, group) of an
    N×C×… input, both N × `groups`, as `med.group_norm` with `save_statistics` returns them;
    under mixed precision both stay in f32. They are defined by one algorithm, so that every
    executor computes them alike and a producer can compute them in its epilogue, a tile at a
    time: each (n, c) plane, seen as D×H×W (W its last axis, H the one before, D the
    product of the others), is cut into chunks of 4×16×64 values (the last ones along an axis
    clipped), in row-major order; a chunk gives its count, mean (kept as a pivot, its
    first-pass mean, plus a small rest) and M2 (the sum of squared deviations from its
    mean); the chunks of the group, plane after plane, are merged in a fixed pairwise tree
    (chunk i with chunk i + s for s = 1, 2, 4, …) by Chan's formula, with
    δ = mean_b − mean_a: `mean = mean_a + δ·n_b/n`, `M2 = M2_a + M2_b + δ²·n_a·n_b/n`.
    No value is squared before its chunk's mean is taken out, so a large mean over a small
    spread does not cancel. A chunk is the output tile of the stencil template, so a
    `stencil` fusion computes the statistics of its shift-sum in the kernel's epilogue.
    `med.group_norm` computes its statistics this way.

    ```mlir
    %mean, %rstd = med.group_norm_stats %x {groups = 2 : i64}
        : (tensor<2x4x8x8x8xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
    ```
  }];
  let numResultsOnFailure = "2";
  let arguments = (ins Med_FloatTensor:$input, I64Attr:$groups,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Med_FloatTensor:$mean, Med_FloatTensor:$rstd);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_GroupNormApplyOp : Med_ShapedOp<"group_norm_apply", [Med_NotDifferentiable, Med_Normalization,
                                                               Med_PerElement]> {
  let family = "normalization";
  let shapeRule = [{groupNormApply($input, $mean, $rstd, $gamma, $beta, $groups)}];
  let flops = "3"; // group_norm's 7 less its statistics' 4
  let wideOperands = ["mean", "rstd", "gamma", "beta"];
  let summary = "med.group_norm from given statistics: normalize and affine";
  let description = [{
    `(input − mean)·rstd·gamma + beta` per element, with the `mean` and `rstd` of its
    (sample, group) (N × `groups`, as `med.group_norm_stats` returns them) and the
    per-channel `gamma`, `beta`: the second half of `med.group_norm`. `med-form-stencil-fusions`
    makes it of a group norm whose statistics a stencil computes in its epilogue.

    ```mlir
    %y = med.group_norm_apply %x, %mean, %rstd, %g, %b {groups = 2 : i64}
        : (tensor<2x4x8x8x8xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8x8xf32>
    ```
  }];
  let numResultsOnFailure = "1";
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$mean, Med_FloatTensor:$rstd,
                       Med_FloatTensor:$gamma, Med_FloatTensor:$beta, I64Attr:$groups);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $mean `,` $rstd `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)
  }];
}

def Med_ChannelLayerNormOp : Med_ShapedOp<"channel_layer_norm", [Med_Differentiable, Med_Normalization]> {
  let family = "normalization";
  let shapeRule = [{channelLayerNorm($input, $gamma, $beta, $epsilon)}];
  let flops = "7";
  let wideOperands = ["gamma", "beta"];
  let summary = "layer normalization over the channel axis only (channels-first)";
  let description = [{
    MedNeXt's channels-first LayerNorm: at every sample and voxel, normalizes the C values of
    axis 1 (biased variance plus `epsilon`), then applies the per-channel `gamma`, `beta`.

    ```mlir
    %y = med.channel_layer_norm %x, %g, %b : (tensor<?x32x?x?x?xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<?x32x?x?x?xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$gamma, Med_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)";
}

def Med_GRNOp : Med_ShapedOp<"grn", [Med_Differentiable, Med_Normalization]> {
  let family = "normalization";
  let shapeRule = [{grn($input, $gamma, $beta)}];
  let flops = "7";
  let wideOperands = ["gamma", "beta"];
  let summary = "global response normalization (ConvNeXt-V2), as in MedNeXt";
  let description = [{
    `g = ‖x‖₂` over the spatial axes per sample and channel; `n = g / (mean over channels of g +
    epsilon)`; result `gamma·(x·n) + beta + x`. `gamma` and `beta` are 1×C×1×1×1, the shape of
    MedNeXt's `grn_gamma` / `grn_beta` parameters.

    ```mlir
    %y = med.grn %x, %g, %b : (tensor<?x96x?x?x?xf32>, tensor<1x96x1x1x1xf32>, tensor<1x96x1x1x1xf32>) -> tensor<?x96x?x?x?xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$gamma, Med_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)";
}

def Med_BatchNormOp : Med_ShapedOp<"batch_norm", [Med_Differentiable, Med_Normalization]> {
  let family = "normalization";
  let shapeRule = [{batchNorm($input, $gamma, $beta, $running_mean, $running_var, $epsilon, $momentum, $training)}];
  let flops = "7";
  let wideOperands = ["gamma", "beta", "running_mean", "running_var"];
  let summary = "batch normalization, as torch.nn.BatchNorm3d in train or eval mode";
  let description = [{
    Normalizes each channel of an N×C×… input. In the training form (`training`) it uses the
    statistics of the batch, over every sample and position of the channel (n = N·D·H·W
    values): the mean and the biased variance (divided by n, `epsilon` added), as PyTorch's
    train mode does, and returns the running statistics updated by them, PyTorch's momentum
    convention: `new_running_mean = (1 − momentum)·running_mean + momentum·mean` and
    `new_running_var = (1 − momentum)·running_var + momentum·var·n/(n − 1)` (the unbiased
    variance). ONNX's `momentum` attribute is the complement, 1 − this one. In the eval form
    (no `training`) it normalizes with `running_mean` and `running_var` and returns them
    unchanged. Then the per-channel affine `gamma`, `beta`. All of gamma, beta and the
    running statistics have C elements; the running statistics get no gradient.

    ```mlir
    %y, %rm1, %rv1 = med.batch_norm %x, %g, %b, %rm, %rv {training, momentum = 1.0e-01 : f64}
        : (tensor<2x4x8x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
        -> (tensor<2x4x8x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let numResultsOnFailure = "3";
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$gamma, Med_FloatTensor:$beta,
                       Med_FloatTensor:$running_mean, Med_FloatTensor:$running_var,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       UnitAttr:$training);
  let results = (outs Med_FloatTensor:$result, Med_FloatTensor:$new_running_mean,
                      Med_FloatTensor:$new_running_var);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta `,` $running_mean `,` $running_var attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------------------===//

class Med_UnaryOp<string mnemonic, string formula>
    : Med_ShapedOp<mnemonic, [Med_Differentiable, Med_Fusible]> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every element.";
  let shapeRule = "unary($input)";
  let arguments = (ins Med_FloatTensor:$input);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let extraClassDefinition = Med_ShapedOpDefinitions<"1">.body # [{
    ::mlir::med::FusionKind $cppClass::getFusionKind() {
      return ::mlir::med::FusionKind::Elementwise;
    }
  }];
}

def Med_GeluOp : Med_UnaryOp<"gelu", "x·Φ(x) = x/2·(1 + erf(x/√2))"> {
  let summary = "GELU, exact (erf) form, as torch.nn.GELU()";
}
def Med_SigmoidOp : Med_UnaryOp<"sigmoid", "1/(1 + exp(−x))">;
def Med_NegOp : Med_UnaryOp<"neg", "−x">;
def Med_ExpOp : Med_UnaryOp<"exp", "exp(x)">;
def Med_LogOp : Med_UnaryOp<"log", "log(x)">;
def Med_SqrtOp : Med_UnaryOp<"sqrt", "√x">;
def Med_ReluOp : Med_UnaryOp<"relu", "max(x, 0)"> {
  let summary = "ReLU, as torch.nn.ReLU and ONNX Relu";
  let description = [{
    `x` where `x > 0`, else 0 (a NaN stays NaN, as torch's `relu`). Its gradient is
    `med.prelu_grad` with slope 0.
  }];
}

def Med_LeakyReluOp : Med_ShapedOp<"leaky_relu", [Med_Differentiable, Med_Fusible]> {
  let shapeRule = "unary($input)";
  let summary = "LeakyReLU, as torch.nn.LeakyReLU and ONNX LeakyRelu";
  let description = [{
    `x` where `x > 0`, else `negative_slope · x`, for every element (nnU-Net's
    `LeakyReLU` has the default 0.01, MONAI's BasicUNet 0.1). Under f32 and mixed precision
    the slope is rounded to f32 once, as torch's kernel takes it. Its gradient is
    `med.prelu_grad` with the slope as a scalar constant.

    ```mlir
    %y = med.leaky_relu %x {negative_slope = 0.1 : f64} : tensor<2x32x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input,
                       DefaultValuedAttr<F64Attr, "0.01">:$negative_slope);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let extraClassDefinition = Med_ShapedOpDefinitions<"1">.body # [{
    ::mlir::med::FusionKind $cppClass::getFusionKind() {
      return ::mlir::med::FusionKind::Elementwise;
    }
  }];
}

def Med_PReluOp : Med_ShapedOp<"prelu", [Med_Differentiable, Med_Fusible]> {
  let shapeRule = "prelu($input, $slope)";
  let summary = "PReLU with a learned slope, as torch.nn.PReLU and ONNX PRelu";
  let description = [{
    `x` where `x > 0`, else `slope · x`, with `slope` broadcast to the input (NumPy rules,
    trailing axes aligned, as ONNX PRelu's): a per-channel slope of an N×C×D×H×W input is
    C×1×1×1 or 1×C×1×1×1 (torch's `PReLU(num_parameters=C)` weight, reshaped), a shared one
    a scalar or size 1. The result has the input's shape. Both operands get a gradient:
    the input's is `med.prelu_grad`, the slope's the sum of `grad · min(x, 0)` back to its
    shape.

    ```mlir
    %y = med.prelu %x, %a : (tensor<2x32x8x8x8xf32>, tensor<32x1x1x1xf32>) -> tensor<2x32x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$slope);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $slope attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = Med_ShapedOpDefinitions<"1">.body # [{
    ::mlir::med::FusionKind $cppClass::getFusionKind() {
      return ::mlir::med::broadcastingKind(getOperation());
    }
  }];
}

def Med_SoftmaxOp : Med_ShapedOp<"softmax", [Med_Differentiable]> {
  let family = "normalization";
  let shapeRule = "softmax($input, $axis)";
  let flops = "5";
  let summary = "softmax along one axis, as torch.softmax and ONNX Softmax (opset 13)";
  let description = [{
    `exp(x − m) / Σ exp(x − m)` along `axis` (the channels, 1, by default: a segmentation
    head's class probabilities), `m` the maximum along it, so that large logits do not
    overflow. The maximum, the exponentials and their sum are f32 under mixed precision
    (f64 in f64 programs), as autocast computes softmax; only the result is stored in the
    activations' type. Its gradient is composed of elementwise ops and one sum:
    `y · (dy − Σ_axis dy · y)`.

    ```mlir
    %p = med.softmax %logits : (tensor<2x3x8x8x8xf32>) -> tensor<2x3x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs Med_FloatTensor:$result);
  // The result type is written out: the parser infers no type from an attribute.
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

class Med_BinaryOp<string mnemonic, string formula>
    : Med_ShapedOp<mnemonic, [Med_Differentiable, Med_Fusible]> {
  let summary = "elementwise " # formula # " with broadcasting";
  let description = [{
    Applies the operation elementwise with NumPy/PyTorch broadcasting: shapes are aligned at
    the trailing axis, and each pair of sizes must be equal or contain a 1. Both operands have
    the same element type.

    ```mlir
    %y = med.}] # mnemonic # [{ %a, %b : (tensor<?x32x?x?x?xf32>, tensor<1x32x1x1x1xf32>) -> tensor<?x32x?x?x?xf32>
    ```
  }];
  let shapeRule = "broadcastBinary($lhs, $rhs)";
  let arguments = (ins Med_FloatTensor:$lhs, Med_FloatTensor:$rhs);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = Med_ShapedOpDefinitions<"1">.body # [{
    ::mlir::med::FusionKind $cppClass::getFusionKind() {
      return ::mlir::med::broadcastingKind(getOperation());
    }
  }];
}

// Folds (lib/IR/MedFolds.cpp): x + 0, x − 0, x · 1, x / 1 → x; x · 0 → 0.
def Med_AddOp : Med_BinaryOp<"add", "lhs + rhs"> { let hasFolder = 1; }
def Med_SubOp : Med_BinaryOp<"sub", "lhs − rhs"> { let hasFolder = 1; }
def Med_MulOp : Med_BinaryOp<"mul", "lhs · rhs"> { let hasFolder = 1; }
def Med_DivOp : Med_BinaryOp<"div", "lhs / rhs"> { let hasFolder = 1; }
def Med_MaxOp : Med_BinaryOp<"max", "max(lhs, rhs)">;
def Med_MinOp : Med_BinaryOp<"min", "min(lhs, rhs)">;
// Gamma augmentation (nnU-Net's GammaTransform): a base in [0, 1] to a positive power.
def Med_PowOp : Med_BinaryOp<"pow", "lhs^rhs (C's powf: a negative base to a non-integer power is NaN)">;

//===----------------------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------------------===//

def Med_PadOp : Med_ShapedOp<"pad", [Med_Differentiable]> {
  let family = "data movement";
  let shapeRule = [{pad($input, $low, $high)}];
  let flops = "none";
  let summary = "pads each axis with a constant, possibly asymmetrically";
  let description = [{
    Adds `low[i]` elements before and `high[i]` after axis `i` (one entry per axis, ≥ 0),
    filled with `value`. MedNeXt's up blocks pad (1, 0) on each spatial axis:

    ```mlir
    %y = med.pad %x {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, 0, 0, 0, 0>}
        : (tensor<?x32x?x?x?xf32>) -> tensor<?x32x?x?x?xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DenseI64ArrayAttr:$low, DenseI64ArrayAttr:$high,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_SliceOp : Med_ShapedOp<"slice", [Med_Differentiable, Med_Fusible]> {
  let family = "data movement";
  let shapeRule = [{slice($input, $offsets, $sizes, $strides)}];
  let flops = "none";
  let planAttributes = [{
    if (!o.getStrides())
      attrs["strides"] = json::Array(SmallVector<int64_t>(o.getSizes().size(), 1));
  }];
  let planAttributeNames = ["strides"];
  let summary = "extracts a strided box";
  let description = [{
    Takes `sizes[i]` elements along each axis `i`, starting at `offsets[i]` and stepping by
    `strides[i]` (default 1). The box must lie inside the input.

    ```mlir
    %y = med.slice %x {offsets = array<i64: 0, 0, 5, 5, 5>, sizes = array<i64: 2, 6, 128, 128, 128>}
        : (tensor<2x6x138x138x138xf32>) -> tensor<2x6x128x128x128xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes, OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_ConcatOp : Med_ShapedOp<"concat", [Med_Differentiable]> {
  let family = "data movement";
  let shapeRule = [{concat($inputs, $axis)}];
  let flops = "none";
  let summary = "concatenates tensors along one axis";
  let description = [{
    All inputs have the same rank, element type and sizes, except along `axis`.

    ```mlir
    %y = med.concat %a, %b {axis = 1 : i64} : (tensor<2x3x8x8x8xf32>, tensor<2x5x8x8x8xf32>) -> tensor<2x8x8x8x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Med_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def Med_TransposeOp : Med_ShapedOp<"transpose", [Med_Differentiable]> {
  let family = "data movement";
  let shapeRule = [{transpose($input, $permutation)}];
  let flops = "none";
  let summary = "permutes the axes of a tensor (numpy.transpose, torch.permute, ONNX Transpose)";
  let description = [{
    Axis `i` of the result is axis `permutation[i]` of the input: `permutation` holds each
    axis of the input (rank ≥ 1) exactly once, and the result's element at indices
    `(j_0, …, j_r−1)` is the input's element whose index along axis `permutation[i]` is
    `j_i`. A copy, no arithmetic; its gradient is the output gradient transposed by the
    inverse permutation. An N×C×D×H×W tensor in channels-last order:

    ```mlir
    %y = med.transpose %x {permutation = array<i64: 0, 2, 3, 4, 1>}
        : (tensor<2x4x6x7x5xf32>) -> tensor<2x6x7x5x4xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_PackOp : Med_ShapedOp<"pack", [Med_NotDifferentiable]> {
  let shapeRule = [{pack($inputs, $offsets, $size)}];
  let summary = "lays out tensors in one 1-D tensor at given offsets, zeros between them";
  let description = [{
    The result is a 1-D f32 tensor of `size` elements; input i (f32, any shape) is copied,
    flattened in row-major order, to the elements from `offsets[i]` on. Offsets ascend and
    inputs do not overlap; the elements no input covers are zero. The optimizer packs the
    gradients into the layout of a `med.flat_buffer` this way; the CUDA backend lets each
    gradient's producer write straight into its slice.

    ```mlir
    %g = med.pack %a, %b offsets [0, 64] size 128 : (tensor<4x3xf32>, tensor<5xf32>) -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Variadic<Med_FloatTensor>:$inputs, DenseI64ArrayAttr:$offsets,
                       I64Attr:$size);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `offsets` $offsets `size` $size attr-dict `:` functional-type(operands, results)
  }];
}

def Med_AllReduceOp : Med_Op<"all_reduce", [Med_NotDifferentiable,
                                             MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "sums a bucket of gradients over the ranks of a data-parallel job";
  let description = [{
    Each result is the sum, over the ranks of the job, of the corresponding input (same
    type); on a single rank it is the input itself. The inputs form bucket `bucket`: laid
    out as `med.pack` lays them out, input i at element `offsets[i]` of a contiguous slice of
    `size` elements of the packed gradients, so that an executor whose gradients already lie
    so (the CUDA backend writes each into its slice) reduces the whole bucket with one
    collective call. `med-data-parallel` places one after the last producer of each bucket;
    buckets are reduced in program order, the same on every rank. The op communicates, so it
    is neither pure nor fused, and no pass merges, drops or reorders it.

    ```mlir
    %ra, %rb = med.all_reduce %a, %b bucket 0 offsets [0, 64] size 128 : (tensor<4x3xf32>, tensor<5xf32>) -> (tensor<4x3xf32>, tensor<5xf32>)
    ```
  }];
  let arguments = (ins Variadic<Med_FloatTensor>:$inputs, I64Attr:$bucket,
                       DenseI64ArrayAttr:$offsets, I64Attr:$size);
  let results = (outs Variadic<Med_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `bucket` $bucket `offsets` $offsets `size` $size attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------------------===//

def Med_ReduceOp : Med_ShapedOp<"reduce", [Med_Differentiable, Med_Fusible]> {
  let family = "reduction";
  let shapeRule = [{reduce($input, $axes, $keepdims)}];
  let summary = "sum, mean, max or min over a set of axes";
  let description = [{
    Reduces `input` over `axes` (distinct, in range). With `keepdims` the reduced axes remain
    with size 1; otherwise they are removed.

    ```mlir
    %m = med.reduce mean %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<?x32x?x?x?xf32>) -> tensor<?x32x1x1x1xf32>
    ```
  }];
  let arguments = (ins Med_ReduceKind:$kind, Med_FloatTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keepdims);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1; // a reduction of zeros is zeros (lib/IR/MedFolds.cpp)
}

//===----------------------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------------------===//

def Med_BCEWithLogitsOp : Med_ShapedOp<"bce_with_logits", [AttrSizedOperandSegments,
                                                          Med_Differentiable]> {
  let family = "loss";
  let shapeRule = [{bceWithLogits($logits, $target, $mask, $pos_weight, $reduction == "none", $auto_pos_weight, $max_pos_weight, nullptr)}];
  let flops = "8 per logits";
  let summary = "binary cross-entropy on logits, with mask and positive-class weights";
  let description = [{
    Elementwise `l = −w·[p·y·log σ(x) + (1−y)·log(1−σ(x))]` as
    `torch.nn.functional.binary_cross_entropy_with_logits`, with `x = logits`, `y = target`.

    - `mask` (optional, same shape as `logits`): elements where it is 0 are left out of the loss
      and of the element count (BANIS masks unlabeled affinities).
    - `pos_weight` (optional, one value per channel): `p` per channel.
    - `auto_pos_weight`: instead of an operand, `p_c = min(neg_c / pos_c, max_pos_weight)`
      from the batch's (masked) targets of channel `c` (BANIS+'s per-channel loss).
    - `reduction`: `mean` over the counted elements, `sum`, `none` (the elementwise loss, same
      shape as `logits`), or `per_channel`: the mean over the counted elements of each channel,
      summed over channels.

    ```mlir
    %l = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction per_channel>, auto_pos_weight}
        : (tensor<2x6x128x128x128xf32>, tensor<2x6x128x128x128xf32>, tensor<2x6x128x128x128xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$logits, Med_FloatTensor:$target,
                       Optional<Med_FloatTensor>:$mask, Optional<Med_FloatTensor>:$pos_weight,
                       DefaultValuedAttr<Med_LossReductionAttr, "::mlir::med::LossReduction::mean">:$reduction,
                       UnitAttr:$auto_pos_weight,
                       DefaultValuedAttr<F64Attr, "10.0">:$max_pos_weight);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $target (`mask` $mask^)? (`pos_weight` $pos_weight^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Med_DiceCEOp : Med_ShapedOp<"dice_ce", [AttrSizedOperandSegments, Med_Differentiable]> {
  let family = "loss";
  let shapeRule = [{diceCE($logits, $targets, $weights, nullptr)}];
  let flops = "8 per logits";
  let summary = "soft Dice + cross-entropy over deep-supervision outputs (nnU-Net)";
  let description = [{
    nnU-Net's `DC_and_CE_loss` summed over deep-supervision levels: for each level `i`,
    `weights[i] · (ce_weight·CE(logits_i, target_i) + dice_weight·(−softDice(softmax(logits_i),
    target_i)))`. `logits_i` is N×C×D×H×W, `target_i` N×1×D×H×W holding class indices (float or
    integer). Soft Dice is `(2·tp + smooth) / (2·tp + fp + fn + smooth)` per class (over the
    whole batch when `batch_dice`), averaged over the classes, the background (class 0)
    excluded unless `include_background`. The weights are used as given (normalize them in the
    recipe; nnU-Net uses 1, ½, ¼, … normalized to sum 1).

    `ignore_index` (nnU-Net's `ignore` label, the highest label value): voxels whose target
    holds it count nowhere: CE is the mean over the other voxels (0 when a level has none, as
    nnU-Net skips it), and they are left out of every Dice sum (tp, Σsoftmax, Σone-hot); their
    logits get no gradient.

    ```mlir
    %l = med.dice_ce logits(%x0, %x1) targets(%t0, %t1) {weights = array<f64: 0.6667, 0.3333>}
        : (tensor<2x4x64x64x64xf32>, tensor<2x4x32x32x32xf32>, tensor<2x1x64x64x64xf32>, tensor<2x1x32x32x32xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Med_FloatTensor>:$logits, Variadic<Med_LabelTensor>:$targets,
                       DenseF64ArrayAttr:$weights,
                       DefaultValuedAttr<F64Attr, "1e-5">:$smooth,
                       DefaultValuedAttr<F64Attr, "1.0">:$ce_weight,
                       DefaultValuedAttr<F64Attr, "1.0">:$dice_weight,
                       DefaultValuedAttr<BoolAttr, "true">:$batch_dice,
                       UnitAttr:$include_background,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$ignore_index);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    `logits` `(` $logits `)` `targets` `(` $targets `)` attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------------------===//
// Optimizers: one op per parameter tensor, returning the updated tensors.
//===----------------------------------------------------------------------------------===//

def Med_AdamWOp : Med_ShapedOp<"adamw", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{adamw($param, $grad, $exp_avg, $exp_avg_sq, $lr, $step, $beta1, $beta2, $epsilon)}];
  let summary = "one AdamW step, exactly as torch.optim.AdamW";
  let description = [{
    With t = `step` (1 for the first step) and the learning rate `lr` (both scalars, inputs
    of the training step):
    `p ← p·(1 − lr·weight_decay)`; `m ← β1·m + (1 − β1)·g`; `v ← β2·v + (1 − β2)·g²`;
    `p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + ε)`.
    Returns the new parameter, first and second moments.
  }];
  let numResultsOnFailure = "3";
  let arguments = (ins Med_FloatTensor:$param, Med_FloatTensor:$grad, Med_FloatTensor:$exp_avg,
                       Med_FloatTensor:$exp_avg_sq, Med_FloatTensor:$lr, Med_FloatTensor:$step,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$epsilon,
                       DefaultValuedAttr<F64Attr, "1e-2">:$weight_decay);
  let results = (outs Med_FloatTensor:$new_param, Med_FloatTensor:$new_exp_avg,
                      Med_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step attr-dict `:` functional-type(operands, results)
  }];
}

def Med_SGDOp : Med_ShapedOp<"sgd", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{sgd($param, $grad, $momentum_buffer, $lr, $momentum, $nesterov)}];
  let summary = "one SGD step with momentum (optionally Nesterov), as torch.optim.SGD";
  let description = [{
    `d ← g + weight_decay·p`; `b ← momentum·b + d`; `d ← d + momentum·b` (Nesterov) or
    `d ← b`; `p ← p − lr·d`. The momentum buffer starts at zero, which equals PyTorch's
    first-step copy. nnU-Net uses lr 1e-2, momentum 0.99, weight decay 3e-5, Nesterov.
    Returns the new parameter and momentum buffer.
  }];
  let numResultsOnFailure = "2";
  let arguments = (ins Med_FloatTensor:$param, Med_FloatTensor:$grad,
                       Med_FloatTensor:$momentum_buffer, Med_FloatTensor:$lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$nesterov);
  let results = (outs Med_FloatTensor:$new_param, Med_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------------------===//
// Mixed precision: dynamic loss scaling without host synchronisation. The decision to
// skip an update is data (a scalar 0/1), and the state is chosen with med.select.
//===----------------------------------------------------------------------------------===//

def Med_AnyNonFiniteOp : Med_ShapedOp<"any_non_finite", [Med_NotDifferentiable,
                                                           Med_ElementSetReduction]> {
  let shapeRule = [{anyNonFinite($inputs)}];
  let summary = "1 if any element of any operand is inf or NaN, else 0";
  let description = [{
    Returns an f32 scalar: 1 when some element of some operand is +inf, −inf or NaN, 0
    otherwise (the `found_inf` of `torch.amp.GradScaler`, which checks every gradient). The
    operands may have any shapes and float types.

    ```mlir
    %found = med.any_non_finite %g0, %g1 : (tensor<4x2x1x1x1xf32>, tensor<4xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Med_FloatTensor>:$inputs);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def Med_SumSquaresOp : Med_ShapedOp<"sum_squares", [Med_NotDifferentiable,
                                                    Med_ElementSetReduction]> {
  let shapeRule = [{sumSquares($inputs)}];
  let summary = "the sum of the squares of every element of every operand";
  let description = [{
    Returns an f32 scalar: Σ over all operands (f32, any shapes) of Σ x². The training step's
    global gradient norm is its square root. Summed in a fixed order (each operand in a
    fixed tree, then the operands in order), so a run gives the same bits every time.

    ```mlir
    %sq = med.sum_squares %g0, %g1 : (tensor<4x2x1x1x1xf32>, tensor<4xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Med_FloatTensor>:$inputs);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def Med_SelectOp : Med_ShapedOp<"select", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{select($cond, $on_true, $on_false)}];
  let summary = "one of two tensors, chosen by a scalar condition";
  let description = [{
    Returns `on_true` when the scalar `cond` is non-zero (NaN counts as non-zero) and
    `on_false` otherwise, whole: nothing of the other operand reaches the result, so a NaN
    there does not propagate. Both operands have the same type. Training steps keep the old
    parameters, optimizer state and EMA this way when a step is skipped
    (`select(found_inf, old, new)`), without the host reading `found_inf`.

    ```mlir
    %p = med.select %found_inf, %old, %new : (tensor<f32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$cond, Med_FloatTensor:$on_true, Med_FloatTensor:$on_false);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$cond `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)";
}

def Med_UpdateLossScaleOp : Med_ShapedOp<"update_loss_scale", [Med_NotDifferentiable]> {
  let shapeRule = [{updateLossScale($scale, $growth_tracker, $found_inf, $growth_factor, $backoff_factor, $growth_interval)}];
  let summary = "the dynamic loss scale update of torch.amp.GradScaler";
  let description = [{
    From the scale `s`, the growth tracker `n` (successful steps since the last change) and
    `found_inf` (all f32 scalars), as `torch._amp_update_scale_`:

    - `found_inf ≠ 0`: `s ← s · backoff_factor`, `n ← 0`;
    - else, if `n + 1 = growth_interval`: `s ← s · growth_factor` (kept when that is not
      finite in f32), `n ← 0`;
    - else `n ← n + 1`.

    The products are computed in double and rounded to f32. Returns the new scale and
    tracker.

    ```mlir
    %s, %n = med.update_loss_scale %scale, %tracker, %found {growth_interval = 2000 : i64}
        : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
    ```
  }];
  let numResultsOnFailure = "2";
  let arguments = (ins Med_FloatTensor:$scale, Med_FloatTensor:$growth_tracker,
                       Med_FloatTensor:$found_inf,
                       DefaultValuedAttr<F64Attr, "2.0">:$growth_factor,
                       DefaultValuedAttr<F64Attr, "0.5">:$backoff_factor,
                       DefaultValuedAttr<I64Attr, "2000">:$growth_interval);
  let results = (outs Med_FloatTensor:$new_scale, Med_FloatTensor:$new_growth_tracker);
  let assemblyFormat = [{
    $scale `,` $growth_tracker `,` $found_inf attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------------------===//
// Shape manipulation (used by gradients; differentiable themselves)
//===----------------------------------------------------------------------------------===//

def Med_ReshapeOp : Med_ShapedOp<"reshape", [Med_Differentiable,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let shapeRule = [{reshape($input, $shape)}];
  let flops = "none";
  let summary = "gives a tensor a new shape with the same number of elements";
  let description = [{
    Reinterprets the elements (in row-major order) with the shape `shape`.

    ```mlir
    %y = med.reshape %x {shape = array<i64: 2, 3, 1, 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3x1x1x1xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1; // to its own type, of itself, of a splat (lib/IR/MedFolds.cpp)
}

def Med_BroadcastOp : Med_ShapedOp<"broadcast", [Med_Differentiable]> {
  let shapeRule = [{broadcastTo($input, $shape)}];
  let summary = "broadcasts a tensor to a shape (NumPy rules)";
  let description = [{
    Repeats `input` along the axes where it has size 1 (or that it lacks, aligning trailing
    axes) to the shape `shape`.

    ```mlir
    %y = med.broadcast %x {shape = array<i64: 2, 32, 4, 4, 4>} : (tensor<2x32x1x1x1xf32>) -> tensor<2x32x4x4x4xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1; // to its own type, of itself, of a splat (lib/IR/MedFolds.cpp)
}

//===----------------------------------------------------------------------------------===//
// Gradient ops: the backward work of the ops above, emitted by med-autodiff. Each is a
// kernel the backends own. They are not differentiable themselves.
//===----------------------------------------------------------------------------------===//

def Med_Conv3dGradWeightOp : Med_ShapedOp<"conv3d_grad_weight", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{conv3dGradWeight($input, $grad_output, $kernel, $stride, $padding, $dilation, $groups)}];
  let flops = "conv_grad_weight";
  let summary = "gradient of a 3D convolution with respect to its weight";
  let description = [{
    `dW[co, ci, a, b, c] = Σ_{n, z, y, x} grad_output[n, co, z, y, x] ·
    input[n, g·Cin/groups + ci, z·s − p + a·d, …]` for the group g of `co`, with
    `kernel` = (kD, kH, kW). The result has shape Cout × Cin/groups × kD × kH × kW, that of
    the convolution's weight. With input and grad_output swapped it is also the weight
    gradient of a transposed convolution.

    ```mlir
    %dw = med.conv3d_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>, groups = 32 : i64, padding = array<i64: 1, 1, 1>}
        : (tensor<2x32x8x8x8xf32>, tensor<2x32x8x8x8xf32>) -> tensor<32x1x3x3x3xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$grad_output,
                       DenseI64ArrayAttr:$kernel,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1, 1}">:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

def Med_ShiftSumGradWeightOp : Med_ShapedOp<"shift_sum_grad_weight", [Med_NotDifferentiable,
    DeclareOpInterfaceMethods<Med_FusionOpInterface>]> {
  let shapeRule = [{shiftSumGradWeight($input, $grad_output, $kernel)}];
  let flops = "conv_grad_weight";
  let summary = "gradient of med.shift_sum with respect to its weight";
  let description = [{
    One sum per channel and tap: with `p = kernel/2`,
    `dW[ch, 0, t] = Σ_{n, z, y, x} grad_output[n, ch, z, y, x] · input[n, ch, (z, y, x) + t − p]`
    (input elements outside the tensor read as zero). `input` and `grad_output` are
    N×C×D×H×W of one shape; the result C×1×kD×kH×kW has the shape of the shift-sum's weight.
    It is `med.conv3d_grad_weight` with `groups = C`, stride 1 and padding kernel/2.

    ```mlir
    %dw = med.shift_sum_grad_weight %x, %dy {kernel = array<i64: 3, 3, 3>}
        : (tensor<2x32x8x8x8xf32>, tensor<2x32x8x8x8xf32>) -> tensor<32x1x3x3x3xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$grad_output,
                       DenseI64ArrayAttr:$kernel);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

def Med_GroupNormGradOp : Med_ShapedOp<"group_norm_grad", [Med_NotDifferentiable, Med_Normalization]> {
  let shapeRule = [{groupNormGrad($input, $gamma, $mean, $rstd, $grad_output, $groups)}];
  let flops = "7";
  let wideOperands = ["gamma", "mean", "rstd"];
  let summary = "gradient of med.group_norm, from the statistics its forward pass saved";
  let description = [{
    From the forward input, gamma, the `mean` and `rstd` that `med.group_norm` returned with
    `save_statistics` (N × groups) and the gradient of the forward result, computes the
    gradients of the input, gamma and beta, as `torch.native_group_norm_backward`. With
    x̂ = (x − mean)·rstd and g = grad_output·gamma per (sample, group):
    `grad_input = rstd·(g − mean(g) − x̂·mean(g·x̂))`, `grad_gamma = Σ grad_output·x̂` and
    `grad_beta = Σ grad_output` over samples and positions.

    ```mlir
    %dx, %dg, %db = med.group_norm_grad %x, %g, %mean, %rstd, %dy {groups = 2 : i64}
        : (tensor<2x4x8x8x8xf32>, tensor<4xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x4x8x8x8xf32>)
        -> (tensor<2x4x8x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let numResultsOnFailure = "3";
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$gamma, Med_FloatTensor:$mean,
                       Med_FloatTensor:$rstd, Med_FloatTensor:$grad_output, I64Attr:$groups);
  let results = (outs Med_FloatTensor:$grad_input, Med_FloatTensor:$grad_gamma,
                      Med_FloatTensor:$grad_beta);
  let assemblyFormat = [{
    $input `,` $gamma `,` $mean `,` $rstd `,` $grad_output attr-dict `:` functional-type(operands, results)
  }];
}

class Med_NormGradOp<string mnemonic, string forward> : Med_ShapedOp<mnemonic, [Med_NotDifferentiable, Med_Normalization]> {
  let summary = "gradient of med." # forward;
  let description = [{
    From the forward input, gamma and the gradient of the forward result, computes the
    gradients of the input, gamma and beta (statistics are recomputed from the input).
  }];
  let flops = "7";
  let wideOperands = ["gamma"];
  let numResultsOnFailure = "3";
  let results = (outs Med_FloatTensor:$grad_input, Med_FloatTensor:$grad_gamma,
                      Med_FloatTensor:$grad_beta);
  let assemblyFormat = "$input `,` $gamma `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

def Med_ChannelLayerNormGradOp : Med_NormGradOp<"channel_layer_norm_grad", "channel_layer_norm"> {
  let shapeRule = "channelLayerNormGrad($input, $gamma, $grad_output)";
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$gamma,
                       Med_FloatTensor:$grad_output, DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
}
def Med_GRNGradOp : Med_NormGradOp<"grn_grad", "grn"> {
  let shapeRule = "grnGrad($input, $gamma, $grad_output)";
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$gamma,
                       Med_FloatTensor:$grad_output, DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
}

def Med_GeluGradOp : Med_ShapedOp<"gelu_grad", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{geluGrad($input, $grad_output)}];
  let summary = "gradient of med.gelu";
  let description = [{
    `grad_output · (Φ(x) + x·φ(x))` with Φ, φ the standard normal CDF and density.

    ```mlir
    %dx = med.gelu_grad %x, %dy : (tensor<2x64x8x8x8xf32>, tensor<2x64x8x8x8xf32>) -> tensor<2x64x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$grad_output);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

def Med_PReluGradOp : Med_ShapedOp<"prelu_grad", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{preluGrad($input, $slope, $grad_output)}];
  let summary = "input gradient of med.prelu, med.leaky_relu and med.relu";
  let description = [{
    `grad_output` where `input > 0`, else `slope · grad_output`, with `slope` broadcast to
    the input as med.prelu broadcasts it (`input` and `grad_output` have one shape, the
    result's). This is torch's backward of `prelu`, `leaky_relu` (the slope a scalar
    constant) and `relu` (slope 0): the derivative at 0 is the slope's side.

    ```mlir
    %dx = med.prelu_grad %x, %a, %dy : (tensor<2x32x8x8x8xf32>, tensor<32x1x1x1xf32>, tensor<2x32x8x8x8xf32>) -> tensor<2x32x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$slope,
                       Med_FloatTensor:$grad_output);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $slope `,` $grad_output attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = Med_ShapedOpDefinitions<"1">.body # [{
    ::mlir::med::FusionKind $cppClass::getFusionKind() {
      return ::mlir::med::broadcastingKind(getOperation());
    }
  }];
}

def Med_ExtremumGradOp : Med_ShapedOp<"extremum_grad", [Med_NotDifferentiable]> {
  let shapeRule = [{extremumGrad($lhs, $rhs, $grad_output)}];
  let summary = "gradient of med.max / med.min with respect to both operands";
  let description = [{
    For `kind` max (min), with `lhs` and `rhs` broadcast to the shape of `grad_output` (that
    of the forward result): `grad_lhs = grad_output` where lhs > rhs (lhs < rhs), 0 where
    lhs < rhs (lhs > rhs) and `grad_output / 2` where they are equal; `grad_rhs` likewise.
    This is `torch.maximum` / `torch.minimum`'s backward, ties included (a NaN operand passes
    the whole gradient to both sides). Both results have the shape of `grad_output`; summing
    them back to the operand shapes is left to `med.reduce`.

    ```mlir
    %da, %db = med.extremum_grad max %a, %b, %dy
        : (tensor<2x3x4xf32>, tensor<3x1xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
    ```
  }];
  let numResultsOnFailure = "2";
  let arguments = (ins Med_ExtremumKind:$kind, Med_FloatTensor:$lhs, Med_FloatTensor:$rhs,
                       Med_FloatTensor:$grad_output);
  let results = (outs Med_FloatTensor:$grad_lhs, Med_FloatTensor:$grad_rhs);
  let assemblyFormat = [{
    $kind $lhs `,` $rhs `,` $grad_output attr-dict `:` functional-type(operands, results)
  }];
}

def Med_ReduceExtremumGradOp : Med_ShapedOp<"reduce_extremum_grad", [Med_NotDifferentiable]> {
  let shapeRule = [{reduceExtremumGrad($input, $extremum, $grad_output, $axes, $keepdims)}];
  let summary = "gradient of med.reduce max / min";
  let description = [{
    `input`, `axes` and `keepdims` are those of the forward reduction, `extremum` its result
    and `grad_output` the gradient of that result (both of the result's shape). The gradient
    goes to the elements equal to their extremum, shared evenly among ties:
    `grad_input = (grad_output / count) · (input == extremum)`, `count` the number of such
    elements in the reduced set, as `torch.amax` / `torch.amin`'s backward (a NaN extremum,
    which no element equals, gives NaN). `kind` names the reduction; the rule itself only
    compares with `extremum`.

    ```mlir
    %dx = med.reduce_extremum_grad max %x, %m, %dm {axes = array<i64: 2, 3, 4>, keepdims}
        : (tensor<2x4x8x8x8xf32>, tensor<2x4x1x1x1xf32>, tensor<2x4x1x1x1xf32>) -> tensor<2x4x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_ExtremumKind:$kind, Med_FloatTensor:$input,
                       Med_FloatTensor:$extremum, Med_FloatTensor:$grad_output,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keepdims);
  let results = (outs Med_FloatTensor:$grad_input);
  let assemblyFormat = [{
    $kind $input `,` $extremum `,` $grad_output attr-dict `:` functional-type(operands, results)
  }];
}

def Med_SliceGradOp : Med_ShapedOp<"slice_grad", [Med_NotDifferentiable]> {
  let shapeRule = [{sliceGrad($grad_output, $offsets, $strides, $shape)}];
  let summary = "gradient of a strided med.slice: scatters into zeros";
  let description = [{
    The inverse placement of `med.slice`: a tensor of shape `shape` (the slice's input) that
    is zero except at `offsets[i] + j·strides[i]` along each axis `i`, where it holds element
    `j` of `grad_output`. The box must lie inside `shape`. (The gradient of a slice with unit
    strides is a `med.pad`.)

    ```mlir
    %dx = med.slice_grad %dy {offsets = array<i64: 0, 0, 1, 1, 1>, strides = array<i64: 1, 1, 2, 2, 2>, shape = array<i64: 2, 4, 9, 9, 9>}
        : (tensor<2x4x4x4x4xf32>) -> tensor<2x4x9x9x9xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$grad_output, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$shape);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$grad_output attr-dict `:` functional-type(operands, results)";
}

def Med_BCEWithLogitsGradOp : Med_ShapedOp<"bce_with_logits_grad", [AttrSizedOperandSegments,
                                                                    Med_NotDifferentiable]> {
  let shapeRule = [{bceWithLogits($logits, $target, $mask, $pos_weight, $reduction == "none", $auto_pos_weight, $max_pos_weight, $grad_loss*)}];
  let flops = "8 per logits";
  let summary = "gradient of med.bce_with_logits with respect to the logits";
  let description = [{
    Takes the operands and attributes of the loss plus `grad_loss` (a scalar, or the shape of
    the logits for reduction `none`) and returns the gradient of the logits. Targets, mask and
    pos_weight get no gradient (automatic pos_weight is treated as a constant, as PyTorch
    Connectomics computes it under no_grad).
  }];
  let arguments = (ins Med_FloatTensor:$logits, Med_FloatTensor:$target,
                       Optional<Med_FloatTensor>:$mask, Optional<Med_FloatTensor>:$pos_weight,
                       Med_FloatTensor:$grad_loss,
                       DefaultValuedAttr<Med_LossReductionAttr, "::mlir::med::LossReduction::mean">:$reduction,
                       UnitAttr:$auto_pos_weight,
                       DefaultValuedAttr<F64Attr, "10.0">:$max_pos_weight);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $target (`mask` $mask^)? (`pos_weight` $pos_weight^)? `grad` $grad_loss attr-dict `:` functional-type(operands, results)
  }];
}

def Med_DiceCEGradOp : Med_ShapedOp<"dice_ce_grad", [AttrSizedOperandSegments,
                                                    Med_NotDifferentiable]> {
  let shapeRule = [{diceCE($logits, $targets, $weights, $grad_loss*)}];
  let flops = "8 per logits";
  let summary = "gradient of med.dice_ce with respect to every logits operand";
  let description = [{
    Takes the operands and attributes of the loss plus the scalar `grad_loss`; returns one
    gradient per logits operand.
  }];
  let numResultsOnFailure = "adaptor.getLogits().size()";
  let arguments = (ins Variadic<Med_FloatTensor>:$logits, Variadic<Med_LabelTensor>:$targets,
                       Med_FloatTensor:$grad_loss,
                       DenseF64ArrayAttr:$weights,
                       DefaultValuedAttr<F64Attr, "1e-5">:$smooth,
                       DefaultValuedAttr<F64Attr, "1.0">:$ce_weight,
                       DefaultValuedAttr<F64Attr, "1.0">:$dice_weight,
                       DefaultValuedAttr<BoolAttr, "true">:$batch_dice,
                       UnitAttr:$include_background,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$ignore_index);
  let results = (outs Variadic<Med_FloatTensor>:$results);
  let assemblyFormat = [{
    `logits` `(` $logits `)` `targets` `(` $targets `)` `grad` $grad_loss attr-dict `:` functional-type(operands, results)
  }];
}

include "med/IR/MedFusionOps.td"
include "med/IR/MedRandomOps.td"
include "med/IR/MedIntensityOps.td"
include "med/IR/MedLabelOps.td"
include "med/IR/MedSpatialOps.td"

#endif // MED_OPS_TD
