//===- MemoryPlan.cpp - the arena: placement by liveness ---------------------------===//
#include "med/Analysis/MemoryPlan.h"

#include "med/IR/MedOps.h"

#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

namespace mlir::med {

using medrun::BufferLife;

ArenaPlan planArena(const std::vector<BufferLife> &input, size_t alignment) {
  ArenaPlan plan;
  const size_t n = input.size();
  plan.offset.assign(n, -1);
  std::vector<BufferLife> life = input;
  auto rounded = [&](size_t b) { return (b + alignment - 1) / alignment * alignment; };
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (life[i].bytes == 0)
      continue;
    if (life[i].first > life[i].last) // never touched: keep it for the whole run
      life[i] = {life[i].bytes, BufferLife::kBeforeSteps, BufferLife::kAfterSteps};
    plan.naiveBytes += rounded(life[i].bytes);
    order.push_back(i);
  }
  // Largest first (then earliest): big buffers decide the arena's size; small ones fill gaps.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return life[a].bytes != life[b].bytes ? life[a].bytes > life[b].bytes
                                          : life[a].first < life[b].first;
  });
  // Placed buffers as [offset, end) in ascending order: the first gap that fits among those
  // live together with a buffer is found by one scan that stops there.
  struct Range {
    size_t begin, end, index;
  };
  std::vector<Range> placed;
  for (size_t i : order) {
    const size_t need = rounded(life[i].bytes);
    size_t at = 0;
    for (const Range &r : placed) {
      if (!life[r.index].overlaps(life[i]))
        continue;
      if (r.begin >= at + need)
        break; // the gap before this busy range fits
      at = std::max(at, r.end);
    }
    plan.offset[i] = static_cast<int64_t>(at);
    plan.bytes = std::max(plan.bytes, at + need);
    const Range range{at, at + need, i};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), range,
                                   [](const Range &a, const Range &b) {
                                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                                   }),
                  range);
  }
  return plan;
}

int64_t storedBytes(Value v) {
  auto type = cast<ShapedType>(v.getType());
  Type element = type.getElementType();
  ArrayAttr decided;
  unsigned n = 0;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      decided = f->getAttrOfType<ArrayAttr>("med.arg_storage");
    n = arg.getArgNumber();
  } else {
    decided = v.getDefiningOp()->getAttrOfType<ArrayAttr>("med.storage");
    n = cast<OpResult>(v).getResultNumber();
  }
  if (decided && n < decided.size())
    if (auto t = dyn_cast<TypeAttr>(decided[n]))
      element = t.getValue();
  return type.getNumElements() * static_cast<int64_t>((element.getIntOrFloatBitWidth() + 7) / 8);
}

FailureOr<FunctionMemoryPlan> planFunctionMemory(func::FuncOp f) {
  if (!f.getBody().hasOneBlock())
    return f.emitError("memory plan: needs a function with a single block");
  FunctionMemoryPlan plan;
  Block &body = f.getBody().front();
  llvm::DenseMap<Value, size_t> index; // value -> its buffer
  llvm::DenseMap<Value, Value> root;   // a view -> the value whose buffer it shares
  auto rootOf = [&](Value v) {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  };
  auto define = [&](Value v, int step) -> LogicalResult {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape())
      return emitError(v.getLoc(), "memory plan: needs static shapes; got ")
             << v.getType() << " (specialize the batch and patch size first)";
    index[v] = plan.values.size();
    plan.values.push_back(v);
    BufferLife life;
    life.bytes = static_cast<size_t>(storedBytes(v));
    life.touch(step);
    plan.lives.push_back(life);
    return success();
  };
  for (BlockArgument arg : f.getArguments())
    if (failed(define(arg, BufferLife::kBeforeSteps)))
      return failure();

  // Parameters by name, and the ops that read them: an update may be written in place.
  llvm::DenseSet<StringAttr> state;
  llvm::DenseMap<StringAttr, SmallVector<ParamOp>> reads;
  llvm::DenseMap<Operation *, int> step;
  int t = 0;
  for (Operation &op : body)
    step[&op] = t++;
  for (Operation &op : body)
    if (auto p = dyn_cast<ParamOp>(&op))
      reads[p.getNameAttr().getAttr()].push_back(p);
  auto inPlace = [&](AssignOp a) {
    Value v = a.getValue();
    auto fusion = dyn_cast_or_null<FusionOp>(v.getDefiningOp());
    auto type = cast<ShapedType>(v.getType());
    if (!fusion || !v.hasOneUse() || !type.getElementType().isF32() || storedBytes(v) !=
        type.getNumElements() * 4)
      return false;
    bool readsIt = false, readAfter = false;
    for (ParamOp p : reads.lookup(a.getNameAttr().getAttr())) {
      readsIt = readsIt || (llvm::is_contained(fusion->getOperands(), p.getResult()) &&
                            p.getType() == v.getType());
      for (Operation *user : p->getUsers())
        readAfter = readAfter || step.lookup(user) > step.lookup(fusion);
    }
    return readsIt && !readAfter;
  };

  for (Operation &op : body) {
    const int at = step[&op];
    if (auto p = dyn_cast<ParamOp>(&op)) {
      auto type = cast<ShapedType>(p.getType());
      const int64_t declared = type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
      if (state.insert(p.getNameAttr().getAttr()).second)
        plan.residentBytes += declared;
      if (failed(define(p.getResult(), BufferLife::kBeforeSteps)))
        return failure();
      if (storedBytes(p.getResult()) == declared)
        plan.lives.back().bytes = 0; // the resident tensor itself; else a converted copy
      continue;
    }
    if (auto view = dyn_cast<ViewLikeOpInterface>(&op)) {
      root[view->getResult(0)] = rootOf(view.getViewSource());
      continue;
    }
    for (Value operand : op.getOperands()) {
      auto it = index.find(rootOf(operand));
      if (it != index.end())
        plan.lives[it->second].touch(at);
    }
    if (auto a = dyn_cast<AssignOp>(&op)) {
      size_t i = index.lookup(rootOf(a.getValue()));
      if (inPlace(a) && rootOf(a.getValue()) == a.getValue())
        plan.lives[i].bytes = 0; // its producer writes the resident tensor itself
      else
        plan.lives[i].touch(BufferLife::kAfterSteps); // downloaded or committed
      continue;
    }
    if (isa<func::ReturnOp>(&op)) {
      for (Value v : op.getOperands())
        if (auto it = index.find(rootOf(v)); it != index.end())
          plan.lives[it->second].touch(BufferLife::kAfterSteps);
      continue;
    }
    for (Value r : op.getResults())
      if (failed(define(r, at)))
        return failure();
  }
  plan.arena = planArena(plan.lives);
  return plan;
}

} // namespace mlir::med
