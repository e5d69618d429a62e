//===- Train.h - the training loop of `medrun train` --------------------------------===//
//
// Runs the `train_step` of an artifact for the steps of an effective recipe (the JSON
// `medc recipe` prints): batches from the data loader, the learning rate and EMA decay of
// each step from the schedule, the step on the CPU or the CUDA backend, NaN handling, logs (JSONL,
// TensorBoard, progress) and checkpoints, and exact resumption from a checkpoint.
//
// Output directory:
//   config.json        the effective recipe of the run
//   metrics.jsonl      one line per step (appended on resume)
//   tensorboard/       event files
//   checkpoints/       step_<N>/{model,ema,optimizer}.safetensors + state.json, latest, best
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_TRAIN_H
#define MEDRUN_TRAIN_H

#include "medrun/Artifact.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <optional>
#include <string>

namespace medrun {

struct TrainOptions {
  std::string out;                   ///< output directory (created)
  std::optional<std::string> resume; ///< checkpoint to resume from ("" = out/checkpoints)
  /// A fresh run refuses an output directory that holds checkpoints unless this is set;
  /// then the old checkpoints, metrics and event files are removed first.
  bool overwrite = false;
  /// Run the steps on the CUDA backend (the artifact must be compiled with --target cuda).
  bool cuda = false;
  /// Set (by a signal handler) to stop after the current step: a checkpoint is saved and
  /// the run ends normally.
  const std::atomic<int> *stop = nullptr;
  FILE *console = stderr; ///< progress bar or lines, messages
  int progressMode = 0;   ///< 0 auto (bar on a terminal), 1 bar, 2 plain lines
};

struct TrainSummary {
  int64_t firstStep = 0, lastStep = 0; ///< steps run: [firstStep, lastStep)
  double firstLoss = 0, lastLoss = 0;  ///< mean loss of the first / last logged interval
  bool interrupted = false;
  int64_t skipped = 0; ///< steps skipped for a non-finite loss (train.nan = skip)
  std::string checkpoint; ///< the last checkpoint written
};

/// Trains. `config` is the effective recipe (medc recipe); the artifact must hold
/// `train_step` compiled from it. Throws Error for bad settings, a failing step (a
/// non-finite loss with train.nan = stop names the step), I/O failures.
TrainSummary train(const Artifact &artifact, const nlohmann::json &config,
                   const TrainOptions &options);

} // namespace medrun

#endif // MEDRUN_TRAIN_H
