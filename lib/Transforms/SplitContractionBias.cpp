//===- SplitContractionBias.cpp - a 1x1x1 convolution's bias into its consumers' fusion ===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDSPLITCONTRACTIONBIAS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

/// The bias operand of a convolution of Contraction access outside any fusion whose result
/// only elementwise or broadcast ops read, else null.
Value splittableBias(Operation *op) {
  Value bias;
  if (auto conv = dyn_cast<Conv3dOp>(op))
    bias = conv.getBias();
  else if (auto conv = dyn_cast<Conv3dTransposeOp>(op))
    bias = conv.getBias();
  if (!bias || fusionKind(op) != FusionKind::Contraction || op->getParentOfType<FusionOp>())
    return {};
  Value result = op->getResult(0);
  if (result.use_empty())
    return {};
  for (Operation *user : result.getUsers()) {
    FusionKind kind = fusionKind(user);
    if (kind != FusionKind::Elementwise && kind != FusionKind::Broadcast)
      return {};
  }
  return bias;
}

struct MedSplitContractionBias
    : med::impl::MedSplitContractionBiasBase<MedSplitContractionBias> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> convs;
    getOperation().walk([&](Operation *op) {
      if (splittableBias(op))
        convs.push_back(op);
    });
    for (Operation *conv : convs) {
      Value bias = splittableBias(conv);
      // The bias is the last operand (the only optional one).
      conv->eraseOperand(conv->getNumOperands() - 1);
      OpBuilder b(conv->getContext());
      b.setInsertionPointAfter(conv);
      auto type = cast<RankedTensorType>(bias.getType());
      const int64_t c = type.getDimSize(0);
      auto column = b.create<ReshapeOp>(conv->getLoc(),
                                        RankedTensorType::get({c, 1, 1, 1}, type.getElementType()),
                                        bias, b.getDenseI64ArrayAttr({c, 1, 1, 1}));
      Value product = conv->getResult(0);
      auto sum = b.create<AddOp>(conv->getLoc(), product, column.getResult());
      // Attributes the ops do not define (med.fp32) carry over to the add.
      for (NamedAttribute a : conv->getDiscardableAttrs())
        sum->setAttr(a.getName(), a.getValue());
      product.replaceAllUsesExcept(sum.getResult(), sum);
    }
  }
};

} // namespace
