//===- AugmentPreview.cpp - pictures of the augmented batches -----------------------===//
#include "medrun/AugmentPreview.h"

#include "medrun/Cuda.h"
#include "medrun/Data.h"
#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Npy.h"
#include "medrun/Random.h"
#include "medrun/Train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

namespace fs = std::filesystem;

namespace medrun {

namespace {

/// Sample n of `t` [B, ...] as a tensor [1, ...] of its own.
Tensor sampleOf(const Tensor &t, int64_t n) {
  Shape shape = t.shape();
  const int64_t batch = shape.at(0);
  if (n < 0 || n >= batch)
    throw Error(str("sample ", n, " of a batch of ", batch));
  shape[0] = 1;
  Tensor s(t.dtype(), shape);
  std::memcpy(s.raw(), static_cast<const char *>(t.raw()) + s.nbytes() * n, s.nbytes());
  return s;
}

double seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

} // namespace

Raster orthoSlices(const Tensor &image, int64_t n, const Tensor *labels, Overlay overlay) {
  const Shape &shape = image.shape();
  if (shape.size() != 5)
    throw Error(str("an image to draw is B x C x D x H x W, not ", shapeStr(shape)));
  const int64_t D = shape[2], H = shape[3], W = shape[4];
  const Tensor img = sampleOf(image, n).to(DType::F32);
  const float *v = img.data<float>(); // channel 0 first
  const int64_t volume = D * H * W;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int64_t i = 0; i < volume; ++i)
    if (std::isfinite(v[i]))
      lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  const double range = hi > lo ? static_cast<double>(hi) - lo : 0.0;

  Tensor lab;
  int64_t channels = 0;
  if (labels && overlay != Overlay::None && labels->shape().size() == 5 &&
      labels->shape()[2] == D && labels->shape()[3] == H && labels->shape()[4] == W) {
    lab = sampleOf(*labels, n).to(DType::F32);
    channels = labels->shape()[1];
  }
  const float *l = lab.defined() ? lab.data<float>() : nullptr;

  const int k = static_cast<int>(std::max<int64_t>(1, 128 / std::max({D, H, W})));
  const int gap = 4;
  const int width = static_cast<int>(k * (2 * W + H) + 2 * gap);
  const int height = static_cast<int>(k * std::max(H, D));
  Raster r(width, height, Rgb{0, 0, 0});
  constexpr double alpha = 0.45;
  auto colour = [&](int64_t d, int64_t h, int64_t w) -> Rgb {
    const int64_t at = (d * H + h) * W + w;
    const float x = v[at];
    const uint8_t g = range > 0 && std::isfinite(x)
                          ? static_cast<uint8_t>(std::lround(255.0 * (x - lo) / range))
                          : 0;
    Rgb c{g, g, g};
    if (!l)
      return c;
    bool paint = false;
    Rgb over{255, 0, 0};
    if (overlay == Overlay::Labels) {
      const long id = std::lround(l[at]);
      if (id > 0) {
        paint = true;
        over = kPalette[(id - 1) % 12];
      }
    } else {
      for (int64_t ch = 0; ch < std::min<int64_t>(3, channels); ++ch)
        paint = paint || l[ch * volume + at] < 0.5f;
    }
    if (paint)
      for (int i = 0; i < 3; ++i)
        c[i] = static_cast<uint8_t>(std::lround((1 - alpha) * c[i] + alpha * over[i]));
    return c;
  };
  // Panel p: rows x columns of the volume and its left edge.
  auto panel = [&](int x0, int64_t rows, int64_t cols, auto voxel) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        Rgb c = voxel(i, j);
        r.fillRect(x0 + static_cast<int>(j * k), static_cast<int>(i * k),
                   x0 + static_cast<int>((j + 1) * k) - 1, static_cast<int>((i + 1) * k) - 1, c);
      }
  };
  panel(0, H, W, [&](int64_t i, int64_t j) { return colour(D / 2, i, j); });
  panel(static_cast<int>(k * W) + gap, D, W, [&](int64_t i, int64_t j) { return colour(i, H / 2, j); });
  panel(static_cast<int>(2 * k * W) + 2 * gap, D, H,
        [&](int64_t i, int64_t j) { return colour(i, j, W / 2); });
  return r;
}

int overlayOutput(const Function &augment, Overlay *overlay) {
  for (const char *name : {"target", "target.0"})
    for (size_t i = 0; i < augment.outputNames.size(); ++i)
      if (augment.outputNames[i] == name) {
        const Shape &s = augment.values[augment.outputs[i]].shape;
        *overlay = s.size() == 5 && s[1] > 1 ? Overlay::Affinities : Overlay::Labels;
        return static_cast<int>(i);
      }
  *overlay = Overlay::None;
  return -1;
}

std::vector<Tensor> augmentInputs(const Function &augment, const StepInputs &feed,
                                  const std::vector<Tensor> &stepInputs) {
  std::vector<Tensor> inputs;
  for (const std::string &name : augment.inputNames) {
    const int i = feed.input(name);
    if (i < 0)
      throw Error(str("@", augment.name, " takes '", name,
                      "', which train_step does not take (recompile the recipe)"));
    inputs.push_back(stepInputs.at(i));
  }
  return inputs;
}

const Function &augmentFunction(const Artifact &artifact, const nlohmann::json &config,
                                const std::string &purpose) {
  const std::string recipe = config.value("recipe", std::string("the recipe"));
  if (!config.contains("augment") || !config["augment"].is_object() ||
      !config["augment"].contains("pipeline"))
    throw Error(str(recipe, ": the recipe has no `augment:` section (augment.pipeline), so "
                            "its training step augments nothing: ", purpose));
  const std::string name = config["augment"].value("function", std::string("augment"));
  for (const Function &f : artifact.functions)
    if (f.name == name)
      return f;
  throw Error(str(artifact.path, ": the artifact has no function @", name,
                  " (the recipe's augment.pipeline); compile the recipe again with this medc "
                  "(`medc compile --recipe ", recipe,
                  "`, or remove the cached artifact), which keeps the pipeline public"));
}

std::vector<nlohmann::json> augmentPreview(const Artifact &artifact, const nlohmann::json &config,
                                           const AugmentPreviewOptions &options) {
  const Function &augment = augmentFunction(artifact, config);
  const StepInputs feed(artifact, config);
  LoaderSpec loader = feed.loader();
  loader.rank = 0;
  loader.ranks = 1;
  std::unique_ptr<CudaSession> session;
  if (options.cuda) {
    session = openCudaSession(artifact, augment, options.console);
  }
  std::unique_ptr<DataLoader> data;
  if (feed.dataset().source == "synthetic") {
    data = std::make_unique<DataLoader>(makeSyntheticDataset(feed.synthetic()), loader,
                                        options.step);
  } else {
    DatasetSplit split = splitDataset(feed.dataset());
    data = std::make_unique<DataLoader>(openDataset(feed.dataset(), split, options.console),
                                        loader, options.step);
  }
  fs::create_directories(options.out);
  const std::string jsonl = (fs::path(options.out) / "samples.jsonl").string();
  std::ofstream lines(jsonl, std::ios::trunc);
  if (!lines)
    throw Error(str(jsonl, ": cannot write"));

  Overlay overlay;
  const int targetOut = overlayOutput(augment, &overlay);
  int imageOut = -1;
  for (size_t i = 0; i < augment.outputNames.size(); ++i)
    if (augment.outputNames[i] == "image")
      imageOut = static_cast<int>(i);
  if (imageOut < 0)
    throw Error(str(artifact.path, ": @", augment.name, " has no output named 'image'"));
  const int rawImageIn = feed.input("image"), rawSegIn = feed.input("seg");
  const int rngIn = feed.input("rng");
  const Overlay rawOverlay = Overlay::Labels; // instances or classes

  auto range = [](const Tensor &t) {
    Tensor f = t.to(DType::F64);
    const double *p = f.data<double>();
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (int64_t i = 0; i < f.numel(); ++i)
      if (std::isfinite(p[i]))
        lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
    return nlohmann::json::array({f.numel() ? lo : 0.0, f.numel() ? hi : 0.0});
  };

  std::vector<nlohmann::json> summary;
  const double start = seconds();
  for (int64_t step = options.step; static_cast<int64_t>(summary.size()) < options.samples;
       ++step) {
    const Batch &batch = data->next();
    const std::vector<Tensor> stepInputs = feed.inputs(batch, step);
    const std::vector<Tensor> inputs = augmentInputs(augment, feed, stepInputs);
    std::vector<Tensor> out = session ? session->run(augment, inputs, {}, nullptr, nullptr)
                                      : runCpu(artifact, augment, inputs, {});
    for (Tensor &t : out)
      if (t.dtype() == DType::BF16 || t.dtype() == DType::F16)
        t = t.to(DType::F32);
    const Tensor &rawImage = stepInputs.at(rawImageIn);
    const Tensor *rawSeg = rawSegIn >= 0 ? &stepInputs.at(rawSegIn) : nullptr;
    const int64_t key = rngIn >= 0 ? stepInputs.at(rngIn).data<int64_t>()[0] : 0;
    const int64_t batchSize = rawImage.dim(0);
    if (rngIn >= 0) // the key as `medrun run --input rng=FILE` takes it (all 64 bits)
      writeNpy((fs::path(options.out) / str("step", step, "_rng.npy")).string(),
               stepInputs.at(rngIn));
    for (int64_t b = 0; b < batchSize && static_cast<int64_t>(summary.size()) < options.samples;
         ++b) {
      const std::string prefix =
          (fs::path(options.out) / str("step", step, "_sample", b)).string();
      nlohmann::json line = {{"step", step}, {"sample", b}, {"key", key},
                             {"prefix", fs::path(prefix).filename().string()}};
      writePng(prefix + "_raw.png", orthoSlices(rawImage, b, rawSeg, rawOverlay));
      writePng(prefix + "_augmented.png",
               orthoSlices(out[imageOut], b, targetOut >= 0 ? &out[targetOut] : nullptr, overlay));
      auto save = [&](const std::string &name, const Tensor &t) {
        Tensor s = sampleOf(t, b);
        writeNpy(prefix + "_" + name + ".npy", s);
        line["shapes"][name] = s.shape();
        line["ranges"][name] = range(s);
      };
      save("raw_image", rawImage);
      if (rawSeg)
        save("raw_seg", *rawSeg);
      for (size_t i = 0; i < out.size(); ++i)
        save(augment.outputNames[i], out[i]);
      lines << line.dump() << "\n";
      summary.push_back(line);
    }
    data->release(batch);
    if (seconds() - start > 1.0)
      std::fprintf(options.console, "augment-preview: step %lld, %zu of %lld samples, %.1f s\n",
                   static_cast<long long>(step), summary.size(),
                   static_cast<long long>(options.samples), seconds() - start);
  }
  lines.flush();
  if (!lines)
    throw Error(str(jsonl, ": cannot write"));
  return summary;
}

} // namespace medrun
