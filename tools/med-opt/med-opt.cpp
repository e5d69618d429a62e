//===- med-opt.cpp - mlir-opt for the med dialect --------------------------------===//
#include "med/Analysis/MemoryPlan.h"
#include "med/InitMed.h"
#include "Version.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"

namespace cl = llvm::cl;

int main(int argc, char **argv) {
  // Options registered before main are LLVM's (code generation for every target, ...): they
  // stay usable and --help-hidden lists them, but --help shows the passes and pipelines
  // first, then mlir-opt's own options.
  cl::OptionCategory *generic = cl::getRegisteredOptions().lookup("help")->Categories.front();
  for (auto &entry : cl::getRegisteredOptions())
    if (!llvm::is_contained(entry.second->Categories, generic))
      entry.second->setHiddenFlag(cl::Hidden);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << medtool::versionText("med-opt", {{"MLIR", LLVM_VERSION_STRING}});
  });

  mlir::DialectRegistry registry;
  mlir::med::registerMedDialects(registry);
  mlir::med::registerAllMedPasses();
  mlir::med::registerTestMemoryPlanPass(); // test-only: prints memory plans for FileCheck
  // The pass list exists once mlir-opt's options are registered (registering is idempotent,
  // MlirOptMain does it again); LLVM sorts categories by name, so this one comes first.
  mlir::MlirOptMainConfig::registerCLOptions(registry);
  static cl::OptionCategory passes("Compiler passes and pipelines (med-*: this project's)");
  if (cl::Option *list = cl::getRegisteredOptions().lookup("med-specialize"))
    list->addCategory(passes);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "med-opt: parses, verifies, transforms and prints med programs\n", registry));
}
