//===- Train.cpp - the training loop of `medrun train` ------------------------------===//
//
// train() is a sequence of named steps (TrainRun.h says where each lives): the run's
// directory, the state it starts from, the backend, the data, logs, validation and
// checkpoints; then the loop, one step at a time (StepRunner), each step logged
// (TrainLoop::log) and followed by validation and a checkpoint when due.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Train.h"
#include "TrainRun.h"

#include "medrun/AugmentPreview.h"
#include "medrun/Checksum.h"
#include "medrun/Executor.h"
#include "medrun/Parallel.h"
#include "medrun/Random.h"
#include "medrun/Schedule.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

namespace medrun {
namespace training {

using json = nlohmann::json;

const json &section(const json &config, const char *name) {
  static const json empty = json::object();
  auto it = config.find(name);
  return it == config.end() ? empty : *it;
}

std::array<int64_t, 3> size3(const json &config, const char *sec, const char *key) {
  auto v = setting<std::vector<int64_t>>(config, sec, key);
  if (v.size() != 3)
    throw Error(str("recipe: ", sec, ".", key, " must hold three sizes"));
  return {v[0], v[1], v[2]};
}

double seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string fmtNumber(double v) {
  if (!std::isfinite(v))
    return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

} // namespace training

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace training;

ScheduleConfig scheduleOf(const json &config) {
  std::map<std::string, std::string> kv;
  for (auto &[key, value] : section(config, "schedule").items())
    kv[key] = value.is_string() ? value.get<std::string>() : value.dump();
  kv["lr"] = section(config, "optimizer").contains("lr")
                 ? section(config, "optimizer")["lr"].dump()
                 : throw Error("recipe: missing 'optimizer.lr' (the base learning rate)");
  return parseSchedule(kv);
}

// Which loader tensor feeds each batch input of train_step, from the input names medc gives
// (`image`, `target`, `mask`, `target.<i>` per deep-supervision output; with an augmentation
// pipeline in the step, `image` and its raw labels `seg`).
std::map<std::string, std::string> batchTensors(const Function &fn, const json &config) {
  std::string loss = setting<std::string>(config, "loss", "type");
  std::map<std::string, std::string> feeds;
  for (const std::string &name : fn.inputNames) {
    if (name == "lr" || name == "step" || name == "ema_decay" || name == "rng" ||
        name == "loss_scale" || name == "growth_tracker" || name == "inv_world_size")
      continue;
    if (name == "image") {
      feeds[name] = "image";
    } else if (name == "seg") { // raw labels: instance ids for affinities, else classes
      feeds[name] = loss == "bce_with_logits" ? "instances" : "classes";
    } else if (loss == "bce_with_logits" && name == "target") {
      feeds[name] = "affinity";
    } else if (loss == "bce_with_logits" && name == "mask") {
      feeds[name] = "affinity_mask";
    } else if (loss == "dice_ce" && (name == "target" || name.rfind("target.", 0) == 0)) {
      int level = name == "target" ? 0 : std::stoi(name.substr(7));
      feeds[name] = level == 0 ? "segmentation" : str("segmentation/", int64_t(1) << level);
    } else {
      throw Error(str("train_step input '", name, "' has no data source for loss '", loss,
                      "' (expected image, target, mask, target.<i>, seg)"));
    }
  }
  return feeds;
}

} // namespace

StepInputs::StepInputs(const Artifact &artifact, const json &config, int worldSize, int rank)
    : artifact_(&artifact), fn_(&artifact.function("train_step")), schedule_(scheduleOf(config)),
      worldSize_(worldSize), rank_(rank) {
  const Function &fn = *fn_;
  if (worldSize < 1)
    throw Error(str("a job of ", worldSize, " ranks: expected at least one"));
  if (worldSize > 1 && input("inv_world_size") < 0)
    throw Error(str(artifact.path, ": train_step was compiled for one process, but the job has ",
                    worldSize, " ranks (compile it with medc compile --data-parallel)"));
  if (input("rng") >= 0)
    seed_ = setting<uint64_t>(config, "train", "seed");
  if (input("ema_decay") >= 0) {
    emaDecay_ = setting<double>(config, "ema", "decay");
    emaWarmup_ = setting<int64_t>(config, "ema", "warmup_steps");
  }
  // Data: the embedded synthetic volumes, patches for the step's batch inputs.
  synthetic_.shape = size3(config, "data", "volume_shape");
  synthetic_.volumes = setting<int64_t>(config, "data", "volumes");
  synthetic_.seed = setting<uint64_t>(config, "data", "seed");
  loader_.batch = setting<int64_t>(config, "data", "batch");
  loader_.patch = size3(config, "data", "patch");
  loader_.workers = setting<int>(config, "data", "workers");
  loader_.prefetch = setting<int>(config, "data", "prefetch");
  loader_.foreground = setting<double>(config, "data", "foreground");
  loader_.seed = synthetic_.seed;
  // Volume files (data.source files or nnunet); keys absent from older recipes keep defaults.
  const json &data = section(config, "data");
  dataset_.source = data.value("source", "synthetic");
  dataset_.path = data.value("path", "");
  dataset_.images = data.value("images", std::vector<std::string>{});
  dataset_.labels = data.value("labels", std::vector<std::string>{});
  dataset_.imageKey = data.value("image_key", "");
  dataset_.labelKey = data.value("label_key", "");
  dataset_.normalization = data.value("normalization", "auto");
  dataset_.splits = data.value("splits", "");
  if (auto fold = data.find("fold"); fold != data.end() && fold->is_string())
    dataset_.allCases = *fold == "all"; // checkEffectiveRecipe allows no other word
  else
    dataset_.fold = data.value("fold", int64_t(0));
  dataset_.valFraction = data.value("val_fraction", 0.2);
  dataset_.cacheMb = data.value("cache_mb", int64_t(1024));
  if (auto sp = data.find("spacing"); sp != data.end() && !sp->is_null()) {
    const std::vector<double> v = sp->get<std::vector<double>>(); // a list of numbers
    if (v.size() != 3 || !(v[0] > 0 && v[1] > 0 && v[2] > 0))
      throw Error(str("data.spacing: expected three positive numbers [z, y, x], got ", sp->dump()));
    dataset_.spacing = std::array<double, 3>{v[0], v[1], v[2]};
  }
  dataset_.seed = synthetic_.seed;
  dataset_.classes = setting<std::string>(config, "loss", "type") == "dice_ce";
  feeds_ = batchTensors(fn, config);
  loader_.tensors.clear();
  for (auto &[name, tensor] : feeds_) {
    loader_.tensors.push_back(tensor);
    if (tensor == "affinity")
      loader_.affinityChannels = fn.values[fn.inputs[input(name)]].shape.at(1);
  }
  // With an augmentation pipeline in the step, the loader cuts its (larger) input patches.
  if (feeds_.count("seg") && input("image") >= 0) {
    const Shape &image = fn.values[fn.inputs[input("image")]].shape;
    if (image.size() == 5)
      loader_.patch = {image[2], image[3], image[4]};
  }
  if (input("image") >= 0 && fn.values[fn.inputs[input("image")]].shape.size() == 5)
    loader_.imageChannels = fn.values[fn.inputs[input("image")]].shape[1];
  for (auto &[name, tensor] : feeds_) { // the recipe and the artifact must agree
    const Shape &want = fn.values[fn.inputs[input(name)]].shape;
    if (want.size() != 5 || want[0] != loader_.batch)
      throw Error(str(artifact.path, ": train_step input '", name, "' is ", shapeStr(want),
                      ", but the recipe's batch is ", loader_.batch, " (recompile the recipe)"));
  }
}

int StepInputs::input(const std::string &name) const {
  for (size_t i = 0; i < fn_->inputNames.size(); ++i)
    if (fn_->inputNames[i] == name)
      return static_cast<int>(i);
  return -1;
}

double StepInputs::learningRate(int64_t step) const {
  return medrun::learningRate(schedule_, step);
}

double StepInputs::initialLossScale() const {
  return fn_->initLossScale > 0 ? fn_->initLossScale : 1.0;
}

std::vector<Tensor> StepInputs::inputs(const Batch &batch, int64_t step, double lossScale,
                                       int64_t growthTracker) const {
  const Function &fn = *fn_;
  std::vector<Tensor> inputs = batchInputs(batch);
  auto scalar = [&](const std::string &name, double v) {
    int i = input(name);
    if (i < 0)
      return;
    DType type = fn.values[fn.inputs[i]].dtype; // rng is i64, the others f32
    Tensor t(type, {});
    if (type == DType::I64)
      t.data<int64_t>()[0] = static_cast<int64_t>(v);
    else
      t.data<float>()[0] = static_cast<float>(v);
    inputs[i] = t;
  };
  scalar("lr", learningRate(step));
  scalar("step", static_cast<double>(step + 1)); // the optimizer's 1-based step count
  scalar("ema_decay", step < emaWarmup_ ? 0.0 : emaDecay_);
  if (int i = input("rng"); i >= 0) { // all 64 bits: not through a double
    Tensor key(DType::I64, {});
    key.data<int64_t>()[0] = stepKey(seed_, static_cast<uint32_t>(rank_), static_cast<uint64_t>(step));
    inputs[i] = key;
  }
  scalar("loss_scale", lossScale);
  scalar("growth_tracker", static_cast<double>(growthTracker));
  scalar("inv_world_size", 1.0 / worldSize_); // averages the gradients summed over the ranks
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      throw Error(str(artifact_->path, ": train_step input '", fn.inputNames[i],
                      "' is not fed by the training loop"));
  return inputs;
}

std::vector<Tensor> StepInputs::batchInputs(const Batch &batch) const {
  std::vector<Tensor> inputs(fn_->inputs.size());
  for (auto &[name, tensor] : feeds_)
    inputs[input(name)] = batch.tensors.at(tensor);
  return inputs;
}

namespace {

// The recipe's settings of the loop itself.
struct LoopSettings {
  int64_t steps = 0, checkpointEvery = 0, logEvery = 0;
  std::string nanPolicy; ///< train.nan: stop or skip
  uint64_t seed = 0;
  /// MEDRUN_STATE_DIGEST=1: every rank prints the checksum of its final state.
  bool stateDigest = false;
};

LoopSettings loopSettings(const json &config) {
  LoopSettings s;
  s.steps = setting<int64_t>(config, "train", "steps");
  s.nanPolicy = setting<std::string>(config, "train", "nan");
  s.seed = setting<uint64_t>(config, "train", "seed");
  if (int threads = setting<int>(config, "train", "threads"); threads > 0)
    setNumThreads(threads);
  s.checkpointEvery = setting<int64_t>(config, "checkpoint", "every");
  s.logEvery = setting<int64_t>(config, "logging", "every");
  const char *digest = std::getenv("MEDRUN_STATE_DIGEST");
  s.stateDigest = digest && *digest && std::string(digest) != "0";
  return s;
}

// metrics.jsonl (appended from the resumed step), TensorBoard's events and, every
// logging.images_every steps, the step's first augmented sample as an image: @augment run
// again on the CPU backend with the step's batch and key (AugmentPreview.h).
void openLogs(RunLogs &logs, const Artifact &artifact, const json &config,
              const TrainOptions &options, bool lead, bool resuming, int64_t first,
              FILE *console) {
  if (lead)
    logs.metrics.emplace((fs::path(options.out) / "metrics.jsonl").string(),
                         resuming ? std::optional<int64_t>(first) : std::nullopt);
  if (lead && setting<bool>(config, "logging", "tensorboard"))
    logs.board =
        std::make_unique<TensorBoardWriter>((fs::path(options.out) / "tensorboard").string());
  logs.imagesEvery = section(config, "logging").value("images_every", int64_t(0));
  if (logs.board && logs.imagesEvery > 0) {
    logs.augmentFn = &augmentFunction(artifact, config,
                                      "logging.images_every has no augmented samples to show");
    if (!pngSupported()) {
      std::fprintf(console, "logging.images_every: medrun was built without libpng "
                            "(libpng-dev): no images\n");
      logs.augmentFn = nullptr;
    }
  }
}

Progress::Options progressOptions(const LoopSettings &settings, int64_t first,
                                  const TrainOptions &options) {
  Progress::Options po;
  po.total = settings.steps;
  po.initial = first;
  po.every = settings.logEvery;
  po.mode = options.progressMode == 1   ? Progress::Mode::Bar
            : options.progressMode == 2 ? Progress::Mode::Lines
                                        : Progress::Mode::Auto;
  return po;
}

// What one step did, as the loop logs it and decides on it.
struct StepOutcome {
  double loss = 0, norm = 0, lr = 0;
  double elapsed = 0, wait = 0; ///< the step's time, and what of it waited for the batch
  bool skipped = false;         ///< a non-finite loss (train.nan skip): not applied
  bool updateSkipped = false;   ///< a non-finite updated state (update_nonfinite): not applied
  bool overflow = false;        ///< fp16-mixed: the scaled gradients overflowed
  bool stopping = false;        ///< a signal on some rank: the job stops after this step
  std::vector<Tensor> imageInputs; ///< @augment's inputs, for the TensorBoard image
};

// Runs the steps on the backend: feeds each its batch and scalars, uploads the next batch
// while the step runs, agrees with the other ranks on the loss and on stopping, carries the
// loss scale from step to step, and applies the step or skips it (train.nan).
class StepRunner {
public:
  StepRunner(const Artifact &artifact, const StepInputs &feed, TrainBackend &backend,
             DataLoader &data, GradientReducer &reducer, const LoopSettings &settings,
             const TrainOptions &options, const StartState &start, Progress &progress)
      : artifact_(artifact), feed_(feed), backend_(backend), data_(data), reducer_(reducer),
        settings_(settings), options_(options), progress_(progress), first_(start.first),
        lossScale_(start.lossScale), growthTracker_(start.growthTracker) {
    lossOut_ = output("loss");
    normOut_ = output("grad_norm");
    // fp16-mixed: the loss scale and its growth tracker are step inputs and outputs, carried
    // from step to step here and saved in checkpoints.
    scaling_ = feed.input("loss_scale") >= 0;
    if (scaling_) {
      scaleOut_ = output("loss_scale");
      trackerOut_ = output("growth_tracker");
      foundInfOut_ = output("found_inf");
    }
    // The step's guard on its updated state (med-train-step guard-update; older artifacts
    // have none).
    for (size_t i = 0; i < feed.function().outputNames.size(); ++i)
      if (feed.function().outputNames[i] == "update_nonfinite")
        updateGuardOut_ = static_cast<int>(i);
    prefetch_ = backend.canStage();
  }

  // Runs 0-based step `step`; keeps @augment's inputs (`augmentFn`) for an image.
  StepOutcome run(int64_t step, const Function *augmentFn) {
    StepOutcome s;
    const double start = seconds();
    const Batch &batch = ahead_ ? *ahead_ : data_.next(&s.wait);
    ahead_ = nullptr;
    s.lr = feed_.learningRate(step);
    std::vector<Tensor> inputs = feed_.inputs(batch, step, lossScale_, growthTracker_);
    // The next batch, if the loader has it ready, is copied to the GPU on a second stream
    // while this step runs; its scalars (the loss scale comes from this step) follow with it.
    if (prefetch_ && step + 1 < settings_.steps && data_.ready()) {
      ahead_ = &data_.next();
      backend_.stage(feed_.batchInputs(*ahead_));
    }
    reducer_.stepStarts();
    std::vector<Tensor> out;
    try {
      out = backend_.run(inputs);
    } catch (const Error &) {
      reducer_.stepEnded(); // the job's failure, where that is what ended the step
      throw;
    }
    if (augmentFn) // kept past the batch's release
      for (const Tensor &t : augmentInputs(*augmentFn, feed_, inputs))
        s.imageInputs.push_back(t.clone());
    data_.release(batch);
    auto value = [&](int i) { return out[i].to(DType::F64).data<double>()[0]; };
    s.loss = value(lossOut_);
    s.norm = value(normOut_);
    agree(s);
    if (step == first_)
      if (std::string line = backend_.afterFirstStep(); !line.empty())
        progress_.message(line);
    // With loss scaling an overflow of the scaled gradients is routine: the step skipped
    // itself (found_inf) and lowered the scale. Only a non-finite loss is a failure then.
    s.overflow = scaling_ && value(foundInfOut_) != 0;
    if (scaling_) {
      lossScale_ = value(scaleOut_);
      growthTracker_ = static_cast<int64_t>(value(trackerOut_));
    }
    if (!std::isfinite(s.loss) || (!std::isfinite(s.norm) && !s.overflow)) {
      if (settings_.nanPolicy == "stop")
        throw Error(str("step ", step, ": the loss is ", s.loss, " (gradient norm ", s.norm,
                        "); stopping without applying it. The last checkpoint is kept; "
                        "`--nan skip` skips such steps instead"));
      s.skipped = true;
      progress_.message(str("step ", step, ": non-finite loss ", s.loss, "; step skipped"));
    } else if (updateGuardOut_ >= 0 && value(updateGuardOut_) != 0) {
      // A finite gradient whose update overflowed (a learning rate too large): the state
      // stays as before the step, as GradScaler skips an overflowed step; counted.
      s.updateSkipped = true;
      progress_.message(str("step ", step, ": the updated state is not finite (lr ", s.lr,
                            ", gradient norm ", s.norm, "); step skipped, the state kept"));
    } else {
      backend_.commit();
    }
    s.elapsed = seconds() - start;
    return s;
  }

  bool scaling() const { return scaling_; }
  double lossScale() const { return lossScale_; }
  int64_t growthTracker() const { return growthTracker_; }

private:
  int output(const std::string &name) const {
    const Function &fn = feed_.function();
    for (size_t i = 0; i < fn.outputNames.size(); ++i)
      if (fn.outputNames[i] == name)
        return static_cast<int>(i);
    throw Error(str(artifact_.path, ": train_step has no output '", name, "'"));
  }

  // Every rank takes the same decisions: the loss is the mean over the ranks (the
  // gradients, so their norm, are the same on all), and a signal on any rank stops all
  // after this step.
  void agree(StepOutcome &s) {
    float agreed[2] = {static_cast<float>(s.loss),
                       options_.stop && options_.stop->load() != 0 ? 1.0f : 0.0f};
    reducer_.sumOverRanks(agreed, 2);
    reducer_.stepEnded();
    if (reducer_.worldSize() > 1)
      s.loss = agreed[0] / reducer_.worldSize();
    s.stopping = agreed[1] != 0;
  }

  const Artifact &artifact_;
  const StepInputs &feed_;
  TrainBackend &backend_;
  DataLoader &data_;
  GradientReducer &reducer_;
  const LoopSettings &settings_;
  const TrainOptions &options_;
  Progress &progress_;
  int64_t first_;
  int lossOut_ = -1, normOut_ = -1;
  bool scaling_ = false;
  int scaleOut_ = -1, trackerOut_ = -1, foundInfOut_ = -1;
  int updateGuardOut_ = -1; ///< update_nonfinite, if the step has it
  bool prefetch_ = false;
  const Batch *ahead_ = nullptr; ///< the next step's batch, uploading during this step
  double lossScale_;
  int64_t growthTracker_;
};

// The loop over the steps, over the parts train() set up.
class TrainLoop {
public:
  struct Parts {
    const Artifact &artifact;
    const LoopSettings &settings;
    const TrainOptions &options;
    TrainBackend &backend;
    GradientReducer &reducer;
    StepRunner &runner;
    RunLogs &logs;
    Progress &progress;
    RunValidation *validation; ///< null: no validation
    RunCheckpoints &checkpoints;
    int64_t samplesPerStep; ///< the global batch
  };
  explicit TrainLoop(Parts parts) : p_(parts) {}

  TrainSummary run(int64_t first) {
    summary_.firstStep = first;
    int64_t step = first;
    for (; step < p_.settings.steps; ++step) {
      const Function *augment =
          p_.logs.augmentFn && step % p_.logs.imagesEvery == 0 ? p_.logs.augmentFn : nullptr;
      StepOutcome s = p_.runner.run(step, augment);
      if (s.skipped) {
        ++summary_.skipped;
      } else {
        summary_.updateSkipped += s.updateSkipped;
        intervalLoss_ += s.loss;
        ++intervalSteps_;
      }
      log(step, s);
      const bool last = step + 1 == p_.settings.steps;
      if ((step + 1) % p_.settings.logEvery == 0 || last || s.stopping)
        summarizeInterval();
      saved(p_.checkpoints.poll());
      validateAndSave(step, last, s.stopping);
      if ((step + 1) % p_.settings.logEvery == 0) {
        intervalLoss_ = 0;
        intervalSteps_ = 0;
      }
      if (s.stopping) {
        summary_.interrupted = true;
        ++step;
        break;
      }
    }
    summary_.lastStep = step;
    saved(p_.checkpoints.wait());
    if (std::string line = p_.backend.atEnd(); !line.empty())
      p_.progress.message(line);
    p_.progress.finish({{"loss", summary_.lastLoss}});
    if (p_.logs.board)
      p_.logs.board->close();
    return summary_;
  }

private:
  // The step's line of metrics.jsonl, its TensorBoard scalars (and image), the progress.
  void log(int64_t step, const StepOutcome &s) {
    StepRecord record;
    record.step = step;
    record.loss = s.loss;
    record.lr = s.lr;
    record.gradNorm = s.norm;
    record.stepTime = s.elapsed;
    record.samplesPerSecond = static_cast<double>(p_.samplesPerStep) / s.elapsed;
    record.dataWait = s.wait;
    if (p_.validation && !s.skipped)
      p_.validation->addStep(step, s.loss, s.lr, s.elapsed);
    if (s.skipped)
      record.extra["skipped"] = true;
    if (s.updateSkipped)
      record.extra["update_skipped"] = true;
    if (p_.runner.scaling()) {
      record.extra["loss_scale"] = p_.runner.lossScale();
      record.extra["found_inf"] = s.overflow;
    }
    if (p_.logs.metrics)
      p_.logs.metrics->write(record);
    if (TensorBoardWriter *board = p_.logs.board.get()) {
      board->addScalars(step, {{"train/loss", s.loss},
                               {"train/lr", s.lr},
                               {"gradients/total_norm", s.norm},
                               {"time/step_s", s.elapsed},
                               {"time/data_wait_s", s.wait}});
      if (!s.imageInputs.empty())
        logAugmented(*board, step, s.imageInputs);
    }
    p_.progress.update(step + 1, {{"loss", s.loss}, {"lr", s.lr}}); // counting resumed steps
  }

  void logAugmented(TensorBoardWriter &board, int64_t step, const std::vector<Tensor> &inputs) {
    const Function &augmentFn = *p_.logs.augmentFn;
    std::vector<Tensor> augmented = runCpu(p_.artifact, augmentFn, inputs, {});
    Overlay overlay;
    const int target = overlayOutput(augmentFn, &overlay);
    int image = 0;
    for (size_t i = 0; i < augmentFn.outputNames.size(); ++i)
      if (augmentFn.outputNames[i] == "image")
        image = static_cast<int>(i);
    Raster picture =
        orthoSlices(augmented[image], 0, target >= 0 ? &augmented[target] : nullptr, overlay);
    board.addImage(step, "augment/sample0", encodePng(picture), picture.width, picture.height);
  }

  // The mean loss of the first and of the latest log interval.
  void summarizeInterval() {
    if (intervalSteps_ == 0)
      return;
    if (firstInterval_) {
      summary_.firstLoss = intervalLoss_ / intervalSteps_;
      firstInterval_ = false;
    }
    summary_.lastLoss = intervalLoss_ / intervalSteps_;
  }

  // After 0-based step `step`: validation when due, then a checkpoint when due, at the end,
  // when stopping, or at a new best Dice (saved, so that `best` can point to it).
  void validateAndSave(int64_t step, bool last, bool stopping) {
    const int64_t done = step + 1;
    std::optional<TensorMap> snapshot; // the state, for validation and the checkpoint
    bool newBest = false;
    if (RunValidation *validation = p_.validation) {
      validation->clearValidated();
      if (!stopping && (done % validation->every() == 0 || last)) {
        snapshot = p_.backend.state();
        validation->run(step, *snapshot, p_.backend, p_.logs);
        newBest = validation->bestAt(done);
      }
    }
    if (!(done % p_.settings.checkpointEvery == 0 || last || stopping || newBest))
      return;
    TensorMap state = snapshot ? std::move(*snapshot) : p_.backend.state();
    const int ranks = p_.reducer.worldSize();
    // Every rank, rank 0 and the silent ones, prints the checksum of its final state before
    // the ranks compare it, so that a script can see for itself that they agree
    // (scripts/gpu-data-parallel.sh, part equiv).
    if (p_.settings.stateDigest && (last || stopping))
      std::fprintf(stderr,
                   "medrun: rank %d of %d: state after step %lld: crc32c %s of %zu tensors\n",
                   p_.options.rank, ranks, static_cast<long long>(done),
                   hex32(stateChecksum(state)).c_str(), state.size());
    if (ranks > 1)
      checkRanksAgree(p_.reducer, p_.options.rank, done, state);
    p_.checkpoints.save(done, std::move(state), p_.runner.lossScale(), p_.runner.growthTracker(),
                        intervalSteps_ > 0 ? std::optional(intervalLoss_ / intervalSteps_)
                                           : std::nullopt,
                        p_.validation);
  }

  void saved(const std::string &dir) {
    if (!dir.empty()) {
      summary_.checkpoint = dir;
      p_.progress.message(str("checkpoint ", dir));
    }
  }

  Parts p_;
  TrainSummary summary_;
  double intervalLoss_ = 0; ///< the counted steps' losses since the last log line
  int64_t intervalSteps_ = 0;
  bool firstInterval_ = true;
};

} // namespace

TrainSummary train(const Artifact &artifact, const json &config, const TrainOptions &options) {
  const LoopSettings settings = loopSettings(config);
  GradientReducer &reducer = options.reducer ? *options.reducer : singleRankReducer();
  const int ranks = reducer.worldSize();
  const StepInputs feed(artifact, config, ranks, options.rank);
  // Each rank draws its own part of the step's global batch (Data.h).
  LoaderSpec loader = feed.loader();
  loader.rank = options.rank;
  loader.ranks = ranks;
  // Rank 0 alone writes: the output directory, logs, checkpoints, the console's progress.
  // The others train alike and say nothing unless they fail.
  const bool lead = options.rank == 0;
  std::unique_ptr<FILE, int (*)(FILE *)> quiet(lead ? nullptr : std::fopen("/dev/null", "w"),
                                                [](FILE *f) { return f ? std::fclose(f) : 0; });
  FILE *const console = lead || !quiet ? options.console : quiet.get();

  const RunDirectory dir(config, options, lead, console);
  StartState start = startState(artifact, feed, config, dir, options, console);
  if (start.finished) {
    TrainSummary done;
    done.firstStep = done.lastStep = start.first;
    done.finished = true;
    done.checkpoint = start.dir;
    return done;
  }

  // The steps run on the backend, which holds the state from here on.
  std::unique_ptr<TrainBackend> backend = options.cuda
                                              ? cudaTrainBackend(artifact, reducer, console)
                                              : cpuTrainBackend(artifact, reducer);
  backend->setState(start.params);
  start.params.clear();

  // Validation (validation.every > 0): the validation cases of the split, or synthetic
  // volumes drawn with their own seed. On the GPU, batches are born in pinned host memory:
  // uploaded with no host-side copy, and the next one while the current step runs.
  const int64_t validateEvery = section(config, "validation")
                                    .value("every", feed.dataset().source == "synthetic"
                                                        ? int64_t(0)
                                                        : settings.checkpointEvery);
  TrainData data = openTrainData(artifact, feed, config, loader, start.first, validateEvery,
                                 backend->batchAllocator(), start.storedContract, options, lead,
                                 console);
  RunLogs logs;
  openLogs(logs, artifact, config, options, lead, dir.resume().has_value(), start.first, console);
  for (const SkippedCheckpoint &s : start.skipped)
    if (logs.metrics)
      logs.metrics->write(Json{{"event", "resume_skipped"}, {"checkpoint", s.path},
                               {"reason", s.reason}, {"resumed_from", start.dir},
                               {"resumed_step", start.first}});
  const Progress::Options po = progressOptions(settings, start.first, options);
  Progress progress(console, po);
  std::unique_ptr<RunValidation> validation;
  if (data.validation)
    validation = std::make_unique<RunValidation>(
        artifact, feed, config, data.validation, data.contract, validateEvery, options, lead,
        start.resumedValidation, logs, dir.resume().has_value(), progress, po.mode, console);
  RunCheckpoints checkpoints(dir.checkpoints(), config,
                             {settings.seed, loader.batch * ranks,
                              Json::parse(section(config, "schedule").dump()),
                              config.value("compile_hash", ""), data.contractJson},
                             lead, validation != nullptr);

  StepRunner runner(artifact, feed, *backend, *data.loader, reducer, settings, options, start,
                    progress);
  TrainLoop loop({artifact, settings, options, *backend, reducer, runner, logs, progress,
                  validation.get(), checkpoints, loader.batch * ranks});
  return loop.run(start.first);
}

} // namespace medrun
