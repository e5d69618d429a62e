//===- SinkAssigns.cpp - med.assign ops to the end of their block ----------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDSINKASSIGNS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

struct MedSinkAssigns : med::impl::MedSinkAssignsBase<MedSinkAssigns> {
  using Base::Base;

  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      if (block.empty() || !block.back().hasTrait<OpTrait::IsTerminator>())
        continue;
      SmallVector<AssignOp> assigns(block.getOps<AssignOp>());
      for (AssignOp a : assigns) // in order: their relative order is kept
        a->moveBefore(&block.back());
    }
  }
};

} // namespace
