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
};

/// Prepares the recipe as `medrun train` does (prepareRecipe), then times `train_step` on
/// one batch of the synthetic data: `warmup` steps, `steps` timed steps, one more profiled
/// step; prints time per step, TFLOP/s, GB/s, peak memory and time by op kind. Returns the
/// exit status.
int benchCommand(const std::string &recipe, const std::vector<std::string> &overrides,
                 const std::string &artifactPath, const BenchOptions &options);

} // namespace medrun

#endif // MEDRUN_TOOLS_BENCHCOMMAND_H
