//===- BenchCommand.cpp - `medrun bench RECIPE`: time the training step -------------===//
//
// The step is the one `medrun train` runs: same recipe handling and compile cache
// (prepareRecipe), same parameters (initParameters with train.seed), same inputs (StepInputs:
// a batch of the synthetic data, the schedule's lr, the step count, EMA decay, rng). Only one
// batch is drawn, and the loader is stopped before the timing, so its worker threads do
// not share the cores with the steps. Parameters evolve as in training: on the GPU they stay
// resident (setState once, run + commit per step), on the CPU the updates are applied.
// A step's time is wall time around one run, which ends with the download of the scalar
// outputs (a synchronization on the GPU); on the GPU the batch is copied from pinned memory
// during the step before, as in training. See docs/perf.md, "How the numbers are made".
// On the data-parallel path (a job of several ranks, or --data-parallel) a few more steps
// run one by one with the reducer's timing events on, for the communication it exposes
// (docs/distributed.md, "Measuring communication"); rank 0 reports, for every rank.
//
//===----------------------------------------------------------------------------------===//
#include "BenchCommand.h"
#include "TrainCommand.h"

#include "medrun/Cuda.h"
#include "medrun/Data.h"
#include "medrun/Distributed.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Flops.h"
#include "medrun/Parallel.h"
#include "medrun/Train.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

namespace medrun {
namespace {

using json = nlohmann::json;

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The process's peak resident set (VmHWM), in bytes; 0 where /proc is not there.
double peakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::atof(line.c_str() + 6) * 1024; // "VmHWM:   123456 kB"
  return 0;
}

int outputIndex(const Function &fn, const std::string &name) {
  for (size_t i = 0; i < fn.outputNames.size(); ++i)
    if (fn.outputNames[i] == name)
      return static_cast<int>(i);
  return -1;
}

std::string gib(double bytes) {
  char buf[64];
  if (bytes >= 1 << 30)
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1 << 30));
  else if (bytes >= 1 << 20)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / (1 << 10));
  return buf;
}

} // namespace

Roofline rooflineFor(const std::string &option, const std::string &deviceName) {
  if (option == "none")
    return {};
  if (option.empty()) {
    // Measured on the H200 (docs/perf.md): the device-to-device copy, and the dense bf16
    // matrix product on random data (769 to 798 TFLOP/s).
    if (deviceName.find("H200") != std::string::npos)
      return {4300, 790, "H200: device copy, dense bf16 matrix product"};
    return {};
  }
  const size_t comma = option.find(',');
  double gb = 0, tf = 0;
  size_t used = 0;
  try {
    if (comma != std::string::npos) {
      gb = std::stod(option.substr(0, comma), &used);
      if (used == comma) {
        const std::string rest = option.substr(comma + 1);
        tf = std::stod(rest, &used);
        if (used != rest.size())
          tf = 0;
      }
    }
  } catch (const std::exception &) {
    gb = tf = 0;
  }
  if (!(gb > 0) || !(tf > 0) || !std::isfinite(gb) || !std::isfinite(tf))
    throw Error(str("--roofline: expected GBPS,TFLOPS (two positive numbers, e.g. 4300,790), "
                    "or none, got '", option, "'"));
  return {gb, tf, "--roofline"};
}

int benchCommand(const std::string &recipe, const std::vector<std::string> &overrides,
                 const std::string &artifactPath, const BenchOptions &options) {
  if (options.steps < 1)
    throw Error(str("--steps: expected at least 1 timed step, got ", options.steps));
  if (options.warmup < 0)
    throw Error(str("--warmup: expected 0 or more steps, got ", options.warmup));
  // A rank of a data-parallel job: its GPU and the communicator first, as in training.
  const DistEnv dist = distEnvFromEnvironment();
  std::unique_ptr<DataParallel> job;
  if (dist.worldSize > 1 || options.dataParallel) {
    job = std::make_unique<DataParallel>(dist);
    setCudaDevice(job->device());
  }
  const bool report = dist.rank == 0; // the other ranks measure, rank 0 prints
  std::unique_ptr<FILE, int (*)(FILE *)> devnull(report ? nullptr : std::fopen("/dev/null", "w"),
                                                 std::fclose);
  FILE *notes = devnull ? devnull.get() : stderr;
  PreparedRecipe prepared;
  if (int rc = prepareRecipe(recipe, overrides, artifactPath, prepared, job != nullptr); rc != 0)
    return rc;
  if (job && !prepared.cuda)
    throw Error("bench: the data-parallel step is timed on the GPU (its sums on NCCL's stream): "
                "use --device cuda");
  const json &config = prepared.config;
  const Artifact &artifact = prepared.artifact;
  std::ofstream jsonFile; // opened now: a wrong path fails before the steps run
  if (!options.json.empty() && report) {
    jsonFile.open(options.json);
    if (!jsonFile)
      throw Error(str(options.json, ": cannot write the benchmark's JSON"));
  }
  if (int threads = config["train"].value("threads", 0); threads > 0)
    setNumThreads(threads);
  const StepInputs feed(artifact, config, job ? job->worldSize() : 1, dist.rank);
  const Function &fn = feed.function();
  const FunctionCost cost = functionCost(fn);
  const int lossOut = outputIndex(fn, "loss");
  if (lossOut < 0)
    throw Error(str(artifact.path, ": train_step has no output 'loss'"));
  const int scaleOut = outputIndex(fn, "loss_scale"), trackerOut = outputIndex(fn, "growth_tracker");
  const Precision precision = precisionOf(fn);

  // One batch, copied out of the loader's buffers; the loader (and its workers) end here.
  std::fprintf(notes, "bench: preparing one batch of the synthetic data and the parameters\n");
  Batch batch;
  {
    DataLoader data(makeSyntheticDataset(feed.synthetic()), feed.loader());
    const Batch &b = data.next();
    for (auto &[name, t] : b.tensors)
      batch.tensors[name] = t.clone();
    batch.step = b.step;
  }
  TensorMap params = initParameters(artifact, config["train"].value("seed", uint64_t(0)));
  std::unique_ptr<CudaSession> gpu;
  if (prepared.cuda) {
    gpu = openCudaSession(artifact, fn, notes);
    gpu->setState(params); // parameters, moments and EMA stay on the device
    if (job)
      gpu->setReducer(*job);
  }

  // On the GPU the batch is uploaded as in training: from pinned memory, on a copy stream
  // during the step before (CudaSession::stage). Two copies of it take turns, as the
  // loader's batches do, so that each run meets the inputs staged for it.
  std::vector<Batch> batches(1, batch);
  const bool staging = gpu && gpu->canStage();
  if (staging) {
    batches.assign(2, Batch{});
    for (Batch &copy : batches) {
      for (auto &[name, t] : batch.tensors) {
        Tensor pinned = gpu->pinnedTensor(t.dtype(), t.shape());
        std::memcpy(pinned.raw(), t.raw(), t.nbytes());
        copy.tensors[name] = std::move(pinned);
      }
      copy.step = batch.step;
    }
  }

  // Step k (0-based, as in training: its lr, step count and EMA decay); `apply` keeps its
  // parameter updates (and loss scale), as a training step does.
  double lossScale = feed.initialLossScale();
  int64_t growthTracker = 0;
  int64_t runs = 0;
  auto runStep = [&](int64_t k, bool apply, std::map<std::string, double> *profile) {
    const Batch &current = batches[runs % batches.size()];
    std::vector<Tensor> inputs = feed.inputs(current, k, lossScale, growthTracker);
    if (staging) // the next run's batch, copied while this one runs
      gpu->stage(fn, feed.batchInputs(batches[(runs + 1) % batches.size()]));
    ++runs;
    TensorMap updates;
    GradientReducer &reducer = job ? static_cast<GradientReducer &>(*job) : singleRankReducer();
    reducer.stepStarts(); // the job's watchdog times the step
    std::vector<Tensor> out;
    try {
      out = gpu ? gpu->run(fn, inputs, {}, profile, nullptr)
                : runCpu(artifact, fn, inputs, params, precision, profile, &updates);
    } catch (const Error &) {
      reducer.stepEnded(); // the job's failure, where that is what ended the step
      throw;
    }
    reducer.stepEnded();
    auto value = [&](int i) { return out.at(i).to(DType::F64).data<double>()[0]; };
    double loss = value(lossOut);
    if (apply) {
      for (auto &[name, t] : updates)
        params[name] = std::move(t);
      if (gpu)
        gpu->commit();
      if (scaleOut >= 0 && trackerOut >= 0) {
        lossScale = value(scaleOut);
        growthTracker = static_cast<int64_t>(value(trackerOut));
      }
    }
    return loss;
  };

  int64_t k = 0;
  if (options.warmup > 0) {
    std::fprintf(notes, "bench: warm-up, %lld steps\n", static_cast<long long>(options.warmup));
    for (; k < options.warmup; ++k)
      runStep(k, true, nullptr);
  }
  std::fprintf(notes, "bench: timing %lld steps\n", static_cast<long long>(options.steps));
  std::vector<double> ms;
  double firstLoss = 0, lastLoss = 0;
  for (int64_t i = 0; i < options.steps; ++i, ++k) {
    double start = now();
    double loss = runStep(k, true, nullptr);
    ms.push_back(1e3 * (now() - start));
    if (i == 0)
      firstLoss = loss;
    lastLoss = loss;
  }
  // The communication, measured over steps of their own: the reducer's events are read
  // back only from steps launched one by one.
  DataParallel::CommunicationTimes comm;
  const int64_t commSteps = job ? std::min<int64_t>(options.steps, 10) : 0;
  std::vector<double> commMs;
  if (job) {
    std::fprintf(notes, "bench: %lld more steps, launched one by one, timing the all-reduces\n",
                 static_cast<long long>(commSteps));
    gpu->setGraphs(false);
    job->timeCommunication(true);
    for (int64_t i = 0; i < commSteps; ++i, ++k) {
      double start = now();
      runStep(k, true, nullptr);
      commMs.push_back(1e3 * (now() - start));
      DataParallel::CommunicationTimes t = job->communicationTimes();
      comm.allReduceMs += t.allReduceMs;
      comm.exposedMs += t.exposedMs;
      comm.allReduces += t.allReduces;
      comm.joins += t.joins;
    }
    job->timeCommunication(false);
    gpu->setGraphs(true);
  }
  std::fprintf(notes, "bench: one more step, profiled by op kind\n");
  std::map<std::string, double> profile;
  runStep(k, false, &profile);

  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  const double tflops = cost.total.flops / (median * 1e-3) / 1e12;
  const double gbps = cost.total.bytes / (median * 1e-3) / 1e9;
  int64_t parameters = 0;
  for (const ParameterInfo &p : artifact.parameters)
    if (p.trainable)
      parameters += numElements(p.shape);
  const json &model = config.contains("model") ? config["model"] : json::object();
  const std::string modelName =
      model.is_object() && model.contains("file") ? model["file"].get<std::string>() : model.dump();
  const auto patch = config["data"]["patch"].get<std::vector<int64_t>>();
  const std::string patchStr = str(patch.at(0), "x", patch.at(1), "x", patch.at(2));
  const int64_t batchSize = config["data"]["batch"].get<int64_t>();
  const std::string device = gpu ? gpu->deviceName() : str("cpu, ", numThreads(), " threads");

  // Each rank's figures, gathered on rank 0: a sum over the ranks of vectors in which each
  // fills its own row (ms/step, peak device memory in MiB, all-reduce and exposed ms/step).
  const double perStep = commSteps > 0 ? 1.0 / static_cast<double>(commSteps) : 0;
  const double allReducePerStep = comm.allReduceMs * perStep, exposedPerStep = comm.exposedMs * perStep;
  std::vector<float> rankRows(job ? 4 * job->worldSize() : 0, 0.0f);
  if (job) {
    float *mine = &rankRows[4 * static_cast<size_t>(dist.rank)];
    mine[0] = static_cast<float>(median);
    mine[1] = static_cast<float>(static_cast<double>(gpu->deviceBytes()) / (1 << 20));
    mine[2] = static_cast<float>(allReducePerStep);
    mine[3] = static_cast<float>(exposedPerStep);
    job->sumOverRanks(rankRows.data(), rankRows.size());
  }
  if (!report)
    return 0;

  std::printf("bench %s: train_step on %s\n", recipe.c_str(), device.c_str());
  std::printf("model %s: %lld parameters; batch %lld, patch %s, precision %s\n",
              modelName.c_str(), static_cast<long long>(parameters),
              static_cast<long long>(batchSize), patchStr.c_str(), fn.precision.c_str());
  // What the compiler made of the step: fusions among the ops, and on the GPU the kernel
  // launches of its plan and how many distinct kernels they run.
  const size_t fusions = static_cast<size_t>(
      std::count_if(fn.ops.begin(), fn.ops.end(), [](const OpInfo &op) { return op.kind == "fusion"; }));
  size_t launches = 0;
  std::set<std::string> kernels;
  if (fn.cuda)
    for (const CudaStep &step : fn.cuda->steps)
      if (step.kind == CudaStep::Kind::Launch) {
        ++launches;
        kernels.insert(step.kernel);
      }
  std::printf("step: %zu ops (%zu fusions), %.4g GFLOP, %.4g GB of operands and results\n",
              fn.ops.size(), fusions, cost.total.flops / 1e9, cost.total.bytes / 1e9);
  if (fn.cuda)
    std::printf("kernels: %zu launches of %zu distinct kernels in the step's plan\n", launches,
                kernels.size());
  std::printf("time: %lld steps after %lld warm-up: median %.2f ms/step (min %.2f, max %.2f)\n",
              static_cast<long long>(options.steps), static_cast<long long>(options.warmup),
              median, sorted.front(), sorted.back());
  std::printf("throughput: %.4g TFLOP/s, %.4g GB/s (every operand and result read or written "
              "once)\n", tflops, gbps);
  double peak = 0;
  if (gpu) {
    peak = static_cast<double>(gpu->deviceBytes());
    std::printf("launches: %s\n", gpu->graphs(fn).c_str());
    std::printf("uploads: %s\n", gpu->uploads().c_str());
    std::printf("peak device memory: %s (arena %s + resident state %s + convolution workspace "
                "%s + input staging)\n",
                gib(peak).c_str(), gib(static_cast<double>(gpu->arenaBytes())).c_str(),
                gib(static_cast<double>(gpu->stateBytes())).c_str(),
                gib(static_cast<double>(gpu->workspaceBytes())).c_str());
    std::printf("convolutions: %s; %s\n", gpu->convolutions().c_str(),
                gpu->convolutions(fn).c_str());
    std::printf("kernel variants: %s\n", gpu->variants(fn).c_str());
  }
  json dataParallel; // null off the data-parallel path
  if (job) {
    std::vector<double> sortedComm = commMs;
    std::sort(sortedComm.begin(), sortedComm.end());
    const size_t c = sortedComm.size();
    const double commMedian = c % 2 ? sortedComm[c / 2] : (sortedComm[c / 2 - 1] + sortedComm[c / 2]) / 2;
    std::printf("communication: %d rank%s, %lld steps launched one by one (median %.2f ms/step), "
                "CUDA events: all-reduce %.3f ms/step (%lld sums), exposed %.3f ms/step "
                "(%.1f%% of the median step; %.1f%% of the all-reduce time hidden behind backward)\n",
                job->worldSize(), job->worldSize() == 1 ? "" : "s",
                static_cast<long long>(commSteps), commMedian, allReducePerStep,
                static_cast<long long>(comm.allReduces / std::max<int64_t>(commSteps, 1)),
                exposedPerStep, median > 0 ? 100 * exposedPerStep / median : 0,
                allReducePerStep > 0 ? std::max(0.0, 100 * (1 - exposedPerStep / allReducePerStep)) : 0);
    json perRank = json::array();
    for (int r = 0; r < job->worldSize(); ++r) {
      const float *row = &rankRows[4 * static_cast<size_t>(r)];
      std::printf("  rank %d: median %.2f ms/step, peak device memory %s, all-reduce %.3f ms/step, "
                  "exposed %.3f ms/step\n", r, row[0], gib(double(row[1]) * (1 << 20)).c_str(),
                  row[2], row[3]);
      perRank.push_back({{"rank", r},
                         {"ms_per_step", row[0]},
                         {"peak_memory_bytes", double(row[1]) * (1 << 20)},
                         {"allreduce_ms_per_step", row[2]},
                         {"exposed_ms_per_step", row[3]}});
    }
    dataParallel = {{"ranks", job->worldSize()},
                    {"comm_steps", commSteps},
                    {"comm_step_ms", commMs},
                    {"allreduces_per_step", comm.allReduces / std::max<int64_t>(commSteps, 1)},
                    {"allreduce_ms_per_step", allReducePerStep},
                    {"exposed_ms_per_step", exposedPerStep},
                    {"per_rank", perRank}};
  }
  if (!gpu) {
    peak = peakResidentBytes();
    std::printf("peak host memory: %s (max resident set of the process; the CPU backend has "
                "no device memory)\n", gib(peak).c_str());
  }
  std::printf("loss: %.6g (first timed step) -> %.6g (last)\n", firstLoss, lastLoss);

  const Roofline roof = rooflineFor(options.roofline, device);
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (auto &[kind, seconds] : profile) {
    rows.emplace_back(seconds, kind);
    total += seconds;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::printf("time by op kind (one more step; %s):\n",
              gpu ? "CUDA events around each launch" : "wall time of each op");
  // Each kind's bytes (operands and results once) and FLOPs over its time, as shares of
  // the roofline: how far each is from the bound it is closer to.
  if (roof.gbPerS > 0)
    std::printf("  %-26s %13s  %6s  %9s %6s  %8s %6s  (roofline: %.0f GB/s, %.0f TFLOP/s; %s)\n",
                "", "", "share", "GB/s", "of bw", "TFLOP/s", "of peak", roof.gbPerS,
                roof.tflops, roof.source.c_str());
  // The cost of each row: the ops under the profile's keys (on the GPU profileKey's: a
  // convolution's family, a fusion's template; on the CPU the op kind).
  std::map<std::string, OpCost> costByRow;
  for (const OpInfo &op : fn.ops)
    costByRow[gpu ? profileKey(fn, op) : op.kind] += opCost(fn, op);
  json kinds = json::array();
  for (auto &[seconds, kind] : rows) {
    double share = total > 0 ? 100 * seconds / total : 0;
    const OpCost &c = costByRow[kind];
    json row = {{"kind", kind},        {"ms", seconds * 1e3}, {"percent", share},
                {"ops", c.count},      {"flops", c.flops},    {"bytes", c.bytes}};
    if (roof.gbPerS > 0 && seconds > 0) {
      const double gb = c.bytes / seconds / 1e9, tf = c.flops / seconds / 1e12;
      std::printf("  %-26s %10.3f ms  %5.1f%%  %9.1f %5.1f%%  %8.2f %5.1f%%\n", kind.c_str(),
                  seconds * 1e3, share, gb, 100 * gb / roof.gbPerS, tf, 100 * tf / roof.tflops);
      row["gb_per_s"] = gb;
      row["tflops"] = tf;
      row["bandwidth_percent"] = 100 * gb / roof.gbPerS;
      row["compute_percent"] = 100 * tf / roof.tflops;
    } else {
      std::printf("  %-26s %10.3f ms  %5.1f%%\n", kind.c_str(), seconds * 1e3, share);
    }
    kinds.push_back(row);
  }
  std::printf("  %-26s %10.3f ms\n", "total", total * 1e3);

  if (!options.json.empty()) {
    json out = {
        {"recipe", recipe},
        {"artifact", artifact.path},
        {"device", gpu ? "cuda" : "cpu"},
        {"device_name", device},
        {"threads", gpu ? 0 : numThreads()},
        {"model", modelName},
        {"parameters", parameters},
        {"batch", batchSize},
        {"patch", patch},
        {"precision", fn.precision},
        {"ops", fn.ops.size()},
        {"fusions", fusions},
        {"launches", launches},
        {"kernels", kernels.size()},
        {"warmup", options.warmup},
        {"steps", options.steps},
        {"step_ms", ms},
        {"ms_per_step", {{"median", median}, {"min", sorted.front()}, {"max", sorted.back()}}},
        {"flops_per_step", cost.total.flops},
        {"bytes_per_step", cost.total.bytes},
        {"tflops", tflops},
        {"gb_per_s", gbps},
        {"peak_memory_bytes", peak},
        {"peak_memory", gpu ? "device: arena + resident state" : "host: max resident set"},
        {"loss_first", firstLoss},
        {"loss_last", lastLoss},
        {"profile_total_ms", total * 1e3},
        {"roofline", roof.gbPerS > 0 ? json{{"gb_per_s", roof.gbPerS},
                                            {"tflops", roof.tflops},
                                            {"source", roof.source}}
                                     : json()},
        {"profile", kinds},
        {"data_parallel", dataParallel},
    };
    jsonFile << out.dump(2) << "\n";
    jsonFile.close();
    if (!jsonFile)
      throw Error(str(options.json, ": cannot write the benchmark's JSON"));
    std::fprintf(notes, "bench: wrote %s\n", options.json.c_str());
  }
  return 0;
}

} // namespace medrun
