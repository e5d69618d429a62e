//===- FormFusions.cpp - elementwise chains into med.fusion ---------------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDFORMFUSIONS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

bool isFusible(Operation *op) {
  FusionKind kind = fusionKind(op);
  if ((kind != FusionKind::Elementwise && kind != FusionKind::Broadcast) ||
      op->getNumResults() != 1)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && type.hasStaticShape() && isa<FloatType>(type.getElementType());
}

bool isMasterWeightMath(Operation *op) { return op->hasAttr("med.fp32"); }

/// May `user` take `producer`'s group in, reading its result `v`? Only when nothing else
/// reads `v` (so it need not be stored, and nothing is computed twice), at the same shape.
bool joins(Operation *producer, Value v, Operation *user) {
  for (Operation *u : v.getUsers())
    if (u != user)
      return false;
  return cast<ShapedType>(v.getType()).getShape() ==
             cast<ShapedType>(user->getResult(0).getType()).getShape() &&
         isMasterWeightMath(producer) == isMasterWeightMath(user);
}

/// Replaces the ops of `group` (in block order; the last is the root) by one fusion.
void outline(ArrayRef<Operation *> group) {
  Operation *root = group.back();
  llvm::SmallPtrSet<Operation *, 8> members(group.begin(), group.end());
  SmallVector<Value> inputs;
  for (Operation *op : group)
    for (Value v : op->getOperands())
      if (!members.contains(v.getDefiningOp()) && !llvm::is_contained(inputs, v))
        inputs.push_back(v);
  OpBuilder b(root);
  auto fusion = b.create<FusionOp>(root->getLoc(), "elementwise",
                                   root->getResultTypes(), inputs);
  if (isMasterWeightMath(root))
    fusion->setAttr("med.fp32", b.getUnitAttr());
  Block &body = fusion.getBody().front();
  IRMapping map;
  map.map(inputs, body.getArguments());
  b.setInsertionPointToStart(&body);
  for (Operation *op : group)
    b.clone(*op, map);
  b.create<YieldOp>(root->getLoc(), map.lookup(root->getResult(0)));
  root->getResult(0).replaceAllUsesWith(fusion.getResult(0));
  for (Operation *op : llvm::reverse(group))
    op->erase();
}

struct MedFormFusions : med::impl::MedFormFusionsBase<MedFormFusions> {
  using Base::Base;

  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      // Groups as lists of ops in block order; an op's group is found through its root.
      llvm::DenseMap<Operation *, size_t> groupOf;
      std::vector<SmallVector<Operation *>> groups;
      for (Operation &op : block) {
        if (!isFusible(&op))
          continue;
        size_t g = groups.size();
        groups.push_back({});
        for (Value v : op.getOperands()) {
          Operation *producer = v.getDefiningOp();
          auto it = producer ? groupOf.find(producer) : groupOf.end();
          if (it == groupOf.end() || it->second == g || !joins(producer, v, &op))
            continue;
          SmallVector<Operation *> &from = groups[it->second];
          for (Operation *m : from)
            groupOf[m] = g;
          groups[g].append(from.begin(), from.end());
          from.clear();
        }
        groups[g].push_back(&op);
        groupOf[&op] = g;
      }
      for (SmallVector<Operation *> &group : groups) {
        if (group.size() < 2)
          continue;
        llvm::sort(group, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
        outline(group);
      }
    }
  }
};

} // namespace
