//===- medc.cpp - the med compiler driver ----------------------------------------===//
//
//   medc stats FILE [--batch N] [--patch D,H,W] [--entry NAME] [--json]
//   medc compile FILE [-o OUT] [--batch N] [--patch D,H,W] [--entry NAME]
//
//===----------------------------------------------------------------------------------===//

#include "med/Analysis/ModelStats.h"
#include "med/IR/MedDialect.h"
#include "med/InitMed.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::SubCommand statsCmd("stats", "Print parameter count, forward FLOPs by op family and "
                                 "activation memory of a network");
cl::SubCommand compileCmd("compile", "Parse, verify and run the compilation pipeline");

cl::OptionCategory shapeCategory("Shape options (stats and compile)");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"), cl::Required,
                               cl::sub(statsCmd), cl::sub(compileCmd));
cl::opt<int64_t> batch("batch", cl::desc("Batch size of the network input (default 1)"),
                       cl::init(1), cl::sub(statsCmd), cl::sub(compileCmd),
                       cl::cat(shapeCategory));
cl::list<int64_t> patch("patch",
                        cl::desc("Patch size D,H,W of the network input (default 128,128,128)"),
                        cl::CommaSeparated, cl::sub(statsCmd), cl::sub(compileCmd),
                        cl::cat(shapeCategory));
cl::opt<std::string> entry("entry",
                           cl::desc("Function to analyse or compile (default: the only public "
                                    "function)"),
                           cl::init(""), cl::sub(statsCmd), cl::sub(compileCmd),
                           cl::cat(shapeCategory));
cl::opt<bool> json("json", cl::desc("Print the statistics as one JSON object"),
                   cl::sub(statsCmd));
cl::opt<std::string> outputFile("o", cl::desc("Output file for the compiled program (default: "
                                              "standard output)"),
                                cl::value_desc("file"), cl::init("-"), cl::sub(compileCmd));

int fail(const llvm::Twine &msg) {
  llvm::errs() << "medc: " << msg << "\n";
  return 1;
}

// Parses and verifies; diagnostics carry the file location.
OwningOpRef<ModuleOp> load(MLIRContext &ctx, llvm::SourceMgr &sources) {
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    fail("cannot read '" + inputFile + "': " + error);
    return nullptr;
  }
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sources, &ctx);
}

// Inline the blocks, fix batch and patch, re-infer every type.
LogicalResult specialize(ModuleOp module) {
  PassManager pm(module.getContext());
  SmallVector<int64_t> sizes = patch.empty() ? SmallVector<int64_t>{128, 128, 128}
                                             : SmallVector<int64_t>(patch.begin(), patch.end());
  med::MedSpecializeOptions options;
  options.entry = entry;
  options.batch = batch;
  options.patch = sizes; // a view: `sizes` outlives the pass manager's run
  pm.addPass(med::createMedSpecialize(options));
  pm.addPass(createSymbolDCEPass());
  return pm.run(module);
}

func::FuncOp entryFunction(ModuleOp module) {
  if (!entry.empty())
    return module.lookupSymbol<func::FuncOp>(entry);
  for (auto f : module.getOps<func::FuncOp>())
    if (f.isPublic() && !f.isExternal())
      return f;
  return nullptr;
}

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream(s) << t;
  return s;
}

void printStats(func::FuncOp f, const med::ModelStats &s) {
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  if (json) {
    llvm::json::Object families;
    for (auto &[family, flops] : s.flopsByFamily)
      families[family] = flops;
    llvm::json::Array inputs;
    for (Type t : f.getArgumentTypes())
      inputs.push_back(typeStr(t));
    llvm::json::Object out{{"function", f.getSymName()},
                           {"inputs", std::move(inputs)},
                           {"parameters", s.parameterCount},
                           {"parameter_tensors", s.parameterTensors},
                           {"parameter_bytes", s.parameterBytes},
                           {"conv_multiply_adds", s.convMacs},
                           {"forward_flops", s.totalFlops()},
                           {"flops_by_family", std::move(families)},
                           {"activation_bytes", s.activationBytes},
                           {"peak_live_bytes", s.peakLiveBytes}};
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(out))) << "\n";
    return;
  }
  llvm::outs() << "function    @" << f.getSymName() << "\n";
  for (Type t : f.getArgumentTypes())
    llvm::outs() << "input       " << t << "\n";
  llvm::outs() << "parameters  " << withCommas(s.parameterCount) << " in "
               << s.parameterTensors << " tensors ("
               << llvm::format("%.1f", s.parameterBytes / (1024.0 * 1024.0)) << " MiB)\n\n";
  llvm::outs() << "forward FLOPs (2 per multiply-add)\n";
  double total = s.totalFlops();
  for (auto &[family, flops] : s.flopsByFamily)
    if (flops > 0)
      llvm::outs() << llvm::format("  %-18s %12.2f GFLOP  %5.1f%%\n", family.str().c_str(),
                                   flops / 1e9, 100 * flops / total);
  llvm::outs() << llvm::format("  %-18s %12.2f GFLOP\n", static_cast<const char *>("total"), total / 1e9);
  llvm::outs() << llvm::format("  convolutions: %.2f G multiply-adds\n\n", s.convMacs / 1e9);
  llvm::outs() << "activation memory (forward, at the tensors' element types)\n"
               << llvm::format("  all op results     %10.2f GiB\n", s.activationBytes / GiB)
               << llvm::format("  peak live          %10.2f GiB (forward only, program order)\n",
                               s.peakLiveBytes / GiB);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions({&shapeCategory, &cl::getGeneralCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "medc: the med compiler\n\n"
      "  medc stats FILE    parameters, forward FLOPs by op family, activation memory\n"
      "  medc compile FILE  parse, verify and run the compilation pipeline\n\n"
      "Shapes: model files leave batch and patch open (`?`); --batch and --patch fix them\n"
      "(default 1 and 128,128,128). Run `medc stats --help` for a subcommand's options.\n");

  if (!statsCmd && !compileCmd) {
    cl::PrintHelpMessage();
    return 1;
  }
  if (!patch.empty() && patch.size() != 3)
    return fail("--patch needs three sizes D,H,W, got " + llvm::Twine(patch.size()));
  if (batch < 1 || llvm::any_of(patch, [](int64_t d) { return d < 1; }))
    return fail("--batch and --patch sizes must be positive");

  DialectRegistry registry;
  med::registerMedDialects(registry);
  MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false); // the location says where; a dump of the op buries it
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &ctx);

  OwningOpRef<ModuleOp> module = load(ctx, sources);
  if (!module || failed(verify(*module)) || failed(specialize(*module)))
    return 1;

  if (statsCmd) {
    func::FuncOp f = entryFunction(*module);
    if (!f)
      return fail("no function to analyse");
    FailureOr<med::ModelStats> stats = med::computeModelStats(f);
    if (failed(stats))
      return 1;
    printStats(f, *stats);
    return 0;
  }

  std::string error;
  auto output = openOutputFile(outputFile, &error);
  if (!output)
    return fail("cannot write '" + outputFile + "': " + error);
  module->print(output->os());
  output->keep();
  return 0;
}
