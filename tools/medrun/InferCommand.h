//===- InferCommand.h - `medrun infer`: predict whole volumes -------------------------===//
#ifndef MEDRUN_TOOL_INFERCOMMAND_H
#define MEDRUN_TOOL_INFERCOMMAND_H

#include "medrun/Artifact.h"
#include "medrun/Dataset.h"
#include "medrun/Tensor.h"

#include <optional>
#include <string>
#include <vector>

namespace medrun {

struct InferOptions {
  std::string artifact;            ///< a recipe's artifact (its `infer` function)
  std::vector<std::string> images; ///< one volume per input channel, same shape
  std::string out;                 ///< where the prediction goes (writeVolume's names)
  std::string params;              ///< a checkpoint or safetensors file
  std::string weights;             ///< model, ema, or "" (ema where the checkpoint has it)
  std::string activation;          ///< sigmoid, softmax, none, or "" (by the recipe's loss)
  /// none, divide255, zscore, or "" (the run's data contract, from the checkpoint)
  std::string normalization;
  std::string device = "cpu";      ///< cpu or cuda
  double overlap = 0.5;
  bool mirror = false;
  int progress = 0;                ///< 0 auto, 1 bar, 2 lines
};

/// The parameters `fn` reads, from a checkpoint or a safetensors file: the EMA weights
/// (ema.<name>) where `weights` is "ema", or "" and the file has them for every one (then
/// set to the choice). Error naming the file for a missing or mismatched parameter.
TensorMap loadWeights(const Artifact &a, const Function &fn, const std::string &path,
                      std::string &weights);

/// The safetensors metadata key under which `medrun export` stores the run's data contract.
inline constexpr const char *kContractMetadataKey = "medrun_data_contract";

/// The data contract of the weights at `path`: a checkpoint's state.json (extra.data), the
/// data.json of the run whose checkpoints hold it, or an exported safetensors file's
/// metadata (kContractMetadataKey). Sets `from` to where it was found; nullopt if nowhere.
std::optional<DataContract> findContract(const std::string &path, std::string &from);

/// Predicts the volume with the artifact's `infer` function over sliding windows
/// (SlidingWindow.h) and writes the channel-first float32 prediction to `out`.
int inferCommand(const InferOptions &options);

} // namespace medrun

#endif // MEDRUN_TOOL_INFERCOMMAND_H
