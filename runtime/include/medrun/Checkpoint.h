//===- Checkpoint.h - training checkpoints ------------------------------------------===//
//
// A checkpoint root directory holds one directory per saved step plus two pointers:
//
//   <root>/step_00001000/model.safetensors      model parameters, MedNeXt v1 state_dict keys
//                        ema.safetensors        EMA weights: "ema.<key>" saved as "<key>"
//                        optimizer.safetensors  optimizer state: "optimizer.<...>" unchanged
//                        state.json             training state, and size and CRC-32C of
//                                               every other file
//   <root>/latest   {"dir": "step_00001000", "step": 1000}
//   <root>/best     {"dir": "step_00000800", "step": 800, "metric": "val_loss", "value": 0.12}
//
// Saving is atomic: the step is built in step_<N>.tmp/ (every file fsync'ed, then the
// directory), renamed to step_<N>/ and the root fsync'ed; only then are the pointers
// replaced (temporary file, fsync, rename) and old steps deleted, each renamed to
// step_<N>.deleting.tmp/ before its files are removed. A crash or a failed write (disk
// full) leaves the previous checkpoints and pointers as they were; the failed
// step_<N>.tmp/ is removed, and leftovers of a crashed run (any step_*.tmp/) are removed by
// the next save and ignored by loading.
//
// Loading verifies state.json's own checksum and the size and CRC-32C of every file it
// lists before parsing any tensor; a mismatch is an Error naming the file and what
// differs, and nothing is returned.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_CHECKPOINT_H
#define MEDRUN_CHECKPOINT_H

#include "medrun/Tensor.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace medrun {

/// JSON documents keep their fields in the order written (state.json is read by people).
using Json = nlohmann::ordered_json;

//===----------------------------------------------------------------------------------===//
// Files of a checkpoint
//===----------------------------------------------------------------------------------===//

/// Tensors whose names start with `prefix` are stored in `file`, under their names without
/// the prefix if `stripPrefix`. The part with the empty prefix takes every other tensor.
struct CheckpointPart {
  const char *file;
  const char *prefix;
  bool stripPrefix;
};

/// ema.safetensors ("ema.", stripped), optimizer.safetensors ("optimizer.", kept),
/// model.safetensors (the rest: trainable and frozen model parameters).
const std::vector<CheckpointPart> &checkpointParts();

/// Splits one state (artifact parameter names) into file name -> tensors under their names
/// in that file. Files with no tensor are left out. Throws Error for a name that is only a
/// prefix ("ema.").
std::map<std::string, TensorMap> splitCheckpointTensors(const TensorMap &state);

/// The inverse of splitCheckpointTensors. Throws Error naming the file and key for an
/// unknown file, a model key that belongs in another file, or two keys that merge into one.
TensorMap mergeCheckpointTensors(const std::map<std::string, TensorMap> &files);

//===----------------------------------------------------------------------------------===//
// Training state (state.json)
//===----------------------------------------------------------------------------------===//

/// What a run needs besides the tensors to continue exactly where it stopped.
struct TrainState {
  int64_t step = 0;             ///< optimizer steps completed; the checkpoint's number
  uint64_t seed = 0;            ///< the run's seed (Philox key)
  uint64_t rngOffset = 0;       ///< Philox counters consumed so far
  uint64_t samplerPosition = 0; ///< samples the data sampler has drawn so far
  Json schedule = Json::object(); ///< learning-rate schedule settings
  double lossScale = 1.0;       ///< dynamic loss scale (1 without fp16 loss scaling)
  int64_t growthTracker = 0;    ///< steps since the loss scale last changed
  std::string recipeHash;       ///< identifies the recipe/artifact the run trains
  /// Metrics of this step (loss, val_loss, ...). Non-finite values are stored as null and
  /// read back as NaN.
  std::map<std::string, double> metrics;
  Json extra = Json::object();    ///< anything else, kept as is
};

/// The fields above as state.json spells them (snake_case).
Json toJson(const TrainState &state);
/// Inverse of toJson; throws Error starting with `what` and naming the bad field.
TrainState trainStateFromJson(const Json &j, const std::string &what);

//===----------------------------------------------------------------------------------===//
// Saving and loading
//===----------------------------------------------------------------------------------===//

struct CheckpointOptions {
  /// Keep the newest `keepLast` steps (<= 0: keep all) plus the best one.
  int keepLast = 3;
  /// Metric of TrainState::metrics that selects `best` (lower is better); empty: no `best`.
  /// A step whose metrics lack it (or have NaN) never becomes the best.
  std::string bestMetric;
  /// Higher values of bestMetric are better (a validation Dice); ties keep the older step.
  bool bestHigher = false;
};

/// "step_00001000" (at least 8 digits).
std::string checkpointDirName(int64_t step);

/// Saves `tensors` (artifact parameter names) and `state` as step `state.step` under
/// `root` (created if missing), replacing an existing directory of the same step, then
/// updates `latest` and `best` and deletes the steps no longer kept. Returns the step
/// directory. Throws Error naming the file and the failed operation; a failure before the
/// final rename leaves every previous checkpoint and pointer untouched. One process saves
/// into a root at a time.
std::string saveCheckpoint(const std::string &root, const TrainState &state,
                           const TensorMap &tensors, const CheckpointOptions &options = {});

struct Checkpoint {
  std::string dir;     ///< the step directory it was loaded from
  TrainState state;
  TensorMap tensors;   ///< artifact parameter names (prefixes restored)
  Json json; ///< state.json as written
};

/// A newer checkpoint (or the `latest` pointer) that resolving a root passed over, and why.
struct SkippedCheckpoint {
  std::string path;
  std::string reason;
};

/// The step directory `path` designates: a step directory (holds state.json); a pointer
/// file (<root>/latest, <root>/best); or a root, which means its `latest` pointer, or the
/// highest-numbered complete step directory if the pointer is missing, unreadable or
/// dangling. `skipped` (if given) receives what a root's resolution passed over: an
/// unusable `latest` and newer step directories without state.json. Throws Error if there
/// is none.
std::string resolveCheckpoint(const std::string &path,
                              std::vector<SkippedCheckpoint> *skipped = nullptr);

/// Checks state.json (its checksum, format, step) and the size and CRC-32C of every file it
/// lists, without parsing the tensors. Returns state.json. Throws Error naming the file.
Json verifyCheckpoint(const std::string &stepDir);

/// resolveCheckpoint, verifyCheckpoint, then reads and merges the tensor files.
Checkpoint loadCheckpoint(const std::string &path);

/// The tensors of `path`: a checkpoint (a directory, or a `latest`/`best` pointer: its files
/// merged back into the artifact's names, model keys, ema.<key>, optimizer.<...>), a
/// PyTorch zip file (TorchFile.h), anything else a safetensors file. MedNeXt v1's
/// `dummy_tensor` (shape [1]) is left out.
TensorMap loadTensors(const std::string &path);

/// The complete step directories under `root` (no *.tmp), ordered by step.
std::vector<std::pair<int64_t, std::string>> listCheckpoints(const std::string &root);

/// Saves checkpoints on a background thread, so that training goes on while a step's files
/// are written. Each save is saveCheckpoint (atomic: tmp directory, then rename); saves run
/// one at a time, in the order given. A failed save is reported by the next call.
class CheckpointWriter {
public:
  CheckpointWriter(std::string root, CheckpointOptions options)
      : root_(std::move(root)), options_(std::move(options)) {}
  /// Waits for a save in progress; its error, if any, is dropped (call wait() to see it).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter &) = delete;
  CheckpointWriter &operator=(const CheckpointWriter &) = delete;

  /// Starts saving `tensors` and `state` and returns. The tensors are the snapshot: nothing
  /// may write into them until the save is done (the training loop replaces tensors, it
  /// never writes into one). Waits for the previous save first; throws its Error.
  void save(TrainState state, TensorMap tensors);
  /// The step directory of a save that finished since the last call, or "" (none, or one
  /// still running). Throws the Error of a save that failed.
  std::string poll();
  /// Waits for the save in progress. Returns its step directory ("" if there was none);
  /// throws its Error.
  std::string wait();

private:
  std::string root_;
  CheckpointOptions options_;
  std::thread worker_;
  std::atomic<bool> finished_{false};
  std::string saved_;
  std::exception_ptr error_;
};

} // namespace medrun

#endif // MEDRUN_CHECKPOINT_H
