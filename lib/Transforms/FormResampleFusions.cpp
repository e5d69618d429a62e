//===- FormResampleFusions.cpp - spatial transforms with what follows them ---------===//
//
// A `resample` fusion: a resampling op (gather access) and either the one stencil op that
// reads its labels (the affinities) or its epilogue of elementwise, broadcast and generate
// ops, closed by a crop of the last value where nothing else leaves the fusion. Ops are found
// by their fusion kind; the template's matcher decides what the fusion may hold.
//
//===------------------------------------------------------------------------------===//
#include "Fusions.h"
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDFORMRESAMPLEFUSIONS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

/// A fusion's kernel takes one pointer per value it reads or writes (FormFusions.cpp).
constexpr size_t kMaxFusionValues = 60;

bool isMasterWeightMath(Operation *op) { return op->hasAttr("med.fp32"); }

/// An op the epilogue may compute per voxel: elementwise, broadcast or generate access,
/// every result a float tensor of shape `space`, computing in f32 where `anchor` does
/// (under mixed precision, f32 inputs are read as the ops of each kind read them).
bool perVoxel(Operation *op, ArrayRef<int64_t> space, Operation *anchor) {
  if (isMasterWeightMath(op) != isMasterWeightMath(anchor))
    return false;
  FusionKind kind = fusionKind(op);
  if ((kind != FusionKind::Elementwise && kind != FusionKind::Broadcast &&
       kind != FusionKind::Generate) ||
      op->getNumResults() == 0 || op->getNumRegions() != 0)
    return false;
  return llvm::all_of(op->getResults(), [&](Value r) {
    auto type = dyn_cast<RankedTensorType>(r.getType());
    return type && type.getShape() == space && isa<FloatType>(type.getElementType());
  });
}

using Members = llvm::SmallPtrSet<Operation *, 16>;

bool defines(const Members &m, Value v) { return m.contains(v.getDefiningOp()); }

/// The members in block order.
SmallVector<Operation *> ordered(const Members &members) {
  SmallVector<Operation *> list(members.begin(), members.end());
  llvm::sort(list, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return list;
}

/// May the group become one fusion at its last op? Every use outside it of a member's
/// result comes after that op, and the kernel's pointers stay within kMaxFusionValues.
bool placeable(const Members &members) {
  Operation *last = ordered(members).back();
  llvm::SmallPtrSet<Value, 16> inputs;
  size_t results = 0;
  for (Operation *op : members) {
    for (Value v : op->getOperands())
      if (!defines(members, v))
        inputs.insert(v);
    for (Value r : op->getResults()) {
      bool escapes = false;
      for (Operation *u : r.getUsers())
        if (!members.contains(u)) {
          if (!last->isBeforeInBlock(u))
            return false;
          escapes = true;
        }
      results += escapes;
    }
  }
  return inputs.size() + results <= kMaxFusionValues;
}

/// Drops members that neither read the anchor's values (directly or through members) nor
/// feed a member: generators left behind when the op they fed was dropped.
void dropStrays(Members &members, Operation *anchor) {
  for (bool changed = true; changed;) {
    changed = false;
    llvm::SmallPtrSet<Operation *, 16> reached{anchor};
    for (Operation *op : ordered(members))
      if (llvm::any_of(op->getOperands(),
                       [&](Value v) { return reached.contains(v.getDefiningOp()); }))
        reached.insert(op);
    for (Operation *op : ordered(members)) {
      if (reached.contains(op) ||
          llvm::any_of(op->getUsers(), [&](Operation *u) { return members.contains(u); }))
        continue;
      members.erase(op);
      changed = true;
    }
  }
}

/// The group `members` as one `resample` fusion at its last op, if the template takes it;
/// the ops it replaces are added to `erased`. The fusion computes in f32 where the anchor
/// does (augmentation under mixed precision); what a closing op of the other kind yields
/// is stored as that op would store it (med-assign-storage).
bool outline(const Members &members, Members &erased) {
  SmallVector<Operation *> ops = ordered(members);
  Operation *root = ops.back();
  OpBuilder b(root);
  FusionOp fusion = formFusion(b, root->getLoc(), "resample", ops, ops, members);
  if (!fusion)
    return false;
  if (isMasterWeightMath(ops.front()))
    fusion->setAttr("med.fp32", b.getUnitAttr());
  for (Operation *op : llvm::reverse(ops)) {
    erased.insert(op);
    op->erase();
  }
  return true;
}

/// Forms the fusion anchored at `anchor` (a gather op producing a 5-D volume).
void formAt(Operation *anchor, Members &erased) {
  Value volume = anchor->getResult(0);
  ArrayRef<int64_t> space = cast<RankedTensorType>(volume.getType()).getShape();
  // The labels' one reader, of stencil access (the affinities).
  if (volume.hasOneUse()) {
    Operation *reader = *volume.getUsers().begin();
    if (fusionKind(reader) == FusionKind::Stencil) {
      Members pair{anchor, reader};
      if (placeable(pair) && outline(pair, erased))
        return;
    }
  }
  // The epilogue: ops reading the group's values join it, taking in the per-voxel ops of
  // inputs only (pending) that they read.
  Members members{anchor}, pending;
  for (Operation *op = anchor->getBlock()->empty() ? nullptr : &anchor->getBlock()->front();
       op; op = op->getNextNode()) {
    if (op == anchor || !perVoxel(op, space, anchor))
      continue;
    if (!anchor->isBeforeInBlock(op) ||
        !llvm::any_of(op->getOperands(), [&](Value v) { return defines(members, v); })) {
      pending.insert(op);
      continue;
    }
    SmallVector<Operation *> work{op};
    while (!work.empty()) {
      Operation *m = work.pop_back_val();
      if (!members.insert(m).second)
        continue;
      pending.erase(m);
      for (Value v : m->getOperands())
        if (pending.contains(v.getDefiningOp()))
          work.push_back(v.getDefiningOp());
    }
  }
  while (members.size() > 1 && !placeable(members)) {
    members.erase(ordered(members).back());
    dropStrays(members, anchor);
  }
  // The crop of the one value leaving the group: the kernel then samples the box alone.
  SmallVector<Value> leaving;
  for (Operation *op : members)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !members.contains(u); }))
        leaving.push_back(r);
  if (leaving.size() == 1 && leaving[0].hasOneUse()) {
    Operation *crop = *leaving[0].getUsers().begin();
    Members withCrop = members;
    withCrop.insert(crop);
    if (fusionKind(crop) == FusionKind::Gather && placeable(withCrop) &&
        outline(withCrop, erased))
      return;
  }
  if (members.size() > 1)
    outline(members, erased);
}

struct MedFormResampleFusions
    : med::impl::MedFormResampleFusionsBase<MedFormResampleFusions> {
  void runOnOperation() override {
    SmallVector<Operation *> anchors;
    for (Block &block : getOperation().getBody())
      for (Operation &op : block)
        if (fusionKind(&op) == FusionKind::Gather && op.getNumResults() == 1)
          if (auto t = dyn_cast<RankedTensorType>(op.getResult(0).getType());
              t && t.getRank() == 5 && t.hasStaticShape())
            anchors.push_back(&op);
    // A fusion formed at one anchor may have taken a later one in (a crop).
    Members erased;
    for (Operation *anchor : anchors)
      if (!erased.contains(anchor))
        formAt(anchor, erased);
  }
};

} // namespace
