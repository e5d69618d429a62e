//===- SplitNorms.cpp - group norms as statistics and a broadcast epilogue ----------===//
//
// A group norm whose consumers fuse elementwise (the activation of a conv block, a
// residual add) becomes med.group_norm_stats (one reduction) and `(x − mean)·(rstd·gamma)
// + beta` in broadcast-elementwise ops over per-(sample, channel) coefficients, so that
// med-form-fusions takes the normalisation into the consumer's fusion and the normalised
// tensor is never stored. Decided by fusion kinds, not op names.
//
//===------------------------------------------------------------------------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDSPLITNORMS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

bool fusesElementwise(Operation *op) {
  FusionKind k = fusionKind(op);
  return k == FusionKind::Elementwise || k == FusionKind::Broadcast;
}

struct MedSplitNorms : med::impl::MedSplitNormsBase<MedSplitNorms> {
  void runOnOperation() override {
    SmallVector<GroupNormOp> norms;
    getOperation().walk([&](GroupNormOp op) {
      if (!isa<FusionOp>(op->getParentOp()))
        norms.push_back(op);
    });
    for (GroupNormOp norm : norms) {
      auto type = dyn_cast<RankedTensorType>(norm.getInput().getType());
      if (!type || !type.hasStaticShape() || type.getRank() < 3)
        continue;
      const int64_t n = type.getDimSize(0), c = type.getDimSize(1), g = norm.getGroups();
      if (g <= 0 || c % g != 0)
        continue;
      // Only where the normalised value goes to ops that fuse elementwise: elsewhere (a
      // GEMM reads it) the split adds launches and saves nothing.
      Value y = norm.getResult();
      if (y.use_empty() || !llvm::all_of(y.getUsers(), fusesElementwise))
        continue;
      // The input is read by the statistics and again by the fused epilogue; a value the
      // fusion passes could compute in place (elementwise producer) would be read twice
      // anyway, so only producers they cannot enter (convolutions, library calls) or
      // function arguments qualify.
      if (Operation *producer = norm.getInput().getDefiningOp())
        if (fusesElementwise(producer))
          continue;
      Location loc = norm.getLoc();
      OpBuilder b(norm);
      auto fp32 = [&](Operation *op) -> Value {
        // Coefficients stay in f32 under mixed precision, as autocast's group norm has them.
        op->setAttr("med.fp32", b.getUnitAttr());
        return op->getResult(0);
      };
      auto stats = b.create<GroupNormStatsOp>(loc, norm.getInput(), norm.getGroups(),
                                              norm.getEpsilon());
      SmallVector<int64_t> perSampleChannel(type.getRank(), 1);
      perSampleChannel[0] = n;
      perSampleChannel[1] = c;
      auto perChannel = [&](Value groupwise) -> Value { // N×G → N×C×1…
        Value v = groupwise;
        if (c != g) {
          v = fp32(b.create<ReshapeOp>(loc, v, ArrayRef<int64_t>{n, g, 1}));
          v = fp32(b.create<BroadcastOp>(loc, v, ArrayRef<int64_t>{n, g, c / g}));
        }
        return fp32(b.create<ReshapeOp>(loc, v, perSampleChannel));
      };
      SmallVector<int64_t> channel(type.getRank() - 1, 1); // C×1… aligns with axis 1
      channel[0] = c;
      Value mean = perChannel(stats.getMean());
      Value rstd = perChannel(stats.getRstd());
      Value gamma = fp32(b.create<ReshapeOp>(loc, norm.getGamma(), channel));
      Value beta = fp32(b.create<ReshapeOp>(loc, norm.getBeta(), channel));
      Value scale = fp32(b.create<MulOp>(loc, rstd, gamma));
      Value centered = b.create<SubOp>(loc, norm.getInput(), mean);
      Value scaled = b.create<MulOp>(loc, centered, scale);
      Value out = b.create<AddOp>(loc, scaled, beta);
      for (NamedAttribute a : norm->getDiscardableAttrs())
        for (Value v : {centered, scaled, out})
          v.getDefiningOp()->setAttr(a.getName(), a.getValue());
      y.replaceAllUsesWith(out);
      if (norm.getSaveStatistics()) {
        norm.getStatistics()[0].replaceAllUsesWith(stats.getMean());
        norm.getStatistics()[1].replaceAllUsesWith(stats.getRstd());
      }
      norm->erase();
    }
  }
};

} // namespace
