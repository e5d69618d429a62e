//===- FormStencilFusions.cpp - group-norm statistics in a stencil's epilogue -------===//
//
// A group norm of a stencil's result (MedNeXt: every depthwise convolution, a shift-sum, is
// followed by one) becomes a `stencil` fusion of the stencil and med.group_norm_stats, whose
// kernel writes the stencil's output and the statistics' per-chunk partials at once, and a
// med.group_norm_apply that normalizes as it reads the output. A shift-sum whose result only
// an add with another value reads (a residual block's input gradient) becomes a `stencil`
// fusion with the add, whose kernel adds the other value as it stores. A shift-sum's weight
// gradient and the sum of the same output gradient (its bias gradient) become a
// `stencil_grad` fusion, whose kernel sums dy as it reads it for the weight gradient. Ops are
// found by their fusion kind; the templates' matchers decide what a fusion may hold.
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
    formResidualFusions();
    formGradFusions();
  }

  /// Each stencil (FusionKind::Stencil, a result of its input's type) outside a fusion whose
  /// result only a two-operand elementwise op reads becomes a `stencil` fusion with that op
  /// at its place, where the matcher takes it (a residual add: the input gradient of a
  /// residual block, the mirrored shift-sum plus the other path's gradient).
  void formResidualFusions() {
    SmallVector<Operation *> stencils;
    getOperation().walk([&](Operation *op) {
      if (fusionKind(op) == FusionKind::Stencil && op->getNumResults() == 1 &&
          op->getNumOperands() >= 1 && !isa<FusionOp>(op->getParentOp()) &&
          op->getResult(0).getType() == op->getOperand(0).getType() &&
          op->getResult(0).hasOneUse())
        stencils.push_back(op);
    });
    for (Operation *stencil : stencils) {
      Operation *user = *stencil->getResult(0).getUsers().begin();
      if (user->getBlock() != stencil->getBlock() ||
          fusionKind(user) != FusionKind::Elementwise || user->getNumOperands() != 2 ||
          user->hasAttr("med.fp32") != stencil->hasAttr("med.fp32"))
        continue;
      llvm::SmallPtrSet<Operation *, 2> members{stencil, user};
      SmallVector<Operation *> ops{stencil, user};
      OpBuilder b(user);
      FusionOp fusion = formFusion(b, user->getLoc(), "stencil", ops, {user}, members);
      if (!fusion)
        continue;
      if (stencil->hasAttr("med.fp32"))
        fusion->setAttr("med.fp32", b.getUnitAttr());
      user->erase();
      stencil->erase();
    }
  }

  /// Each weight gradient of a stencil (FusionKind::Stencil, a weight-shaped result from
  /// the input and the output gradient) with a reduction of the same output gradient in its
  /// block becomes a `stencil_grad` fusion, where the matcher takes the pair (the bias
  /// gradient's sum). The fusion stands at the later of the two; the earlier one's result
  /// must not be read in between.
  void formGradFusions() {
    SmallVector<Operation *> gradWeights;
    getOperation().walk([&](Operation *op) {
      if (fusionKind(op) == FusionKind::Stencil && op->getNumOperands() == 2 &&
          op->getNumResults() == 1 && !isa<FusionOp>(op->getParentOp()) &&
          op->getResult(0).getType() != op->getOperand(0).getType())
        gradWeights.push_back(op);
    });
    llvm::DenseSet<Operation *> taken;
    for (Operation *gradWeight : gradWeights) {
      Value dy = gradWeight->getOperand(1);
      for (Operation *sum : dy.getUsers()) {
        if (sum->getBlock() != gradWeight->getBlock() ||
            fusionKind(sum) != FusionKind::Reduction || sum->getNumResults() != 1 ||
            taken.contains(sum) || sum->hasAttr("med.fp32") != gradWeight->hasAttr("med.fp32"))
          continue;
        Operation *last = gradWeight->isBeforeInBlock(sum) ? sum : gradWeight;
        Operation *first = last == sum ? gradWeight : sum;
        if (llvm::any_of(first->getResult(0).getUsers(), [&](Operation *u) {
              return u->getBlock() != last->getBlock() || u->isBeforeInBlock(last);
            }))
          continue;
        llvm::SmallPtrSet<Operation *, 2> members{gradWeight, sum};
        SmallVector<Operation *> ops{gradWeight, sum};
        OpBuilder b(last);
        FusionOp fusion = formFusion(b, gradWeight->getLoc(), "stencil_grad", ops, ops, members);
        if (!fusion)
          continue; // not the bias gradient's sum: another reduction of dy
        if (gradWeight->hasAttr("med.fp32"))
          fusion->setAttr("med.fp32", b.getUnitAttr());
        taken.insert(sum);
        sum->erase();
        gradWeight->erase();
        break;
      }
    }
  }
};

} // namespace
