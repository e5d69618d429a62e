//===- InferCommand.h - `medrun infer`: predict whole volumes -------------------------===//
#ifndef MEDRUN_TOOL_INFERCOMMAND_H
#define MEDRUN_TOOL_INFERCOMMAND_H

#include "medrun/Artifact.h"
#include "medrun/Dataset.h"
#include "medrun/Tensor.h"

#include <array>
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
  /// The input's spacing (z, y, x) where its file states none (--spacing); must agree
  /// with a file that states one.
  std::optional<std::array<double, 3>> spacing;
  /// Block-wise inference: the block (D, H, W; zeros: chosen from `memoryMb`), the host
  /// memory the blocks may take (0: 2048 MiB for chunked outputs; other outputs are
  /// predicted whole unless a block is given) and the output's chunks.
  std::array<int64_t, 3> block{0, 0, 0};
  double memoryMb = 0;
  std::array<int64_t, 3> chunk{64, 64, 64};
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
/// (SlidingWindow.h) and writes the channel-first float32 prediction to `out`. A chunked
/// output (HDF5, Zarr) is predicted and written block by block (slidingWindowBlock: equal
/// to the whole volume's prediction), the input read by blocks with their halo; the blocks
/// done are recorded in OUT's progress file (progressPath), so a second run skips them.
int inferCommand(const InferOptions &options);

/// The progress file of block-wise inference into `out` (FILE.h5/KEY, DIR.zarr/KEY): beside
/// the container, named by it and the key ("pred.zarr/affs" -> "pred.zarr.affs.progress.json").
std::string inferProgressPath(const std::string &out);

struct Args;
/// --spacing, --block, --memory and --chunk into `o` (Error naming the option).
void parseInferBlockOptions(const Args &args, InferOptions &o);

} // namespace medrun

#endif // MEDRUN_TOOL_INFERCOMMAND_H
