//===- MedOps.h - operations of the med dialect --------------------------------===//
#ifndef MED_IR_MEDOPS_H
#define MED_IR_MEDOPS_H

#include "med/IR/MedDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "med/IR/MedEnums.h.inc"

namespace mlir::med {
/// Marks ops that give no gradient to any operand (constants, the gradient ops).
template <typename ConcreteType>
class NotDifferentiable : public OpTrait::TraitBase<ConcreteType, NotDifferentiable> {};

/// Marks ops whose result depends only on the multiset of their operands' elements, zeros
/// adding nothing (med.sum_squares, med.any_non_finite).
template <typename ConcreteType>
class ElementSetReduction : public OpTrait::TraitBase<ConcreteType, ElementSetReduction> {};

/// Marks ops that are one pass over their first operand's elements with small side inputs,
/// outside the fusion templates (med.group_norm_apply): cheap to compute again.
template <typename ConcreteType>
class PerElement : public OpTrait::TraitBase<ConcreteType, PerElement> {};

/// An op's access pattern for fusion (FusionOpInterface).
enum class FusionKind {
  Elementwise,
  Broadcast,
  Reduction,
  Contraction,
  Stencil,
  Gather,
  Generate,
  Opaque
};
} // namespace mlir::med

#include "med/IR/MedInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "med/IR/MedOpsAttributes.h.inc"

namespace mlir::med {
/// The mark of a med.group_norm that is an instance norm (ONNX InstanceNormalization): its
/// result, under PyTorch's autocast, is in the input's type (docs/dialect.md).
inline constexpr llvm::StringLiteral kInstanceNormAttr = "med.instance_norm";
/// Declared result types accept inferred ones when each declared size is equal or `?`.
bool areCompatibleResultTypes(TypeRange inferred, TypeRange declared);
/// Reports a declared result type that the inferred one does not fit.
LogicalResult verifyResultTypes(Operation *op, TypeRange inferred);
/// The access pattern of any op: its FusionOpInterface's, or Opaque without one.
FusionKind fusionKind(Operation *op);
/// Elementwise when every operand has the result's type, else Broadcast (binary ops).
FusionKind broadcastingKind(Operation *op);
} // namespace mlir::med

#define GET_OP_CLASSES
#include "med/IR/MedOps.h.inc"

namespace mlir::med {
/// The matcher of a fusion template: does `body` (a med.fusion's block) hold only what the
/// template `name` can run? Reports the first problem through `report` (when given), else
/// returns the roles it found (med.fusion's `roles`: role name → index of the role's op in
/// the body; empty for a template without roles). Shared by the verifier of med.fusion and
/// the passes that form fusions.
FailureOr<DictionaryAttr> matchFusionTemplate(StringRef name, Block &body,
                                              llvm::function_ref<InFlightDiagnostic()> report);
/// A rank-0 f32 med.constant: an `elementwise` fusion's body may hold it (a literal).
bool isScalarLiteralConstant(ConstantOp op);
/// The fusion templates medc knows.
ArrayRef<StringRef> fusionTemplates();
} // namespace mlir::med

#endif // MED_IR_MEDOPS_H
