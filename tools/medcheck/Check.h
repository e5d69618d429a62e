//===- Check.h - medcheck's parts, shared by its files -------------------------------===//
//
// Internal to tools/medcheck, one file per concern:
//   medcheck.cpp         main: which functions and which checks run
//   CommandLine.cpp      the options and --help
//   Compare.cpp          a tensor against torch's, pass or fail, the report's lines
//   Sides.cpp            where each side computes (Sides), the GPU memory both share
//   ForwardCheck.cpp     the outputs of each function; --fusions
//   GradCheck.cpp        --grad (torch autograd) and --fd (finite differences)
//   TrainCheck.cpp       --train-steps: train_step against torch.optim, step by step
//   AutocastCompare.cpp  --train-steps' comparison of each kind of tensor, and the ratio
//                        rule of --against-autocast and --against-f64
// TorchReference.cpp is the LibTorch side: the mapping of each op.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDCHECK_CHECK_H
#define MEDCHECK_CHECK_H

#include "TorchReference.h"

#include "medrun/AdamDrift.h"
#include "medrun/Artifact.h"
#include "medrun/Cuda.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Tensor.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace medcheck {

using medrun::Error;
using medrun::str;

//===- The command line (CommandLine.cpp) ------------------------------------------===//

/// A bad command line: exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string artifact;
  std::vector<std::string> funcs;
  uint64_t seed = 0;
  double tolerance = -1; // < 0: the precision's default
  medrun::Precision precision = medrun::Precision::F32;
  int threads = 0;
  bool help = false;
  bool version = false;
  bool grad = false;
  bool fusions = false; ///< --fusions: each fusion body in isolation
  int64_t fd = 0; ///< > 0: finite differences with this many elements per tensor
  std::string fdParams;
  bool hasFdParams = false;
  std::regex fdRegex;
  double fdTolerance = -1; // < 0: default
  int64_t trainSteps = 0;   ///< > 0: --train-steps
  double lr = 1e-3;
  bool hasLr = false;
  std::string lrSchedule = "constant";
  double emaDecay = 0.999;
  int64_t emaWarmup = 0;
  double lossScale = 0; ///< > 0: --loss-scale
  bool trainGrad = false;
  bool againstAutocast = false; ///< --against-autocast
  bool autocastTypes = false;   ///< --autocast-types
  double autocastRatio = 1.5;
  bool hasAutocastRatio = false;
  std::optional<medrun::Precision> autocastType; ///< --autocast-type (default: --precision)
  bool againstF64 = false; ///< --against-f64: torch f64 the reference, torch f32 the low run
  double f64Ratio = 2;     ///< --f64-ratio
  bool hasF64Ratio = false;
  bool hasTrainOnly = false; ///< an option that needs --train-steps
  std::string device = "cpu"; ///< our backend: cpu or cuda
  std::string torchDevice;    ///< where LibTorch computes: cpu or cuda (empty: as device)
  Recompute recompute;        ///< --torch-recompute and its variants
};

/// medcheck --help.
extern const char *const kUsage;

/// Throws UsageError.
Options parseArgs(int argc, char **argv);

//===- Comparison and the report (Compare.cpp) -------------------------------------===//

struct Comparison {
  double maxAbs = 0, rel = 0;
  double oursNorm = 0, refNorm = 0; ///< 2-norms of the finite values
  std::string problem; ///< non-empty: a mismatch other than the values
};

/// `x` (any device and float type) against `ref`: the largest absolute difference and the
/// relative error norm; NaNs at the same places count as equal.
Comparison compareTorch(const torch::Tensor &x, const torch::Tensor &ref);
/// Ours against torch's, as compareTorch.
Comparison compare(const medrun::Tensor &ours, const torch::Tensor &ref);
/// How many elements the difference d = x - ref is spread over: (sum d^2)^2 / sum d^4 (1 when
/// one element holds it all, the element count when all are alike; 0 for no difference).
double spreadOf(const torch::Tensor &x, const torch::Tensor &ref);

struct Counts {
  size_t checked = 0, failed = 0;
};

/// Gradients whose norms (ours and torch's) are both below kVanishing * tolerance * the
/// largest gradient norm of the function count as zero.
constexpr double kVanishing = 1e-2;

/// Default tolerances of the mixed-precision training checks (--precision bf16 / f16, see
/// --help): a few times the largest relative error seen over a few steps of the checked
/// networks; bf16 keeps 8 bits of mantissa per activation, f16 11.
constexpr double kBF16Tolerance = 5e-2, kF16Tolerance = 1e-2;

/// Pass or fail for each output of one function: the relative error norm within the
/// tolerance; or, for a gradient (isGrad), both norms vanishing next to the function's
/// largest gradient. A gradient that is zero mathematically (a bias right before an instance
/// norm, anything before a norm over a single voxel) is rounding noise on both sides, where
/// a relative error says nothing. Adds "vanishing: ..." to the note of such outputs.
std::vector<bool> judge(const std::vector<Comparison> &cs, const std::vector<bool> &isGrad,
                        double tolerance, std::vector<std::string> &notes);
/// judge's vanishing limit: kVanishing * tolerance * the largest gradient norm.
double vanishingLimit(const std::vector<Comparison> &cs, const std::vector<bool> &isGrad,
                      double tolerance);
/// Whether both norms of a comparison lie below the vanishing limit.
bool vanishes(const Comparison &c, double limit);

/// One output's line: function, name, shape, max_abs, rel, ok or FAIL (and the notes).
void printLine(const std::string &fn, const std::string &name, const medrun::Shape &shape,
               const Comparison &c, bool ok, const std::string &note);

/// "1.2e-05".
std::string sci(double v);
/// "12.3 ms" or "1.23 s".
std::string seconds(double s);
/// Seconds on a steady clock.
double now();

/// The name of output `i` of `fn` (out<i> where the plan gives none).
std::string outputName(const medrun::Function &fn, size_t i);

//===- The two sides (Sides.cpp) ---------------------------------------------------===//

/// Where each side computes: ours on medrun's CPU backend, or on the CUDA backend through
/// one CudaSession for the whole medcheck run (--device); torch on its CPU or its CUDA
/// device (--torch-device). With both on one GPU, each run needs the memory the other
/// leaves: ours frees its arena when a run ends (releaseMemory), and torch's cached blocks are
/// released before each of our runs (beforeOurs).
struct Sides {
  const medrun::Artifact &artifact;
  medrun::Precision precision = medrun::Precision::F32;
  medrun::CudaSession *cuda = nullptr; ///< --device cuda
  torch::Device torchDevice = torch::kCPU;
  Recompute recompute; ///< how gradTorch runs (--torch-recompute)

  /// `recompute` with the memory torch's device has free now: on a GPU what the driver
  /// reports free plus what torch's allocator reserves but does not use, on the CPU the
  /// host's MemAvailable (0 where unknown: then it never runs in parts by itself).
  Recompute recomputeNow() const;
  /// Our run of `fn` (runCpu's interface); outputs and `updates` come back on the host
  /// (without `updates`, the state `fn` sets is dropped).
  std::vector<medrun::Tensor> ours(const medrun::Function &fn,
                                   const std::vector<medrun::Tensor> &inputs,
                                   const medrun::TensorMap &params,
                                   medrun::TensorMap *updates = nullptr) const;
  /// A copy of `t` on torch's device.
  torch::Tensor toTorch(const medrun::Tensor &t) const {
    return medcheck::toTorch(t, torchDevice);
  }
  /// Before each of our runs: with torch on a GPU, the memory its caching allocator keeps
  /// goes back to the driver (the tensors still alive, parameters and optimizer state, stay).
  void beforeOurs() const;
  /// Before torch's run: with torch on a GPU, its allocator's peaks are reset and the
  /// device's memory in use is sampled until afterTorch.
  void beforeTorch() const;
  /// After torch's run (`what`): waits for its kernels, so that its wall time is complete;
  /// with torch on a GPU, prints its peak memory (the device's and torch's allocator's).
  void afterTorch(const std::string &what) const;
  /// "2 threads" or "cuda", for the time lines.
  std::string oursWhere() const;
  std::string torchWhere() const;
};

/// After an error in a run that was being sampled (an out-of-memory one, say): how much of
/// the GPU was in use at the peak of that run, and torch's allocator's peaks.
void memoryAtError();

//===- The checks ------------------------------------------------------------------===//

/// The inputs of a function, drawn by the role of each argument (medrun/InputRoles.h): the
/// same for `fn`'s name and `seed` in every mode.
std::vector<medrun::Tensor> drawInputs(const medrun::Function &fn, uint64_t seed);

/// Each function's outputs against torch (ForwardCheck.cpp).
Counts checkForward(const Options &o, const Sides &sides,
                    const std::vector<const medrun::Function *> &fns,
                    const medrun::TensorMap &params,
                    const std::map<std::string, torch::Tensor> &torchParams, double tolerance,
                    torch::ScalarType floatType);

/// --fusions: every distinct fusion body against LibTorch, in isolation (ForwardCheck.cpp).
int checkFusions(const Options &o, const medrun::Artifact &artifact, torch::Device device);

/// A loss function and the gradient function med-autodiff made of it.
struct GradPair {
  const medrun::Function *f = nullptr, *g = nullptr;
};

/// Whether --fd-params (if any) selects a gradient output of `p` (GradCheck.cpp).
bool fdSelectsAny(const Options &o, const GradPair &p);

/// --grad: f_grad on our backend against torch autograd of f's mapping (GradCheck.cpp).
Counts checkGrad(const Options &o, const Sides &sides, const std::vector<GradPair> &pairs,
                 const medrun::TensorMap &params,
                 const std::map<std::string, torch::Tensor> &torchParams, double tolerance,
                 torch::ScalarType floatType);

/// --fd: central differences of f on our backend in f64 against f_grad in f64; adds the
/// elements perturbed to `elements` (GradCheck.cpp).
Counts checkFd(const Options &o, const medrun::Artifact &artifact,
               const std::vector<GradPair> &pairs, const medrun::TensorMap &params,
               double tolerance, size_t &elements);

/// The default tolerance of --precision for --train-steps.
double defaultTolerance(medrun::Precision p);

/// --train-steps: train_step against torch (TrainCheck.cpp). 0 when every step passes.
int checkTrain(const Options &o, const Sides &sides, double tolerance,
               torch::ScalarType floatType);

//===- --train-steps' comparison (AutocastCompare.cpp) ----------------------------===//

/// How far ours may be from torch's reference in one training step: within the tolerance,
/// or by the ratio rule: within `ratio` times the error of a second, lower-precision torch
/// run against the same reference (and the rules for errors of few elements, see --help).
/// --against-autocast: the reference is torch f32, the low run torch autocast to bf16/f16;
/// --against-f64: the reference is torch f64, the low run torch f32.
struct StepRules {
  double tolerance = 0;
  bool byRatio = false;       ///< --against-autocast or --against-f64
  std::string lowName;        ///< how the lines name the low run: "autocast" or "f32"
  std::string lowTypeName;    ///< the type the low run rounds to: "bf16", "f16" or "f32"
  double ratio = 1.5;         ///< --autocast-ratio or --f64-ratio
  /// Gradients and moments: one rounding to the low run's type (unitRoundoff; 0 for none).
  double roundoff = 0;
  /// AdamW's bound on how far gradient noise moves a parameter (noise-driven parameters:
  /// those whose torch gradient vanished in some step, see --help).
  double noiseBound = 0;
  const std::set<std::string> *noiseDriven = nullptr;
  /// Without the ratio rule: AdamW's amplification of gradient differences within the
  /// tolerance.
  const medrun::AdamDriftBound *drift = nullptr;
};

/// Judges the values of training step `step` against torch's, printing a line for each
/// scalar and each kind of tensor (grads, params, moments, ema) and any tensor that fails.
class StepJudge {
public:
  StepJudge(const StepRules &rules, int64_t step) : r_(rules), step_(step) {}

  /// A scalar (loss, grad_norm) within the tolerance, or by the ratio rule judged against
  /// `acValue`, the low run's.
  void scalar(const char *what, double ours, double theirs, double acValue = NAN);
  /// A value that must be equal (found_inf, the loss scale and its tracker).
  void exact(const char *what, double ours, double theirs);
  /// By the ratio rule: the gradient elements whose sign differs from the reference's,
  /// counted per tensor against the low run's.
  void signs(const std::vector<std::string> &names, const std::vector<medrun::Tensor> &ours,
             const std::vector<torch::Tensor> &theirs, const std::vector<torch::Tensor> &acs);
  /// One kind of tensors. `gradients`: the vanishing rule applies (gradients, optimizer
  /// moments); else values (parameters, EMA), where a noise-driven parameter passes within
  /// the AdamW noise bound. `acs`: the low run's tensors (the ratio rule). `elementBound`
  /// (values, by the ratio rule): how far the noise bound lets one element of this kind
  /// move; errors of a few such elements are compared as counts. `bySpreadToo`: an error
  /// carried by few elements (spreadOf) is compared as a count of the low run's per-element
  /// shares.
  void kind(const std::string &kind, const std::vector<std::string> &names,
            const std::vector<medrun::Tensor> &ours, const std::vector<torch::Tensor> &theirs,
            const std::vector<torch::Tensor> &acs, bool gradients, double elementBound = 0,
            bool bySpreadToo = false);
  /// Marks the step failed (a check made elsewhere).
  void fail() { failed_ = true; }
  bool failed() const { return failed_; }

private:
  const StepRules &r_;
  int64_t step_;
  bool failed_ = false;
};

/// Ours passes by the ratio rule where its relative error is within `ratio` times the low
/// run's, or at most kF32Level: f32 rounding of either side's order of operations, where a
/// ratio of two roundings says nothing (against autocast: where bf16 played no part; against
/// f64: ours' reductions sum in f32 in other orders than torch's, see --help).
constexpr double kF32Level = 1e-5;
bool withinRatio(double rel, double lowRel, double ratio);
/// The unit roundoff of the autocast type (2^-8 bf16, 2^-11 f16).
double unitRoundoff(medrun::Precision p);

/// --against-f64 for one function's outputs (the forward check): each output's error against
/// torch f64 (`cs`) by the ratio rule against torch f32's (`lowCs`), gradients passing first
/// by the vanishing rule of `judge`. Sets the notes of each.
std::vector<bool> judgeByRatio(const std::vector<Comparison> &cs,
                               const std::vector<Comparison> &lowCs,
                               const std::vector<bool> &isGrad, double tolerance, double ratio,
                               std::vector<std::string> &notes);

} // namespace medcheck

#endif // MEDCHECK_CHECK_H
