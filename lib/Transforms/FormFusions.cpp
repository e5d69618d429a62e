//===- FormFusions.cpp - elementwise chains into med.fusion ---------------------===//
#include "Fusions.h"
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

/// An op of elementwise, broadcast or generate access (random numbers) whose results are
/// float tensors of one static shape (the iteration space of the fusion it may join).
bool isFusible(Operation *op) {
  FusionKind kind = fusionKind(op);
  if ((kind != FusionKind::Elementwise && kind != FusionKind::Broadcast &&
       kind != FusionKind::Generate) ||
      op->getNumResults() == 0)
    return false;
  auto first = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!first || !first.hasStaticShape())
    return false;
  for (Value r : op->getResults()) {
    auto type = dyn_cast<RankedTensorType>(r.getType());
    if (!type || type.getShape() != first.getShape() || !isa<FloatType>(type.getElementType()))
      return false;
  }
  return true;
}

bool isMasterWeightMath(Operation *op) { return op->hasAttr("med.fp32"); }

/// A fusion reads and writes at most this many values: its kernel takes one pointer each
/// (and the status word), well inside CUDA's 4 KiB of kernel parameters, and the CPU
/// emulation of the kernels in CI passes at most 64 arguments.
constexpr size_t kMaxFusionValues = 60;

/// The values a group of ops reads from outside and the results read outside it.
size_t boundaryValues(const llvm::SmallPtrSetImpl<Operation *> &members) {
  llvm::SmallPtrSet<Value, 16> inputs;
  size_t results = 0;
  for (Operation *op : members) {
    for (Value v : op->getOperands())
      if (!members.contains(v.getDefiningOp()))
        inputs.insert(v);
    for (Value r : op->getResults())
      results += llvm::any_of(r.getUsers(), [&](Operation *u) { return !members.contains(u); });
  }
  return inputs.size() + results;
}

/// The groups being formed: lists of ops in block order, an op's group found by index.
struct Groups {
  llvm::DenseMap<Operation *, size_t> of;
  std::vector<SmallVector<Operation *>> lists;

  /// May `user` take group `g` in? Its ops produce `user`'s shape with the same precision
  /// mark, and every other use of their results comes after `user`: such a result is then
  /// one more result of the fusion at `user`, and nothing reads it before it exists.
  /// `user`'s group so far is `own` (the producers it took in already). The fusion stays
  /// within kMaxFusionValues.
  bool joins(size_t g, Operation *user, size_t own) const {
    Operation *producer = lists[g].back();
    if (cast<ShapedType>(producer->getResult(0).getType()).getShape() !=
            cast<ShapedType>(user->getResult(0).getType()).getShape() ||
        isMasterWeightMath(producer) != isMasterWeightMath(user))
      return false;
    for (Operation *m : lists[g])
      for (Operation *u : m->getUsers()) {
        auto it = of.find(u);
        if (u != user && !(it != of.end() && it->second == g) && !user->isBeforeInBlock(u))
          return false;
      }
    llvm::SmallPtrSet<Operation *, 16> merged(lists[g].begin(), lists[g].end());
    merged.insert(lists[own].begin(), lists[own].end());
    merged.insert(user);
    return boundaryValues(merged) <= kMaxFusionValues;
  }

  void merge(size_t from, size_t into) {
    for (Operation *m : lists[from])
      of[m] = into;
    lists[into].append(lists[from].begin(), lists[from].end());
    lists[from].clear();
  }
};

/// Replaces the ops of `group` (in block order; the last is the root) by one fusion at the
/// root, yielding every result of the group that is used outside it. The scalar constants
/// the group reads are copied into the body (literals in the kernel: no input, and no launch
/// once nothing else reads them).
void outline(ArrayRef<Operation *> group) {
  Operation *root = group.back();
  llvm::SmallPtrSet<Operation *, 8> members(group.begin(), group.end());
  SmallVector<Operation *> ops;
  for (Operation *op : group)
    for (Value v : op->getOperands())
      if (auto c = v.getDefiningOp<ConstantOp>(); c && isScalarLiteralConstant(c) && members.insert(c).second)
        ops.push_back(c);
  SmallVector<Operation *> constants(ops);
  ops.append(group.begin(), group.end());
  SmallVector<Value> escaping;
  OpBuilder b(root);
  FusionOp fusion = buildFusion(b, root->getLoc(), "elementwise", ops, group, members, escaping);
  if (isMasterWeightMath(root))
    fusion->setAttr("med.fp32", b.getUnitAttr());
  for (Operation *c : constants) // kept for their other readers
    members.erase(c);
  useFusionResults(fusion, escaping, members);
  for (Operation *op : llvm::reverse(group))
    op->erase();
  for (Operation *c : constants)
    if (c->use_empty())
      c->erase();
}

struct MedFormFusions : med::impl::MedFormFusionsBase<MedFormFusions> {
  using Base::Base;

  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      Groups groups;
      for (Operation &op : block) {
        if (!isFusible(&op))
          continue;
        size_t g = groups.lists.size();
        groups.lists.push_back({});
        for (Value v : op.getOperands()) {
          auto it = groups.of.find(v.getDefiningOp());
          if (it != groups.of.end() && it->second != g && groups.joins(it->second, &op, g))
            groups.merge(it->second, g);
        }
        groups.lists[g].push_back(&op);
        groups.of[&op] = g;
      }
      for (SmallVector<Operation *> &group : groups.lists) {
        if (group.size() < 2)
          continue;
        llvm::sort(group, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
        outline(group);
      }
    }
  }
};

} // namespace
