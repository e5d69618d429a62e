//===- MedDialect.td - the med dialect, its enums and op base ------------------===//
//
// The `med` dialect describes a 3D segmentation training program: the network (MedNeXt),
// its losses and, later, optimizer and augmentation. Tensors are builtin ranked tensors in
// NCDHW layout; parameters are module-level symbols named like PyTorch state_dict keys.
//
//===----------------------------------------------------------------------------------===//

#ifndef MED_DIALECT_TD
#define MED_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Med_Dialect : Dialect {
  let name = "med";
  let cppNamespace = "::mlir::med";
  let summary = "Training programs for 3D segmentation networks";
  let description = [{
    `med` holds the operations of a 3D segmentation training step: convolutions, normalizations,
    elementwise math with broadcasting, data movement, reductions and losses. Activations are
    ranked tensors in NCDHW layout (batch, channels, depth, height, width). Spatial sizes and the
    batch may be dynamic (`?`) in library functions; `med-specialize` fixes them for one batch
    and patch size. Learnable tensors are declared once per module with `med.parameter`, named
    like the PyTorch `state_dict` key they correspond to, and read with `med.param`.

    The unit attribute `med.fp32` on an op marks master-weight math of a training step
    (gradient norm, unscaling, optimizer, EMA, the parameter reads feeding them): under
    mixed precision (bf16, f16 activations) a backend computes such an op and keeps its
    results in f32. `med-train-step` sets it; the artifact carries it as `fp32: true`.

    Folds (applied by `canonicalize`): `x + 0`, `x − 0`, `x · 1`, `x / 1` are `x` where `x`
    has the result's type; `x · 0` and any reduction of zeros are zeros; a reshape or
    broadcast to its own type is its input, two in a row are one, and either of a splat
    constant is a constant. Zero is absorbing (`x · 0` is 0 even for an infinite or NaN
    `x`, as for a gradient that is zero by construction) and the sign of a zero result is
    not kept; other values are unchanged.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1; // folds may produce constants (med.constant)
}

class Med_Op<string mnemonic, list<Trait> traits = []>
    : Op<Med_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------------------===//

def Med_InitKind : I32EnumAttr<"InitKind", "how a parameter is initialized", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for conv weights
    // (kaiming_uniform with a = sqrt(5)) and conv biases.
    I32EnumAttrCase<"uniform", 2>,
    // A copy of another parameter's initial value (EMA weights start as the model's).
    I32EnumAttrCase<"copy", 3>]> {
  let cppNamespace = "::mlir::med";
}

def Med_ReduceKind : I32EnumAttr<"ReduceKind", "reduction", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>,
    I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::mlir::med";
}

// Which extremum a med.max / med.min or a reduce max / min took (its gradient ops).
def Med_ExtremumKind : I32EnumAttr<"ExtremumKind", "maximum or minimum", [
    I32EnumAttrCase<"max", 0>,
    I32EnumAttrCase<"min", 1>]> {
  let cppNamespace = "::mlir::med";
}

def Med_LossReduction : I32EnumAttr<"LossReduction", "how an elementwise loss is reduced", [
    I32EnumAttrCase<"mean", 0>,
    I32EnumAttrCase<"sum", 1>,
    I32EnumAttrCase<"none", 2>,
    // Mean over the (masked) elements of each channel, then summed over channels.
    I32EnumAttrCase<"per_channel", 3>]> {
  let cppNamespace = "::mlir::med";
  let genSpecializedAttr = 0;
}
def Med_LossReductionAttr : EnumAttr<Med_Dialect, Med_LossReduction, "reduction">;

//===----------------------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------------------===//

// Ranks are checked by each op's shape rule, whose messages name the expected layout.
def Med_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Med_LabelTensor : RankedTensorOf<[AnyFloat, AnySignlessInteger]>;

#endif // MED_DIALECT_TD
