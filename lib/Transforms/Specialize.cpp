//===- Specialize.cpp - fix batch and patch size, inline, re-infer types -------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Transforms/InliningUtils.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDSPECIALIZE
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

// Re-infers result types in program order, so fixed input sizes reach every op.
LogicalResult reinferTypes(func::FuncOp entry) {
  WalkResult result = entry.walk([&](Operation *op) {
    auto infer = dyn_cast<InferTypeOpInterface>(op);
    if (!infer)
      return WalkResult::advance();
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                      op->getAttrDictionary(), op->getPropertiesStorage(),
                                      op->getRegions(), types)))
      return WalkResult::interrupt();
    // med ops infer an unranked type when their shapes do not fit; their verifier says why.
    if (llvm::any_of(types, [](Type t) { return isa<UnrankedTensorType>(t); })) {
      (void)verify(op);
      return WalkResult::interrupt();
    }
    for (auto [res, type] : llvm::zip(op->getResults(), types))
      res.setType(type);
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  Operation *terminator = entry.getBody().back().getTerminator();
  entry.setType(FunctionType::get(entry.getContext(), entry.getBody().getArgumentTypes(),
                                  terminator->getOperandTypes()));
  return success();
}

struct MedSpecialize : med::impl::MedSpecializeBase<MedSpecialize> {
  using Base::Base;

  // The named entry, or every public function with a body.
  SmallVector<func::FuncOp> findEntries(ModuleOp module) {
    SmallVector<func::FuncOp> entries;
    if (!entry.empty()) {
      auto f = module.lookupSymbol<func::FuncOp>(entry);
      if (!f || f.isExternal())
        module.emitError("med-specialize: no function @") << entry << " with a body";
      else
        entries.push_back(f);
      return entries;
    }
    for (auto f : module.getOps<func::FuncOp>())
      if (f.isPublic() && !f.isExternal())
        entries.push_back(f);
    if (entries.empty())
      module.emitError("med-specialize: the module has no public function to specialize");
    return entries;
  }

  LogicalResult specialize(func::FuncOp f) {
    for (BlockArgument arg : f.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() != 5)
        continue;
      // Deep-supervision targets come at 1/factor of the patch (`med.downsample`).
      int64_t factor = 1;
      if (auto attr = f.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), "med.downsample"))
        factor = attr.getInt();
      SmallVector<int64_t> shape(type.getShape());
      if (batch > 0 && ShapedType::isDynamic(shape[0]))
        shape[0] = batch;
      for (size_t i = 0; i < patch.size(); ++i) {
        if (!ShapedType::isDynamic(shape[2 + i]))
          continue;
        if (factor < 1 || patch[i] % factor != 0)
          return f.emitError("med-specialize: argument ")
                 << arg.getArgNumber() << " is downsampled by " << factor
                 << ", which does not divide the patch size " << patch[i];
        shape[2 + i] = patch[i] / factor;
      }
      arg.setType(RankedTensorType::get(shape, type.getElementType()));
    }
    if (succeeded(reinferTypes(f)))
      return success();
    InFlightDiagnostic note = f.emitRemark("while specializing @") << f.getSymName();
    if (batch > 0)
      note << " for batch " << static_cast<int64_t>(batch);
    if (!patch.empty())
      note << (batch > 0 ? " and" : "") << " patch " << patch[0] << "x" << patch[1] << "x"
           << patch[2];
    return failure();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!patch.empty() && patch.size() != 3) {
      module.emitError("med-specialize: patch needs 3 sizes (D,H,W), got ") << patch.size();
      return signalPassFailure();
    }
    if (batch < 0 || llvm::any_of(patch, [](int64_t d) { return d < 1; })) {
      module.emitError("med-specialize: batch and patch sizes must be positive");
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> entries = findEntries(module);
    if (entries.empty())
      return signalPassFailure();
    // Inline everywhere first: an entry may call another entry, whose signature must still
    // be the generic one while it is inlined.
    SymbolTable symbols(module);
    for (func::FuncOp f : entries)
      if (failed(inlineAllCalls(f, symbols)))
        return signalPassFailure();
    for (func::FuncOp f : entries)
      if (failed(specialize(f)))
        return signalPassFailure();
  }
};

} // namespace

// Nested calls come into the entry function with each inlined body, so inline in rounds;
// a call graph deeper than this is recursive.
static constexpr int kMaxInlineDepth = 64;

LogicalResult mlir::med::inlineAllCalls(func::FuncOp entry, SymbolTable &symbols) {
  InlinerInterface interface(entry.getContext());
  for (int depth = 0;; ++depth) {
    SmallVector<func::CallOp> calls;
    entry.walk([&](func::CallOp call) { calls.push_back(call); });
    if (calls.empty())
      return success();
    if (depth == kMaxInlineDepth)
      return calls.front().emitOpError("calls nest deeper than ")
             << kMaxInlineDepth << " levels; recursive calls cannot be specialized";
    for (func::CallOp call : calls) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal())
        return call.emitOpError("callee @") << call.getCallee() << " has no body to inline";
      if (failed(inlineCall(interface, call, callee, &callee.getBody())))
        return call.emitOpError("could not be inlined");
      call.erase();
    }
  }
}

