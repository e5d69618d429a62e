//===- ModelStats.cpp - parameter, FLOP and memory counts of a function --------===//
//
// Each op's arithmetic is its FLOP rule in the op table (med/OpTable.h, written in ODS):
// convolutions 2 per multiply-add, other ops an approximate count per element (normalizations
// 7: two sums, centre, scale, affine; elementwise ops 1; losses 8 per logit), data movement
// none. medrun counts an artifact's functions by the same rules (runtime/src/artifact/Flops.cpp).
//
//===----------------------------------------------------------------------------------===//

#include "med/Analysis/ModelStats.h"
#include "med/Analysis/MemoryPlan.h"
#include "med/IR/MedOps.h"
#include "med/OpTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::med;

namespace {

const char *const kFamilies[] = {"conv 1x1x1",    "conv depthwise", "conv dense",
                                 "conv transposed", "normalization",  "elementwise",
                                 "reduction",       "loss",           "data movement"};

int64_t numElements(Type t) { return cast<ShapedType>(t).getNumElements(); }

int64_t numBytes(Type t) {
  auto shaped = cast<ShapedType>(t);
  return shaped.getNumElements() * ((shaped.getElementTypeBitWidth() + 7) / 8);
}

bool isUnitKernel(RankedTensorType weight) {
  return llvm::all_of(weight.getShape().drop_front(2), [](int64_t k) { return k == 1; });
}

// Depthwise: one input and one output channel per group.
bool isDepthwise(int64_t cin, int64_t cout, int64_t groups) {
  return groups > 1 && groups == cin && groups == cout;
}

/// The op's arithmetic by its rule in the op table (medrun bench counts by the same rule).
::med::ops::OpFlops opFlops(Operation *op) {
  const ::med::ops::OpSchema *schema = ::med::ops::findOp(op->getName().stripDialect());
  if (!schema)
    return {};
  auto shapeOf = [](Value v) {
    ArrayRef<int64_t> s = cast<ShapedType>(v.getType()).getShape();
    return std::vector<int64_t>(s.begin(), s.end());
  };
  ::med::ops::OpShapes shapes;
  shapes.operand = [&](const char *name) {
    std::vector<std::vector<int64_t>> out;
    for (auto [i, spec] : llvm::enumerate(schema->operands)) {
      if (spec.name != std::string_view(name))
        continue;
      // The op's ODS operand group `i` (the table lists the groups in ODS order).
      OperandRange group = llvm::TypeSwitch<Operation *, OperandRange>(op)
                               .Case<
#include "med/OpClasses.inc"
                                   >([&](auto o) { return o.getODSOperands(i); })
                               .Default([](Operation *o) { return o->getOperands(); });
      for (Value v : group)
        out.push_back(shapeOf(v));
    }
    return out;
  };
  for (Value r : op->getResults())
    shapes.results.push_back(shapeOf(r));
  return ::med::ops::flopsOf(*schema, shapes);
}

} // namespace

double ModelStats::totalFlops() const {
  double total = 0;
  for (auto &entry : flopsByFamily)
    total += entry.second;
  return total;
}

StringRef mlir::med::opFamily(Operation *op) {
  return llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case<Conv3dOp>([](Conv3dOp conv) -> StringRef {
        auto w = cast<RankedTensorType>(conv.getWeight().getType());
        int64_t cin = cast<RankedTensorType>(conv.getInput().getType()).getDimSize(1);
        if (isUnitKernel(w))
          return "conv 1x1x1";
        if (isDepthwise(cin, w.getDimSize(0), conv.getGroups()))
          return "conv depthwise";
        return "conv dense";
      })
      .Case<Conv3dTransposeOp>([](Conv3dTransposeOp conv) -> StringRef {
        auto w = cast<RankedTensorType>(conv.getWeight().getType());
        int64_t groups = conv.getGroups();
        if (isUnitKernel(w))
          return "conv 1x1x1";
        if (isDepthwise(w.getDimSize(0), w.getDimSize(1) * groups, groups))
          return "conv depthwise";
        return "conv transposed";
      })
      .Case<ShiftSumOp>([](auto) { return "conv depthwise"; })
      .Default([](Operation *op) -> StringRef { // the op table's family (ODS `family`)
        const ::med::ops::OpSchema *schema = ::med::ops::findOp(op->getName().stripDialect());
        return schema ? schema->family : "elementwise";
      });
}

FailureOr<ModelStats> mlir::med::computeModelStats(func::FuncOp f) {
  ModelStats stats;
  for (const char *family : kFamilies)
    stats.flopsByFamily[family] = 0;

  auto isStatic = [&](Value v, Operation *where) -> LogicalResult {
    auto t = dyn_cast<ShapedType>(v.getType());
    if (t && t.hasStaticShape()) {
      // Counts are int64 (bytes) and double sums of them: a tensor of 2^48 bytes or more
      // would overflow them or their totals; refuse it rather than print negative counts.
      int64_t bytes = (t.getElementTypeBitWidth() + 7) / 8;
      for (int64_t d : t.getShape())
        if (__builtin_mul_overflow(bytes, d, &bytes) || bytes >= (int64_t(1) << 48))
          return where->emitError("a value of type ")
                 << v.getType() << " holds 2^48 bytes or more: too large to count (use a "
                 << "smaller batch or patch)";
      return success();
    }
    return where->emitError("needs static shapes to count; got ")
           << v.getType() << " (specialize the batch and patch size first)";
  };

  // Program order over the body: last use of each value, for the peak of live bytes.
  llvm::DenseMap<Value, Operation *> lastUse;
  for (Operation &op : f.getBody().front())
    for (Value v : op.getOperands())
      lastUse[v] = &op;

  llvm::DenseSet<StringAttr> seenParams;
  int64_t live = 0;
  for (BlockArgument arg : f.getArguments()) {
    if (failed(isStatic(arg, f)))
      return failure();
    live += numBytes(arg.getType());
  }
  stats.peakLiveBytes = live;

  if (!f.getBody().hasOneBlock())
    return f.emitError("needs a function with a single block to count");
  for (Operation &opRef : f.getBody().front()) {
    Operation *op = &opRef;
    if (op->getNumResults() == 0)
      continue;
    for (Value r : op->getResults())
      if (failed(isStatic(r, op)))
        return failure();
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (seenParams.insert(param.getNameAttr().getAttr()).second) {
        stats.parameterCount += numElements(param.getType());
        stats.parameterBytes += numBytes(param.getType());
        ++stats.parameterTensors;
      }
      continue;
    }
    if (isa<ConstantOp>(op))
      continue;

    StringRef family = opFamily(op);
    // The bias add of a convolution counts as elementwise work.
    ::med::ops::OpFlops flops = opFlops(op);
    stats.convMacs += flops.macs;
    stats.flopsByFamily[family] += flops.flops - flops.biasAdd;
    stats.flopsByFamily["elementwise"] += flops.biasAdd;

    for (Value r : op->getResults()) {
      stats.activationBytes += numBytes(r.getType());
      live += numBytes(r.getType());
    }
    stats.peakLiveBytes = std::max(stats.peakLiveBytes, live);
    // Free what this op read for the last time (parameters and constants are not counted).
    llvm::SmallPtrSet<Value, 4> freed;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (lastUse.lookup(v) != op || isa_and_nonnull<ParamOp, ConstantOp>(def) ||
          !freed.insert(v).second)
        continue;
      live -= numBytes(v.getType());
    }
  }
  FailureOr<FunctionMemoryPlan> memory = planFunctionMemory(f);
  if (failed(memory))
    return failure();
  stats.plannedArenaBytes = static_cast<int64_t>(memory->arena.bytes);
  stats.residentBytes = memory->residentBytes;
  return stats;
}
