//===- medcheck.cpp - checks medrun's CPU or CUDA backend against LibTorch ------------===//
//
//   medcheck X.medc [--func NAME]... [--seed S] [--tolerance T] [--precision f32|f64]
//            [--threads N] [--grad] [--fd N [--fd-params REGEX] [--fd-tolerance T]]
//            [--device cpu|cuda] [--torch-device cpu|cuda]
//   medcheck X.medc --train-steps N [--lr L] [--lr-schedule constant|cosine]
//            [--ema-decay D] [--ema-warmup W] [--loss-scale S] [--train-grad] [--seed S]
//            [--tolerance T] [--precision f32|f64|bf16|f16] [--threads N]
//            [--against-autocast [--autocast-ratio R] [--autocast-type bf16|f16]]
//            [--against-f64 [--f64-ratio R]]
//            [--device cpu|cuda] [--torch-device cpu|cuda]
//
// For each selected function of the artifact: initializes the parameters (initParameters),
// draws random inputs by the role of each argument, runs the function with runCpu (or a
// CudaSession, --device cuda) and with the LibTorch reference of TorchReference.cpp (on
// torch's CPU or GPU, --torch-device), and compares every output.
// --grad compares the gradients <f>_grad computes with torch autograd of f's mapping;
// --fd compares them with central finite differences of f on our own backend in f64.
// --train-steps runs N steps of train_step against torch autograd + torch.optim + EMA
// (+ a GradScaler written out here for fp16-mixed steps); with --against-autocast, a bf16
// or f16 step is judged against torch autocast's error next to torch f32; with
// --against-f64, an f32 step (or function) against torch f32's error next to torch f64.
//
//===----------------------------------------------------------------------------------===//
#include "Check.h"
#include "Version.h"

#include "medrun/GpuLibraries.h"
#include "medrun/Parallel.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <set>

namespace medcheck {
namespace {

/// The functions --func selects (all of the artifact's without it).
std::vector<const medrun::Function *> selectedFunctions(const Options &o,
                                                        const medrun::Artifact &artifact) {
  std::vector<const medrun::Function *> fns;
  if (o.funcs.empty()) {
    for (const medrun::Function &f : artifact.functions)
      fns.push_back(&f);
  } else {
    std::set<std::string> seen;
    for (const std::string &name : o.funcs)
      if (seen.insert(name).second)
        fns.push_back(&artifact.function(name)); // throws, listing the functions there are
  }
  if (fns.empty())
    throw Error(str(o.artifact, ": the artifact has no functions"));
  return fns;
}

/// Gradient modes: the pairs (f, f_grad) among the selection; --func f_grad means f.
std::vector<GradPair> gradPairs(const Options &o, const medrun::Artifact &artifact,
                                const std::vector<const medrun::Function *> &fns) {
  std::vector<GradPair> pairs;
  const char *mode = o.grad ? "--grad" : "--fd";
  auto find = [&](const std::string &name) -> const medrun::Function * {
    for (const medrun::Function &f : artifact.functions)
      if (f.name == name)
        return &f;
    return nullptr;
  };
  std::set<std::string> seen;
  for (const medrun::Function *fn : fns) {
    GradPair p;
    if (const medrun::Function *g = find(fn->name + "_grad")) {
      p = {fn, g};
    } else if (fn->name.size() > 5 &&
               fn->name.compare(fn->name.size() - 5, 5, "_grad") == 0 &&
               find(fn->name.substr(0, fn->name.size() - 5))) {
      p = {find(fn->name.substr(0, fn->name.size() - 5)), fn};
    } else {
      if (!o.funcs.empty())
        throw UsageError(str(mode, ": function '", fn->name, "' has no gradient function '",
                             fn->name, "_grad' in ", o.artifact,
                             " (compile it with medc compile --grad; the first result must "
                             "be a scalar loss)"));
      continue;
    }
    if (seen.insert(p.f->name).second)
      pairs.push_back(p);
  }
  if (pairs.empty())
    throw UsageError(str(mode, ": ", o.artifact, " has no gradient function (<f>_grad); ",
                         "compile it with medc compile --grad"));
  if (o.fd > 0 && o.hasFdParams &&
      std::none_of(pairs.begin(), pairs.end(),
                   [&](const GradPair &p) { return fdSelectsAny(o, p); }))
    throw UsageError(str("--fd-params '", o.fdParams, "' matches no parameter or argument ",
                         "of the checked functions"));
  return pairs;
}

int run(const Options &o) {
  torch::Device torchDevice = torch::kCPU;
  if (o.torchDevice == "cuda") {
    if (!torch::cuda::is_available())
      throw Error("--torch-device cuda: this LibTorch has no usable CUDA device (a CPU-only "
                  "build, or no GPU or driver); use --torch-device cpu");
    torchDevice = torch::Device(torch::kCUDA, 0);
    // f32 products in f32: TF32 (10-bit mantissas) in cuDNN's convolutions or cuBLAS's
    // matmuls would be far outside the f32 tolerances. No benchmarking: cuDNN picks its
    // algorithms by its heuristics, the same in every step.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  medrun::Artifact artifact = medrun::Artifact::load(o.artifact);
  std::unique_ptr<medrun::CudaSession> session; // one for the whole run
  if (o.device == "cuda")
    session = std::make_unique<medrun::CudaSession>(artifact);
  if (o.fusions)
    return checkFusions(o, artifact, torchDevice);
  Sides sides{artifact, o.precision, session.get(), torchDevice};
  sides.recompute = o.recompute;
  if (session || torchDevice.is_cuda()) {
    std::cout << "devices  ours " << o.device;
    if (session)
      std::cout << " (" << session->deviceName()
                << (session->loadedFromPtx() ? ", kernels from PTX" : "") << ")";
    std::cout << "  torch " << o.torchDevice << (torchDevice.is_cuda() ? " (TF32 off)" : "")
              << "\n";
  }
  if (o.trainSteps > 0) {
    double tolerance = o.tolerance > 0 ? o.tolerance : defaultTolerance(o.precision);
    return checkTrain(o, sides, tolerance,
                      o.precision == medrun::Precision::F64 ? torch::kDouble : torch::kFloat);
  }
  const bool gradients = o.grad || o.fd > 0;
  const std::vector<const medrun::Function *> fns = selectedFunctions(o, artifact);
  const std::vector<GradPair> pairs =
      gradients ? gradPairs(o, artifact, fns) : std::vector<GradPair>();

  double tolerance = o.tolerance > 0 ? o.tolerance
                     : o.precision == medrun::Precision::F64 ? 1e-10
                                                             : 1e-4;
  torch::ScalarType floatType =
      o.precision == medrun::Precision::F64 ? torch::kDouble : torch::kFloat;

  medrun::TensorMap params = medrun::initParameters(artifact, o.seed);
  std::map<std::string, torch::Tensor> torchParams;
  for (const auto &[name, t] : params)
    torchParams[name] = sides.toTorch(t);

  const char *precisionName = o.precision == medrun::Precision::F64 ? "f64" : "f32";
  bool failed = false;
  if (!gradients) {
    Counts n = checkForward(o, sides, fns, params, torchParams, tolerance, floatType);
    if (o.againstF64)
      std::cout << n.checked << " outputs checked, " << n.failed << " failed (against torch "
                << "f64: rel <= " << o.f64Ratio << " * f32's rel or <= " << sci(kF32Level)
                << ", gradients vanishing below " << sci(kVanishing * tolerance)
                << " of the largest; precision f32)\n";
    else
      std::cout << n.checked << " outputs checked, " << n.failed << " failed (tolerance "
                << sci(tolerance) << ", precision " << precisionName << ")\n";
    failed = n.failed > 0;
  }
  if (o.grad) {
    Counts n = checkGrad(o, sides, pairs, params, torchParams, tolerance, floatType);
    std::cout << n.checked << " gradient outputs checked against torch autograd, " << n.failed
              << " failed (tolerance " << sci(tolerance) << ", precision " << precisionName
              << ")\n"
              << std::flush;
    failed |= n.failed > 0;
  }
  if (o.fd > 0) {
    if (session)
      std::cout << "--fd: finite differences run on the CPU backend in f64 (--device cuda "
                   "does not apply to them)\n";
    double fdTolerance = o.fdTolerance > 0 ? o.fdTolerance : 1e-6;
    size_t elements = 0;
    Counts n = checkFd(o, artifact, pairs, params, fdTolerance, elements);
    std::cout << n.checked << " gradients checked by finite differences (" << elements
              << " elements), " << n.failed << " failed (tolerance " << sci(fdTolerance)
              << ", f64)\n";
    failed |= n.failed > 0;
  }
  return failed ? 1 : 0;
}

} // namespace
} // namespace medcheck

int main(int argc, char **argv) {
  using namespace medcheck;
  Options o;
  try {
    o = parseArgs(argc, argv);
  } catch (const UsageError &e) {
    std::cerr << "medcheck: " << e.what() << "\n(medcheck --help lists the options)\n";
    return 2;
  }
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  if (o.version) {
    medtool::VersionLines lines = {{"LibTorch", TORCH_VERSION}};
    for (auto &line : medrun::gpuLibraryVersions())
      lines.push_back(line);
    std::cout << medtool::versionText("medcheck", lines);
    return 0;
  }
  try {
    // Both sides get the same number of threads, so that the times compare.
    if (o.threads > 0)
      medrun::setNumThreads(o.threads);
    torch::set_num_threads(medrun::numThreads());
    return run(o);
  } catch (const UsageError &e) { // a usage error only the artifact reveals (--grad, --fd)
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
    return 2;
  } catch (const medrun::Error &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
  } catch (const c10::Error &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: torch: " << e.what_without_backtrace() << "\n";
  } catch (const std::exception &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
  }
  memoryAtError();
  return 1;
}
