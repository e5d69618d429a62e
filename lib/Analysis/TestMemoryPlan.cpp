//===- TestMemoryPlan.cpp - -test-med-print-memory-plan ---------------------------===//
//
// A test-only pass (registered by med-opt, not part of any pipeline): prints each public
// function's memory plan (planFunctionMemory) for FileCheck, one line per buffer that
// takes arena bytes, in definition order, then the arena's size.
//
//===------------------------------------------------------------------------------===//
#include "med/Analysis/MemoryPlan.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::med {
namespace {

struct TestPrintMemoryPlan
    : PassWrapper<TestPrintMemoryPlan, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintMemoryPlan)
  StringRef getArgument() const final { return "test-med-print-memory-plan"; }
  StringRef getDescription() const final {
    return "Print each function's memory plan (value, offset, size, live steps)";
  }
  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      FailureOr<FunctionMemoryPlan> plan = planFunctionMemory(f);
      if (failed(plan))
        return signalPassFailure();
      AsmState names(f);
      auto step = [](int s) {
        return s == medrun::BufferLife::kBeforeSteps  ? std::string("in")
               : s == medrun::BufferLife::kAfterSteps ? std::string("out")
                                                      : std::to_string(s);
      };
      os << "memory plan @" << f.getSymName() << "\n";
      for (size_t i = 0; i < plan->values.size(); ++i) {
        const medrun::BufferLife &life = plan->lives[i];
        if (!life.bytes)
          continue;
        os << "  ";
        plan->values[i].printAsOperand(os, names);
        os << ": offset = " << plan->arena.offset[i] << ", size = " << life.bytes
           << ", live = [" << step(life.first) << ", " << step(life.last) << "]\n";
      }
      os << "  arena = " << plan->arena.bytes << ", resident = " << plan->residentBytes
         << "\n";
    }
  }
};

} // namespace

void registerTestMemoryPlanPass() { PassRegistration<TestPrintMemoryPlan>(); }

} // namespace mlir::med
