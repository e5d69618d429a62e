//===- Executor.h - running a function of an artifact on the CPU ----------------===//
#ifndef MEDRUN_EXECUTOR_H
#define MEDRUN_EXECUTOR_H

#include "medrun/Artifact.h"
#include "medrun/GradientReducer.h"
#include "medrun/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace medrun {

/// How floating-point values are stored while a function runs (docs/training.md §5). The
/// program's own types (f32) are mapped: F32 as written, F64 for gradient checks; the mixed
/// precisions store activations in BF16, or for F16 in f32 rounded to binary16 after every
/// op (emulating half storage), and keep scalars and the ops medc marks `fp32` (master
/// weights, optimizer state, EMA, gradient norms, loss scaling) in f32.
enum class Precision { F32, F64, BF16, F16 };
/// "f32"/"fp32", "f64"/"fp64", "bf16"/"bf16-mixed", "f16"/"fp16"/"fp16-mixed"; throws Error.
Precision parsePrecision(const std::string &name);
/// The dtype activations are stored in (F32 for F16, whose values are binary16 numbers).
DType storageType(Precision p);
/// The precision a training step was compiled for (Function::precision): BF16 for
/// bf16-mixed, F16 for fp16-mixed, F32 otherwise.
Precision precisionOf(const Function &fn);

/// Parameters initialized as PyTorch initializes each layer by default (docs/artifact.md):
/// zeros, ones, a constant, or U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Deterministic in `seed` and each
/// parameter's name (Philox counters), independent of order and thread count.
TensorMap initParameters(const Artifact &artifact, uint64_t seed);

/// Checks that `params` holds the parameters of the artifact with the declared shapes and
/// dtypes: all of them, or with `fn` those its `param` ops read (a function needs only
/// what it reads: `infer` no optimizer or EMA state). Throws Error naming a missing key, an
/// unknown key or a wrong shape.
void checkParameters(const Artifact &artifact, const TensorMap &params,
                     const Function *fn = nullptr);

/// Runs `fn` on the CPU backend and returns its outputs. `inputs` are the function's
/// arguments in order (arg0, arg1, ...), checked against the declared shapes and dtypes
/// (Error naming the argument otherwise; a rank-0 integer argument also takes a float
/// scalar holding an integer). Every parameter the function reads must be in `params`.
/// Float outputs have storageType(precision), or f32 for scalars and `fp32` ops under the
/// mixed precisions.
/// With `profile`, adds the seconds spent in each op kind to it. Values the function
/// assigns to parameters (med.assign: training steps) are put into `updates`, in the type
/// they were computed in (f32 for the `fp32` ops of a training step under mixed
/// precision); the caller applies them (a function that assigns needs `updates`).
/// `reducer` sums the gradient buckets of a data-parallel step (med.all_reduce) over the
/// ranks; by default singleRankReducer().
std::vector<Tensor> runCpu(const Artifact &artifact, const Function &fn,
                           const std::vector<Tensor> &inputs, const TensorMap &params,
                           Precision precision = Precision::F32,
                           std::map<std::string, double> *profile = nullptr,
                           TensorMap *updates = nullptr, GradientReducer *reducer = nullptr);

} // namespace medrun

#endif // MEDRUN_EXECUTOR_H
