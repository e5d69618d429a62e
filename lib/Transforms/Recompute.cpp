//===- Recompute.cpp - saved values recomputed until the memory plan fits a budget ---===//
#include "Fusions.h"
#include "med/Analysis/MemoryPlan.h"
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDRECOMPUTE
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;
using medrun::BufferLife;

namespace {

/// Elements computed per element of the result when `op` runs again, or 0 when it cannot
/// be recomputed cheaply: it must be free of side effects and elementwise (or broadcasting)
/// by FusionOpInterface or PerElement, or an elementwise fusion (its body's ops per element).
double recomputeCost(Operation *op) {
  if (op->getNumResults() == 0 || !isMemoryEffectFree(op))
    return 0;
  if (auto fusion = dyn_cast<FusionOp>(op)) {
    if (fusion.getTemplateName() != "elementwise")
      return 0;
    double ops = 0;
    fusion.getBody().walk([&](Operation *inner) { ops += inner->getNumResults() ? 1 : 0; });
    return std::max(ops, 1.0);
  }
  FusionKind kind = fusionKind(op);
  return kind == FusionKind::Elementwise || kind == FusionKind::Broadcast ||
                 op->hasTrait<PerElement>()
             ? 1
             : 0;
}

int64_t planned(const FunctionMemoryPlan &p) {
  return static_cast<int64_t>(p.arena.bytes) + p.residentBytes;
}

/// Bytes live at each step -1 (the upload) .. `steps`, at index step + 1.
std::vector<int64_t> liveBytes(const FunctionMemoryPlan &p, int steps) {
  std::vector<int64_t> delta(steps + 3, 0);
  auto at = [&](int s) { return std::clamp(s, -1, steps) + 1; };
  for (const BufferLife &l : p.lives)
    if (l.bytes && l.first <= l.last) {
      delta[at(l.first)] += static_cast<int64_t>(l.bytes);
      delta[at(l.last) + 1] -= static_cast<int64_t>(l.bytes);
    }
  std::vector<int64_t> live(steps + 2, 0);
  int64_t sum = 0;
  for (int i = 0; i < steps + 2; ++i)
    live[i] = sum += delta[i];
  return live;
}

/// The step at which the most bytes are live (the lower bound the arena approaches).
int peakStep(const FunctionMemoryPlan &p, int steps) {
  std::vector<int64_t> live = liveBytes(p, steps);
  return static_cast<int>(std::max_element(live.begin(), live.end()) - live.begin()) - 1;
}

/// An elementwise op or `elementwise` fusion (what an elementwise kernel runs).
bool isElementwiseKernel(Operation *op) {
  if (auto fusion = dyn_cast<FusionOp>(op))
    return fusion.getTemplateName() == "elementwise";
  return fusionKind(op) == FusionKind::Elementwise && isMemoryEffectFree(op) &&
         op->getNumResults() > 0;
}

/// One `elementwise` fusion at `first` computing what `first` and `second` (elementwise
/// kernels of one shape, `second` later and reading only values that exist at `first`)
/// compute: their results in that order, their storage decisions kept.
FusionOp mergeElementwise(Operation *first, Operation *second) {
  llvm::SetVector<Value> inputs;
  for (Operation *op : {first, second})
    inputs.insert(op->getOperands().begin(), op->getOperands().end());
  SmallVector<Type> types(first->getResultTypes());
  types.append(second->getResultTypes().begin(), second->getResultTypes().end());
  OpBuilder b(first);
  auto merged = b.create<FusionOp>(first->getLoc(), "elementwise", types, inputs.getArrayRef());
  Block &body = merged.getBody().front();
  IRMapping outer; // the merged fusion's block arguments for the outside values
  outer.map(inputs.getArrayRef(), body.getArguments());
  SmallVector<Value> yielded;
  b.setInsertionPointToStart(&body);
  for (Operation *op : {first, second}) {
    if (auto fusion = dyn_cast<FusionOp>(op)) {
      IRMapping map;
      Block &inner = fusion.getBody().front();
      for (BlockArgument a : inner.getArguments())
        map.map(a, outer.lookup(fusion->getOperand(a.getArgNumber())));
      for (Operation &o : inner.without_terminator())
        b.clone(o, map);
      for (Value y : inner.getTerminator()->getOperands())
        yielded.push_back(map.lookup(y));
    } else {
      Operation *c = b.clone(*op, outer);
      c->removeAttr("med.storage");
      yielded.append(c->getResults().begin(), c->getResults().end());
    }
  }
  b.create<YieldOp>(first->getLoc(), yielded);
  SmallVector<Attribute> storage;
  for (Operation *op : {first, second})
    if (auto s = op->getAttrOfType<ArrayAttr>("med.storage"))
      storage.append(s.begin(), s.end());
  if (storage.size() == types.size())
    merged->setAttr("med.storage", b.getArrayAttr(storage));
  unsigned i = 0;
  for (Operation *op : {first, second})
    for (Value r : op->getResults())
      r.replaceAllUsesWith(merged->getResult(i++));
  second->erase();
  first->erase();
  return merged;
}

struct Candidate {
  Operation *op;
  Value value;
  Operation *late; ///< the first reader after the peak; the copy goes before it
  double score;    ///< bytes freed per element recomputed
};

/// Is `v` at hand at step `at` without living longer: a parameter or constant (resident),
/// or a value something reads at or after `at`.
bool availableAt(Value v, int at, const llvm::DenseMap<Operation *, int> &step, Block &body) {
  if (isa_and_nonnull<ParamOp, ConstantOp>(v.getDefiningOp()))
    return true;
  return llvm::any_of(v.getUsers(), [&](Operation *user) {
    Operation *top = body.findAncestorOpInBlock(*user);
    return top && step.count(top) && step.lookup(top) >= at;
  });
}

/// Result `k` of `op` computed again at `b`'s insertion point, or null. `available` gives
/// the value to read in place of an input there (itself or its copy), or null when there is
/// none. An elementwise fusion's result is recomputed from the slice of its
/// body that yields it, cut at the fusion's inputs and at its other results (an activation
/// from the saved pre-activation beside it); another op cheap to run again
/// (recomputeCost) is copied whole when it has one result. The copy's storage is the
/// original's.
Operation *freeCopy(OpBuilder &b, Operation *op, unsigned k,
                    llvm::function_ref<Value(Value)> available) {
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion) {
    if (op->getNumResults() != 1 || !recomputeCost(op))
      return nullptr;
    SmallVector<Value> operands;
    for (Value w : op->getOperands())
      if (Value at = available(w))
        operands.push_back(at);
      else
        return nullptr;
    Operation *copy = b.clone(*op);
    copy->setOperands(operands);
    return copy;
  }
  // Templates whose kernels are one pass over their elements (a depthwise stencil reads a
  // few neighbours more): cheap enough to run again when it costs no memory.
  const StringRef templ = fusion.getTemplateName();
  if (templ != "elementwise" && templ != "stencil")
    return nullptr;
  Block &body = fusion.getBody().front();
  Operation *yield = body.getTerminator();
  llvm::DenseMap<Value, Value> cut; // body value -> the outside value that holds it
  for (BlockArgument a : body.getArguments())
    cut[a] = fusion->getOperand(a.getArgNumber());
  for (auto [j, y] : llvm::enumerate(yield->getOperands()))
    if (j != k)
      cut.try_emplace(y, fusion->getResult(j));
  Value target = yield->getOperand(k);
  if (cut.count(target))
    return nullptr;
  llvm::SetVector<Operation *> slice;
  llvm::SetVector<Value> inputs;
  SmallVector<Operation *> work{target.getDefiningOp()};
  while (!work.empty()) {
    Operation *inner = work.pop_back_val();
    if (!slice.insert(inner))
      continue;
    for (Value u : inner->getOperands())
      if (auto it = cut.find(u); it != cut.end())
        inputs.insert(u);
      else
        work.push_back(u.getDefiningOp());
  }
  SmallVector<Value> outer;
  for (Value u : inputs)
    if (Value at = available(cut.lookup(u)))
      outer.push_back(at);
    else
      return nullptr;
  auto copy = b.create<FusionOp>(op->getLoc(), templ, TypeRange{target.getType()}, outer);
  {
    IRMapping map;
    map.map(inputs.getArrayRef(), copy.getBody().front().getArguments());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&copy.getBody().front());
    for (Operation &inner : body.without_terminator()) // body order
      if (slice.contains(&inner))
        b.clone(inner, map);
    b.create<YieldOp>(op->getLoc(), ValueRange{map.lookup(target)});
  }
  if (failed(matchRoles(copy))) {
    copy->erase();
    return nullptr;
  }
  if (auto storage = op->getAttrOfType<ArrayAttr>("med.storage"))
    copy->setAttr("med.storage", b.getArrayAttr({storage[k]}));
  if (op->hasAttr("med.fp32"))
    copy->setAttr("med.fp32", b.getUnitAttr());
  return copy;
}

struct MedRecompute : med::impl::MedRecomputeBase<MedRecompute> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(recomputeFree()))
      return signalPassFailure();
    if (budgetGib <= 0) {
      if (failed(mergeFreeCopies()))
        return signalPassFailure();
      return;
    }
    func::FuncOp f = getOperation();
    const int64_t budget = static_cast<int64_t>(budgetGib * double(int64_t(1) << 30));
    FailureOr<FunctionMemoryPlan> plan = planFunctionMemory(f);
    if (failed(plan))
      return signalPassFailure();
    if (planned(*plan) <= budget) {
      if (failed(mergeFreeCopies()))
        return signalPassFailure();
      return;
    }
    // The copies that cost no memory come out of the block MLPs' backward (the templates'
    // matchers want the originals): they are made again once the budget's work is done.
    undoFree();
    plan = planFunctionMemory(f);
    if (failed(plan))
      return signalPassFailure();
    llvm::DenseSet<Operation *> tried; // candidates that did not lower the peak
    while (planned(*plan) > budget) {
      Block &body = f.getBody().front();
      llvm::DenseMap<Operation *, int> step;
      int n = 0;
      for (Operation &op : body)
        step[&op] = n++;
      const int peak = peakStep(*plan, n);
      // Values live across the peak, read before it (or defined) and again after it.
      std::vector<Candidate> candidates;
      for (Operation &op : body) {
        const double cost = recomputeCost(&op);
        if (!cost || step[&op] >= peak || tried.contains(&op))
          continue;
        for (Value v : op.getResults()) {
          Operation *late = nullptr;
          for (Operation *user : v.getUsers()) {
            Operation *top = body.findAncestorOpInBlock(*user);
            if (top && step[top] > peak && !isa<func::ReturnOp, AssignOp>(top) &&
                (!late || step[top] < step[late]))
              late = top;
          }
          if (!late)
            continue;
          const double elements = cast<ShapedType>(v.getType()).getNumElements();
          candidates.push_back({&op, v, late, double(storedBytes(v)) / (cost * elements)});
        }
      }
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const Candidate &a, const Candidate &b) { return a.score > b.score; });
      bool lowered = false;
      for (const Candidate &c : candidates) {
        Operation *copy = recompute(c, step);
        copies[c.op].push_back(copy);
        FailureOr<FunctionMemoryPlan> next = planFunctionMemory(f);
        if (failed(next))
          return signalPassFailure();
        if (planned(*next) < planned(*plan)) {
          plan = std::move(next);
          lowered = true;
          break;
        }
        undo(c, copy); // it did not help: the original reads again
        copies[c.op].pop_back();
        tried.insert(c.op);
      }
      if (!lowered && !recomputeBlockMlp())
        break;
      if (!lowered) { // (candidates tried before stay tried: retrying each costs a plan)
        plan = planFunctionMemory(f);
        if (failed(plan))
          return signalPassFailure();
      }
    }
    if (failed(recomputeFree()) || failed(mergeFreeCopies()))
      return signalPassFailure();
    plan = planFunctionMemory(f);
    if (failed(plan))
      return signalPassFailure();
    if (planned(*plan) > budget && !soft) {
      std::string gib;
      llvm::raw_string_ostream(gib) << llvm::format("%g", static_cast<double>(budgetGib));
      f.emitError(llvm::formatv("memory budget of {0} GiB ({1} bytes) cannot be met: the best "
                                "planned peak med-recompute reaches is {2} bytes ({3:F2} GiB: "
                                "arena {4}, resident state {5})",
                                gib, budget, planned(*plan),
                                planned(*plan) / double(int64_t(1) << 30), plan->arena.bytes,
                                plan->residentBytes)
                      .str());
      return signalPassFailure();
    }
  }

  /// The most expensive candidates: a block MLP whose expansion and activation the `mlp`
  /// and `mlp_grad` templates recompute (med-form-mlp-fusions for one block), the block
  /// freeing the most bytes per multiply-add first. Copies of its activation made here
  /// are undone first (the templates recompute it). Storage is decided again for the new
  /// fusions. False when no block is left.
  bool recomputeBlockMlp() {
    func::FuncOp f = getOperation();
    SmallVector<Operation *> blocks = blockMlps(f);
    auto score = [](Operation *compress) {
      Value g = compress->getOperand(0), h = g.getDefiningOp()->getOperand(0);
      Value x = h.getDefiningOp()->getOperand(0);
      const double macs = double(cast<ShapedType>(h.getType()).getNumElements()) *
                          double(cast<ShapedType>(x.getType()).getDimSize(1));
      return double(storedBytes(h) + storedBytes(g)) / macs;
    };
    std::stable_sort(blocks.begin(), blocks.end(),
                     [&](Operation *a, Operation *b) { return score(a) > score(b); });
    for (Operation *compress : blocks) {
      if (failedBlocks.contains(compress))
        continue;
      Operation *act = compress->getOperand(0).getDefiningOp();
      for (Operation *copy : copies.lookup(act))
        undo(Candidate{act, {}, nullptr, 0}, copy);
      copies.erase(act);
      // The template's weight gradient reads the expansion's own input: copies of it go too.
      Operation *input = act->getOperand(0).getDefiningOp()->getOperand(0).getDefiningOp();
      for (Operation *copy : copies.lookup(input))
        undo(Candidate{input, {}, nullptr, 0}, copy);
      copies.erase(input);
      llvm::DenseSet<Operation *> erased;
      const bool formed = formBlockMlp(compress, erased);
      if (!erased.empty()) { // new fusions (an mlp_grad alone where the mlp failed, too)
        OpPassManager storage(func::FuncOp::getOperationName());
        storage.addPass(createMedAssignStorage());
        if (failed(runPipeline(storage, f)))
          return false;
      }
      if (formed)
        return true;
      failedBlocks.insert(compress);
    }
    return false;
  }

  /// Without a budget: values live across the peak that can be computed again from values
  /// live across it anyway (freeCopy) are, before their first reader after the peak; that
  /// peak then holds fewer bytes and no other step more. Repeated at each new peak while
  /// the planned bytes fall; a round that does not lower them is undone.
  LogicalResult recomputeFree() {
    func::FuncOp f = getOperation();
    FailureOr<FunctionMemoryPlan> plan = planFunctionMemory(f);
    if (failed(plan))
      return failure();
    if (budgetGib <= 0 && planned(*plan) <= int64_t(aboveGib * double(int64_t(1) << 30)))
      return success(); // small enough: every saved value kept, no time spent
    Block &body = f.getBody().front();
    for (int round = 0; round < kMaxFreeRounds; ++round) {
      llvm::DenseMap<Operation *, int> step;
      int n = 0;
      for (Operation &op : body)
        step[&op] = n++;
      const int peak = peakStep(*plan, n);
      SmallVector<std::pair<Operation *, Value>> made; // copy, the value it stands for
      llvm::DenseMap<Value, Operation *> moved; // values redirected to their copy
      llvm::DenseSet<Value> read;               // values a copy reads
      for (Operation &op : llvm::make_early_inc_range(body)) {
        if (!step.count(&op) || step[&op] >= peak || isa<ParamOp, ConstantOp>(op))
          continue;
        for (OpResult v : op.getResults()) {
          Operation *late = nullptr;
          for (Operation *user : v.getUsers()) {
            Operation *top = body.findAncestorOpInBlock(*user);
            if (top && step.count(top) && step[top] > peak &&
                !isa<func::ReturnOp, AssignOp>(top) && (!late || step[top] < step[late]))
              late = top;
          }
          if (!late || read.contains(v))
            continue;
          OpBuilder b(late);
          // An input recomputed this round is read from its copy, moved up when it stands
          // later (its inputs are read after its own place, so they are live here too).
          Operation *copy = freeCopy(b, &op, v.getResultNumber(), [&](Value w) -> Value {
            if (Operation *c = moved.lookup(w)) {
              if (!hoistBefore(c, late, llvm::SmallPtrSet<Operation *, 1>{}))
                return Value();
              return c->getResult(0);
            }
            return availableAt(w, step[late], step, body) ? w : Value();
          });
          if (!copy)
            continue;
          const int from = step[late];
          v.replaceUsesWithIf(copy->getResult(0), [&](OpOperand &use) {
            Operation *top = body.findAncestorOpInBlock(*use.getOwner());
            return top && top != copy && step.count(top) && step.lookup(top) >= from;
          });
          made.push_back({copy, v});
          moved[v] = copy;
          freeCopies.push_back({copy, v});
          for (Value w : copy->getOperands())
            read.insert(w);
        }
      }
      if (made.empty())
        return success();
      FailureOr<FunctionMemoryPlan> next = planFunctionMemory(f);
      if (failed(next))
        return failure();
      if (planned(*next) >= planned(*plan)) {
        for (auto [copy, v] : llvm::reverse(made)) {
          freeCopies.pop_back(); // this round's are last
          copy->getResult(0).replaceAllUsesWith(v);
          copy->erase();
        }
        return success();
      }
      plan = std::move(next);
    }
    return success();
  }
  static constexpr int kMaxFreeRounds = 64;

  /// Each copy recomputeFree made that is an elementwise kernel runs in one kernel with a
  /// later elementwise kernel of its shape reading one of its inputs (GELU's output computed
  /// where its gradient reads the same pre-activation: that input is read once), when the
  /// later one can stand where the copy stands and no step's live bytes then exceed the
  /// peak's (its results live from the copy's place on).
  LogicalResult mergeFreeCopies() {
    if (!mergeKernels)
      return success();
    func::FuncOp f = getOperation();
    FailureOr<FunctionMemoryPlan> plan = planFunctionMemory(f);
    if (failed(plan))
      return failure();
    Block &body = f.getBody().front();
    llvm::DenseMap<Operation *, int> step;
    int n = 0;
    for (Operation &op : body)
      step[&op] = n++;
    std::vector<int64_t> live = liveBytes(*plan, n);
    const int64_t peak = *std::max_element(live.begin(), live.end());
    llvm::DenseSet<Operation *> copies;
    for (auto [copy, v] : freeCopies)
      copies.insert(copy);
    for (auto [copy, v] : freeCopies) {
      if (!isElementwiseKernel(copy))
        continue;
      auto shape = cast<ShapedType>(copy->getResult(0).getType()).getShape();
      Operation *sibling = nullptr;
      int seen = 0;
      for (Operation *op = copy->getNextNode(); op && seen < kSiblingWindow && !sibling;
           op = op->getNextNode(), ++seen) {
        if (copies.contains(op) || !isElementwiseKernel(op) ||
            op->hasAttr("med.fp32") != copy->hasAttr("med.fp32") ||
            cast<ShapedType>(op->getResult(0).getType()).getShape() != shape)
          continue;
        bool shares = false, movable = true;
        for (Value w : op->getOperands()) {
          shares |= llvm::is_contained(copy->getOperands(), w);
          Operation *def = w.getDefiningOp();
          movable &= !def || (def != copy && def->isBeforeInBlock(copy));
        }
        if (shares && movable)
          sibling = op;
      }
      if (!sibling)
        continue;
      int64_t bytes = 0;
      for (Value r : sibling->getResults())
        bytes += storedBytes(r);
      const int from = step[copy], to = step[sibling];
      bool fits = true;
      for (int s = from; s < to && fits; ++s)
        fits = live[s + 1] + bytes <= peak;
      if (!fits)
        continue;
      for (int s = from; s < to; ++s)
        live[s + 1] += bytes;
      FusionOp merged = mergeElementwise(copy, sibling);
      step[merged] = from;
    }
    freeCopies.clear(); // merged: no longer undone one by one
    return success();
  }
  static constexpr int kSiblingWindow = 8;

  llvm::DenseMap<Operation *, SmallVector<Operation *>> copies; ///< made by this pass
  /// Copies made by recomputeFree in order, each with the value it stands for.
  SmallVector<std::pair<Operation *, Value>> freeCopies;

  /// Every copy recomputeFree made reads the original again (latest first: a copy may read
  /// an earlier one).
  void undoFree() {
    for (auto [copy, v] : llvm::reverse(freeCopies)) {
      copy->getResult(0).replaceAllUsesWith(v);
      copy->erase();
    }
    freeCopies.clear();
  }
  llvm::DenseSet<Operation *> failedBlocks; ///< block MLPs the templates do not take

  /// A copy of the candidate's op before its first reader after the peak; every reader
  /// from there on reads the copy.
  Operation *recompute(const Candidate &c, const llvm::DenseMap<Operation *, int> &step) {
    OpBuilder b(c.late);
    Operation *copy = b.clone(*c.op);
    Block *block = c.late->getBlock();
    const int from = step.lookup(c.late);
    for (unsigned i = 0; i < c.op->getNumResults(); ++i)
      c.op->getResult(i).replaceUsesWithIf(copy->getResult(i), [&](OpOperand &use) {
        Operation *top = block->findAncestorOpInBlock(*use.getOwner());
        return top && top != copy && step.count(top) && step.lookup(top) >= from;
      });
    return copy;
  }

  void undo(const Candidate &c, Operation *copy) {
    copy->replaceAllUsesWith(c.op->getResults());
    copy->erase();
  }
};

} // namespace
