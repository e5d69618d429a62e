//===- Executor.h - running a function of an artifact on the CPU ----------------===//
#ifndef MEDRUN_EXECUTOR_H
#define MEDRUN_EXECUTOR_H

#include "medrun/Artifact.h"
#include "medrun/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace medrun {

/// Storage type of floating-point values while a function runs. The program's own types
/// (f32) are mapped: F32 as written, F64 for gradient checks, BF16 for activations in
/// bf16-mixed (parameters stay f32 masters and are rounded when read).
enum class Precision { F32, F64, BF16 };
Precision parsePrecision(const std::string &name); // "f32", "f64", "bf16"; throws Error
DType storageType(Precision p);

/// Parameters initialized as PyTorch initializes each layer by default (docs/artifact.md):
/// zeros, ones, or U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Deterministic in `seed` and each
/// parameter's name (Philox counters), independent of order and thread count.
TensorMap initParameters(const Artifact &artifact, uint64_t seed);

/// Checks that `params` holds exactly the parameters of the artifact with the declared
/// shapes and dtypes; throws Error naming a missing key, an unknown key or a wrong shape.
void checkParameters(const Artifact &artifact, const TensorMap &params);

/// Runs `fn` on the CPU backend and returns its outputs. `inputs` are the function's
/// arguments in order (arg0, arg1, ...), checked against the declared shapes and dtypes
/// (Error naming the argument otherwise). Every parameter the function reads must be in
/// `params`. Outputs have storageType(precision) for float results.
/// With `profile`, adds the seconds spent in each op kind to it. Values the function
/// assigns to parameters (med.assign: training steps) are put into `updates`, in the
/// storage type; the caller applies them (a function that assigns needs `updates`).
std::vector<Tensor> runCpu(const Artifact &artifact, const Function &fn,
                           const std::vector<Tensor> &inputs, const TensorMap &params,
                           Precision precision = Precision::F32,
                           std::map<std::string, double> *profile = nullptr,
                           TensorMap *updates = nullptr);

} // namespace medrun

#endif // MEDRUN_EXECUTOR_H
