//===- medc.cpp - the med compiler driver ----------------------------------------===//
//
//   medc stats FILE [--batch N] [--patch D,H,W] [--entry NAME] [--json]
//   medc import MODEL.onnx [-o OUT.mlir] [--name NAME]
//   medc compile FILE [-o OUT] [--emit artifact|plan|mlir] [--grad] [--batch N] [--patch D,H,W]
//                [--entry NAME] [--target cpu|cuda]
//
//===----------------------------------------------------------------------------------===//

#include "med/Analysis/MemoryPlan.h"
#include "med/Analysis/ModelStats.h"
#include "med/IR/MedDialect.h"
#include "med/IR/ParserGuard.h"
#include "med/Import/Onnx.h"
#include "med/InitMed.h"
#include "med/Target/Artifact.h"
#include "med/Target/Cuda.h"
#include "med/Transforms/Passes.h"
#include "Recipe.h"
#include "med/IR/MedOps.h"
#include "medrun/RecipeRules.h"
#include "Version.h"

#include <array>
#include <chrono>
#include <thread>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/bit.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SHA256.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::SubCommand statsCmd("stats", "Print parameter count, forward FLOPs by op family and "
                                 "activation memory of a network");
cl::SubCommand compileCmd("compile", "Parse, verify and run the compilation pipeline");
cl::SubCommand importCmd("import", "Import an ONNX model (torch.onnx.export) into the med "
                                   "dialect: the network function, its parameters named by "
                                   "the initializers");
cl::SubCommand recipeCmd("recipe", "Print the effective training recipe as JSON: every key "
                                   "checked, --set applied, defaults filled in");

cl::OptionCategory shapeCategory("Shape options (stats and compile)");
cl::OptionCategory outputCategory("Output options");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir or model.onnx>"),
                               cl::sub(statsCmd), cl::sub(compileCmd), cl::sub(importCmd));
cl::opt<std::string> importName("name",
                                cl::desc("The imported network function's name (default: the "
                                         "file name, models/unet.onnx -> @unet)"),
                                cl::init(""), cl::sub(importCmd));
cl::opt<double> dropoutRate("dropout",
                            cl::desc("Every dropout layer's rate, in [0, 1) (0: none), as a "
                                     "recipe's model.dropout (default: the rates the model "
                                     "holds; an error if the model has no dropout)"),
                            cl::value_desc("p"), cl::sub(compileCmd), cl::sub(importCmd),
                            cl::sub(statsCmd));
cl::opt<std::string> recipeInput(cl::Positional, cl::desc("<recipe.yaml>"), cl::sub(recipeCmd));
cl::list<std::string> overrides("set",
                                cl::desc("Override a recipe key: --set section.key=value (a "
                                         "list as a,b,c), e.g. --set data.batch=1"),
                                cl::value_desc("key=value"), cl::sub(compileCmd),
                                cl::sub(recipeCmd), cl::cat(outputCategory));
cl::opt<std::string> recipeFile("recipe",
                                cl::desc("Compile the training recipe FILE (configs/*.yaml): its "
                                         "model, batch, patch, loss, optimizer, clipping and EMA "
                                         "replace FILE, --batch, --patch, --loss and --train"),
                                cl::value_desc("recipe.yaml"), cl::init(""), cl::sub(compileCmd),
                                cl::cat(outputCategory));
cl::opt<int64_t> batch("batch", cl::desc("Batch size of the network input (default 1)"),
                       cl::init(1), cl::sub(statsCmd), cl::sub(compileCmd),
                       cl::cat(shapeCategory));
cl::list<int64_t> patch("patch",
                        cl::desc("Patch size D,H,W of the network input (default 128,128,128)"),
                        cl::CommaSeparated, cl::sub(statsCmd), cl::sub(compileCmd),
                        cl::cat(shapeCategory));
cl::opt<std::string> entry("entry",
                           cl::desc("Function to analyse (needed when there are several) or to "
                                    "compile (default: every public function)"),
                           cl::init(""), cl::sub(statsCmd), cl::sub(compileCmd),
                           cl::cat(shapeCategory));
cl::opt<bool> json("json", cl::desc("Print the statistics as one JSON object"),
                   cl::sub(statsCmd), cl::cat(outputCategory));
enum class Emit { Auto, Artifact, Plan, Mlir, Cuda };
cl::opt<Emit> emit("emit", cl::desc("What compile writes"), cl::init(Emit::Auto),
                   cl::values(clEnumValN(Emit::Auto, "auto",
                                         "an artifact if the output ends in .medc, else MLIR "
                                         "(default)"),
                              clEnumValN(Emit::Artifact, "artifact",
                                         "the artifact medrun executes (docs/artifact.md)"),
                              clEnumValN(Emit::Plan, "plan",
                                         "the artifact's JSON document, indented (to read)"),
                              clEnumValN(Emit::Mlir, "mlir", "the compiled module as MLIR"),
                              clEnumValN(Emit::Cuda, "cuda",
                                         "the generated CUDA source: every kernel in one "
                                         "translation unit (the artifact splits them into "
                                         "modules)")),
                   cl::sub(compileCmd), cl::cat(outputCategory));
enum class Target { Cpu, Cuda };
cl::opt<Target> target(
    "target", cl::desc("What the artifact carries besides the op-level plan"),
    cl::init(Target::Cpu),
    cl::values(clEnumValN(Target::Cpu, "cpu", "the op-level plan only: the CPU backend (default)"),
               clEnumValN(Target::Cuda, "cuda",
                          "also CUDA kernels (NVRTC, sm_90 cubin and PTX) and their launch "
                          "plans, for medrun --device cuda; needs no GPU")),
    cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<int> cudaArch("cuda-arch", cl::desc("GPU architecture of the cubin (default 90: sm_90)"),
                      cl::init(90), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<bool> cudaPtx("cuda-ptx",
                      cl::desc("Keep the compute_<arch> PTX beside the cubin, for GPUs of newer "
                               "architectures, whose driver compiles it (default true; "
                               "--cuda-ptx=false leaves it out)"),
                      cl::init(true), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<bool> cudaWgmma(
    "cuda-wgmma",
    cl::desc("With --cuda-arch 90: also compile sm_90a variants (wgmma tensor cores) of the "
             "templates that have them, into a module of their own; medrun loads it on "
             "sm_90 GPUs and runs whichever variant measures faster (default true)"),
    cl::init(true), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<bool> fusionChecks(
    "fusion-checks",
    cl::desc("Add a function fusion_check_<k> per fusion body (its inputs, one fusion op, "
             "its results), so that `medrun cuda-check --fusions` checks each fused kernel "
             "in isolation against the CPU backend"),
    cl::init(false), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<bool> cudaFmad("cuda-fmad",
                       cl::desc("Let NVRTC contract a*b+c into fused multiply-adds (default "
                                "true); --cuda-fmad=false rounds every product and sum as the "
                                "CPU backend does"),
                       cl::init(true), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<unsigned> cudaModules(
    "cuda-modules",
    cl::desc("Split the CUDA kernels into at most this many modules, which NVRTC compiles "
             "in parallel and the cubin cache keeps apart (default 0: one per hardware "
             "thread)"),
    cl::init(0), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<unsigned> cudaScratchMib(
    "cuda-scratch-mib",
    cl::desc("The most device scratch a fused block MLP's backward may take at once for its "
             "recomputed expansion and gradient (MiB, default 512): it runs in slabs of "
             "voxels that fit"),
    cl::init(512), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<unsigned> cudaMlpResidentKib(
    "cuda-mlp-resident-kib",
    cl::desc("The most shared memory a fused block MLP's kernel may take to keep all its "
             "weights there (KiB, default 48; 0: the weights are staged per tile and the "
             "backward runs in slabs)"),
    cl::init(48), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<unsigned> cudaMlpPipeline(
    "cuda-mlp-pipeline",
    cl::desc("Tiles in flight in the copy pipeline of a fused block MLP's resident kernels "
             "(cp.async; default 2, fewer where they do not fit; 1: the kernels that take one "
             "tile at a time, for a before/after measurement)"),
    cl::init(2), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<unsigned> cudaSmCount(
    "cuda-sm-count",
    cl::desc("Streaming multiprocessors of the target GPU, which sizes the grids that fill "
             "it (default 132: the H100 SXM and the H200)"),
    cl::init(132), cl::sub(compileCmd), cl::cat(outputCategory));
// Tests only: the grid of the mlp templates' resident kernels, so that each block of a small
// test takes several tiles.
cl::opt<unsigned> cudaMlpResidentBlocks("cuda-mlp-resident-blocks", cl::Hidden,
                                        cl::init(0), cl::sub(compileCmd));
// Tests only: the mlp_grad backward's scratch limit in KiB (instead of --cuda-scratch-mib), so
// that a small test runs it in several slabs.
cl::opt<unsigned> cudaScratchKib("cuda-scratch-kib", cl::Hidden, cl::init(0),
                                 cl::sub(compileCmd));
// Tests only: appends a line NVRTC rejects, to show how a failed compilation is reported.
cl::opt<bool> cudaInjectError("cuda-inject-error", cl::Hidden, cl::sub(compileCmd));
cl::opt<bool> grad("grad",
                   cl::desc("Also build <f>_grad, the gradient of every function whose first "
                            "result is a scalar loss (med-autodiff)"),
                   cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<std::string> lossOptions("loss",
                                cl::desc("Wrap the network in @loss with these med-add-loss "
                                         "options, e.g. \"type=bce_with_logits mask=true\" or "
                                         "\"type=dice_ce\" (see docs/passes.md)"),
                                cl::value_desc("options"), cl::init(""), cl::sub(compileCmd),
                                cl::cat(outputCategory));
cl::opt<std::string> train("train",
                          cl::desc("Build @train_step from the loss function with these "
                                   "med-train-step options, e.g. \"optimizer=adamw clip=1.0 "
                                   "ema=true\" (see docs/passes.md)"),
                          cl::value_desc("options"), cl::init(""), cl::sub(compileCmd),
                          cl::cat(outputCategory));
cl::list<std::string> disabledPasses(
    "disable-pass",
    cl::desc("Leave out an optimizing pass of compile's pipeline (med-shift-sum, canonicalize, "
             "med-flatten-optimizer, cse, med-sink-assigns, med-form-mlp-fusions, "
             "med-form-stencil-fusions, med-form-fusions); repeatable"),
    cl::value_desc("name"), cl::sub(compileCmd), cl::cat(outputCategory));
cl::list<std::string> enabledPasses(
    "enable-pass",
    cl::desc("Run a pass of compile's pipeline that is off by default (med-form-mlp-fusions: "
             "the recipe key recompute_mlp); repeatable"),
    cl::value_desc("name"), cl::sub(compileCmd), cl::cat(outputCategory));
// The block MLPs fused without a request (recompute_mlp fuses them all): by default those
// within the bounds of the one-kernel backward with the expanded channels split across
// warps (kernels/mlp.cuh: mlpGradChunks; Fusion/Mlp.cpp: mlpGradChunks), which made the
// BANIS+ bf16 step 0.88× as long at 0.72× the peak on an H100 (docs/perf.md).
// Blocks outside them stay on the library's products unless a budget needs them fused.
enum class MlpFusions { None, OneKernel };
cl::opt<MlpFusions> mlpFusions(
    "mlp-fusions",
    cl::desc("Block MLPs fused (med-form-mlp-fusions) without recompute_mlp, which fuses all"),
    cl::values(clEnumValN(MlpFusions::None, "none", "none: the library's products"),
               clEnumValN(MlpFusions::OneKernel, "one-kernel",
                          "those whose backward runs in one kernel with the expanded "
                          "channels split across warps: at most 64 input and output "
                          "channels, 256 expanded (the default)")),
    cl::init(MlpFusions::OneKernel), cl::sub(compileCmd), cl::sub(recipeCmd),
    cl::cat(outputCategory));
cl::opt<double> memoryBudget(
    "memory-budget",
    cl::desc("Recompute saved values in the backward until the planned device memory (medc's "
             "memory plan and the resident state) fits GiB (med-recompute; the recipe key "
             "memory_budget_gib); stats reports the planned peak after it"),
    cl::value_desc("GiB"), cl::init(0), cl::sub(compileCmd), cl::sub(statsCmd),
    cl::cat(outputCategory));
cl::opt<double> recomputeAbove(
    "recompute-above",
    cl::desc("The memory target without a budget: a step planned above GiB gets saved "
             "values recomputed in the backward (costing time): first those whose inputs are "
             "kept anyway, then, if still above, as under --memory-budget GiB but with no "
             "error when missed (the recipe key recompute_above_gib; 0: the first kind "
             "always, no budget)"),
    cl::value_desc("GiB"), cl::init(mlir::med::kRecomputeAboveGib), cl::sub(compileCmd),
    cl::cat(outputCategory));
cl::list<std::string> printIRAfter(
    "print-ir-after",
    cl::desc("Print the module to standard error after the named pass of compile's pipeline "
             "(med-specialize, med-autodiff, med-train-step, med-form-fusions, ...); "
             "repeatable"),
    cl::value_desc("name"), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<bool> dataParallel(
    "data-parallel",
    cl::desc("Prepare the training step for data-parallel training: its flat gradients are "
             "summed over the ranks in buckets (med-data-parallel) and averaged through the "
             "input inv_world_size; without it the step is for one process"),
    cl::init(false), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<double> bucketMb("bucket-mb",
                         cl::desc("With --data-parallel: the largest gradient bucket in MiB "
                                  "(default 25, as PyTorch DDP)"),
                         cl::init(25), cl::sub(compileCmd), cl::cat(outputCategory));
cl::opt<std::string> outputFile("o", cl::desc("Output file for the compiled program (default: "
                                              "standard output)"),
                                cl::value_desc("file"), cl::init("-"), cl::sub(compileCmd),
                                cl::sub(importCmd), cl::cat(outputCategory));

std::string sourceSha256; // of the input file, for the artifact's manifest
// The loss and train options in effect: from --loss/--train, or from a recipe.
std::optional<std::string> effectiveLoss, effectiveTrain;

int fail(const llvm::Twine &msg) {
  llvm::errs() << "medc: " << msg << "\n";
  return 1;
}

// Parses the source manager's main file, refusing first what MLIR 19's parser would crash
// on (med/IR/ParserGuard.h) with an error at its place.
OwningOpRef<ModuleOp> parseChecked(llvm::SourceMgr &sources, MLIRContext &ctx) {
  const llvm::MemoryBuffer *buffer = sources.getMemoryBuffer(sources.getMainFileID());
  if (std::optional<med::UnsafeSyntax> unsafe = med::findUnsafeSyntax(buffer->getBuffer())) {
    sources.PrintMessage(llvm::errs(),
                         llvm::SMLoc::getFromPointer(buffer->getBufferStart() + unsafe->offset),
                         llvm::SourceMgr::DK_Error, unsafe->message);
    return nullptr;
  }
  return parseSourceFile<ModuleOp>(sources, &ctx);
}

// A model file: MLIR, or ONNX (.onnx, .txtpb) imported into the med dialect (lib/Import).
OwningOpRef<ModuleOp> loadModel(const std::string &path, MLIRContext &ctx,
                                llvm::SourceMgr &sources, std::string *sha256 = nullptr) {
  std::string error;
  auto file = openInputFile(path, &error);
  if (!file) {
    fail("cannot read '" + path + "': " + error);
    return nullptr;
  }
  if (sha256)
    *sha256 = llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(file->getBuffer())),
                          /*LowerCase=*/true);
  if (med::isOnnxModelPath(path)) {
    med::OnnxImportOptions options;
    options.functionName = importName;
    options.textFormat = !llvm::StringRef(path).ends_with(".onnx");
    auto imported = med::importOnnx(file->getBuffer(), path, ctx, options);
    if (!imported) {
      fail(llvm::toString(imported.takeError()));
      return nullptr;
    }
    return std::move(*imported);
  }
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseChecked(sources, ctx);
}

// Parses and verifies; diagnostics carry the file location.
OwningOpRef<ModuleOp> load(MLIRContext &ctx, llvm::SourceMgr &sources) {
  return loadModel(inputFile, ctx, sources, &sourceSha256);
}

SmallVector<int64_t> specializedPatch() {
  return patch.empty() ? SmallVector<int64_t>{128, 128, 128}
                       : SmallVector<int64_t>(patch.begin(), patch.end());
}

// --print-ir-after: the module after each pass named there, to standard error.
void printAfterNamedPasses(PassManager &pm) {
  if (printIRAfter.empty())
    return;
  pm.getContext()->disableMultithreading(); // module-scope printing needs it
  pm.enableIRPrinting(
      [](Pass *, Operation *) { return false; },
      [](Pass *pass, Operation *) { return llvm::is_contained(printIRAfter, pass->getArgument()); },
      /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
}

// Pass options are space-separated `key=value` words (a value may be a {list} or quoted);
// MLIR's option parser takes some malformed words (`===`, `=x`) without a word of warning.
// Returns the first word that is not an option, or "".
std::string malformedOption(StringRef options) {
  size_t i = 0;
  while (i < options.size()) {
    while (i < options.size() && llvm::isSpace(options[i]))
      ++i;
    size_t start = i, depth = 0;
    char quote = 0;
    for (; i < options.size() && (depth || quote || !llvm::isSpace(options[i])); ++i) {
      char c = options[i];
      if (quote)
        quote = c == quote ? 0 : quote;
      else if (c == '"' || c == '\'')
        quote = c;
      else if (c == '{')
        ++depth;
      else if (c == '}' && depth)
        --depth;
    }
    StringRef word = options.slice(start, i);
    if (word.empty())
      continue;
    auto [key, value] = word.split('=');
    bool keyOk = !key.empty() && llvm::isAlpha(key.front()) &&
                 llvm::all_of(key, [](char c) { return llvm::isAlnum(c) || c == '-' || c == '_'; });
    if (!keyOk || (word.contains('=') && value.empty()))
      return word.str();
  }
  return "";
}

LogicalResult checkPassOptions(StringRef flag, StringRef options, StringRef example) {
  std::string word = malformedOption(options);
  if (word.empty())
    return success();
  fail(flag + ": '" + word + "' is not an option: expected space-separated key=value "
              "options, e.g. \"" + example + "\" (see docs/passes.md)");
  return failure();
}

// Inline the blocks, fix batch and patch, re-infer every type. With --entry, only that
// function stays public, so the artifact holds just it (and what the pipeline derives).
LogicalResult specialize(ModuleOp module) {
  if (!entry.empty())
    for (auto f : module.getOps<func::FuncOp>())
      if (f.getSymName() != entry && f.isPublic())
        f.setPrivate();
  PassManager pm(module.getContext());
  if (effectiveLoss && failed(checkPassOptions("--loss", *effectiveLoss, "type=dice_ce")))
    return failure();
  if (effectiveTrain &&
      failed(checkPassOptions("--train", *effectiveTrain, "optimizer=adamw clip=1.0 ema=true")))
    return failure();
  if (effectiveLoss) {
    std::unique_ptr<Pass> addLoss = med::createMedAddLoss();
    if (failed(addLoss->initializeOptions(*effectiveLoss, [](const Twine &msg) {
          fail("--loss: " + msg);
          return failure();
        })))
      return failure();
    pm.addPass(std::move(addLoss));
  }
  SmallVector<int64_t> sizes = specializedPatch();
  med::MedSpecializeOptions options;
  options.entry = entry;
  options.batch = batch;
  options.patch = sizes; // a view: `sizes` outlives the pass manager's run
  pm.addPass(med::createMedSpecialize(options));
  med::buildForwardPipeline(pm, std::vector<std::string>(disabledPasses.begin(), disabledPasses.end()));
  if (grad)
    pm.addPass(med::createMedAutodiff());
  if (effectiveTrain) {
    std::unique_ptr<Pass> step = med::createMedTrainStep();
    if (failed(step->initializeOptions(*effectiveTrain, [](const Twine &msg) {
          fail("--train: " + msg);
          return failure();
        })))
      return failure();
    pm.addPass(std::move(step));
    // Inlining only: canonicalize runs once, in the optimizing pipeline (--disable-pass).
    pm.addPass(createInlinerPass({}, [](OpPassManager &) {}));
  }
  pm.addPass(createSymbolDCEPass());
  printAfterNamedPasses(pm);
  return pm.run(module);
}

/// The recipe's augmentation pipeline file ("" = none), its function and the values its
/// `augment.overrides` give the pipeline's marked parameters.
std::string recipeAugment, recipeAugmentFunction;
std::vector<medc::AugmentOverride> recipeAugmentOverrides;
/// A generated pipeline instead of a file (`augment.pipeline: nnunet`): the request's
/// pipeline and sizes (batch and patch: those compiled).
medc::AugmentRequest recipeAugmentRequest;
/// Whether the recipe gives loss.affinities.offsets (recipeAugmentRequest.offsets): a
/// pipeline file's affinities must then be those.
bool recipeAffinityOffsetsGiven = false;
std::string recipeNetwork;

// The loss's ignore label ("ignore-label=K" among the loss options), or -1.
int64_t ignoreLabelOf(StringRef lossOptions) {
  SmallVector<StringRef> parts;
  lossOptions.split(parts, ' ', -1, false);
  int64_t k = -1;
  for (StringRef p : parts)
    if (p.consume_front("ignore-label=") && p.getAsInteger(10, k))
      k = -1;
  return k;
}

// The generated pipeline's sizes the recipe leaves to the network: nnunet's channels (the
// image input's), classes (the first output's channels, and nnU-Net's ignore label above
// them when the loss names one: the pipeline interpolates it as a label of its own) and
// levels (the outputs).
LogicalResult resolveAugmentRequest(ModuleOp module, medc::AugmentRequest &r) {
  if (r.pipeline != "nnunet" || (r.channels && r.classes && r.levels))
    return success();
  func::FuncOp network;
  for (auto f : module.getOps<func::FuncOp>())
    if (recipeNetwork.empty() ? f.isPublic() && !f.isExternal() : f.getSymName() == recipeNetwork)
      network = network ? func::FuncOp() : f;
  auto channelsOf = [](Type t) -> int64_t {
    auto shaped = dyn_cast<RankedTensorType>(t);
    return shaped && shaped.getRank() == 5 && !shaped.isDynamicDim(1) ? shaped.getDimSize(1) : 0;
  };
  const int64_t in = network && network.getNumArguments() ? channelsOf(network.getArgumentTypes()[0]) : 0;
  const int64_t out = network && network.getNumResults() ? channelsOf(network.getResultTypes()[0]) : 0;
  if (!in || !out)
    return fail(recipeFile + ": augment.pipeline nnunet: cannot read the channels of " +
                (network ? "@" + network.getSymName().str() : std::string("the network")) +
                " (no single network function with an N x C x D x H x W input and output); "
                "give augment.channels, augment.classes and augment.levels"),
           failure();
  if (!r.channels)
    r.channels = in;
  if (!r.classes)
    r.classes = std::max(out, ignoreLabelOf(effectiveLoss.value_or("")) + 1);
  if (!r.levels)
    r.levels = network.getNumResults();
  return success();
}

// Copies the recipe's augmentation function (and the private functions it calls) into
// `module`, private, for med-train-step (augment=NAME) to run first in @train_step.
LogicalResult linkAugmentation(ModuleOp module) {
  if (recipeAugment.empty() && recipeAugmentRequest.pipeline.empty())
    return success();
  MLIRContext *ctx = module.getContext();
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, ctx);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file;
  if (!recipeAugmentRequest.pipeline.empty()) {
    medc::AugmentRequest &r = recipeAugmentRequest;
    r.batch = batch;
    llvm::copy(specializedPatch(), r.patch.begin());
    if (failed(resolveAugmentRequest(module, r)))
      return failure();
    llvm::Expected<std::string> text = medc::generateAugmentPipeline(r, recipeFile);
    if (!text)
      return fail(llvm::toString(text.takeError())), failure();
    // Diagnostics name the pipeline and how it was generated.
    recipeAugment = "augment.pipeline " + r.pipeline + " (gen_augment.py " +
                    llvm::join(medc::augmentGeneratorArgs(r), " ") + ")";
    file = llvm::MemoryBuffer::getMemBufferCopy(*text, recipeAugment);
  } else {
    file = openInputFile(recipeAugment, &error);
    if (!file)
      return fail("augment.pipeline: cannot read '" + recipeAugment + "': " + error), failure();
  }
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> pipeline = parseChecked(sources, *ctx);
  if (!pipeline || failed(verify(*pipeline)))
    return failure();
  if (llvm::Error e = medc::applyAugmentOverrides(*pipeline, recipeAugmentOverrides, recipeFile,
                                                  recipeAugment))
    return fail(llvm::toString(std::move(e))), failure();
  if (recipeAffinityOffsetsGiven && recipeAugmentRequest.pipeline.empty()) {
    // A pipeline file makes its own targets: they must be the recipe's offsets.
    std::vector<int64_t> want;
    for (const auto &o : recipeAugmentRequest.offsets)
      want.insert(want.end(), o.begin(), o.end());
    auto text = [](ArrayRef<int64_t> v) {
      std::string s;
      for (size_t i = 0; i < v.size(); i += 3)
        s += (i ? ", [" : "[") + std::to_string(v[i]) + ", " + std::to_string(v[i + 1]) + ", " +
             std::to_string(v[i + 2]) + "]";
      return "[" + s + "]";
    };
    bool mismatch = false;
    pipeline->walk([&](med::AffinitiesOp op) {
      if (mismatch || op.getOffsets() == ArrayRef<int64_t>(want))
        return;
      mismatch = true;
      fail(recipeFile + ": loss.affinities.offsets " + text(want) + ", but the affinities of " +
           recipeAugment + " have the offsets " + text(op.getOffsets()) +
           " (generate the file with them, or name a generated pipeline: banis)");
    });
    if (mismatch)
      return failure();
  }
  auto fn = pipeline->lookupSymbol<func::FuncOp>(recipeAugmentFunction);
  if (!fn || fn.isExternal())
    return fail(recipeAugment + ": no function @" + recipeAugmentFunction +
                " (augment.function names the pipeline's function)"),
           failure();
  for (Operation &op : pipeline->getBody()->getOperations()) {
    auto f = dyn_cast<func::FuncOp>(op);
    if (!f)
      return fail(recipeAugment + ": a pipeline file holds functions only, found '" +
                  op.getName().getStringRef() + "'"),
             failure();
    if (module.lookupSymbol(f.getSymName()))
      return fail(recipeAugment + ": @" + f.getSymName() +
                  " is also a function of the model file; rename one of them"),
             failure();
  }
  for (auto f : llvm::make_early_inc_range(pipeline->getOps<func::FuncOp>())) {
    f->remove();
    f.setPrivate();
    module.push_back(f);
  }
  return success();
}

/// The recipe's `recompute_mlp` (the block MLP's fusions, off by default).
bool recipeRecomputeMlp = false;

/// The optimizing passes of `medc compile` (after the program is complete). Each can be
/// left out with --disable-pass.
LogicalResult optimize(ModuleOp module) {
  std::vector<std::string> disabled(disabledPasses.begin(), disabledPasses.end());
  std::vector<std::string> requested(enabledPasses.begin(), enabledPasses.end());
  if (recipeRecomputeMlp && !llvm::is_contained(requested, "med-form-mlp-fusions"))
    requested.push_back("med-form-mlp-fusions");
  auto run = [&](ModuleOp m, double budget, bool soft, bool print) -> LogicalResult {
    PassManager pm(m.getContext());
    if (failed(med::buildOptimizationPipeline(
            pm, disabled,
            [](const llvm::Twine &msg) { fail("--disable-pass/--enable-pass: " + msg); },
            requested, dataParallel ? std::optional<double>(bucketMb) : std::nullopt, budget,
            recomputeAbove, soft,
            mlpFusions == MlpFusions::OneKernel ? med::MlpFusionBounds{64, 256}
                                                : med::MlpFusionBounds{})))
      return failure();
    if (print)
      printAfterNamedPasses(pm);
    return pm.run(m);
  };
  // The memory target: a step whose plan stays above --recompute-above after the
  // recomputation that costs no memory is compiled again under that size as a budget that
  // is not an error to miss (block MLPs through their templates, at a time cost measured
  // in docs/perf.md). A step that fits keeps the first compilation.
  const bool target = !(memoryBudget > 0) && recomputeAbove > 0 &&
                      !llvm::is_contained(disabled, "med-recompute");
  if (!target)
    return run(module, memoryBudget, false, true);
  OwningOpRef<ModuleOp> probe = module.clone();
  if (failed(run(*probe, 0, false, false)))
    return failure();
  int64_t most = 0;
  for (auto f : probe->getOps<func::FuncOp>())
    if (!f.isExternal())
      if (FailureOr<med::FunctionMemoryPlan> plan = med::planFunctionMemory(f); succeeded(plan))
        most = std::max<int64_t>(most, int64_t(plan->arena.bytes) + plan->residentBytes);
  const bool over = most > int64_t(recomputeAbove * double(int64_t(1) << 30));
  if (!over && printIRAfter.empty()) {
    module.getBodyRegion().takeBody(probe->getBodyRegion());
    return success();
  }
  return run(module, over ? double(recomputeAbove) : 0.0, over, true);
}

// The function to analyse: --entry, or the only public function.
func::FuncOp entryFunction(ModuleOp module) {
  if (!entry.empty()) {
    auto f = module.lookupSymbol<func::FuncOp>(entry);
    if (!f)
      fail("no function @" + entry);
    return f;
  }
  func::FuncOp found;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!f.isPublic() || f.isExternal())
      continue;
    if (found) {
      fail("several public functions (@" + found.getSymName() + ", @" + f.getSymName() +
           "); choose one with --entry");
      return nullptr;
    }
    found = f;
  }
  if (!found)
    fail("no public function to analyse");
  return found;
}

// The factor each patch size must be a multiple of: the largest cumulative stride a value
// of the network sees, per axis (a strided convolution multiplies it, a transposed one
// divides it). MedNeXt's four stride-2 blocks give 16. Follows calls into the block
// functions.
using Strides = std::array<int64_t, 3>;
SmallVector<Strides> cumulativeStrides(ModuleOp module, func::FuncOp f, ArrayRef<Strides> args,
                                       Strides &largest) {
  llvm::DenseMap<Value, Strides> of;
  for (auto [arg, s] : llvm::zip(f.getArguments(), args))
    of[arg] = s;
  auto get = [&](Value v) { return of.lookup(v).front() ? of.lookup(v) : Strides{1, 1, 1}; };
  SmallVector<Strides> results;
  for (Operation &op : f.getBody().front()) {
    Strides s = {1, 1, 1};
    for (Value v : op.getOperands())
      for (int i = 0; i < 3; ++i)
        s[i] = std::max(s[i], get(v)[i]);
    if (isa<func::ReturnOp>(op)) {
      for (Value v : op.getOperands())
        results.push_back(get(v));
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal())
        continue;
      SmallVector<Strides> in;
      for (Value v : call.getOperands())
        in.push_back(get(v));
      SmallVector<Strides> out = cumulativeStrides(module, callee, in, largest);
      for (auto [r, o] : llvm::zip(call.getResults(), out))
        of[r] = o;
      continue;
    }
    if (auto stride = op.getAttrOfType<DenseI64ArrayAttr>("stride"); stride && stride.size() == 3)
      for (int i = 0; i < 3; ++i)
        s[i] = isa<med::Conv3dTransposeOp>(op) ? std::max<int64_t>(1, s[i] / stride[i])
                                               : s[i] * stride[i];
    for (int i = 0; i < 3; ++i)
      largest[i] = std::max(largest[i], s[i]);
    for (Value r : op.getResults())
      of[r] = s;
  }
  return results;
}

// A recipe's patch must be a multiple of its network's downsampling factor on each axis:
// said here, naming the recipe and the rule, rather than as a shape error deep in the model.
// loss.affinities.offsets against the network and the patch, where the offsets make the
// targets (given, or a generated banis/affinities pipeline): one output channel per offset,
// each offset shorter than the patch on every axis. Without them the host loader makes
// BANIS's targets, the first C for a network of C < 6 channels: the effective recipe then
// names those C (what `medrun segment --run` reads).
LogicalResult checkAffinityOffsets(const std::string &recipePath, medc::Recipe &recipe,
                                   func::FuncOp network, ArrayRef<int64_t> sizes) {
  auto &offsets = recipe.affinityOffsets;
  auto out = network.getNumResults() ? dyn_cast<RankedTensorType>(network.getResultTypes()[0])
                                     : RankedTensorType();
  const int64_t channels = out && out.getRank() == 5 && !out.isDynamicDim(1) ? out.getDimSize(1) : 0;
  if (offsets.empty() || (!recipe.affinityOffsetsGiven && recipe.augmentGenerated != "banis" &&
                          recipe.augmentGenerated != "affinities")) {
    if (channels >= 1 && channels < static_cast<int64_t>(offsets.size())) {
      offsets.resize(channels);
      llvm::json::Array list;
      for (const auto &o : offsets)
        list.push_back(llvm::json::Array{o[0], o[1], o[2]});
      (*recipe.effective.getObject("loss"))["affinities"] =
          llvm::json::Object{{"offsets", std::move(list)}};
    }
    return success();
  }
  const std::string key = recipePath + ": loss.affinities.offsets";
  for (size_t k = 0; k < offsets.size(); ++k)
    for (int a = 0; a < 3; ++a)
      if (std::abs(offsets[k][a]) >= sizes[a])
        return fail(key + ": offset " + llvm::Twine(k) + " [" + llvm::Twine(offsets[k][0]) + ", " +
                    llvm::Twine(offsets[k][1]) + ", " + llvm::Twine(offsets[k][2]) + "] reaches " +
                    llvm::Twine(std::abs(offsets[k][a])) + " voxels along " + std::string(1, "DHW"[a]) +
                    ", not less than the patch's " + llvm::Twine(sizes[a]) +
                    " (no affinity of the patch would pair two of its voxels)"),
               failure();
  if (channels && channels != static_cast<int64_t>(offsets.size()))
    return fail(key + " has " + llvm::Twine(offsets.size()) + " offsets" +
                (recipe.affinityOffsetsGiven ? "" : " (the default: BANIS's six)") + ", but @" +
                network.getSymName() + " of the model predicts " + llvm::Twine(channels) +
                " channels: one affinity per channel (give as many offsets, or a model of " +
                llvm::Twine(offsets.size()) + " output channels)"),
           failure();
  return success();
}

LogicalResult checkRecipePatch(const std::string &recipePath, medc::Recipe &recipe,
                               ArrayRef<int64_t> sizes) {
  DialectRegistry registry;
  med::registerMedDialects(registry);
  MLIRContext ctx(registry);
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &ctx);
  OwningOpRef<ModuleOp> module = loadModel(recipe.model, ctx, sources);
  if (!module)
    return failure();
  SmallVector<func::FuncOp> candidates;
  for (auto f : module->getOps<func::FuncOp>())
    if (recipe.network.empty() ? f.isPublic() && !f.isExternal() : f.getSymName() == recipe.network)
      candidates.push_back(f);
  func::FuncOp network = candidates.size() == 1 ? candidates.front() : func::FuncOp();
  if (!network || network.getBody().empty())
    return success(); // no single network: the compiler's own errors say why
  if (failed(checkAffinityOffsets(recipePath, recipe, network, sizes)))
    return failure();
  Strides largest = {1, 1, 1};
  SmallVector<Strides> args(network.getNumArguments(), Strides{1, 1, 1});
  cumulativeStrides(*module, network, args, largest);
  for (int i = 0; i < 3; ++i)
    if (sizes[i] % largest[i] != 0) {
      int64_t f = largest[i], below = sizes[i] / f * f;
      return fail(recipePath + ": data.patch [" +
                  llvm::join(llvm::map_range(sizes, [](int64_t d) { return std::to_string(d); }), ", ") +
                  "] must be a multiple of " + llvm::Twine(f) + " on each axis: @" +
                  network.getSymName() + " downsamples by " + llvm::Twine(f) + " (e.g. " +
                  (below > 0 ? std::to_string(below) + " or " : "") + std::to_string(below + f) +
                  " instead of " + std::to_string(sizes[i]) + ")"),
             failure();
    }
  return success();
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

// 1234567 -> "1.23 M" (SI prefixes, for counts of operations).
std::string si(double v) {
  const char *prefixes[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  return llvm::formatv("{0:F2} {1}", v, prefixes[i]).str(); // "1.23 M", "4.00 "
}

// 3.5 * 2^30 -> "3.50 GiB".
std::string bytes(double v) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  return llvm::formatv("{0:F2} {1}", v, units[i]).str();
}

void printStats(func::FuncOp f, const med::ModelStats &s) {
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
                           {"peak_live_bytes", s.peakLiveBytes},
                           {"planned_arena_bytes", s.plannedArenaBytes},
                           {"resident_bytes", s.residentBytes},
                           {"planned_peak_bytes", s.plannedArenaBytes + s.residentBytes}};
    if (s.memoryBudgetBytes)
      out["memory_budget_bytes"] = s.memoryBudgetBytes;
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(out))) << "\n";
    return;
  }
  llvm::raw_ostream &os = llvm::outs();
  os << "function    @" << f.getSymName() << "\n";
  for (Type t : f.getArgumentTypes())
    os << "input       " << t << "\n";
  os << "parameters  " << withCommas(s.parameterCount) << " in " << s.parameterTensors
     << " tensors (" << bytes(s.parameterBytes) << ")\n\n";
  os << "forward FLOPs (2 per multiply-add)\n";
  double total = s.totalFlops();
  for (auto &[family, flops] : s.flopsByFamily)
    if (flops > 0)
      os << llvm::formatv("  {0,-18} {1,12}FLOP  {2,5:F1}%\n", family, si(flops),
                          100 * flops / total);
  os << llvm::formatv("  {0,-18} {1,12}FLOP\n", "total", si(total));
  os << "  convolutions: " << si(s.convMacs) << " multiply-adds\n\n";
  os << "activation memory (forward, at the tensors' element types)\n"
     << llvm::formatv("  all op results     {0,12}\n", bytes(s.activationBytes))
     << llvm::formatv("  peak live          {0,12} (forward only, program order)\n",
                      bytes(s.peakLiveBytes));
  os << "\nplanned device memory (medc's memory plan over the ops in program order)\n"
     << llvm::formatv("  arena              {0,12} (values at their storage types)\n",
                      bytes(s.plannedArenaBytes))
     << llvm::formatv("  resident state     {0,12} (the parameters, moments and EMA read)\n",
                      bytes(s.residentBytes))
     << llvm::formatv("  planned peak       {0,12}{1}\n", bytes(s.plannedArenaBytes + s.residentBytes),
                      s.memoryBudgetBytes ? " (within the memory budget of " +
                                                bytes(s.memoryBudgetBytes) + ", med-recompute)"
                                          : std::string());
}

// Identifies what a recipe compiles to: this compiler (its executable), the model file and
// the compile-time settings. medrun names cached artifacts by it, so a changed model,
// recipe or compiler recompiles and nothing else does.
std::string compileHash(const medc::Recipe &r, const char *argv0) {
  llvm::SHA256 h;
  auto add = [&](llvm::StringRef s) {
    h.update(s);
    h.update(llvm::StringRef("\0", 1));
  };
  add(MEDC_VERSION);
  std::string self = llvm::sys::fs::getMainExecutable(argv0, (void *)&compileHash);
  if (auto exe = llvm::MemoryBuffer::getFile(self))
    add((*exe)->getBuffer());
  if (auto model = llvm::MemoryBuffer::getFile(r.model))
    add((*model)->getBuffer());
  add(r.network);
  add(std::to_string(r.batch));
  for (int64_t d : r.patch)
    add(std::to_string(d));
  if (auto pipeline = llvm::MemoryBuffer::getFile(r.augment); !r.augment.empty() && pipeline)
    add((*pipeline)->getBuffer()), add(r.augmentOverridesKey);
  if (!r.augmentGenerated.empty()) { // the generator's text and what it is asked for
    add("generated " + r.augmentGenerated);
    if (auto script = llvm::MemoryBuffer::getFile(medc::augmentGenerator()))
      add((*script)->getBuffer());
    for (int64_t size : {r.augmentChannels, r.augmentClasses, r.augmentLevels, r.augmentContext})
      add(std::to_string(size));
    for (const auto &o : r.affinityOffsets)
      add(std::to_string(o[0]) + "," + std::to_string(o[1]) + "," + std::to_string(o[2]));
    add(r.augmentOverridesKey);
  }
  add(r.lossOptions);
  add(r.trainOptions);
  // Settings that change the compiled step's passes (an artifact cached under another
  // value would be reused otherwise).
  add(r.recomputeMlp ? "recompute_mlp" : "");
  add(llvm::formatv("memory_budget_gib {0} recompute_above_gib {1}", r.memoryBudgetGib,
                    r.recomputeAboveGib)
          .str());
  if (r.dropout)
    add("dropout " + llvm::utohexstr(llvm::bit_cast<uint64_t>(*r.dropout)));
  // The stencil kernels emitted (the same function, other kernels and times: a cached
  // artifact of one variant must not stand in for another's measurement).
  if (const char *stencil = std::getenv("MEDC_STENCIL"); stencil && *stencil)
    add(std::string("stencil ") + stencil);
  if (mlpFusions == MlpFusions::None)
    add("mlp_fusions none");
  if (const char *mlpGrad = std::getenv("MEDC_MLP_GRAD"); mlpGrad && *mlpGrad)
    add(std::string("mlp_grad ") + mlpGrad);
  return llvm::toHex(h.final(), /*LowerCase=*/true).substr(0, 16);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  // LLVM's own options stay usable but out of --help.
  cl::HideUnrelatedOptions({&shapeCategory, &outputCategory});
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << medtool::versionText(
        "medc", {{"MLIR", LLVM_VERSION_STRING},
#ifdef MED_CUDA_TOOLKIT_VERSION
                 {"CUDA toolkit", MED_CUDA_TOOLKIT_VERSION " (NVRTC, linked)"},
#else
                 {"CUDA toolkit", "none (built without it: no --target cuda)"},
#endif
                 {"artifact format", "writes version " + std::to_string(mlir::med::kArtifactFormatVersion)}});
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "medc: the med compiler\n\n"
      "  medc stats FILE    parameters, forward FLOPs by op family, activation memory\n"
      "  medc compile FILE  parse, verify and run the compilation pipeline (FILE: .mlir or "
      ".onnx)\n"
      "  medc import M.onnx -o M.mlir   an ONNX model as a med network\n"
      "  medc compile --recipe R.yaml [--set key=value]...   compile a training recipe\n"
      "  medc recipe R.yaml [--set key=value]...  the effective recipe as JSON\n\n"
      "Shapes: model files leave batch and patch open (`?`); --batch and --patch fix them\n"
      "(default 1 and 128,128,128). Run `medc stats --help` for a subcommand's options.\n");

  if (!statsCmd && !compileCmd && !recipeCmd && !importCmd) {
    cl::PrintHelpMessage();
    return 1;
  }
  if (recipeCmd) {
    if (recipeInput.empty())
      return fail("recipe: no recipe file (e.g. medc recipe configs/banis_plus.yaml)");
    llvm::Expected<medc::Recipe> recipe = medc::readRecipe(recipeInput, overrides);
    if (!recipe)
      return fail(llvm::toString(recipe.takeError()));
    if (failed(checkRecipePatch(recipeInput, *recipe, recipe->patch)))
      return 1;
    if (!recipe->effective.getObject("optimizer")->get("lr"))
      return fail(recipeInput + ": missing 'optimizer.lr' (the base learning rate of the "
                                "schedule, e.g. 1.0e-3)");
    recipe->effective["recipe"] = recipeInput.getValue();
    recipe->effective["compile_hash"] = compileHash(*recipe, argv[0]);
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(recipe->effective)))
                 << "\n";
    return 0;
  }
  std::string recipeHash;
  std::optional<double> effectiveDropout;
  if (dropoutRate.getNumOccurrences())
    effectiveDropout = dropoutRate;
  if (lossOptions.getNumOccurrences())
    effectiveLoss = lossOptions;
  if (train.getNumOccurrences())
    effectiveTrain = train;
  if (!recipeFile.empty()) {
    if (!inputFile.empty() || effectiveLoss || effectiveTrain)
      return fail("--recipe names the model, loss and optimizer; give no model file, --loss or "
                  "--train with it");
    if (effectiveDropout)
      return fail("--dropout: the recipe's model.dropout sets the rate (--set model.dropout=P)");
    llvm::Expected<medc::Recipe> recipe = medc::readRecipe(recipeFile, overrides);
    if (!recipe)
      return fail(llvm::toString(recipe.takeError()));
    recipeHash = compileHash(*recipe, argv[0]);
    inputFile = recipe->model;
    if (!batch.getNumOccurrences())
      batch = recipe->batch;
    if (patch.empty())
      for (int64_t d : recipe->patch)
        patch.push_back(d);
    if (patch.size() == 3 && failed(checkRecipePatch(recipeFile, *recipe, specializedPatch())))
      return 1;
    effectiveLoss = recipe->lossOptions;
    effectiveTrain = recipe->trainOptions;
    recipeRecomputeMlp = recipe->recomputeMlp;
    if (!memoryBudget.getNumOccurrences())
      memoryBudget = recipe->memoryBudgetGib;
    if (!recomputeAbove.getNumOccurrences())
      recomputeAbove = recipe->recomputeAboveGib;
    recipeAugment = recipe->augment;
    recipeAugmentFunction = recipe->augmentFunction;
    recipeNetwork = recipe->network;
    effectiveDropout = recipe->dropout;
    recipeAugmentRequest.pipeline = recipe->augmentGenerated;
    recipeAugmentRequest.channels = recipe->augmentChannels;
    recipeAugmentRequest.classes = recipe->augmentClasses;
    recipeAugmentRequest.levels = recipe->augmentLevels;
    recipeAugmentRequest.context = recipe->augmentContext;
    recipeAugmentRequest.offsets = recipe->affinityOffsets;
    recipeAugmentOverrides = recipe->augmentOverrides;
    recipeAffinityOffsetsGiven = recipe->affinityOffsetsGiven;
  }
  if (recipeFile.empty() && !overrides.empty())
    return fail("--set overrides a recipe key; use it with --recipe");
  if (inputFile.empty())
    return fail("no model file (see --help)");
  if (!patch.empty() && patch.size() != 3)
    return fail("--patch needs three sizes D,H,W, got " + llvm::Twine(patch.size()));
  if (batch < 1 || llvm::any_of(patch, [](int64_t d) { return d < 1; }))
    return fail("--batch and --patch sizes must be positive");
  {
    int64_t voxels = batch;
    for (int64_t d : specializedPatch())
      if (__builtin_mul_overflow(voxels, d, &voxels) || voxels > medrun::recipe::kMaxBatchVoxels)
        return fail("--batch x --patch (" + llvm::Twine(batch.getValue()) + " x " +
                    llvm::join(llvm::map_range(specializedPatch(),
                                               [](int64_t d) { return std::to_string(d); }),
                               ",") +
                    ") must be at most 2^40 voxels: sizes past that cannot be planned or counted");
  }

  DialectRegistry registry;
  med::registerMedDialects(registry);
  MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false); // the location says where; a dump of the op buries it
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &ctx);

  OwningOpRef<ModuleOp> module = load(ctx, sources);
  if (module && effectiveDropout)
    if (llvm::Error e = med::applyDropoutRate(*module, *effectiveDropout, inputFile))
      return fail(llvm::toString(std::move(e)));
  if (importCmd) { // the imported module as it is: batch and patch stay open
    if (!module || failed(verify(*module)))
      return 1;
    std::string error;
    auto output = openOutputFile(outputFile, &error);
    if (!output)
      return fail("cannot write '" + outputFile + "': " + error);
    output->os() << "// Imported by medc import from " << inputFile << "\n";
    module->print(output->os());
    output->keep();
    return 0;
  }
  if (!module || failed(verify(*module)) || failed(linkAugmentation(*module)) ||
      failed(specialize(*module)))
    return 1;

  if (statsCmd) {
    func::FuncOp f = entryFunction(*module);
    if (!f)
      return 1;
    FailureOr<med::ModelStats> stats = med::computeModelStats(f);
    if (failed(stats))
      return 1;
    if (memoryBudget > 0) { // the planned peak once med-recompute has met the budget
      PassManager pm(&ctx);
      med::MedRecomputeOptions options;
      options.budgetGib = memoryBudget;
      pm.nest<func::FuncOp>().addPass(med::createMedRecompute(options));
      if (failed(pm.run(*module)))
        return 1;
      FailureOr<med::ModelStats> budgeted = med::computeModelStats(f);
      if (failed(budgeted))
        return 1;
      stats->plannedArenaBytes = budgeted->plannedArenaBytes;
      stats->residentBytes = budgeted->residentBytes;
      stats->memoryBudgetBytes = static_cast<int64_t>(memoryBudget * double(int64_t(1) << 30));
    }
    printStats(f, *stats);
    return 0;
  }

  if (failed(optimize(*module)))
    return 1;
  bool artifact = emit == Emit::Artifact ||
                  (emit == Emit::Auto && llvm::StringRef(outputFile).ends_with(".medc"));
  std::string error;
  auto output = openOutputFile(outputFile, &error);
  if (!output)
    return fail("cannot write '" + outputFile + "': " + error);
  if (artifact || emit == Emit::Plan || emit == Emit::Cuda) {
    med::ArtifactManifest manifest;
    manifest.compiler = "medc " MEDC_VERSION;
    manifest.source = inputFile;
    manifest.sourceSha256 = sourceSha256;
    manifest.options = {{"batch", std::to_string(batch)},
                        {"patch", llvm::join(llvm::map_range(specializedPatch(),
                                                             [](int64_t d) {
                                                               return std::to_string(d);
                                                             }),
                                             ",")},
                        {"entry", entry},
                        {"grad", grad ? "true" : "false"},
                        {"loss", effectiveLoss.value_or("")},
                        {"train", effectiveTrain.value_or("")},
                        {"recipe", recipeFile},
                        {"compile_hash", recipeHash},
                        {"target", target == Target::Cuda ? "cuda" : "cpu"}};
    if (dataParallel) // absent otherwise: single-process artifacts stay as they were
      manifest.options["data_parallel"] = llvm::formatv("bucket-mb={0}", bucketMb.getValue()).str();
    FailureOr<llvm::json::Value> doc = med::artifactDocument(*module, manifest);
    if (failed(doc))
      return 1;
    std::vector<med::ArtifactSection> sections;
    if (fusionChecks)
      med::appendFusionCheckFunctions(*doc->getAsObject());
    if (target == Target::Cuda || emit == Emit::Cuda) {
      const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
      llvm::Expected<med::CudaProgram> program =
          med::generateCuda(*doc->getAsObject(), cudaModules ? cudaModules : threads,
                            cudaScratchKib ? int64_t{cudaScratchKib.getValue()} << 10
                                           : int64_t{std::max(1u, cudaScratchMib.getValue())} << 20,
                            int64_t{cudaMlpResidentKib.getValue()} << 10,
                            int64_t{cudaMlpResidentBlocks.getValue()},
                            cudaWgmma && cudaArch == 90,
                            int64_t{std::max(1u, cudaSmCount.getValue())},
                            int64_t{std::max(1u, cudaMlpPipeline.getValue())});
      if (!program)
        return fail(llvm::toString(program.takeError()));
      if (cudaInjectError) {
        program->source += "\nthis line is not C++ (injected by --cuda-inject-error);\n";
        program->modules.back() += "\nthis line is not C++ (injected by --cuda-inject-error);\n";
      }
      if (emit == Emit::Cuda) {
        output->os() << program->source;
        output->keep();
        return 0;
      }
      auto start = std::chrono::steady_clock::now();
      std::vector<std::string> archs;
      for (const std::string &a : program->moduleArchs)
        archs.push_back(a.empty() ? std::to_string(cudaArch) : a);
      llvm::Expected<std::vector<med::CudaBinary>> binaries =
          med::compileCudaModules(program->modules, archs, cudaFmad, threads);
      if (!binaries)
        return fail(llvm::toString(binaries.takeError()));
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::string arch = std::to_string(cudaArch);
      llvm::json::Array modules;
      for (size_t m = 0; m < binaries->size(); ++m) {
        const med::CudaBinary &b = (*binaries)[m];
        std::string suffix = "." + std::to_string(m);
        llvm::json::Object module{{"source", "cuda.source" + suffix},
                                  {"cubin", "cuda.cubin" + suffix},
                                  {"compile_seconds", std::round(b.seconds * 100) / 100},
                                  {"cached", b.cached}};
        sections.push_back({"cuda.source" + suffix, program->modules[m]});
        sections.push_back({"cuda.cubin" + suffix, b.cubin});
        // An sm_90a module runs on sm_90 GPUs only: its PTX would serve no other.
        if (!program->moduleArchs[m].empty())
          module["arch"] = "sm_" + program->moduleArchs[m];
        else if (cudaPtx) {
          module["ptx"] = "cuda.ptx" + suffix;
          sections.push_back({"cuda.ptx" + suffix, b.ptx});
        }
        modules.push_back(std::move(module));
      }
      (*doc->getAsObject())["cuda"] = llvm::json::Object{
          {"arch", "sm_" + arch},
          {"nvrtc", binaries->front().version},
          {"options", llvm::json::Array{"--gpu-architecture=sm_" + arch, "-default-device",
                                        "--std=c++17", cudaFmad ? "--fmad=true" : "--fmad=false"}},
          {"kernels", static_cast<int64_t>(program->kernels)},
          {"launches", static_cast<int64_t>(program->launches)},
          {"compile_seconds", std::round(seconds * 100) / 100},
          {"modules", std::move(modules)}};
    }
    if (emit == Emit::Plan)
      output->os() << llvm::formatv("{0:2}", *doc) << "\n";
    else
      med::writeArtifactContainer(*doc, sections, output->os());
  } else {
    module->print(output->os());
  }
  output->keep();
  return 0;
}
