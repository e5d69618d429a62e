//===- TrainRun.h - the steps of `train()`, shared by its files --------------------===//
//
// Internal to runtime/src/train. train() (Train.cpp) is a sequence of named steps, each
// defined where its concern lives:
//   RunDirectory.cpp      the output directory: its lock, --resume / --overwrite, config.json
//   TrainCheckpoints.cpp  where the state starts (a checkpoint or fresh parameters), the
//                         checkpoints the run writes, the ranks' agreement on the state
//   TrainData.cpp         the loader, the validation volumes and the data contract
//                         (split.json, data.json)
//   TrainValidation.cpp   validation during the run, its best Dice and progress.png
//   Train.cpp             the recipe's settings, what a step is fed, one step, its logs
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SRC_TRAIN_TRAINRUN_H
#define MEDRUN_SRC_TRAIN_TRAINRUN_H

#include "medrun/Checkpoint.h"
#include "medrun/Error.h"
#include "medrun/ProgressPlot.h"
#include "medrun/Train.h"
#include "medrun/TrainBackend.h"
#include "medrun/TrainLog.h"
#include "medrun/Validation.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace medrun::training {

//===- The effective recipe (Train.cpp) --------------------------------------------===//

/// The recipe's section `name`, or an empty object.
const nlohmann::json &section(const nlohmann::json &config, const char *name);

/// `sec.key` of the recipe as a T; Error naming the key when it is missing or mistyped.
template <typename T> T setting(const nlohmann::json &config, const char *sec, const char *key) {
  const nlohmann::json &s = section(config, sec);
  auto it = s.find(key);
  if (it == s.end())
    throw Error(str("recipe: missing '", sec, ".", key, "' (run the recipe through `medc recipe`)"));
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception &) { // checkEffectiveRecipe catches these first
    throw Error(str("recipe: ", sec, ".", key, ": a value of the wrong type, ", it->dump()));
  }
}

/// `sec.key` as three sizes.
std::array<int64_t, 3> size3(const nlohmann::json &config, const char *sec, const char *key);

/// Seconds on a steady clock.
double seconds();

/// "n/a" for a non-finite value, else four decimals.
std::string fmtNumber(double v);

//===- The output directory (RunDirectory.cpp) -------------------------------------===//

/// One run per output directory: two runs in one directory would overwrite each other's
/// checkpoints and logs. An exclusive flock on OUT/medrun.lock, held while the run lives; the
/// kernel drops it when the process ends, however it ends, so a crash leaves no stale lock.
/// The file says who holds it.
class RunLock {
public:
  explicit RunLock(const std::string &dir);
  ~RunLock();
  RunLock(const RunLock &) = delete;
  RunLock &operator=(const RunLock &) = delete;

private:
  int fd_ = -1;
};

/// The output directory of a run, made ready: created and locked (rank 0), the checkpoint
/// to resume from decided (--resume, --resume-or-start), an older run's outputs removed
/// (--overwrite) and the effective recipe written to config.json.
class RunDirectory {
public:
  RunDirectory(const nlohmann::json &config, const TrainOptions &options, bool lead,
               FILE *console);

  const std::string &checkpoints() const { return checkpoints_; }
  /// The checkpoint to resume from ("" = the latest of checkpoints()); none: a fresh run.
  const std::optional<std::string> &resume() const { return resume_; }

private:
  std::optional<RunLock> lock_;
  std::string checkpoints_;
  std::optional<std::string> resume_;
};

//===- Where the state starts; checkpoints (TrainCheckpoints.cpp) -------------------===//

/// The state the first step starts from, and what the run carries over from a checkpoint.
struct StartState {
  TensorMap params; ///< parameters, optimizer state and EMA
  int64_t first = 0; ///< the first step to run
  double lossScale = 1;
  int64_t growthTracker = 0;
  Json resumedValidation; ///< the best validation so far, from the checkpoint
  std::optional<DataContract> storedContract; ///< the data contract the run started with
  std::string dir; ///< the checkpoint resumed from
  std::vector<SkippedCheckpoint> skipped; ///< newer checkpoints the resume passed over
  /// --resume-or-start found the run's checkpoint at train.steps: nothing to train.
  bool finished = false;
};

/// From the run's checkpoint when resuming (checked against the artifact), else initialized
/// parameters (or --init-from's). When the checkpoint is at train.steps already: `finished`
/// with --resume-or-start, else an Error.
StartState startState(const Artifact &artifact, const StepInputs &feed,
                      const nlohmann::json &config, const RunDirectory &dir,
                      const TrainOptions &options, FILE *console);

/// The ranks of a data-parallel job train one model: at each checkpoint they compare a
/// checksum of their state; a rank that differs stops the job, on every rank.
uint32_t stateChecksum(const TensorMap &state);
void checkRanksAgree(GradientReducer &reducer, int rank, int64_t step, const TensorMap &state);

class RunValidation;

/// The checkpoints of a run: saved by a background thread (rank 0 alone) with the state.json
/// that resumes it exactly.
class RunCheckpoints {
public:
  struct Run {                 ///< what every checkpoint of the run records
    uint64_t seed = 0;
    int64_t samplesPerStep = 0; ///< the global batch: the batch times the ranks
    Json schedule;
    std::string compileHash;
    Json contract; ///< the data contract (extra.data)
  };
  /// Writes under `root` when `write` (rank 0); `validating`: `best` follows the Dice.
  RunCheckpoints(std::string root, const nlohmann::json &config, Run run, bool write,
                 bool validating);

  /// Starts saving `snapshot` as the checkpoint after `done` steps, with the loss scale,
  /// the mean loss of the current log interval (if any step of it counted) and the
  /// validation's best so far. Nothing when this rank does not write.
  void save(int64_t done, TensorMap snapshot, double lossScale, int64_t growthTracker,
            std::optional<double> intervalLoss, const RunValidation *validation);
  /// The directory of a save that finished since the last call, or "".
  std::string poll();
  /// Waits for the save in progress; its directory, or "".
  std::string wait();

private:
  Run run_;
  std::optional<CheckpointWriter> writer_;
};

//===- Data (TrainData.cpp) --------------------------------------------------------===//

/// The run's data: the training loader, the validation volumes (null: no validation) and
/// the data contract, recorded in OUT/split.json (volume files) and OUT/data.json.
struct TrainData {
  std::unique_ptr<DataLoader> loader;
  std::shared_ptr<const PatchSource> validation;
  DataContract contract;
  Json contractJson;
};

/// Opens the recipe's data for `loader` from step `first`: the synthetic volumes or the
/// volume files' split, checked against the model's input channels. Validation volumes are
/// opened when `validateEvery` > 0 (the split's validation cases, or synthetic volumes of
/// their own seed).
TrainData openTrainData(const Artifact &artifact, const StepInputs &feed,
                        const nlohmann::json &config, const LoaderSpec &loader, int64_t first,
                        int64_t validateEvery, const BatchAllocator &allocate,
                        const std::optional<DataContract> &storedContract,
                        const TrainOptions &options, bool lead, FILE *console);

//===- Logs (Train.cpp) ------------------------------------------------------------===//

/// Where the run logs (rank 0): metrics.jsonl, TensorBoard, and the augmented sample shown
/// every logging.images_every steps.
struct RunLogs {
  std::optional<JsonlLog> metrics;
  std::unique_ptr<TensorBoardWriter> board;
  const Function *augmentFn = nullptr; ///< @augment, when images are logged
  int64_t imagesEvery = 0;
};

//===- Validation (TrainValidation.cpp) --------------------------------------------===//

/// Validation during the run: the `infer` function over each validation volume (sliding
/// window), with the EMA weights when the step keeps them; its Dice chooses `best`, its
/// moving average is nnU-Net's, and progress.png draws both beside the loss.
class RunValidation {
public:
  /// Error when the artifact has no `infer`. Takes the best Dice so far from the checkpoint
  /// (`resumed`) and, when resuming, the curves of metrics.jsonl.
  RunValidation(const Artifact &artifact, const StepInputs &feed, const nlohmann::json &config,
                std::shared_ptr<const PatchSource> source, const DataContract &contract,
                int64_t every, const TrainOptions &options, bool lead, const Json &resumed,
                const RunLogs &logs, bool resuming, Progress &progress,
                Progress::Mode progressMode, FILE *console);

  /// Validates the weights of `state` after 0-based step `step`: logs, TensorBoard, the
  /// console, progress.png.
  void run(int64_t step, const TensorMap &state, TrainBackend &backend, RunLogs &logs);
  /// A step's loss, learning rate and time for progress.png's curves.
  void addStep(int64_t step, double loss, double lr, double seconds) {
    history_.loss.push_back({step, loss});
    history_.lr.push_back({step, lr});
    history_.stepTime.push_back({step, seconds});
  }
  /// Forgets the last Dice (called before each step's validation, if any).
  void clearValidated() { validated_.reset(); }

  int64_t every() const { return every_; }
  /// The Dice of this step, if it validated.
  const std::optional<double> &validated() const { return validated_; }
  /// Whether 1-based step `done` holds the best Dice so far.
  bool bestAt(int64_t done) const { return best_ && bestStep_ == done; }
  /// The best Dice and its moving average, as state.json's extra.validation (null: none yet).
  Json stateJson() const;

private:
  const Function *inferFn_ = nullptr;
  std::vector<std::string> inferParams_; ///< the parameters `infer` reads
  bool emaWeights_ = false;
  int64_t every_ = 0;
  bool lead_ = false;
  std::unique_ptr<Validator> validator_;
  Progress &progress_;
  Progress::Mode progressMode_;
  FILE *console_;
  std::string plotPath_;
  std::optional<double> best_; ///< the best validation so far and its step
  int64_t bestStep_ = 0;
  std::optional<double> diceEma_; ///< nnU-Net's moving average of the Dice
  std::optional<double> validated_;
  ProgressHistory history_;
};

} // namespace medrun::training

#endif // MEDRUN_SRC_TRAIN_TRAINRUN_H
