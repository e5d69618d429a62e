//===- FormReduceFusions.cpp - sibling reductions into one pass ---------------------===//
//
// Reductions of one value over the same axes (a volume's mean, minimum and maximum, as the
// contrast and gamma transforms take them) become one `reduce` fusion, placed at the first
// of them: they read nothing but the value, so every use of any of them follows it. Ops are
// found by their fusion kind; the template's matcher decides what the fusion may hold.
//
//===------------------------------------------------------------------------------===//
#include "Fusions.h"
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDFORMREDUCEFUSIONS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

struct MedFormReduceFusions : med::impl::MedFormReduceFusionsBase<MedFormReduceFusions> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      // Siblings: reductions of one value with the same attributes (axes, keepdims) and
      // precision mark, in block order.
      llvm::MapVector<std::pair<Value, DictionaryAttr>, SmallVector<Operation *>> siblings;
      for (Operation &op : block)
        if (fusionKind(&op) == FusionKind::Reduction && op.getNumOperands() == 1 &&
            op.getNumResults() == 1) {
          // The kind (sum, mean, ...) may differ; everything else must match.
          NamedAttrList attrs(op.getAttrDictionary());
          attrs.erase("kind");
          siblings[{op.getOperand(0), attrs.getDictionary(op.getContext())}].push_back(&op);
        }
      for (auto &[key, ops] : siblings) {
        if (ops.size() < 2)
          continue;
        llvm::SmallPtrSet<Operation *, 4> members(ops.begin(), ops.end());
        OpBuilder b(ops.front());
        FusionOp fusion = formFusion(b, ops.front()->getLoc(), "reduce", ops, ops, members);
        if (!fusion)
          continue;
        if (ops.front()->hasAttr("med.fp32"))
          fusion->setAttr("med.fp32", b.getUnitAttr());
        for (Operation *op : llvm::reverse(ops))
          op->erase();
      }
    }
  }
};

} // namespace
