//===- Train.h - the training loop of `medrun train` --------------------------------===//
//
// Runs the `train_step` of an artifact for the steps of an effective recipe (the JSON
// `medc recipe` prints): batches from the data loader, the learning rate and EMA decay of
// each step from the schedule, the step on the CPU or the CUDA backend, NaN handling, logs (JSONL,
// TensorBoard, progress) and checkpoints, and exact resumption from a checkpoint. The steps
// run on a TrainBackend (TrainBackend.h), the only thing the loop knows of the backends.
//
// Output directory:
//   config.json        the effective recipe of the run
//   data.json          the data contract (Dataset.h): normalisation and its statistics per
//                      channel, spacing, labels; also in each checkpoint's state.json
//                      (extra.data), where infer finds it and a resumed run takes it
//   split.json         volume files: the training and validation cases
//   metrics.jsonl      one line per step and per validation (appended on resume)
//   progress.png       loss and validation Dice curves, redrawn at each validation
//   tensorboard/       event files
//   checkpoints/       step_<N>/{model,ema,optimizer}.safetensors + state.json, latest, best
//   medrun.lock        held (flock) by the run in progress: a second run in the directory
//                      fails, naming the holder's pid, host and start time
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_TRAIN_H
#define MEDRUN_TRAIN_H

#include "medrun/Artifact.h"
#include "medrun/Cuda.h"
#include "medrun/Data.h"
#include "medrun/Dataset.h"
#include "medrun/GradientReducer.h"
#include "medrun/Schedule.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace medrun {

struct TrainOptions {
  std::string out;                   ///< output directory (created)
  std::optional<std::string> resume; ///< checkpoint to resume from ("" = out/checkpoints)
  /// With resume "": start from step 0 when out/checkpoints holds no complete checkpoint
  /// (a job that is requeued runs with it from its first start). Without it that is an Error.
  bool resumeOrStart = false;
  /// A fresh run refuses an output directory that holds checkpoints unless this is set;
  /// then the old checkpoints, metrics and event files are removed first.
  bool overwrite = false;
  /// Run the steps on the CUDA backend (the artifact must be compiled with --target cuda).
  bool cuda = false;
  /// Set (by a signal handler) to stop after the current step: a checkpoint is saved and
  /// the run ends normally.
  const std::atomic<int> *stop = nullptr;
  /// A fresh run starts from these weights (a MedNeXt v1 state_dict, Interop.h) instead of
  /// initialized ones; `upkern` resizes kernels of another size.
  std::string initFrom;
  bool upkern = false;
  /// Sums the gradient buckets of a step compiled with --data-parallel over the ranks of
  /// the job (null: a job of one rank, singleRankReducer()). Its worldSize() sets the
  /// step's inv_world_size.
  GradientReducer *reducer = nullptr;
  /// This process's rank in the job: each draws its own part of a step's global batch
  /// (Data.h); rank 0 alone writes the output directory and the console's progress.
  int rank = 0;
  FILE *console = stderr; ///< progress bar or lines, messages
  int progressMode = 0;   ///< 0 auto (bar on a terminal), 1 bar, 2 plain lines
};

struct TrainSummary {
  int64_t firstStep = 0, lastStep = 0; ///< steps run: [firstStep, lastStep)
  double firstLoss = 0, lastLoss = 0;  ///< mean loss of the first / last logged interval
  bool interrupted = false;
  int64_t skipped = 0; ///< steps skipped for a non-finite loss (train.nan = skip)
  /// Steps whose updated state was not finite (train_step's update_nonfinite): skipped.
  int64_t updateSkipped = 0;
  std::string checkpoint; ///< the last checkpoint written
  /// --resume-or-start found the run at train.steps already: no step ran, `checkpoint` is
  /// the one it ended with.
  bool finished = false;
};

/// What the training loop feeds `train_step`, read from the effective recipe and checked
/// against the artifact: the synthetic dataset and the loader's settings (`data:`), which
/// loader tensor feeds each batch input (`image`, `target`, `mask`, `target.<i>`), and the
/// scalar inputs of each step. `medrun train` and `medrun bench` share it.
class StepInputs {
public:
  /// Throws Error naming the recipe key or the train_step input that does not fit. A job of
  /// `worldSize` ranks > 1 needs a step compiled with --data-parallel.
  StepInputs(const Artifact &artifact, const nlohmann::json &config, int worldSize = 1,
             int rank = 0);

  const Function &function() const { return *fn_; }
  const SyntheticSpec &synthetic() const { return synthetic_; }
  /// data.source and the keys of volume files (source synthetic: the synthetic volumes).
  const DatasetSpec &dataset() const { return dataset_; }
  const LoaderSpec &loader() const { return loader_; }
  /// Index of the train_step input `name`, or -1.
  int input(const std::string &name) const;
  /// The learning rate of 0-based step `step` (the recipe's schedule).
  double learningRate(int64_t step) const;
  /// The loss scale of the first step (fp16-mixed: the compiled initial scale, else 1).
  double initialLossScale() const;
  /// Every input of 0-based step `step`: the batch's tensors, `lr`, `step` (1-based, the
  /// optimizer's count), `ema_decay` (0 during the EMA warm-up), `rng` (the step's key of
  /// med.random: stepKey of train.seed, the rank and the step, medrun/Random.h), under fp16-mixed
  /// `loss_scale` and `growth_tracker` carried from the previous step, and in a step compiled
  /// with --data-parallel `inv_world_size` (1 / the ranks of the job).
  std::vector<Tensor> inputs(const Batch &batch, int64_t step, double lossScale = 1,
                             int64_t growthTracker = 0) const;
  /// The batch's tensors at their train_step input positions, undefined elsewhere: what
  /// the CUDA session can upload ahead, before the step's scalars are known.
  std::vector<Tensor> batchInputs(const Batch &batch) const;

private:
  const Artifact *artifact_;
  const Function *fn_;
  SyntheticSpec synthetic_;
  DatasetSpec dataset_;
  LoaderSpec loader_;
  std::map<std::string, std::string> feeds_; ///< train_step input -> loader tensor
  ScheduleConfig schedule_;
  double emaDecay_ = 0;
  int64_t emaWarmup_ = 0;
  int worldSize_ = 1;
  int rank_ = 0;
  uint64_t seed_ = 0; ///< train.seed: with the rank and the step, the key of `rng`
};

/// Trains. `config` is the effective recipe (medc recipe); the artifact must hold
/// `train_step` compiled from it. Checkpoints are written by a background thread while the
/// next steps run; the last one is waited for. Throws Error for bad settings, a failing step
/// (a non-finite loss with train.nan = stop names the step), I/O failures (a failed
/// checkpoint save ends the run), an output directory in use by another run.
TrainSummary train(const Artifact &artifact, const nlohmann::json &config,
                   const TrainOptions &options);

} // namespace medrun

#endif // MEDRUN_TRAIN_H
