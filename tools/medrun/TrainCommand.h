//===- TrainCommand.h - `medrun train RECIPE` ---------------------------------------===//
#ifndef MEDRUN_TOOLS_TRAINCOMMAND_H
#define MEDRUN_TOOLS_TRAINCOMMAND_H

#include "medrun/Artifact.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace medrun {

/// A recipe ready to run: its effective form (medc recipe), the compiled artifact and the
/// backend chosen by train.device.
struct PreparedRecipe {
  nlohmann::json config;
  Artifact artifact;
  bool cuda = false;
};

/// What `medrun train` does before training, shared with `medrun bench`: checks the recipe
/// with its overrides (medc recipe), chooses the device (train.device; Error for cuda
/// without a driver or GPU), and compiles the recipe unless the artifact is cached (for the
/// GPU with --target cuda) or given as `artifactPath` (then `recipe` may be the effective
/// recipe as JSON: no medc needed); the artifact must come from the recipe (compile hash).
/// Prints a line per phase to stderr. Returns 0, or medc's exit status when medc failed
/// (it said why). `dataParallel` (a job of several ranks) compiles with --data-parallel.
int prepareRecipe(const std::string &recipe, const std::vector<std::string> &overrides,
                  const std::string &artifactPath, PreparedRecipe &prepared,
                  bool dataParallel = false);

/// Where compiled recipes are cached (MEDRUN_CACHE, else XDG_CACHE_HOME/medrun,
/// ~/.cache/medrun): <compile hash>[.cuda][.dp].medc.
std::string recipeCacheDir();

/// Checks the recipe with its overrides (medc recipe), compiles it unless the artifact is
/// cached (for the GPU with --target cuda when the device is cuda, or auto and a GPU is
/// present), and trains. `recipe` may also be an effective recipe (JSON, `medc recipe`)
/// with `artifactPath` compiled from it: no medc needed. `resume`: "" = the run's own
/// checkpoints, or a checkpoint path; `resumeOrStart`: a fresh run when the run has none.
/// `progressMode`: 0 auto, 1 bar, 2 plain lines. `initFrom`: a fresh run starts from these
/// weights (TrainOptions::initFrom). In a job of several ranks (the launcher's variables,
/// Distributed.h) it trains data parallel on GPU LOCAL_RANK; with `dataParallel` a job of
/// one rank does too (a communicator of one: that path checked on one GPU). Returns the exit
/// status (130 after SIGINT).
int trainCommand(const std::string &recipe, const std::vector<std::string> &overrides,
                 const std::optional<std::string> &resume, bool resumeOrStart, bool overwrite,
                 int progressMode, const std::string &artifactPath = "",
                 const std::string &initFrom = "", bool upkern = false,
                 bool dataParallel = false);

} // namespace medrun

#endif // MEDRUN_TOOLS_TRAINCOMMAND_H
