//===- TrainCommand.h - `medrun train RECIPE` ---------------------------------------===//
#ifndef MEDRUN_TOOLS_TRAINCOMMAND_H
#define MEDRUN_TOOLS_TRAINCOMMAND_H

#include <optional>
#include <string>
#include <vector>

namespace medrun {

/// Checks the recipe with its overrides (medc recipe), compiles it unless the artifact is
/// cached (for the GPU with --target cuda when the device is cuda, or auto and a GPU is
/// present), and trains. `recipe` may also be an effective recipe (JSON, `medc recipe`)
/// with `artifactPath` compiled from it: no medc needed. `resume`: "" = the run's own checkpoints, or a checkpoint path.
/// `progressMode`: 0 auto, 1 bar, 2 plain lines. Returns the exit status.
int trainCommand(const std::string &recipe, const std::vector<std::string> &overrides,
                 const std::optional<std::string> &resume, bool overwrite, int progressMode,
                 const std::string &artifactPath = "");

} // namespace medrun

#endif // MEDRUN_TOOLS_TRAINCOMMAND_H
