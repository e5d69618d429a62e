//===- BenchCommand.h - `medrun bench RECIPE` ---------------------------------------===//
#ifndef MEDRUN_TOOLS_BENCHCOMMAND_H
#define MEDRUN_TOOLS_BENCHCOMMAND_H

#include <string>
#include <vector>

namespace medrun {

struct BenchOptions {
  int64_t steps = 20;   ///< timed steps (>= 1)
  int64_t warmup = 3;   ///< untimed steps before them (>= 0)
  std::string json;     ///< write the numbers there as JSON ("" = no file)
  /// The roofline the rows are measured against, "GBPS,TFLOPS" ("" = known for the
  /// device, see rooflineFor; "none" = no roofline columns).
  std::string roofline;
  /// Time the data-parallel step (compiled with --data-parallel, its buckets summed over
  /// NCCL) even as a job of one rank; a job of several ranks always does (docs/distributed.md).
  bool dataParallel = false;
};

/// The bounds of a roofline: bytes per second and FLOP per second.
struct Roofline {
  double gbPerS = 0, tflops = 0;
  std::string source; ///< where the numbers come from, for the report
};

/// The roofline of `option` ("GBPS,TFLOPS", or "" for the device's, or "none"), or none
/// (gbPerS 0) when neither is known. Throws Error on a malformed option.
Roofline rooflineFor(const std::string &option, const std::string &deviceName);

/// Prepares the recipe as `medrun train` does (prepareRecipe), then times `train_step` on
/// one batch of the synthetic data: `warmup` steps, `steps` timed steps, one more profiled
/// step; prints time per step, TFLOP/s, GB/s, peak memory and time by op kind (with each
/// kind's GB/s and TFLOP/s against the roofline where one is known). Returns the exit
/// status.
int benchCommand(const std::string &recipe, const std::vector<std::string> &overrides,
                 const std::string &artifactPath, const BenchOptions &options);

} // namespace medrun

#endif // MEDRUN_TOOLS_BENCHCOMMAND_H
