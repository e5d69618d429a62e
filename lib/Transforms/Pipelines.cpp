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
  static const StringRef names[] = {"canonicalize",         "med-flatten-optimizer",
                                    "cse",                  "med-sink-assigns",
                                    "med-form-mlp-fusions", "med-form-stencil-fusions",
                                    "med-split-norms",      "med-split-contraction-bias", "med-form-resample-fusions",
                                    "med-form-reduce-fusions", "med-form-fusions",
                                    "med-recompute"};
  return names;
}

ArrayRef<StringRef> mlir::med::offByDefaultPasses() {
  // med-split-norms: our step is the same bits with it, and it passes medcheck's rule
  // against torch f64 on the CPU (Passes.td); on by request until it does on the GPU.
  // The block MLP's templates for every block: on by request (`recompute_mlp`); by default
  // medc fuses only the blocks within the bounds it passes (buildOptimizationPipeline's
  // mlpBounds: those whose backward runs in one kernel), faster than the library's
  // products there, slower at the wide blocks (docs/perf.md).
  static const StringRef names[] = {"med-form-mlp-fusions", "med-split-norms"};
  return names;
}

LogicalResult mlir::med::buildOptimizationPipeline(OpPassManager &pm,
                                                   ArrayRef<std::string> disabled,
                                                   llvm::function_ref<void(const Twine &)> error,
                                                   ArrayRef<std::string> requested,
                                                   std::optional<double> bucketMb,
                                                   double memoryBudgetGib,
                                                   double recomputeAboveGib, bool softBudget,
                                                   MlpFusionBounds mlpBounds) {
  for (const std::string &name : disabled)
    if (!llvm::is_contained(optimizationPasses(), StringRef(name)) &&
        !llvm::is_contained(forwardPasses(), StringRef(name))) {
      error("no optional pass '" + name + "' (optional passes: " +
            llvm::join(forwardPasses(), ", ") + ", " + llvm::join(optimizationPasses(), ", ") +
            ")");
      return failure();
    }
  for (const std::string &name : requested)
    if (!llvm::is_contained(offByDefaultPasses(), StringRef(name))) {
      error("no pass '" + name + "' that is off by default (those: " +
            llvm::join(offByDefaultPasses(), ", ") + ")");
      return failure();
    }
  auto enabled = [&](StringRef name) {
    if (llvm::is_contained(offByDefaultPasses(), name))
      return llvm::is_contained(requested, name.str()) && !llvm::is_contained(disabled, name.str());
    return !llvm::is_contained(disabled, name.str());
  };
  if (enabled("canonicalize")) // the ops' folds: zero gradients, identities, shape chains
    pm.nest<func::FuncOp>().addPass(createCanonicalizerPass());
  // Before cse, which would merge the updates of two parameters with one gradient value.
  if (enabled("med-flatten-optimizer"))
    pm.addPass(createMedFlattenOptimizer());
  if (bucketMb) { // not optional once asked for: ranks would not agree on the gradients
    if (!enabled("med-flatten-optimizer")) {
      error("med-data-parallel reduces the flat gradient buffer: it needs "
            "med-flatten-optimizer");
      return failure();
    }
    MedDataParallelOptions options;
    options.bucketMb = *bucketMb;
    pm.addNestedPass<func::FuncOp>(createMedDataParallel(options));
  }
  OpPassManager &fn = pm.nest<func::FuncOp>();
  if (enabled("cse")) // one constant of each value
    fn.addPass(createCSEPass());
  if (enabled("med-sink-assigns"))
    fn.addPass(createMedSinkAssigns());
  if (enabled("med-form-mlp-fusions")) {
    fn.addPass(createMedFormMlpFusions());
  } else if (mlpBounds.maxChannels > 0 && !llvm::is_contained(disabled, "med-form-mlp-fusions")) {
    MedFormMlpFusionsOptions options;
    options.maxChannels = mlpBounds.maxChannels;
    options.maxExpanded = mlpBounds.maxExpanded;
    fn.addPass(createMedFormMlpFusions(options));
  }
  if (enabled("med-form-stencil-fusions"))
    fn.addPass(createMedFormStencilFusions());
  // After the stencil fusions took their norms; only with med-form-fusions, which takes
  // the split norm into its consumer's fusion (alone it adds launches).
  if (enabled("med-split-norms") && enabled("med-form-fusions"))
    fn.addPass(createMedSplitNorms());
  // After the mlp fusions took their blocks whole; only with med-form-fusions, which turns
  // the split into a gain (alone it adds a kernel per convolution), and not under a memory
  // budget: med-recompute forms block MLPs from the convolutions with their bias.
  if (enabled("med-split-contraction-bias") && enabled("med-form-fusions") &&
      !(memoryBudgetGib > 0))
    fn.addPass(createMedSplitContractionBias());
  if (enabled("med-form-resample-fusions")) // before med-form-fusions takes its epilogues
    fn.addPass(createMedFormResampleFusions());
  if (enabled("med-form-reduce-fusions"))
    fn.addPass(createMedFormReduceFusions());
  if (enabled("med-form-fusions"))
    fn.addPass(createMedFormFusions());
  // Not optional: the artifact needs its decisions. Last, after every pass that makes ops.
  fn.addPass(createMedAssignStorage());
  // After the storage decisions, which size the memory plan. Without a budget it only
  // recomputes what costs no memory elsewhere; a budget needs it.
  if (memoryBudgetGib > 0 && !enabled("med-recompute")) {
    error("a memory budget needs med-recompute");
    return failure();
  }
  if (enabled("med-recompute")) {
    MedRecomputeOptions options;
    options.budgetGib = memoryBudgetGib;
    options.aboveGib = recomputeAboveGib;
    options.soft = softBudget;
    options.mergeKernels = enabled("med-form-fusions"); // no fusions formed unasked
    fn.addPass(createMedRecompute(options));
  }
  return success();
}

namespace {
struct OptimizationOptions : public PassPipelineOptions<OptimizationOptions> {
  ListOption<std::string> disable{*this, "disable",
                                  llvm::cl::desc("optional passes to leave out")};
  ListOption<std::string> enable{*this, "enable",
                                 llvm::cl::desc("passes that are off by default to run")};
  Option<bool> dataParallel{*this, "data-parallel",
                            llvm::cl::desc("run med-data-parallel after med-flatten-optimizer"),
                            llvm::cl::init(false)};
  Option<double> bucketMb{*this, "bucket-mb",
                          llvm::cl::desc("med-data-parallel's largest bucket in MiB"),
                          llvm::cl::init(25)};
  Option<double> memoryBudgetGib{*this, "memory-budget-gib",
                                 llvm::cl::desc("run med-recompute last with this budget "
                                                "(0: no budget)"),
                                 llvm::cl::init(0)};
  Option<double> recomputeAboveGib{
      *this, "recompute-above-gib",
      llvm::cl::desc("without a budget, med-recompute recomputes only a step planned above "
                     "this many GiB (0: always)"),
      llvm::cl::init(med::kRecomputeAboveGib)};
};
} // namespace

void mlir::med::registerMedPipelines() {
  PassPipelineRegistration<OptimizationOptions>(
      "med-optimize",
      "the optimizing passes of `medc compile` after the program is complete (canonicalize, "
      "med-flatten-optimizer, with data-parallel=true med-data-parallel, cse, "
      "med-sink-assigns, med-form-mlp-fusions when enabled, med-form-stencil-fusions, "
      "med-split-norms, med-split-contraction-bias, med-form-fusions), then "
      "med-assign-storage, and med-recompute, exactly as medc runs them",
      [](OpPassManager &pm, const OptimizationOptions &options) {
        std::vector<std::string> disabled(options.disable.begin(), options.disable.end());
        std::vector<std::string> enabled(options.enable.begin(), options.enable.end());
        (void)buildOptimizationPipeline(
            pm, disabled, [](const Twine &msg) { llvm::errs() << "med-optimize: " << msg << "\n"; },
            enabled, options.dataParallel ? std::optional<double>(options.bucketMb) : std::nullopt,
            options.memoryBudgetGib, options.recomputeAboveGib);
      });
}
