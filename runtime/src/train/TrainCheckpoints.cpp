//===- TrainCheckpoints.cpp - where a run's state starts, and its checkpoints ------===//
#include "TrainRun.h"

#include "medrun/Checksum.h"
#include "medrun/Executor.h"
#include "medrun/Interop.h"

#include <algorithm>
#include <filesystem>

namespace medrun::training {

StartState startState(const Artifact &artifact, const StepInputs &feed,
                      const nlohmann::json &config, const RunDirectory &dir,
                      const TrainOptions &options, FILE *console) {
  const int64_t steps = setting<int64_t>(config, "train", "steps");
  StartState start;
  start.lossScale = feed.initialLossScale();
  if (const std::optional<std::string> &resume = dir.resume()) {
    // A newer checkpoint passed over (incomplete, or an unusable `latest`) is announced,
    // here and in metrics.jsonl (openLogs).
    const std::string from = resume->empty() ? dir.checkpoints() : *resume;
    const std::string stepDir = resolveCheckpoint(from, &start.skipped);
    for (const SkippedCheckpoint &s : start.skipped)
      std::fprintf(console, "medrun: warning: --resume: skipping %s: %s; resuming from %s\n",
                   s.path.c_str(), s.reason.c_str(), stepDir.c_str());
    Checkpoint ckpt;
    try {
      ckpt = loadCheckpoint(stepDir);
    } catch (const Error &e) {
      // A damaged checkpoint is not passed over silently, nor at all: say which complete
      // step precedes it, to be named explicitly.
      const auto steps = listCheckpoints(std::filesystem::path(stepDir).parent_path().string());
      auto at = std::find_if(steps.begin(), steps.end(),
                             [&](const auto &s) { return s.second == stepDir; });
      std::string previous;
      for (auto it = steps.begin(); it != at && at != steps.end(); ++it)
        if (std::filesystem::exists(std::filesystem::path(it->second) / "state.json"))
          previous = it->second;
      if (previous.empty())
        throw;
      throw Error(str(e.what(), " (the previous checkpoint is ", previous,
                      "; --resume ", previous, " continues from it)"));
    }
    if (ckpt.state.extra.contains("validation"))
      start.resumedValidation = ckpt.state.extra["validation"];
    if (ckpt.state.extra.contains("data"))
      start.storedContract =
          DataContract::fromJson(nlohmann::json::parse(ckpt.state.extra["data"].dump()),
                                 str(ckpt.dir, "/state.json: extra.data"));
    start.dir = ckpt.dir;
    checkParameters(artifact, ckpt.tensors);
    start.params = std::move(ckpt.tensors);
    start.first = ckpt.state.step;
    start.lossScale = ckpt.state.lossScale;
    start.growthTracker = ckpt.state.growthTracker;
    if (!ckpt.state.recipeHash.empty() &&
        ckpt.state.recipeHash != config.value("compile_hash", ""))
      std::fprintf(console,
                   "medrun: warning: %s was written by a differently compiled recipe\n",
                   ckpt.dir.c_str());
    std::fprintf(console, "resuming from %s (step %lld)\n", ckpt.dir.c_str(),
                 static_cast<long long>(start.first));
  } else {
    start.params = initParameters(artifact, setting<uint64_t>(config, "train", "seed"));
    if (!options.initFrom.empty())
      initFromFile(artifact, start.params, options.initFrom, options.upkern, console);
  }
  if (start.first >= steps) {
    // A requeued job passes --resume-or-start every time, also after the run has ended.
    if (options.resumeOrStart) {
      start.finished = true;
      return start;
    }
    throw Error(str("nothing to do: the checkpoint is at step ", start.first,
                    " and train.steps is ", steps,
                    " (raise it with --steps; --resume-or-start exits 0 on a finished run)"));
  }
  return start;
}

// Sums of the checksum's 16-bit pieces over the ranks are exact in f32, and equal the rank
// count times each rank's piece only when all agree. A rank that differs means a gradient
// that was not summed alike everywhere.
uint32_t stateChecksum(const TensorMap &state) {
  uint32_t crc = 0;
  for (const auto &[name, t] : state) {
    crc = crc32c(name.data(), name.size(), crc);
    crc = crc32c(t.raw(), t.nbytes(), crc);
  }
  return crc;
}

void checkRanksAgree(GradientReducer &reducer, int rank, int64_t step, const TensorMap &state) {
  const uint32_t crc = stateChecksum(state);
  const int ranks = reducer.worldSize();
  float pieces[2] = {static_cast<float>(crc >> 16), static_cast<float>(crc & 0xffff)};
  reducer.stepStarts();
  reducer.sumOverRanks(pieces, 2);
  float differs[1] = {pieces[0] != ranks * static_cast<float>(crc >> 16) ||
                              pieces[1] != ranks * static_cast<float>(crc & 0xffff)
                          ? 1.0f
                          : 0.0f};
  reducer.sumOverRanks(differs, 1);
  reducer.stepEnded();
  if (differs[0] != 0)
    throw Error(str("after step ", step, " the ranks' parameters differ (rank ", rank,
                    "'s state checksum is ", hex32(crc),
                    "): a gradient was not summed alike on every rank; stopping"));
}

RunCheckpoints::RunCheckpoints(std::string root, const nlohmann::json &config, Run run,
                               bool write, bool validating)
    : run_(std::move(run)) {
  CheckpointOptions keep;
  keep.keepLast = static_cast<int>(setting<int64_t>(config, "checkpoint", "keep"));
  keep.bestMetric = validating ? "val_dice" : "loss";
  keep.bestHigher = validating;
  if (write)
    writer_.emplace(std::move(root), keep);
}

void RunCheckpoints::save(int64_t done, TensorMap snapshot, double lossScale,
                          int64_t growthTracker, std::optional<double> intervalLoss,
                          const RunValidation *validation) {
  if (!writer_)
    return;
  TrainState state;
  state.step = done;
  state.seed = run_.seed;
  state.samplerPosition = static_cast<uint64_t>(done * run_.samplesPerStep);
  state.schedule = run_.schedule;
  state.recipeHash = run_.compileHash;
  state.extra["data"] = run_.contract;
  state.lossScale = lossScale;
  state.growthTracker = growthTracker;
  if (intervalLoss)
    state.metrics["loss"] = *intervalLoss;
  if (validation) {
    if (validation->validated())
      state.metrics["val_dice"] = *validation->validated();
    if (Json v = validation->stateJson(); !v.is_null())
      state.extra["validation"] = std::move(v);
  }
  writer_->save(std::move(state), std::move(snapshot));
}

std::string RunCheckpoints::poll() { return writer_ ? writer_->poll() : ""; }

std::string RunCheckpoints::wait() { return writer_ ? writer_->wait() : ""; }

} // namespace medrun::training
