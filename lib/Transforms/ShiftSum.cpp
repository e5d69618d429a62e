//===- ShiftSum.cpp - stride-1 depthwise convolutions as shift-sums -----------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDSHIFTSUM
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

/// Whether `conv` is a depthwise convolution of stride 1 with odd kernels and padding k/2 on
/// every axis: exactly what med.shift_sum computes.
bool isShiftSum(Conv3dOp conv) {
  auto x = cast<RankedTensorType>(conv.getInput().getType());
  auto w = cast<RankedTensorType>(conv.getWeight().getType());
  int64_t c = x.getDimSize(1);
  if (ShapedType::isDynamic(c) || c != conv.getGroups() || w.getDimSize(0) != c ||
      w.getDimSize(1) != 1)
    return false;
  for (int a = 0; a < 3; ++a) {
    int64_t k = w.getDimSize(2 + a);
    if (ShapedType::isDynamic(k) || k % 2 == 0 || conv.getStride()[a] != 1 ||
        conv.getDilation()[a] != 1 || conv.getPadding()[a] != k / 2)
      return false;
  }
  return true;
}

struct MedShiftSum : med::impl::MedShiftSumBase<MedShiftSum> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Conv3dOp> convs;
    getOperation().walk([&](Conv3dOp conv) {
      if (isShiftSum(conv))
        convs.push_back(conv);
    });
    for (Conv3dOp conv : convs) {
      OpBuilder b(conv);
      auto sum = b.create<ShiftSumOp>(conv.getLoc(), conv.getType(), conv.getInput(),
                                      conv.getWeight(), conv.getBias(), /*mirrored=*/false);
      // Attributes the op does not define (med.fp32, med.storage) carry over.
      for (NamedAttribute a : conv->getDiscardableAttrs())
        sum->setAttr(a.getName(), a.getValue());
      conv.getResult().replaceAllUsesWith(sum.getResult());
      conv.erase();
    }
  }
};

} // namespace
