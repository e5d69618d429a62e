//===- InferCommand.cpp - `medrun infer` --------------------------------------------===//
#include "InferCommand.h"

#include "medrun/Artifact.h"
#include "medrun/Checkpoint.h"
#include "medrun/Cuda.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Safetensors.h"
#include "medrun/SlidingWindow.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>

namespace medrun {
namespace {

bool isState(const std::string &key) {
  return key.rfind("ema.", 0) == 0 || key.rfind("optimizer.", 0) == 0;
}

/// The parameters `fn` reads, from a checkpoint or a safetensors file: the EMA weights
/// (ema.<name>) where `weights` is "ema", or "" and the file has them for every one.
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

/// Normalises one channel in place as training does (Dataset.cpp): divide255 or z-score
/// per volume; auto: divide255 for uint8 volumes, z-score otherwise.
void normalize(float *v, int64_t n, std::string how, const VolumeInfo &info) {
  if (how == "auto")
    how = info.type == VoxelType::U8 ? "divide255" : "zscore";
  if (how == "none")
    return;
  if (how == "divide255") {
    for (int64_t i = 0; i < n; ++i)
      v[i] /= 255.0f;
    return;
  }
  if (how != "zscore")
    throw Error(str("--normalization: expected auto, none, divide255 or zscore, got '", how, "'"));
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += v[i];
    sq += static_cast<double>(v[i]) * v[i];
  }
  const double mean = sum / n, sd = std::sqrt(std::max(0.0, sq / n - mean * mean));
  const double inv = 1 / std::max(sd, 1e-8);
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((v[i] - mean) * inv);
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
    normalize(dst, voxels, o.normalization, readers[c]->info());
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
