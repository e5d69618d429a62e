//===- Pipelines.cpp - the pass pipelines medc runs, registered for med-opt ------===//
#include "med/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

ArrayRef<StringRef> mlir::med::forwardPasses() {
  static const StringRef names[] = {"med-shift-sum"};
  return names;
}

void mlir::med::buildForwardPipeline(OpPassManager &pm, ArrayRef<std::string> disabled) {
  if (!llvm::is_contained(disabled, "med-shift-sum"))
    pm.nest<func::FuncOp>().addPass(createMedShiftSum());
}

ArrayRef<StringRef> mlir::med::optimizationPasses() {
  static const StringRef names[] = {"canonicalize", "med-flatten-optimizer", "cse",
                                    "med-sink-assigns", "med-form-fusions"};
  return names;
}

LogicalResult mlir::med::buildOptimizationPipeline(OpPassManager &pm,
                                                   ArrayRef<std::string> disabled,
                                                   llvm::function_ref<void(const Twine &)> error) {
  for (const std::string &name : disabled)
    if (!llvm::is_contained(optimizationPasses(), StringRef(name)) &&
        !llvm::is_contained(forwardPasses(), StringRef(name))) {
      error("no optional pass '" + name + "' (optional passes: " +
            llvm::join(forwardPasses(), ", ") + ", " + llvm::join(optimizationPasses(), ", ") +
            ")");
      return failure();
    }
  auto enabled = [&](StringRef name) { return !llvm::is_contained(disabled, name.str()); };
  if (enabled("canonicalize")) // the ops' folds: zero gradients, identities, shape chains
    pm.nest<func::FuncOp>().addPass(createCanonicalizerPass());
  // Before cse, which would merge the updates of two parameters with one gradient value.
  if (enabled("med-flatten-optimizer"))
    pm.addPass(createMedFlattenOptimizer());
  OpPassManager &fn = pm.nest<func::FuncOp>();
  if (enabled("cse")) // one constant of each value
    fn.addPass(createCSEPass());
  if (enabled("med-sink-assigns"))
    fn.addPass(createMedSinkAssigns());
  if (enabled("med-form-fusions"))
    fn.addPass(createMedFormFusions());
  // Not optional: the artifact needs its decisions. Last, after every pass that makes ops.
  fn.addPass(createMedAssignStorage());
  return success();
}

namespace {
struct OptimizationOptions : public PassPipelineOptions<OptimizationOptions> {
  ListOption<std::string> disable{*this, "disable",
                                  llvm::cl::desc("optional passes to leave out")};
};
} // namespace

void mlir::med::registerMedPipelines() {
  PassPipelineRegistration<OptimizationOptions>(
      "med-optimize",
      "the optimizing passes of `medc compile` after the program is complete (canonicalize, "
      "med-flatten-optimizer, cse, med-sink-assigns, med-form-fusions), then "
      "med-assign-storage, exactly as medc runs them",
      [](OpPassManager &pm, const OptimizationOptions &options) {
        std::vector<std::string> disabled(options.disable.begin(), options.disable.end());
        (void)buildOptimizationPipeline(pm, disabled, [](const Twine &msg) {
          llvm::errs() << "med-optimize: " << msg << "\n";
        });
      });
}
