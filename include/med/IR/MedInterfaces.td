//===- MedInterfaces.td - op interfaces and traits of the med dialect -----------===//
#ifndef MED_INTERFACES_TD
#define MED_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Med_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::med";
  let description = [{
    The reverse-mode gradient rule of an op: given the gradients of its results (a null
    Value for a result whose gradient is zero), it builds the gradients of its operands at
    the builder's insertion point, pushing one Value per operand (null where the operand
    gets no gradient, e.g. labels, masks, integer inputs). `med-autodiff` calls it on every
    op between the parameters and the loss.

    Before the reverse sweep, `med-autodiff` also calls `saveForGradient` on each such op: an
    op whose gradient reuses work of its forward pass (group_norm's statistics) returns an
    equivalent op that also produces it; its leading results replace the op's results.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the operand gradients from the result gradients.",
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
    InterfaceMethod<
      "Builds, at the builder's insertion point (just before this op), an equivalent op "
      "that also returns what the gradient rule reuses from the forward pass, or returns "
      "null when there is nothing to save.",
      "::mlir::Operation *", "saveForGradient", (ins "::mlir::OpBuilder &":$builder),
      /*methodBody=*/"", /*defaultImplementation=*/"return nullptr;">,
  ];
}

// Ops that produce no gradient for any operand: constants, and the gradient ops
// themselves (no second derivatives). med-autodiff treats their results as constants.
def Med_NotDifferentiable : NativeOpTrait<"NotDifferentiable"> {
  let cppNamespace = "::mlir::med";
}

// Ops whose result depends only on the multiset of all their operands' elements, to which
// zeros add nothing (sum of squares, any non-finite): operands may be regrouped, e.g. into
// the flat buffers of med-flatten-optimizer, without changing the result.
def Med_ElementSetReduction : NativeOpTrait<"ElementSetReduction"> {
  let cppNamespace = "::mlir::med";
}

// Ops that run as one pass over their first operand's elements with a few small side
// inputs (statistics, per-channel vectors), though no fusion template takes them: as cheap
// to run again as an elementwise op (med-recompute).
def Med_PerElement : NativeOpTrait<"PerElement"> {
  let cppNamespace = "::mlir::med";
}

def Med_FusionOpInterface : OpInterface<"FusionOpInterface"> {
  let cppNamespace = "::mlir::med";
  let description = [{
    How an op takes part in a fusion (`med.fusion`): its access pattern, from which the
    fusion passes and the templates' matchers decide, never from op names.

    - `Elementwise`: each result element depends on the operand elements at the same index
      (every operand and result of one shape);
    - `Broadcast`: elementwise after NumPy broadcasting of some operands to the result;
    - `Reduction`, `Contraction`, `Stencil`: sums over axes, products over a channel axis,
      windows of neighbouring elements (for the templates that take them);
    - `Gather`: each result element reads operand elements at positions computed from its
      own index (and per-sample parameters): a box, a resampling;
    - `Generate`: each result element is a function of its index and scalar operands only
      (counter-based random numbers; other operands give just a shape);
    - `Opaque`: none of these; never fused by pattern. Ops without this interface are opaque.
  }];
  let methods = [
    InterfaceMethod<"The op's access pattern, for fusion.", "::mlir::med::FusionKind",
                    "getFusionKind">,
  ];
}

def Med_NormalizationOpInterface : OpInterface<"NormalizationOpInterface"> {
  let cppNamespace = "::mlir::med";
  let description = [{
    A normalization or its gradient. Under mixed precision it computes as torch autocast's
    float32 policy has it: it reads its affine parameters and saved statistics in f32, and
    results keepsF32Result names (by default those after the first: saved statistics, the
    gradients of gamma and beta) stay in f32. `med-assign-storage` decides storage types from this, never from op names.
  }];
  let methods = [
    InterfaceMethod<"Whether the operand at `index` is read in f32 under mixed precision "
                    "(gamma, beta, saved statistics).",
                    "bool", "readsF32Operand", (ins "unsigned":$index)>,
    InterfaceMethod<"Whether the result at `index` stays in f32 under mixed precision "
                    "(by default every result after the first: saved statistics, the "
                    "gradients of gamma and beta).",
                    "bool", "keepsF32Result", (ins "unsigned":$index), [{}],
                    [{ return index > 0; }]>,
  ];
}

#endif // MED_INTERFACES_TD
