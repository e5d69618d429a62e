//===- Fusions.h - what the fusion-forming passes share -----------------------------===//
//
// Internal to lib/Transforms: building a med.fusion from a group of ops (med-form-fusions,
// med-form-mlp-fusions) and the storage type of a mixed-precision function
// (med-assign-storage, med-form-mlp-fusions).
//
//===------------------------------------------------------------------------------===//

#ifndef MED_TRANSFORMS_FUSIONS_H
#define MED_TRANSFORMS_FUSIONS_H

#include "med/IR/MedOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

namespace mlir::med {

/// A fusion of template `templ` at `b`'s insertion point whose body is clones of `ops` (in
/// order). Its inputs are the values the ops read from outside `members`; its results are
/// the results of `escapes` that an op outside `members` reads, listed in `escaping` in
/// the fusion's result order. The originals stay: the caller replaces those uses and
/// erases them (or erases the fusion).
FusionOp buildFusion(OpBuilder &b, Location loc, StringRef templ, ArrayRef<Operation *> ops,
                     ArrayRef<Operation *> escapes,
                     const llvm::SmallPtrSetImpl<Operation *> &members,
                     SmallVectorImpl<Value> &escaping);

/// Replaces the uses of `escaping` outside `members` by the fusion's results.
void useFusionResults(FusionOp fusion, ArrayRef<Value> escaping,
                      const llvm::SmallPtrSetImpl<Operation *> &members);

/// buildFusion, then template `templ`'s matcher on the body: where it matches, the uses
/// outside `members` of what escapes read the fusion's results (the caller erases the
/// originals); where it does not, the fusion is erased, nothing else changed, and the
/// result is null.
FusionOp formFusion(OpBuilder &b, Location loc, StringRef templ, ArrayRef<Operation *> ops,
                    ArrayRef<Operation *> escapes,
                    const llvm::SmallPtrSetImpl<Operation *> &members);

/// Template `fusion`'s matcher on its body: its roles set where it matches; failure (the
/// fusion unchanged) where it does not.
LogicalResult matchRoles(FusionOp fusion);

/// Moves `op` before `at` where it stands later, with the ops it reads that do too: only
/// ops free of side effects and not among `members`. False when one cannot move (those
/// moved before stay moved: moving an op free of side effects earlier changes nothing).
bool hoistBefore(Operation *op, Operation *at,
                 const llvm::SmallPtrSetImpl<Operation *> &members);

/// The block MLPs of `f` (mixed precision only): each compressing contraction whose input
/// is a one-operand elementwise activation of an expanding contraction, the three found by
/// FusionOpInterface.
SmallVector<Operation *> blockMlps(func::FuncOp f);

/// Makes the block MLP ending in `compress` (from blockMlps) an `mlp` fusion (with its
/// elementwise epilogue where the template takes it) and the backward ops that read its
/// expansion an `mlp_grad` fusion that recomputes it (med-form-mlp-fusions, one block).
/// Ops it erases are added to `erased`. False when the block's ops do not fit the templates.
bool formBlockMlp(Operation *compress, llvm::DenseSet<Operation *> &erased);

/// The 16-bit type a function's activations are stored in under its `med.precision`
/// (bf16-mixed: bf16, fp16-mixed: f16); none for other functions.
std::optional<Type> mixedStorageType(func::FuncOp f);

} // namespace mlir::med

#endif // MED_TRANSFORMS_FUSIONS_H
