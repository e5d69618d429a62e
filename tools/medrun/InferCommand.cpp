//===- InferCommand.cpp - `medrun infer` --------------------------------------------===//
#include "InferCommand.h"

#include "medrun/Artifact.h"
#include "medrun/Checkpoint.h"
#include "medrun/Cuda.h"
#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Safetensors.h"
#include "medrun/SlidingWindow.h"
#include "medrun/TorchFile.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>

namespace medrun {
namespace {

namespace fs = std::filesystem;

bool isState(const std::string &key) {
  return key.rfind("ema.", 0) == 0 || key.rfind("optimizer.", 0) == 0;
}

} // namespace

TensorMap loadWeights(const Artifact &a, const Function &fn, const std::string &path,
                      std::string &weights) {
  if (path.empty())
    throw Error("medrun infer needs the trained weights: --params CHECKPOINT (a run's "
                "checkpoints/best, a step directory) or a safetensors file");
  if (!weights.empty() && weights != "model" && weights != "ema")
    throw Error(str("--weights: expected model or ema, got '", weights, "'"));
  TensorMap params = loadTensors(path);
  std::set<std::string> read;
  for (const OpInfo &op : fn.ops)
    if (op.kind == "param" && !isState(op.strAttr("name")))
      read.insert(op.strAttr("name"));
  if (weights.empty()) {
    weights = "ema";
    for (const std::string &key : read)
      if (!params.count("ema." + key))
        weights = "model";
  }
  if (weights == "ema")
    for (const std::string &key : read) {
      auto ema = params.find("ema." + key);
      if (ema == params.end())
        throw Error(str(path, ": --weights ema: no EMA weight 'ema.", key, "' for the parameter '",
                        key, "' (was the run trained with ema?)"));
      params[key] = ema->second;
    }
  for (auto it = params.begin(); it != params.end();)
    it = isState(it->first) ? params.erase(it) : std::next(it);
  try {
    checkParameters(a, params, &fn);
  } catch (const Error &e) {
    throw Error(str(path, ": ", e.what()));
  }
  return params;
}

namespace {

/// The activation the recipe's loss implies: sigmoid for bce_with_logits, softmax for
/// dice_ce (the artifact's `loss` option, "type=... ...").
std::string defaultActivation(const Artifact &a) {
  auto it = a.options.find("loss");
  const std::string loss = it == a.options.end() ? "" : it->second;
  if (loss.find("type=bce") != std::string::npos)
    return "sigmoid";
  if (loss.find("type=dice_ce") != std::string::npos)
    return "softmax";
  throw Error(str(a.path, ": the artifact names no loss (compiled without --recipe?); choose "
                  "--activation sigmoid, softmax or none"));
}

} // namespace

std::optional<DataContract> findContract(const std::string &path, std::string &from) {
  std::string dir;
  try {
    dir = resolveCheckpoint(path);
  } catch (const Error &) {
    // A weights file: `medrun export` puts the run's contract into its metadata.
    if (!fs::is_regular_file(path) || isTorchFile(path))
      return std::nullopt;
    const SafetensorsFile f = readSafetensors(path);
    auto it = f.metadata.find(kContractMetadataKey);
    if (it == f.metadata.end())
      return std::nullopt;
    nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
    from = str(path, " (metadata ", kContractMetadataKey, ")");
    if (j.is_discarded())
      throw Error(str(from, ": malformed JSON (the run's data contract)"));
    return DataContract::fromJson(j, from);
  }
  const fs::path state = fs::path(dir) / "state.json";
  std::ifstream in(state);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object() && j.contains("extra") && j["extra"].is_object() &&
      j["extra"].contains("data")) {
    from = state.string() + " (extra.data)";
    return DataContract::fromJson(j["extra"]["data"], from);
  }
  // A step directory of a run: RUN/checkpoints/step_N.
  const fs::path run = fs::path(dir).parent_path().parent_path() / "data.json";
  if (fs::exists(run)) {
    std::ifstream rin(run);
    nlohmann::json r = nlohmann::json::parse(rin, nullptr, false);
    if (r.is_discarded())
      throw Error(str(run.string(), ": malformed JSON (the run's data contract)"));
    from = run.string();
    return DataContract::fromJson(r, from);
  }
  return std::nullopt;
}

namespace {

/// How channel `c` is normalised: as --normalization says, else as the run's contract says;
/// with neither, an Error that names what is missing (never a guess).
ChannelNormalization channelNormalization(const InferOptions &o,
                                          const std::optional<DataContract> &contract,
                                          const std::string &from, size_t c) {
  if (contract && !contract->preprocessed.empty() && o.normalization.empty())
    throw Error(str(from,
                    ": the run trained on a preprocessed cache (cropped, normalised and "
                    "resampled by ",
                    contract->preprocessed,
                    "), which infer cannot do to a raw "
                    "volume: give it the case's preprocessed volumes (CACHE/CASE.zarr/data_XXXX) "
                    "with --normalization none"));
  if (!o.normalization.empty()) {
    const std::string &n = o.normalization;
    if (n == "ct")
      throw Error("--normalization ct: CT normalisation needs the training data's intensity "
                  "statistics, which only a run's checkpoint holds: give --params a run's "
                  "checkpoint and leave --normalization out");
    if (n != "none" && n != "divide255" && n != "zscore")
      throw Error(str("--normalization: expected none, divide255 or zscore, got '", n,
                      "' (without it, the run's own normalisation is applied)"));
    ChannelNormalization norm;
    norm.scheme = n;
    if (contract && contract->channels[c].scheme != n)
      std::fprintf(stderr,
                   "medrun: warning: --normalization %s replaces the normalisation the model "
                   "was trained with, %s (%s): the prediction will differ from validation's\n",
                   n.c_str(), contract->channels[c].describe().c_str(), from.c_str());
    return norm;
  }
  if (!contract)
    throw Error(str(o.params,
                    ": holds no data contract (the normalisation the model was "
                    "trained with, which a run's checkpoint keeps in state.json, extra.data): "
                    "infer with a run's checkpoint (RUN/checkpoints/best), or name the "
                    "normalisation with --normalization none, divide255 or zscore"));
  return contract->channels[c];
}

} // namespace

int inferCommand(const InferOptions &o) {
  Artifact a = Artifact::load(o.artifact);
  const Function &fn = a.function("infer");
  if (fn.inputs.size() != 1 || fn.outputs.size() < 1)
    throw Error(str(a.path, ": function 'infer' should take one image and return the prediction"));
  const Shape &in = fn.values[fn.inputs[0]].shape;
  if (in.size() != 5)
    throw Error(str(a.path, ": 'infer' takes ", shapeStr(in), ", expected [batch, C, D, H, W]"));
  std::string activation = o.activation.empty() ? defaultActivation(a) : o.activation;
  {
    Tensor probe(DType::F32, {1, 1});
    applyActivation(probe, activation); // rejects a bad name before any work
  }
  if (o.device != "cpu" && o.device != "cuda")
    throw Error(str("--device: expected cpu or cuda, got '", o.device, "'"));
  if (o.out.empty())
    throw Error("medrun infer: give the output with -o (OUT.nii.gz, OUT.h5/KEY, OUT.zarr/KEY, .npy)");
  if (o.images.size() != static_cast<size_t>(in[1]))
    throw Error(str(a.path, ": the network takes ", in[1], " input channel(s); got ",
                    o.images.size(), " --image volume(s) (one per channel)"));
  std::string weights = o.weights;
  TensorMap params = loadWeights(a, fn, o.params, weights);
  std::string from;
  const std::optional<DataContract> contract = findContract(o.params, from);
  if (contract && contract->channels.size() != static_cast<size_t>(in[1]))
    throw Error(str(from, ": the run's data contract lists ", contract->channels.size(),
                    " input channel(s), but ", a.path, "'s network takes ", in[1]));
  const int64_t outChannels =
      fn.values[fn.outputs[0]].shape.size() == 5 ? fn.values[fn.outputs[0]].shape[1] : -1;
  if (contract && contract->source == "nnunet" && activation == "softmax" && outChannels > 0 &&
      static_cast<int64_t>(contract->labels.size()) != outChannels)
    throw Error(str(from, ": the run's data contract lists ", contract->labels.size(),
                    " classes, but ", a.path, "'s network predicts ", outChannels,
                    " (an artifact of another recipe?)"));

  // The image: one channel per volume, all of one shape, normalised as in training.
  std::vector<std::unique_ptr<VolumeReader>> readers;
  for (const std::string &path : o.images) {
    readers.push_back(openVolume(path));
    if (readers.back()->info().shape != readers.front()->info().shape) {
      const Box3 &s = readers.back()->info().shape, &f = readers.front()->info().shape;
      throw Error(str(path, ": shape ", s[0], "x", s[1], "x", s[2], " differs from ",
                      o.images.front(), "'s ", f[0], "x", f[1], "x", f[2]));
    }
  }
  const VolumeInfo &info = readers.front()->info();
  const int64_t voxels = info.shape[0] * info.shape[1] * info.shape[2];
  Tensor image(DType::F32, {in[1], info.shape[0], info.shape[1], info.shape[2]});
  for (size_t c = 0; c < readers.size(); ++c) {
    float *dst = image.data<float>() + c * voxels;
    readers[c]->read({0, 0, 0}, info.shape, dst);
    ChannelNormalization norm = channelNormalization(o, contract, from, c);
    if (norm.scheme == "zscore")
      norm.useVolumeStatistics(dst, voxels);
    norm.apply(dst, voxels);
    std::fprintf(stderr, "infer: channel %zu%s: normalization %s%s\n", c,
                 norm.name.empty() ? "" : str(" (", norm.name, ")").c_str(),
                 norm.scheme == "zscore" ? "zscore (the volume's own mean and std)"
                                         : norm.describe().c_str(),
                 o.normalization.empty() ? str(", from ", from).c_str() : ", from --normalization");
  }
  if (contract && contract->spacing) {
    // Inference does not resample: an input of another spacing is not what training saw.
    const std::array<double, 3> &t = *contract->spacing;
    for (int k = 0; k < 3; ++k)
      if (std::abs(info.spacing[k] - t[k]) > 0.05 * t[k]) {
        std::fprintf(stderr,
                     "medrun: warning: %s has spacing %g x %g x %g (z, y, x), the training "
                     "cases %g x %g x %g (%s); infer does not resample: resample the image "
                     "to the training spacing first\n",
                     info.name().c_str(), info.spacing[0], info.spacing[1], info.spacing[2], t[0],
                     t[1], t[2], from.c_str());
        break;
      }
  }

  SlidingWindowOptions sw;
  sw.window = {in[2], in[3], in[4]};
  sw.batch = in[0];
  sw.overlap = o.overlap;
  sw.mirror = o.mirror;
  std::unique_ptr<CudaSession> session;
  if (o.device == "cuda") {
    session = std::make_unique<CudaSession>(a);
    session->setState(params); // the weights stay on the GPU for every batch
  }
  WindowPredictor predict = [&](const Tensor &batch) {
    std::vector<Tensor> out =
        session ? session->run(fn, {batch}, params) : runCpu(a, fn, {batch}, params);
    return out[0];
  };
  const int64_t total = slidingWindowBatches(info.shape, sw);
  std::fprintf(stderr, "infer %s: %lldx%lldx%lld, windows %lldx%lldx%lld (batch %lld, overlap "
               "%g%s), %s weights, %lld batches on %s\n",
               info.name().c_str(), (long long)info.shape[0], (long long)info.shape[1],
               (long long)info.shape[2], (long long)in[2], (long long)in[3], (long long)in[4],
               (long long)in[0], o.overlap, o.mirror ? ", mirrored 8 ways" : "", weights.c_str(),
               (long long)total, session ? session->deviceName().c_str() : "the CPU");
  Progress::Options po;
  po.total = total;
  po.desc = "infer";
  po.mode = o.progress == 1 ? Progress::Mode::Bar
            : o.progress == 2 ? Progress::Mode::Lines
                              : Progress::Mode::Auto;
  po.every = std::max<int64_t>(1, total / 10);
  Progress bar(stderr, po);
  Tensor result = slidingWindow(image, sw, predict, [&](int64_t done, int64_t) { bar.update(done); });
  bar.finish();
  applyActivation(result, activation);

  VolumeData data;
  data.shape = info.shape;
  data.channels = result.dim(0);
  data.type = VoxelType::F32;
  data.data = result.raw();
  data.spacing = info.spacing;
  data.affine = info.affine;
  writeVolume(o.out, data);
  std::fprintf(stderr, "wrote %s: %lld channels (%s) x %lldx%lldx%lld float32\n", o.out.c_str(),
               (long long)data.channels, activation.c_str(), (long long)info.shape[0],
               (long long)info.shape[1], (long long)info.shape[2]);
  return 0;
}

} // namespace medrun
