//===- AssignStorage.cpp - one storage type per value of a mixed-precision function ----===//
//
// The rule (Passes.td, MedAssignStorage) lives here and nowhere else: the artifact carries
// its decisions, and the executors store values as they say.
//
//===----------------------------------------------------------------------------------===//
#include "Fusions.h"
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDASSIGNSTORAGE
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

bool isActivationShaped(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.getElementType().isF32() && tensor.getRank() > 0;
}

/// Whether every use of `v` reads it in f32: as a normalization's gamma or beta, or in
/// master-weight math (the coefficients of a norm split by med-split-norms).
bool readOnlyInF32(Value v) {
  if (v.use_empty())
    return false;
  return llvm::all_of(v.getUses(), [](OpOperand &use) {
    auto norm = dyn_cast<NormalizationOpInterface>(use.getOwner());
    return (norm && norm.readsF32Operand(use.getOperandNumber())) ||
           use.getOwner()->hasAttr("med.fp32");
  });
}

/// Is `r` a fusion's result that its body yields from a result a normalization keeps in f32
/// (a stencil fusion's statistics)?
bool keepsF32(OpResult r) {
  auto fusion = dyn_cast<FusionOp>(r.getOwner());
  if (!fusion)
    return false;
  auto yield = cast<YieldOp>(fusion.getBody().front().getTerminator());
  auto inner = dyn_cast<OpResult>(yield.getValues()[r.getResultNumber()]);
  auto norm = inner ? dyn_cast<NormalizationOpInterface>(inner.getOwner()) : nullptr;
  return norm && norm.keepsF32Result(inner.getResultNumber());
}

/// Is `r` the result of a master-weight fusion (med.fp32: it computes in f32) that its body
/// yields from an op computing in the activations' type (a resample fusion's crop or
/// affinities, returned by the augmentation as the step's inputs)? It is stored as that op's
/// result would be.
bool yieldedLow(OpResult r) {
  auto fusion = dyn_cast<FusionOp>(r.getOwner());
  if (!fusion || !fusion->hasAttr("med.fp32") || !isActivationShaped(r.getType()))
    return false;
  auto yield = cast<YieldOp>(fusion.getBody().front().getTerminator());
  Operation *inner = yield.getValues()[r.getResultNumber()].getDefiningOp();
  return inner && !inner->hasAttr("med.fp32");
}

/// Does `op` compute in the activations' type?
bool computesLow(Operation *op) {
  if (op->hasAttr("med.fp32"))
    return false;
  if (isa<ParamOp>(op) && readOnlyInF32(op->getResult(0)))
    return false; // autocast keeps the norms' affine parameters in f32
  return llvm::any_of(op->getResultTypes(), [](Type t) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    return tensor && isa<FloatType>(tensor.getElementType()) && tensor.getRank() > 0;
  });
}

struct MedAssignStorage : med::impl::MedAssignStorageBase<MedAssignStorage> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    const std::optional<Type> mixed = mixedStorageType(f);
    if (!mixed)
      return;
    Builder b(f.getContext());
    const Type low = *mixed;
    DenseMap<Value, Type> storage;
    auto elementType = [](Value v) { return getElementTypeOrSelf(v.getType()); };

    SmallVector<Attribute> args;
    for (BlockArgument a : f.getArguments()) {
      storage[a] = isActivationShaped(a.getType()) ? low : elementType(a);
      args.push_back(TypeAttr::get(storage[a]));
    }
    f->setAttr("med.arg_storage", b.getArrayAttr(args));

    for (Operation &op : f.getBody().getOps()) {
      if (op.getNumResults() == 0)
        continue;
      auto view = dyn_cast<ViewLikeOpInterface>(&op);
      const bool lowOp = computesLow(&op);
      auto norm = dyn_cast<NormalizationOpInterface>(&op);
      SmallVector<Attribute> types;
      for (OpResult r : op.getResults()) {
        Type t = elementType(r);
        if (view && r.getResultNumber() == 0)
          t = storage.lookup(view.getViewSource());
        else if (isa<AllReduceOp>(op)) // summed in place: stored as its input
          t = storage.lookup(op.getOperand(r.getResultNumber()));
        else if ((lowOp && t.isF32() && !(norm && norm.keepsF32Result(r.getResultNumber())) &&
                  !keepsF32(r)) ||
                 yieldedLow(r))
          t = low;
        storage[r] = t;
        types.push_back(TypeAttr::get(t));
      }
      op.setAttr("med.storage", b.getArrayAttr(types));
    }
  }
};

} // namespace
