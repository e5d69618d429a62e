//===- Train.cpp - the training loop of `medrun train` ------------------------------===//
#include "medrun/Train.h"
#include "medrun/AugmentPreview.h"

#include "medrun/Checkpoint.h"
#include "medrun/Checksum.h"
#include "medrun/Cuda.h"
#include "medrun/Data.h"
#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Interop.h"
#include "medrun/Parallel.h"
#include "medrun/ProgressPlot.h"
#include "medrun/Random.h"
#include "medrun/Schedule.h"
#include "medrun/TrainBackend.h"
#include "medrun/TrainLog.h"
#include "medrun/Validation.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace medrun {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const json &section(const json &config, const char *name) {
  static const json empty = json::object();
  auto it = config.find(name);
  return it == config.end() ? empty : *it;
}

template <typename T> T setting(const json &config, const char *sec, const char *key) {
  const json &s = section(config, sec);
  auto it = s.find(key);
  if (it == s.end())
    throw Error(str("recipe: missing '", sec, ".", key, "' (run the recipe through `medc recipe`)"));
  try {
    return it->get<T>();
  } catch (const json::exception &) { // checkEffectiveRecipe catches these first
    throw Error(str("recipe: ", sec, ".", key, ": a value of the wrong type, ", it->dump()));
  }
}

std::array<int64_t, 3> size3(const json &config, const char *sec, const char *key) {
  auto v = setting<std::vector<int64_t>>(config, sec, key);
  if (v.size() != 3)
    throw Error(str("recipe: ", sec, ".", key, " must hold three sizes"));
  return {v[0], v[1], v[2]};
}

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

bool finite(double v) { return std::isfinite(v); }

std::string fmtNumber(double v) {
  if (!std::isfinite(v))
    return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

double seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// One run per output directory: two runs in one directory would overwrite each other's
// checkpoints and logs. An exclusive flock on OUT/medrun.lock, held while the run lives; the
// kernel drops it when the process ends, however it ends, so a crash leaves no stale lock.
// The file says who holds it.
class RunLock {
public:
  explicit RunLock(const std::string &dir) {
    const std::string path = (fs::path(dir) / "medrun.lock").string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0)
      throw Error(str(path, ": cannot open the run's lock file: ", std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      char buf[512] = {};
      ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
      std::string holder(buf, n > 0 ? static_cast<size_t>(n) : 0);
      while (!holder.empty() && holder.back() == '\n')
        holder.pop_back();
      ::close(fd_);
      if (err != EWOULDBLOCK)
        throw Error(str(path, ": cannot lock the run directory: ", std::strerror(err)));
      throw Error(str(dir, " is in use by another run (", holder.empty() ? "holder unknown" : holder,
                      "; lock ", path, "): wait for it to end, or train elsewhere with --out DIR"));
    }
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    char when[32] = "?";
    std::time_t now = std::time(nullptr);
    std::tm utc{};
    if (::gmtime_r(&now, &utc))
      std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
    std::string who = str("medrun train, pid ", ::getpid(), " on ", host, ", started ", when, "\n");
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, who.data(), who.size(), 0) < 0) {
      // The lock holds without the note; a second run then says "holder unknown".
    }
  }
  ~RunLock() { ::close(fd_); } // not unlinked: another run may have opened it already
  RunLock(const RunLock &) = delete;
  RunLock &operator=(const RunLock &) = delete;

private:
  int fd_ = -1;
};

// The curves of progress.png from the log of a resumed run (what precedes the resumed step).
ProgressHistory readHistory(const std::string &path) {
  ProgressHistory h;
  std::ifstream in(path);
  std::string line;
  auto number = [](const json &j, const char *key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : std::nan("");
  };
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer())
      continue;
    const int64_t step = j["step"].get<int64_t>();
    if (j.contains("val_dice")) {
      h.dice.push_back({step, number(j, "val_dice")});
      h.diceEma.push_back({step, number(j, "val_dice_ema")});
    } else if (!j.contains("skipped")) {
      h.loss.push_back({step, number(j, "loss")});
    }
  }
  return h;
}

// step_<N>.tmp directories under `root`: saves that did not finish.
std::string unfinishedSaves(const std::string &root) {
  std::string names;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) == 0 && entry.path().extension() == ".tmp")
      names += (names.empty() ? "" : ", ") + name;
  }
  return names;
}

// The ranks of a data-parallel job train one model: at each checkpoint they compare a
// checksum of their state (sums of its 16-bit pieces over the ranks are exact in f32, and
// equal the rank count times each rank's piece only when all agree). A rank that differs
// means a gradient that was not summed alike everywhere: the job stops, on every rank.
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
  dataset_.fold = data.value("fold", int64_t(0));
  dataset_.valFraction = data.value("val_fraction", 0.2);
  dataset_.cacheMb = data.value("cache_mb", int64_t(1024));
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

TrainSummary train(const Artifact &artifact, const json &config, const TrainOptions &options) {
  const Function &fn = artifact.function("train_step");
  auto output = [&](const std::string &name) -> int {
    for (size_t i = 0; i < fn.outputNames.size(); ++i)
      if (fn.outputNames[i] == name)
        return static_cast<int>(i);
    throw Error(str(artifact.path, ": train_step has no output '", name, "'"));
  };
  const int lossOut = output("loss"), normOut = output("grad_norm");

  const int64_t steps = setting<int64_t>(config, "train", "steps");
  const std::string nanPolicy = setting<std::string>(config, "train", "nan");
  const uint64_t seed = setting<uint64_t>(config, "train", "seed");
  if (int threads = setting<int>(config, "train", "threads"); threads > 0)
    setNumThreads(threads);
  const int64_t checkpointEvery = setting<int64_t>(config, "checkpoint", "every");
  const int64_t logEvery = setting<int64_t>(config, "logging", "every");
  GradientReducer &reducer = options.reducer ? *options.reducer : singleRankReducer();
  const int ranks = reducer.worldSize();
  const bool stateDigest = [] {
    const char *v = std::getenv("MEDRUN_STATE_DIGEST");
    return v && *v && std::string(v) != "0";
  }();
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

  std::optional<RunLock> lock;
  if (lead) {
    fs::create_directories(options.out);
    lock.emplace(options.out);
  }
  const std::string checkpoints = (fs::path(options.out) / "checkpoints").string();
  // --resume-or-start: the run's latest checkpoint if it has one, else a fresh run.
  std::optional<std::string> resume = options.resume;
  if (resume && resume->empty() && listCheckpoints(checkpoints).empty()) {
    if (!options.resumeOrStart) {
      std::string unfinished = unfinishedSaves(checkpoints);
      throw Error(str("--resume: ", checkpoints, " holds no complete checkpoint",
                      unfinished.empty() ? "" : str(" (only ", unfinished,
                                                    ": a save that did not finish)"),
                      "; --resume-or-start starts the run from step 0 when there is none"));
    }
    std::fprintf(console, "no checkpoint in %s: starting at step 0\n",
                 checkpoints.c_str());
    resume.reset();
  }
  if (!resume && !listCheckpoints(checkpoints).empty()) {
    if (!options.overwrite)
      throw Error(str(options.out, " already holds checkpoints of a run: --resume continues it, "
                                   "--overwrite starts it over, --out DIR trains elsewhere"));
    if (lead)
      for (const char *old : {"checkpoints", "tensorboard", "metrics.jsonl", "progress.png"})
        fs::remove_all(fs::path(options.out) / old);
  }
  if (lead) {
    std::ofstream cfg(fs::path(options.out) / "config.json");
    cfg << config.dump(2) << "\n";
    if (!cfg)
      throw Error(str(options.out, "/config.json: cannot write the effective recipe"));
  }

  // Parameters, optimizer state and EMA: fresh, or from a checkpoint.
  TensorMap params;
  int64_t first = 0;
  double lossScale = feed.initialLossScale();
  int64_t growthTracker = 0;
  std::string compileHash = config.value("compile_hash", "");
  Json resumedValidation; // the best validation so far, from the checkpoint
  std::optional<DataContract> storedContract; // the data contract the run started with
  if (resume) {
    Checkpoint ckpt = loadCheckpoint(resume->empty() ? checkpoints : *resume);
    if (ckpt.state.extra.contains("validation"))
      resumedValidation = ckpt.state.extra["validation"];
    if (ckpt.state.extra.contains("data"))
      storedContract = DataContract::fromJson(json::parse(ckpt.state.extra["data"].dump()),
                                              str(ckpt.dir, "/state.json: extra.data"));
    checkParameters(artifact, ckpt.tensors);
    params = std::move(ckpt.tensors);
    first = ckpt.state.step;
    lossScale = ckpt.state.lossScale;
    growthTracker = ckpt.state.growthTracker;
    if (!ckpt.state.recipeHash.empty() && ckpt.state.recipeHash != compileHash)
      std::fprintf(console,
                   "medrun: warning: %s was written by a differently compiled recipe\n",
                   ckpt.dir.c_str());
    std::fprintf(console, "resuming from %s (step %lld)\n", ckpt.dir.c_str(),
                 static_cast<long long>(first));
  } else {
    params = initParameters(artifact, seed);
    if (!options.initFrom.empty())
      initFromFile(artifact, params, options.initFrom, options.upkern, console);
  }
  if (first >= steps)
    throw Error(str("nothing to do: the checkpoint is at step ", first, " and train.steps is ",
                    steps, " (raise it with --steps)"));

  // The steps run on the backend, which holds the state from here on.
  std::unique_ptr<TrainBackend> backend = options.cuda
                                              ? cudaTrainBackend(artifact, reducer, console)
                                              : cpuTrainBackend(artifact, reducer);
  backend->setState(params);
  params.clear();
  // On the GPU, batches are born in pinned host memory: uploaded with no host-side copy,
  // and the next one while the current step runs (below).
  const BatchAllocator allocate = backend->batchAllocator();
  std::unique_ptr<DataLoader> loaderPtr;
  // Validation (validation.every > 0): the validation cases of the split, or synthetic
  // volumes drawn with their own seed.
  const json &validationConfig = section(config, "validation");
  const int64_t validateEvery = validationConfig.value(
      "every", feed.dataset().source == "synthetic" ? int64_t(0) : checkpointEvery);
  std::shared_ptr<const PatchSource> validationSource;
  DataContract contract;
  if (feed.dataset().source == "synthetic") {
    contract = dataContract(feed.dataset(), nullptr);
    if (loader.imageChannels != 1)
      throw Error(str("data.source synthetic: the synthetic volumes have one channel, but ",
                      artifact.path, "'s model takes ", loader.imageChannels,
                      " (train it on volume files with as many channels)"));
    loaderPtr = std::make_unique<DataLoader>(makeSyntheticDataset(feed.synthetic()), loader, first,
                                             allocate);
    if (validateEvery > 0) {
      SyntheticSpec spec = feed.synthetic();
      spec.seed = validationConfig.value("seed", spec.seed + 1);
      spec.volumes = validationConfig.value("volumes", int64_t(2));
      validationSource = memorySource(makeSyntheticDataset(spec));
    }
  } else {
    // Volume files: the split goes to OUT/split.json (what validation and inference use).
    DatasetSplit split = splitDataset(feed.dataset());
    json record = {{"how", split.how}, {"train", json::array()}, {"validation", json::array()}};
    for (auto [list, key] : {std::pair{&split.train, "train"}, {&split.validation, "validation"}})
      for (const Case &c : *list)
        record[key].push_back({{"name", c.name},
                               {"image", c.images.at(0)},
                               {"images", c.images},
                               {"label", c.label}});
    if (lead) {
      std::ofstream out(fs::path(options.out) / "split.json");
      out << record.dump(2) << "\n";
      if (!out)
        throw Error(str(options.out, "/split.json: cannot write the dataset split"));
    }
    std::shared_ptr<const PatchSource> source =
        openDataset(feed.dataset(), split, console, storedContract ? &*storedContract : nullptr);
    contract = dataContract(feed.dataset(), source.get());
    if (static_cast<int64_t>(contract.channels.size()) != loader.imageChannels)
      throw Error(str("data: the dataset has ", contract.channels.size(), " input channel(s)",
                      feed.dataset().source == "nnunet" ? " (dataset.json's channel_names)" : "",
                      ", but ", artifact.path, "'s model takes ", loader.imageChannels,
                      " (generate the model with scripts/gen_mednext.py --in-channels ",
                      contract.channels.size(), ")"));
    loaderPtr = std::make_unique<DataLoader>(source, loader, first, allocate);
    if (validateEvery > 0) {
      validationSource = openValidationDataset(feed.dataset(), split, *source);
      if (!validationSource)
        std::fprintf(console, "validation: off: the split (%s) leaves no validation case\n",
                     split.how.c_str());
    }
  }
  // The data contract: what infer and validation apply to a raw volume (Dataset.h).
  const Json contractJson = contract.toJson();
  if (lead) {
    const fs::path path = fs::path(options.out) / "data.json", tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp);
      out << contractJson.dump(2) << "\n";
      if (!out)
        throw Error(str(tmp.string(), ": cannot write the run's data contract"));
    }
    fs::rename(tmp, path);
  }
  DataLoader &data = *loaderPtr;
  std::optional<JsonlLog> metrics;
  if (lead)
    metrics.emplace((fs::path(options.out) / "metrics.jsonl").string(),
                    resume ? std::optional<int64_t>(first) : std::nullopt);
  std::unique_ptr<TensorBoardWriter> board;
  if (lead && setting<bool>(config, "logging", "tensorboard"))
    board = std::make_unique<TensorBoardWriter>((fs::path(options.out) / "tensorboard").string());
  // logging.images_every: the step's first augmented sample as a TensorBoard image, from
  // @augment run again on the CPU backend with the step's batch and key (AugmentPreview.h).
  const int64_t imagesEvery = section(config, "logging").value("images_every", int64_t(0));
  const Function *augmentFn = nullptr;
  if (board && imagesEvery > 0) {
    augmentFn = &augmentFunction(artifact, config,
                                 "logging.images_every has no augmented samples to show");
    if (!pngSupported()) {
      std::fprintf(console, "logging.images_every: medrun was built without libpng "
                            "(libpng-dev): no images\n");
      augmentFn = nullptr;
    }
  }
  Progress::Options po;
  po.total = steps;
  po.initial = first;
  po.every = logEvery;
  po.mode = options.progressMode == 1   ? Progress::Mode::Bar
            : options.progressMode == 2 ? Progress::Mode::Lines
                                        : Progress::Mode::Auto;
  Progress progress(console, po);

  // Validation: the `infer` function over each validation volume (sliding window), with
  // the EMA weights when the step keeps them; its Dice chooses `best`.
  std::unique_ptr<Validator> validator;
  const Function *inferFn = nullptr;
  const bool emaWeights = feed.input("ema_decay") >= 0;
  std::vector<std::string> inferParams; // the parameters `infer` reads
  if (validationSource) {
    if (std::none_of(artifact.functions.begin(), artifact.functions.end(),
                     [](const Function &f) { return f.name == "infer"; }))
      throw Error(str(artifact.path, ": has no function 'infer' to validate with (compile the "
                                     "recipe with medc compile --recipe)"));
    inferFn = &artifact.function("infer");
    for (const OpInfo &op : inferFn->ops)
      if (op.kind == "param")
        inferParams.push_back(op.strAttr("name"));
    const Shape &in = inferFn->values[inferFn->inputs.at(0)].shape;
    const Shape &out = inferFn->values[inferFn->outputs.at(0)].shape;
    ValidationOptions vo;
    vo.affinities = setting<std::string>(config, "loss", "type") == "bce_with_logits";
    if (auto box = validationConfig.find("box"); box != validationConfig.end())
      vo.box = size3(config, "validation", "box");
    vo.window.window = {in.at(2), in.at(3), in.at(4)};
    vo.window.batch = in.at(0);
    vo.window.overlap = validationConfig.value("overlap", 0.5);
    vo.window.mirror = validationConfig.value("mirror", false);
    // dataset.json's class names, when its labels are the network's classes 0..C-1.
    if (!vo.affinities && static_cast<int64_t>(contract.labels.size()) == out.at(1)) {
      bool consecutive = true;
      for (size_t k = 0; k < contract.labels.size(); ++k)
        consecutive = consecutive && contract.labels[k].second == static_cast<int64_t>(k);
      if (consecutive)
        for (size_t k = 1; k < contract.labels.size(); ++k)
          vo.classNames.push_back(contract.labels[k].first);
    }
    validator = std::make_unique<Validator>(validationSource, out.at(1), vo);
    progress.message(str("validation: every ", validateEvery, " steps and at the end, ",
                         validationSource->size(), " volume(s), ", validator->batches(),
                         " window batches, ", emaWeights ? "EMA" : "model",
                         " weights; the Dice chooses checkpoints/best",
                         pngSupported() ? "; progress.png" : "; no progress.png (medrun was "
                                                             "built without libpng-dev)"));
  }
  std::optional<double> bestDice;             // the best validation so far and its step
  int64_t bestStep = 0;
  std::optional<double> diceEma;              // nnU-Net's moving average of the Dice
  if (validator && resumedValidation.is_object()) {
    if (resumedValidation.value("best", Json()).is_number()) {
      bestDice = resumedValidation["best"].get<double>();
      bestStep = resumedValidation.value("best_step", int64_t(0));
    }
    if (resumedValidation.value("dice_ema", Json()).is_number())
      diceEma = resumedValidation["dice_ema"].get<double>();
  }
  const std::string plotPath = (fs::path(options.out) / "progress.png").string();
  ProgressHistory history;
  if (validator && resume && metrics)
    history = readHistory(metrics->path());
  std::optional<double> validated; // the Dice of this step, if it validated

  auto validate = [&](int64_t step, const TensorMap &state) {
    const double start = seconds();
    TensorMap weights;
    for (const std::string &name : inferParams) { // a frozen parameter has no EMA copy
      auto ema = emaWeights ? state.find("ema." + name) : state.end();
      weights[name] = ema != state.end() ? ema->second : state.at(name);
    }
    const WindowPredictor predict = backend->predictor(*inferFn, weights);
    Progress::Options vpo;
    vpo.total = validator->batches();
    vpo.desc = "validate";
    vpo.mode = po.mode;
    ValidationResult r;
    {
      Progress bar(console, vpo);
      r = validator->run(predict, [&](int64_t done, int64_t) { bar.update(done); });
    }
    const double elapsed = seconds() - start;
    validated = r.dice;
    std::string classes;
    nlohmann::ordered_json perClass = nlohmann::ordered_json::object();
    std::vector<std::pair<std::string, double>> scalars = {{"val/dice", r.dice}};
    for (size_t c = 0; c < r.names.size(); ++c) {
      perClass[r.names[c]] = std::isfinite(r.perClass[c]) ? nlohmann::ordered_json(r.perClass[c])
                                                          : nlohmann::ordered_json(nullptr);
      scalars.push_back({"val/dice/" + r.names[c], r.perClass[c]});
      classes += str(c ? ", " : "", r.names[c], " ", fmtNumber(r.perClass[c]));
    }
    if (std::isfinite(r.dice)) {
      diceEma = diceEma ? 0.9 * *diceEma + 0.1 * r.dice : r.dice;
      if (!bestDice || r.dice > *bestDice) { // ties keep the earlier step
        bestDice = r.dice;
        bestStep = step + 1;
      }
    }
    if (diceEma)
      scalars.push_back({"val/dice_ema", *diceEma});
    nlohmann::ordered_json record = {{"step", step},
                                     {"val_dice", std::isfinite(r.dice) ? nlohmann::ordered_json(r.dice)
                                                                        : nlohmann::ordered_json(nullptr)},
                                     {"val_dice_ema", diceEma ? nlohmann::ordered_json(*diceEma)
                                                              : nlohmann::ordered_json(nullptr)},
                                     {"val_dice_per_class", perClass},
                                     {"val_best", bestDice ? nlohmann::ordered_json(*bestDice)
                                                           : nlohmann::ordered_json(nullptr)},
                                     {"val_volumes", r.volumes},
                                     {"val_time", elapsed}};
    if (metrics)
      metrics->write(record);
    if (board)
      board->addScalars(step, scalars);
    progress.message(str("validation after step ", step + 1, ": Dice ", fmtNumber(r.dice), " (",
                         classes, "), moving average ", diceEma ? fmtNumber(*diceEma) : "-",
                         "; best ", bestDice ? fmtNumber(*bestDice) : "-", " after step ",
                         bestStep, " (", r.volumes, " volume(s), ", r.voxels, " voxels, ",
                         Progress::formatInterval(elapsed), ")"));
    history.dice.push_back({step, r.dice});
    history.diceEma.push_back({step, diceEma ? *diceEma : std::nan("")});
    if (lead && pngSupported()) {
      try {
        writePng(plotPath, drawProgress(history));
      } catch (const Error &e) {
        progress.message(str("medrun: warning: ", e.what()));
      }
    }
  };

  CheckpointOptions keep;
  keep.keepLast = static_cast<int>(setting<int64_t>(config, "checkpoint", "keep"));
  keep.bestMetric = validator ? "val_dice" : "loss";
  keep.bestHigher = validator != nullptr;
  std::optional<CheckpointWriter> writer; // saves while the next steps run
  if (lead)
    writer.emplace(checkpoints, keep);
  TrainSummary summary;
  summary.firstStep = first;
  double intervalLoss = 0;
  int64_t intervalSteps = 0;
  bool firstInterval = true;

  auto save = [&](int64_t done, TensorMap snapshot) {
    TrainState state;
    state.step = done;
    state.seed = seed;
    state.samplerPosition = static_cast<uint64_t>(done * loader.batch * ranks);
    state.schedule = Json::parse(section(config, "schedule").dump());
    state.recipeHash = compileHash;
    state.extra["data"] = contractJson;
    state.lossScale = lossScale;
    state.growthTracker = growthTracker;
    if (intervalSteps > 0)
      state.metrics["loss"] = intervalLoss / intervalSteps;
    if (validated)
      state.metrics["val_dice"] = *validated;
    if (bestDice || diceEma) {
      Json v = {{"metric", "val_dice"}};
      if (bestDice) {
        v["best"] = *bestDice;
        v["best_step"] = bestStep;
      }
      if (diceEma)
        v["dice_ema"] = *diceEma;
      state.extra["validation"] = v;
    }
    writer->save(std::move(state), std::move(snapshot));
  };
  auto saved = [&](const std::string &dir) {
    if (!dir.empty()) {
      summary.checkpoint = dir;
      progress.message(str("checkpoint ", dir));
    }
  };

  // fp16-mixed: the loss scale and its growth tracker are step inputs and outputs, carried
  // from step to step here and saved in checkpoints.
  const bool scaling = feed.input("loss_scale") >= 0;
  const int scaleOut = scaling ? output("loss_scale") : -1;
  const int trackerOut = scaling ? output("growth_tracker") : -1;
  const int foundInfOut = scaling ? output("found_inf") : -1;
  const bool prefetch = backend->canStage();
  const Batch *ahead = nullptr; // the next step's batch, uploading during this step
  int64_t step = first;
  for (; step < steps; ++step) {
    double start = seconds(), wait = 0;
    const Batch &batch = ahead ? *ahead : data.next(&wait);
    ahead = nullptr;
    const double lr = feed.learningRate(step);
    std::vector<Tensor> inputs = feed.inputs(batch, step, lossScale, growthTracker);
    // The next batch, if the loader has it ready, is copied to the GPU on a second stream
    // while this step runs; its scalars (the loss scale comes from this step) follow with it.
    if (prefetch && step + 1 < steps && data.ready()) {
      ahead = &data.next();
      backend->stage(feed.batchInputs(*ahead));
    }
    reducer.stepStarts();
    std::vector<Tensor> out;
    try {
      out = backend->run(inputs);
    } catch (const Error &) {
      reducer.stepEnded(); // the job's failure, where that is what ended the step
      throw;
    }
    std::vector<Tensor> imageInputs; // kept past the batch's release
    if (augmentFn && step % imagesEvery == 0)
      for (const Tensor &t : augmentInputs(*augmentFn, feed, inputs))
        imageInputs.push_back(t.clone());
    data.release(batch);
    auto value = [&](int i) { return out[i].to(DType::F64).data<double>()[0]; };
    double loss = value(lossOut), norm = value(normOut);
    // Every rank takes the same decisions: the loss is the mean over the ranks (the
    // gradients, so their norm, are the same on all), and a signal on any rank stops all
    // after this step.
    float agreed[2] = {static_cast<float>(loss), options.stop && options.stop->load() != 0 ? 1.0f : 0.0f};
    reducer.sumOverRanks(agreed, 2);
    reducer.stepEnded();
    if (ranks > 1)
      loss = agreed[0] / ranks;
    const bool stopping = agreed[1] != 0;
    if (step == first)
      if (std::string line = backend->afterFirstStep(); !line.empty())
        progress.message(line);
    bool skip = false;
    // With loss scaling an overflow of the scaled gradients is routine: the step skipped
    // itself (found_inf) and lowered the scale. Only a non-finite loss is a failure then.
    bool overflow = scaling && value(foundInfOut) != 0;
    if (scaling) {
      lossScale = value(scaleOut);
      growthTracker = static_cast<int64_t>(value(trackerOut));
    }
    if (!finite(loss) || (!finite(norm) && !overflow)) {
      if (nanPolicy == "stop")
        throw Error(str("step ", step, ": the loss is ", loss, " (gradient norm ", norm,
                        "); stopping without applying it. The last checkpoint is kept; "
                        "`--nan skip` skips such steps instead"));
      skip = true;
      ++summary.skipped;
      progress.message(str("step ", step, ": non-finite loss ", loss, "; step skipped"));
    } else {
      backend->commit();
      intervalLoss += loss;
      ++intervalSteps;
    }
    double elapsed = seconds() - start;
    StepRecord record;
    record.step = step;
    record.loss = loss;
    record.lr = lr;
    record.gradNorm = norm;
    record.stepTime = elapsed;
    record.samplesPerSecond = static_cast<double>(loader.batch * ranks) / elapsed;
    record.dataWait = wait;
    if (validator && !skip)
      history.loss.push_back({step, loss});
    if (skip)
      record.extra["skipped"] = true;
    if (scaling) {
      record.extra["loss_scale"] = lossScale;
      record.extra["found_inf"] = overflow;
    }
    if (metrics)
      metrics->write(record);
    if (board)
      board->addScalars(step, {{"train/loss", loss},
                               {"train/lr", lr},
                               {"gradients/total_norm", norm},
                               {"time/step_s", elapsed},
                               {"time/data_wait_s", wait}});
    if (board && !imageInputs.empty()) {
      std::vector<Tensor> augmented = runCpu(artifact, *augmentFn, imageInputs, {});
      Overlay overlay;
      const int target = overlayOutput(*augmentFn, &overlay);
      int image = 0;
      for (size_t i = 0; i < augmentFn->outputNames.size(); ++i)
        if (augmentFn->outputNames[i] == "image")
          image = static_cast<int>(i);
      Raster picture =
          orthoSlices(augmented[image], 0, target >= 0 ? &augmented[target] : nullptr, overlay);
      board->addImage(step, "augment/sample0", encodePng(picture), picture.width, picture.height);
    }
    progress.update(step + 1, {{"loss", loss}, {"lr", lr}}); // steps done, counting resumed ones

    bool last = step + 1 == steps;
    if ((step + 1) % logEvery == 0 || last || stopping) {
      if (firstInterval && intervalSteps > 0) {
        summary.firstLoss = intervalLoss / intervalSteps;
        firstInterval = false;
      }
      if (intervalSteps > 0)
        summary.lastLoss = intervalLoss / intervalSteps;
    }
    if (writer)
      saved(writer->poll());
    // The snapshot of the state, for validation and the checkpoint.
    validated.reset();
    bool newBest = false;
    std::optional<TensorMap> snapshot;
    if (validator && !stopping && ((step + 1) % validateEvery == 0 || last)) {
      snapshot = backend->state();
      validate(step, *snapshot);
      newBest = bestDice && bestStep == step + 1; // saved, so that `best` can point to it
    }
    if ((step + 1) % checkpointEvery == 0 || last || stopping || newBest) {
      TensorMap state = snapshot ? std::move(*snapshot) : backend->state();
      // MEDRUN_STATE_DIGEST=1: every rank, rank 0 and the silent ones, prints the checksum
      // of its final state, before the ranks compare it, so that a script can see for
      // itself that they agree (scripts/gpu-data-parallel.sh, part equiv).
      if (stateDigest && (last || stopping))
        std::fprintf(stderr, "medrun: rank %d of %d: state after step %lld: crc32c %s of %zu tensors\n",
                     options.rank, ranks, static_cast<long long>(step + 1),
                     hex32(stateChecksum(state)).c_str(), state.size());
      if (ranks > 1)
        checkRanksAgree(reducer, options.rank, step + 1, state);
      if (writer)
        save(step + 1, std::move(state));
    }
    if ((step + 1) % logEvery == 0) {
      intervalLoss = 0;
      intervalSteps = 0;
    }
    if (stopping) {
      summary.interrupted = true;
      ++step;
      break;
    }
  }
  summary.lastStep = step;
  if (writer)
    saved(writer->wait());
  if (std::string line = backend->atEnd(); !line.empty())
    progress.message(line);
  progress.finish({{"loss", summary.lastLoss}});
  if (board)
    board->close();
  return summary;
}

} // namespace medrun
