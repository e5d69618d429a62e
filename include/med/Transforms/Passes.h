//===- Passes.h - passes of the med compiler -----------------------------------===//
#ifndef MED_TRANSFORMS_PASSES_H
#define MED_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"

namespace mlir::med {

#define GEN_PASS_DECL
#include "med/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "med/Transforms/Passes.h.inc"

/// Inlines every call reachable from `entry` into it (med-specialize, med-train-step).
LogicalResult inlineAllCalls(func::FuncOp entry, SymbolTable &symbols);

/// Adds `<f>_grad` next to the loss function `f` (see MedAutodiff in Passes.td) and
/// returns it; reports an error at `f` or at the op without a gradient rule.
FailureOr<func::FuncOp> buildGradientFunction(func::FuncOp f);

/// Whether `f`'s body has ops whose train mode differs from their eval mode (med.batch_norm
/// in its training form, med.dropout) or that set state (med.assign).
bool hasTrainForm(func::FuncOp f);
/// Turns `f` into an evaluation function: the eval form of every such op (batch_norm with
/// its running statistics, dropout the identity) and no state set (its med.assign ops
/// removed). The step's key, an i64 scalar argument that nothing reads any more, is removed
/// from the arguments (and from `med.input_names`).
void toEvalForm(func::FuncOp f);

/// The optimizing passes of `medc compile` on the forward program (after med-specialize,
/// before med-autodiff and med-train-step, so that gradients are built from the rewritten
/// ops' rules), in pipeline order; each can be left out.
ArrayRef<StringRef> forwardPasses();
/// Adds them to `pm` (on a module), but those named in `disabled` (other names are ignored:
/// buildOptimizationPipeline reports them).
void buildForwardPipeline(OpPassManager &pm, ArrayRef<std::string> disabled);
/// The optimizing passes of `medc compile` after the program is complete, in pipeline order;
/// each can be left out.
ArrayRef<StringRef> optimizationPasses();
/// Without a budget, med-recompute recomputes saved values only in a step whose planned
/// peak exceeds this many GiB (medc's default; the recipe key recompute_above_gib).
inline constexpr double kRecomputeAboveGib = 16;
/// Those of them that run only when requested.
ArrayRef<StringRef> offByDefaultPasses();
/// The blocks med-form-mlp-fusions fuses by default (0: none): with `maxChannels`, those
/// with at most that many input and output channels and `maxExpanded` expanded ones (0:
/// any), as if requested; a request (`recompute_mlp`) fuses every block.
struct MlpFusionBounds {
  int64_t maxChannels = 0, maxExpanded = 0;
};
/// Adds them to `pm` (on a module): the default ones but those named in `disabled`, the
/// off-by-default ones named in `requested`; an unknown name is reported through `error`.
/// With `bucketMb`, med-data-parallel with buckets of that many MiB runs after
/// med-flatten-optimizer (`medc compile --data-parallel`). med-recompute runs last with
/// `memoryBudgetGib` (0: none; `softBudget`: missing it is no error) and `recomputeAboveGib`
/// (without a budget, it recomputes only a step planned above this).
LogicalResult buildOptimizationPipeline(OpPassManager &pm, ArrayRef<std::string> disabled,
                                        llvm::function_ref<void(const Twine &)> error,
                                        ArrayRef<std::string> requested = {},
                                        std::optional<double> bucketMb = std::nullopt,
                                        double memoryBudgetGib = 0,
                                        double recomputeAboveGib = kRecomputeAboveGib,
                                        bool softBudget = false,
                                        MlpFusionBounds mlpBounds = {});
/// Registers `med-optimize` (buildOptimizationPipeline) for med-opt.
void registerMedPipelines();

} // namespace mlir::med

#endif // MED_TRANSFORMS_PASSES_H
