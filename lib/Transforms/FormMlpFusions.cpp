//===- FormMlpFusions.cpp - the block MLP and its gradients into med.fusion ---------===//
//
// A contraction over channels, an elementwise activation of it and a contraction of that
// (MedNeXt's 1×1×1 expand → GELU → 1×1×1 compress) become an `mlp` fusion whose expansion
// never reaches memory; the backward ops that read the expansion or its activation become
// an `mlp_grad` fusion that recomputes them. Ops are found by their fusion kind; the
// templates' matchers decide what a fusion may hold.
//
//===------------------------------------------------------------------------------===//
#include "Fusions.h"
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDFORMMLPFUSIONS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

bool hasKind(Operation *op, FusionKind kind) { return op && fusionKind(op) == kind; }

/// Builds a fusion of `group` (ops in block order) before `at`, its body the clones of the
/// group. `recomputed` ops are cloned first (their originals stay). The fusion yields the
/// group's results used outside it. When the template's matcher accepts the body, the
/// group's results are replaced and its ops erased; otherwise the fusion is erased and
/// nothing changes.
bool outline(StringRef templ, ArrayRef<Operation *> recomputed, ArrayRef<Operation *> group,
             Operation *at, llvm::DenseSet<Operation *> &erased) {
  llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());
  members.insert(recomputed.begin(), recomputed.end());
  SmallVector<Operation *> all(recomputed.begin(), recomputed.end());
  all.append(group.begin(), group.end());
  for (Operation *op : all) // every input must exist where the fusion goes
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && !members.contains(def) && !hoistBefore(def, at, members))
        return false;
  OpBuilder b(at);
  if (!formFusion(b, at->getLoc(), templ, all, group, members))
    return false;
  for (Operation *op : llvm::reverse(group)) {
    erased.insert(op);
    op->erase();
  }
  return true;
}

/// The ops that read the expansion `h` or its activation `g` outside the forward chain,
/// closed under what their gradients need: the producer of the activation gradient's other
/// operand (a contraction read by nothing else), and the contractions and reductions of the
/// activation gradient. Empty when there are none (no backward), nullopt when they do not
/// form the block's gradient.
std::optional<SmallVector<Operation *>> backwardOf(Operation *act, Operation *compress) {
  Value h = act->getOperand(0), g = act->getResult(0);
  llvm::SetVector<Operation *> ops;
  for (Value v : {h, g})
    for (Operation *u : v.getUsers())
      if (u != act && u != compress)
        ops.insert(u);
  if (ops.empty())
    return SmallVector<Operation *>{};
  Operation *actGrad = nullptr;
  for (Operation *op : ops)
    if (hasKind(op, FusionKind::Elementwise))
      actGrad = actGrad ? nullptr : op;
  if (!actGrad || actGrad->getNumOperands() != 2 || actGrad->getOperand(0) != h)
    return std::nullopt;
  Operation *dg = actGrad->getOperand(1).getDefiningOp();
  if (!hasKind(dg, FusionKind::Contraction) || !dg->getResult(0).hasOneUse())
    return std::nullopt;
  ops.insert(dg);
  for (Operation *u : actGrad->getResult(0).getUsers())
    if (hasKind(u, FusionKind::Contraction) || hasKind(u, FusionKind::Reduction))
      ops.insert(u);
    else
      return std::nullopt;
  SmallVector<Operation *> list = ops.takeVector();
  llvm::sort(list, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return list;
}

} // namespace

SmallVector<Operation *> mlir::med::blockMlps(func::FuncOp f) {
  SmallVector<Operation *> compresses;
  // The template's tensor cores multiply 16-bit operands: mixed-precision functions only.
  if (!mixedStorageType(f))
    return compresses;
  for (Block &block : f.getBody()) // not inside fusions formed before
    for (Operation &op : block) {
      if (!hasKind(&op, FusionKind::Contraction) || op.getNumOperands() < 2)
        continue;
      Operation *act = op.getOperand(0).getDefiningOp();
      // The template composes the activation's scalar form from its input alone: an
      // activation whose definition has attributes (leaky_relu's slope) stays outside.
      if (!hasKind(act, FusionKind::Elementwise) || act->getNumOperands() != 1 ||
          !act->getName().getAttributeNames().empty())
        continue;
      Operation *expand = act->getOperand(0).getDefiningOp();
      if (hasKind(expand, FusionKind::Contraction) && expand->getBlock() == op.getBlock())
        compresses.push_back(&op);
    }
  return compresses;
}

bool mlir::med::formBlockMlp(Operation *compress, llvm::DenseSet<Operation *> &erased) {
  Operation *act = compress->getOperand(0).getDefiningOp();
  Operation *expand = act->getOperand(0).getDefiningOp();
  // Copies of the activation med-recompute placed in the backward read the original again:
  // the templates recompute it themselves. An activation with an equal one before it is
  // such a copy (a weight gradient reading it looks like a compression): not a block.
  SmallVector<Operation *> copies;
  for (Operation *u : act->getOperand(0).getUsers())
    if (u != act && OperationEquivalence::isEquivalentTo(u, act, OperationEquivalence::IgnoreLocations)) {
      if (u->isBeforeInBlock(act))
        return false;
      copies.push_back(u);
    }
  for (Operation *copy : copies) {
    copy->replaceAllUsesWith(act);
    copy->erase();
  }
  std::optional<SmallVector<Operation *>> backward = backwardOf(act, compress);
  if (!backward)
    return false;
  // The backward first: then nothing outside the forward chain reads h or g.
  if (!backward->empty() && !outline("mlp_grad", {expand, act}, *backward, backward->front(), erased))
    return false;
  SmallVector<Operation *> forward{expand, act, compress};
  Value m = compress->getResult(0);
  if (m.hasOneUse()) { // an elementwise epilogue: the residual add
    Operation *e = *m.getUsers().begin();
    FusionKind kind = fusionKind(e);
    if ((kind == FusionKind::Elementwise || kind == FusionKind::Broadcast) &&
        e->getBlock() == compress->getBlock())
      forward.push_back(e);
  }
  if (outline("mlp", {}, forward, forward.back(), erased))
    return true;
  if (forward.size() == 4) {
    forward.pop_back();
    return outline("mlp", {}, forward, forward.back(), erased);
  }
  return false;
}

namespace {

struct MedFormMlpFusions : med::impl::MedFormMlpFusionsBase<MedFormMlpFusions> {
  using Base::Base;

  void runOnOperation() override {
    llvm::DenseSet<Operation *> erased; // candidates outlined by an earlier match
    for (Operation *compress : blockMlps(getOperation()))
      if (!erased.contains(compress) && withinSizes(compress))
        formBlockMlp(compress, erased);
  }

  /// The block's channels (dimension 1: in, expanded, out) within the pass's bounds.
  bool withinSizes(Operation *compress) const {
    Operation *expand = compress->getOperand(0).getDefiningOp()->getOperand(0).getDefiningOp();
    auto channels = [](Value v) { return cast<ShapedType>(v.getType()).getDimSize(1); };
    const int64_t in = channels(expand->getOperand(0)), expanded = channels(compress->getOperand(0)),
                  out = channels(compress->getResult(0));
    auto within = [](int64_t size, int64_t bound) {
      return bound == 0 || (!ShapedType::isDynamic(size) && size <= bound);
    };
    return within(in, maxChannels) && within(out, maxChannels) && within(expanded, maxExpanded);
  }
};

} // namespace
