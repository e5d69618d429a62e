//===- FormStencilFusions.cpp - group-norm statistics in a stencil's epilogue -------===//
//
// A group norm of a stencil's result (MedNeXt: every depthwise convolution, a shift-sum, is
// followed by one) becomes a `stencil` fusion of the stencil and med.group_norm_stats, whose
// kernel writes the stencil's output and the statistics' per-chunk partials at once, and a
// med.group_norm_apply that normalizes as it reads the output. Ops are found by their
// fusion kind; the template's matcher decides what the fusion may hold.
//
//===------------------------------------------------------------------------------===//
#include "Fusions.h"
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDFORMSTENCILFUSIONS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

struct MedFormStencilFusions
    : med::impl::MedFormStencilFusionsBase<MedFormStencilFusions> {
  void runOnOperation() override {
    SmallVector<GroupNormOp> norms;
    getOperation().walk([&](GroupNormOp op) {
      if (!isa<FusionOp>(op->getParentOp()))
        norms.push_back(op);
    });
    llvm::DenseSet<Operation *> fused;
    for (GroupNormOp norm : norms) {
      Operation *producer = norm.getInput().getDefiningOp();
      if (!producer || fusionKind(producer) != FusionKind::Stencil ||
          producer->getNumResults() != 1 || !fused.insert(producer).second)
        continue;
      OpBuilder b(producer->getContext());
      b.setInsertionPointAfter(producer);
      auto stats = b.create<GroupNormStatsOp>(norm.getLoc(), norm.getInput(), norm.getGroups(),
                                              norm.getEpsilon());
      b.setInsertionPoint(norm);
      auto apply = b.create<GroupNormApplyOp>(norm.getLoc(), norm.getInput(), stats.getMean(),
                                              stats.getRstd(), norm.getGamma(), norm.getBeta(),
                                              norm.getGroups());
      // Marks the norm carries (med.instance_norm) are the apply's: it yields its result.
      for (NamedAttribute a : norm->getDiscardableAttrs())
        apply->setAttr(a.getName(), a.getValue());
      llvm::SmallPtrSet<Operation *, 2> members{producer, stats};
      SmallVector<Operation *> ops{producer, stats};
      b.setInsertionPoint(producer);
      FusionOp fusion = formFusion(b, producer->getLoc(), "stencil", ops, ops, members);
      if (!fusion) {
        apply->erase();
        stats->erase();
        continue;
      }
      norm.getResult().replaceAllUsesWith(apply.getResult());
      if (norm.getSaveStatistics()) {
        norm.getStatistics()[0].replaceAllUsesWith(fusion.getResult(1));
        norm.getStatistics()[1].replaceAllUsesWith(fusion.getResult(2));
      }
      norm->erase();
      stats->erase();
      producer->erase();
    }
  }
};

} // namespace
