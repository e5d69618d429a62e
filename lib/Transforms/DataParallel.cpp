//===- DataParallel.cpp - gradient buckets summed over the ranks of a job ----------===//
//
// Splits each flat gradient buffer (a med.pack) into buckets, reduces each with a
// med.all_reduce right after its last producer, and folds the averaging into the optimizer's
// scale through the input `inv_world_size`. See Passes.td for the rules.
//
//===----------------------------------------------------------------------------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDDATAPARALLEL
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

constexpr StringLiteral kScaleInput = "inv_world_size";

/// A contiguous run of a pack's members, [first, last] in layout order.
struct Bucket {
  unsigned first, last;
  Operation *after; ///< the last producer of a member (null: all are block arguments)
};

struct MedDataParallel : med::impl::MedDataParallelBase<MedDataParallel> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    Block &block = fn.getBody().front();
    SmallVector<PackOp> packs;
    bool assigns = false;
    auto module = fn->getParentOfType<ModuleOp>();
    for (Operation &op : block) {
      if (auto pack = dyn_cast<PackOp>(op))
        packs.push_back(pack);
      if (auto assign = dyn_cast<AssignOp>(op)) {
        // State each rank keeps from its own batch (BatchNorm's running statistics, as
        // PyTorch's BatchNorm3d without SyncBatchNorm): no gradient in it to reduce.
        if (assign->hasAttr("med.per_rank"))
          continue;
        assigns = true;
        if (!module.lookupSymbol<FlatBufferOp>(assign.getName())) {
          assign.emitOpError("assigns '")
              << assign.getName()
              << "' outside a flat buffer: med-data-parallel reduces only the gradients of "
                 "the flat gradient buffer (run med-flatten-optimizer first; a tensor that "
                 "updates unlike all others is not flattened)";
          return signalPassFailure();
        }
      }
    }
    if (!assigns)
      return; // not a training step
    if (packs.empty()) {
      fn.emitOpError("assigns state but has no flat gradient buffer (med.pack) to reduce; "
                     "run med-flatten-optimizer first");
      return signalPassFailure();
    }
    if (!(bucketMb > 0)) {
      fn.emitOpError("bucket-mb must be positive, got ") << bucketMb;
      return signalPassFailure();
    }
    if (llvm::any_of(fn.getArguments(), [&](BlockArgument a) { return name(fn, a) == kScaleInput; })) {
      fn.emitOpError("already has an input '") << kScaleInput << "' (med-data-parallel ran twice?)";
      return signalPassFailure();
    }

    // 1-2. Buckets of each pack and their all-reduces.
    SmallVector<AllReduceOp> reduces;
    for (PackOp pack : packs)
      for (const Bucket &b : buckets(pack))
        reduces.push_back(reduce(block, pack, b));
    llvm::sort(reduces, [](AllReduceOp a, AllReduceOp b) { return a->isBeforeInBlock(b); });
    OpBuilder b(fn.getContext());
    for (auto [k, r] : llvm::enumerate(reduces)) // numbered in program order
      r.setBucket(k);

    // 3. Averaging: the input `inv_world_size`, folded into the optimizer's scale.
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    const unsigned n = fn.getNumArguments();
    fn.insertArgument(n, scalar, {}, fn.getLoc());
    SmallVector<Attribute> names;
    if (auto old = fn->getAttrOfType<ArrayAttr>("med.input_names"))
      names.assign(old.begin(), old.end());
    while (names.size() < n)
      names.push_back(b.getStringAttr("arg" + std::to_string(names.size())));
    names.push_back(b.getStringAttr(kScaleInput));
    fn->setAttr("med.input_names", b.getArrayAttr(names));
    Value inverse = fn.getArgument(n);
    auto fp32 = [&](Operation *op) {
      op->setAttr("med.fp32", b.getUnitAttr());
      return op->getResult(0);
    };
    llvm::SetVector<Operation *> users;
    for (PackOp pack : packs)
      for (Operation *user : pack->getUsers())
        users.insert(user);
    for (Operation *user : users) {
      if (isa<AnyNonFiniteOp>(user))
        continue; // finiteness does not depend on a positive scale
      if (auto norm = dyn_cast<SumSquaresOp>(user)) {
        b.setInsertionPointAfter(norm);
        Value square = fp32(b.create<MulOp>(norm.getLoc(), inverse, inverse));
        Value scaled = fp32(b.create<MulOp>(norm.getLoc(), norm.getResult(), square));
        norm.getResult().replaceAllUsesExcept(scaled, scaled.getDefiningOp());
        continue;
      }
      b.setInsertionPoint(user);
      for (OpOperand &use : user->getOpOperands())
        if (auto pack = use.get().getDefiningOp<PackOp>(); pack && llvm::is_contained(packs, pack))
          use.set(fp32(b.create<MulOp>(user->getLoc(), use.get(), inverse)));
    }
  }

  static StringRef name(func::FuncOp fn, BlockArgument a) {
    auto names = fn->getAttrOfType<ArrayAttr>("med.input_names");
    if (!names || a.getArgNumber() >= names.size())
      return "";
    auto s = dyn_cast<StringAttr>(names[a.getArgNumber()]);
    return s ? s.getValue() : "";
  }

  /// The buckets of `pack`: walking its members from the one produced first, each bucket
  /// takes members while its slice stays within bucket-mb.
  SmallVector<Bucket> buckets(PackOp pack) {
    ArrayRef<int64_t> offsets = pack.getOffsets();
    const unsigned count = pack.getInputs().size();
    auto end = [&](unsigned i) {
      return offsets[i] + cast<RankedTensorType>(pack.getInputs()[i].getType()).getNumElements();
    };
    auto producer = [&](unsigned i) { return pack.getInputs()[i].getDefiningOp(); };
    auto later = [](Operation *a, Operation *c) {
      return !a ? c : !c ? a : a->isBeforeInBlock(c) ? c : a;
    };
    // Backward produces the last layers' gradients first: then walk from the end.
    Operation *head = producer(0), *tail = producer(count - 1);
    const bool reverse = tail && (!head || tail->isBeforeInBlock(head));
    const double limit = bucketMb * 1024 * 1024 / 4; // elements
    SmallVector<Bucket> out;
    for (unsigned k = 0; k < count; ++k) {
      unsigned i = reverse ? count - 1 - k : k;
      if (!out.empty()) {
        Bucket &last = out.back();
        unsigned lo = std::min(last.first, i), hi = std::max(last.last, i);
        if (static_cast<double>(end(hi) - offsets[lo]) <= limit) {
          last.first = lo;
          last.last = hi;
          last.after = later(last.after, producer(i));
          continue;
        }
      }
      out.push_back({i, i, producer(i)});
    }
    return out;
  }

  /// The all-reduce of bucket `b` of `pack`, right after its last producer; the pack reads
  /// its results.
  AllReduceOp reduce(Block &block, PackOp pack, const Bucket &b) {
    OpBuilder builder(pack.getContext());
    // After the producer and the buckets already placed there, in formation order.
    Operation *at = b.after;
    for (Operation *next = at ? at->getNextNode() : &block.front(); next && isa<AllReduceOp>(next);
         next = next->getNextNode())
      at = next;
    if (at)
      builder.setInsertionPointAfter(at);
    else
      builder.setInsertionPointToStart(&block);
    ArrayRef<int64_t> offsets = pack.getOffsets();
    SmallVector<Value> inputs;
    SmallVector<int64_t> relative;
    for (unsigned i = b.first; i <= b.last; ++i) {
      inputs.push_back(pack.getInputs()[i]);
      relative.push_back(offsets[i] - offsets[b.first]);
    }
    const int64_t size = offsets[b.last] +
                         cast<RankedTensorType>(inputs.back().getType()).getNumElements() -
                         offsets[b.first];
    auto op = builder.create<AllReduceOp>(pack.getLoc(), ValueRange(inputs).getTypes(), inputs,
                                          /*bucket=*/0, relative, size);
    for (unsigned i = b.first; i <= b.last; ++i)
      pack->setOperand(i, op.getResult(i - b.first));
    return op;
  }
};

} // namespace
