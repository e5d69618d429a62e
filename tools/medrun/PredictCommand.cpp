//===- PredictCommand.cpp - `medrun predict` ------------------------------------------===//
#include "PredictCommand.h"

#include "InferCommand.h"

#include "medrun/Artifact.h"
#include "medrun/Checkpoint.h"
#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Npy.h"
#include "medrun/Preprocess.h"
#include "medrun/Resample.h"
#include "medrun/SlidingWindow.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace medrun {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

} // namespace

int predictCommand(const PredictOptions &o) {
  if (o.input.empty() || !fs::is_directory(o.input))
    throw Error(str("medrun predict needs a folder of raw cases (CASE_0000.nii.gz, ...), got '",
                    o.input, "'"));
  if (o.out.empty())
    throw Error("medrun predict: give the output folder with -o DIR");
  if (o.runs.empty())
    throw Error("medrun predict: give the trained runs with --run RUN (once per fold)");
  if (o.artifact.empty())
    throw Error("medrun predict: give the recipe's compiled artifact with --artifact X.medc");
  // The runs' data contracts: one plan, one set of channels and labels.
  // A run is a training run's directory, or the file `medrun export` wrote (its contract in
  // the metadata).
  std::vector<DataContract> contracts;
  std::vector<std::string> weightFiles;
  for (const std::string &run : o.runs) {
    std::string path = (fs::path(run) / "data.json").string();
    if (fs::is_regular_file(run)) {
      std::optional<DataContract> c = findContract(run, path);
      if (!c)
        throw Error(str(run, ": a weights file without the run's data contract (export the run "
                             "with `medrun export RUN -o FILE`, which carries it)"));
      contracts.push_back(*c);
      weightFiles.push_back(run);
    } else {
      if (!fs::exists(path))
        throw Error(str(path, ": no such file (--run must be a training run's directory or an "
                              "exported weights file)"));
      contracts.push_back(DataContract::fromJson(readJsonFile(path), path));
      weightFiles.push_back((fs::path(run) / "checkpoints" / "best").string());
    }
    if (contracts.back().preprocessed.empty())
      throw Error(str(path,
                      ": the run did not train on a `medrun preprocess` cache, so no plan "
                      "says how to preprocess a raw case: use medrun infer with its checkpoint"));
    if (contracts.back().channels.size() != contracts[0].channels.size() ||
        contracts.back().preprocessed != contracts[0].preprocessed)
      throw Error(str(path, ": another plan or channel count than ", o.runs[0],
                      "'s (the folds of an ensemble share the plan)"));
  }
  const PreprocessPlan plan =
      readPreprocessPlan(o.plans.empty() ? contracts[0].preprocessed : o.plans);
  const size_t channels = plan.schemes.size();
  if (contracts[0].channels.size() != channels)
    throw Error(str(plan.path, ": ", channels, " channel(s), but the runs take ",
                    contracts[0].channels.size()));
  std::string ending = ".nii.gz";
  if (fs::exists(fs::path(contracts[0].dataset) / "dataset.json"))
    ending = readJsonFile((fs::path(contracts[0].dataset) / "dataset.json").string())
                 .value("file_ending", ending);
  // Cases: CASE_XXXX<ending>, every channel present.
  std::map<std::string, std::vector<std::string>> cases;
  for (const auto &e : fs::directory_iterator(o.input)) {
    const std::string n = e.path().filename().string();
    if (n.size() <= ending.size() + 5 ||
        n.compare(n.size() - ending.size(), ending.size(), ending) || n[0] == '.')
      continue;
    const std::string stem = n.substr(0, n.size() - ending.size());
    const std::string name = stem.substr(0, stem.size() - 5);
    if (stem[stem.size() - 5] != '_')
      continue;
    cases[name].push_back(e.path().string());
  }
  if (cases.empty())
    throw Error(str(o.input, ": no case files CASE_XXXX", ending));
  for (auto &[name, files] : cases) {
    std::sort(files.begin(), files.end());
    for (size_t c = 0; c < channels; ++c) {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "_%04zu", c);
      const std::string want = (fs::path(o.input) / (name + suffix + ending)).string();
      if (c >= files.size() || files[c] != want)
        throw Error(str("case ", name, ": channel ", c, " is missing: ", want, " (the plan has ",
                        channels, " channel(s))"));
    }
    if (files.size() != channels)
      throw Error(str("case ", name, ": ", files.size(), " channel files in ", o.input,
                      ", the plan has ", channels));
  }

  Artifact a = Artifact::load(o.artifact);
  const Function &fn = a.function("infer");
  const Shape &in = fn.values[fn.inputs.at(0)].shape;
  if (in.size() != 5 || in[1] != static_cast<int64_t>(channels))
    throw Error(
        str(a.path, ": 'infer' takes ", shapeStr(in), "; the plan has ", channels, " channel(s)"));
  std::vector<TensorMap> folds;
  std::string weights = o.weights;
  for (const std::string &file : weightFiles) {
    std::string w = o.weights;
    folds.push_back(loadWeights(a, fn, file, w));
    weights = w;
  }
  SlidingWindowOptions sw;
  sw.window = {in[2], in[3], in[4]};
  sw.batch = in[0];
  sw.overlap = o.overlap;
  sw.mirror = o.mirror;
  fs::create_directories(o.out);
  std::fprintf(stderr, "predict %zu case(s) from %s with %zu fold(s) (%s weights%s), plan %s\n",
               cases.size(), o.input.c_str(), folds.size(), weights.c_str(),
               o.mirror ? ", mirrored 8 ways" : "", plan.path.c_str());
  if (o.saveProbabilities)
    std::fprintf(stderr, "probabilities: OUT/CASE.npz (key probabilities, C x z x y x, float32)\n");
  Progress::Options po;
  po.total = static_cast<int64_t>(cases.size());
  po.desc = "predict";
  po.mode = o.progress == 1   ? Progress::Mode::Bar
            : o.progress == 2 ? Progress::Mode::Lines
                              : Progress::Mode::Auto;
  po.every = 1;
  Progress bar(stderr, po);
  const auto start = std::chrono::steady_clock::now();
  int64_t done = 0, voxels = 0;
  for (const auto &[name, files] : cases) {
    const PreprocessedCase pc = preprocessCase(name, files, "", plan);
    const Shape3 &s = pc.shape;
    const int64_t n = s[0] * s[1] * s[2];
    Tensor image(DType::F32, {static_cast<int64_t>(channels), s[0], s[1], s[2]});
    for (size_t c = 0; c < channels; ++c)
      std::copy(pc.data[c].begin(), pc.data[c].end(), image.data<float>() + c * n);
    // The folds' logits, averaged (nnU-Net sums the logits and divides by the folds).
    std::vector<double> sum;
    int64_t classes = 0;
    for (const TensorMap &params : folds) {
      WindowPredictor predict = [&](const Tensor &batch) {
        return runCpu(a, fn, {batch}, params)[0];
      };
      const Tensor logits = slidingWindow(image, sw, predict);
      classes = logits.dim(0);
      const float *p = logits.data<float>();
      if (sum.empty())
        sum.assign(static_cast<size_t>(classes * n), 0.0);
      for (int64_t k = 0; k < classes * n; ++k)
        sum[k] += p[k];
    }
    for (double &v : sum)
      v /= static_cast<double>(folds.size());
    // Back to the cropped shape (the probabilities' resampling: order 1, separate z).
    const Shape3 &cs = pc.cropShape;
    const int64_t m = cs[0] * cs[1] * cs[2];
    const int axis = separateAxis(plan.target, pc.spacing);
    std::vector<std::vector<double>> back;
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<double> ch(sum.begin() + c * n, sum.begin() + (c + 1) * n);
      back.push_back(resampleImage(ch, s, cs, 1, axis));
    }
    // argmax (the first of equals), put back into the uncropped volume, transposed back.
    const Shape3 &full = pc.shapeBefore;
    const Shape3 raw = pc.original.shape;
    // Raw voxel v (C order over raw) is voxel rawToFull[v] of the uncropped, transposed volume.
    std::vector<int64_t> rawToFull(static_cast<size_t>(raw[0] * raw[1] * raw[2]));
    {
      const int64_t stride[3] = {full[1] * full[2], full[2], 1};
      for (int64_t i = 0, v = 0; i < raw[0]; ++i)
        for (int64_t j = 0; j < raw[1]; ++j)
          for (int64_t k = 0; k < raw[2]; ++k, ++v) {
            const int64_t at[3] = {i, j, k}; // raw axis a is transposed axis backward[a]
            int64_t t[3];
            for (int ax = 0; ax < 3; ++ax)
              t[ax] = at[plan.forward[ax]];
            rawToFull[v] = t[0] * stride[0] + t[1] * stride[1] + t[2] * stride[2];
          }
    }
    if (o.saveProbabilities) {
      // nnU-Net's --save_probabilities: the softmax of the resampled logits, background 1
      // outside the crop, in the input's array order: CASE.npz, key probabilities, (C, z, y, x).
      const int64_t nFull = full[0] * full[1] * full[2];
      std::vector<float> prob(static_cast<size_t>(classes * nFull), 0.0f);
      std::fill(prob.begin(), prob.begin() + nFull, 1.0f);
      std::vector<double> e(static_cast<size_t>(classes));
      for (int64_t z = 0, v = 0; z < cs[0]; ++z)
        for (int64_t y = 0; y < cs[1]; ++y)
          for (int64_t x = 0; x < cs[2]; ++x, ++v) {
            double mx = back[0][v], sum = 0;
            for (int64_t c = 1; c < classes; ++c)
              mx = std::max(mx, back[c][v]);
            for (int64_t c = 0; c < classes; ++c)
              sum += e[c] = std::exp(back[c][v] - mx);
            const int64_t at = ((pc.lo[0] + z) * full[1] + pc.lo[1] + y) * full[2] + pc.lo[2] + x;
            for (int64_t c = 0; c < classes; ++c)
              prob[c * nFull + at] = static_cast<float>(e[c] / sum);
          }
      const int64_t nRaw = static_cast<int64_t>(rawToFull.size());
      Tensor probabilities(DType::F32, {classes, raw[0], raw[1], raw[2]});
      float *dst = probabilities.data<float>();
      for (int64_t c = 0; c < classes; ++c)
        for (int64_t v = 0; v < nRaw; ++v)
          dst[c * nRaw + v] = prob[c * nFull + rawToFull[v]];
      writeNpz((fs::path(o.out) / (name + ".npz")).string(), {{"probabilities", probabilities}});
    }
    std::vector<int64_t> seg(static_cast<size_t>(full[0] * full[1] * full[2]), 0);
    for (int64_t z = 0, v = 0; z < cs[0]; ++z)
      for (int64_t y = 0; y < cs[1]; ++y)
        for (int64_t x = 0; x < cs[2]; ++x, ++v) {
          int64_t best = 0;
          for (int64_t c = 1; c < classes; ++c)
            if (back[c][v] > back[best][v])
              best = c;
          seg[((pc.lo[0] + z) * full[1] + pc.lo[1] + y) * full[2] + pc.lo[2] + x] = best;
        }
    std::vector<int64_t> out(seg.size());
    for (size_t v = 0; v < out.size(); ++v)
      out[v] = seg[rawToFull[v]];
    VolumeData vd;
    vd.shape = raw;
    vd.spacing = pc.original.spacing;
    vd.affine = pc.original.affine;
    std::vector<uint8_t> u8;
    std::vector<uint16_t> u16;
    if (classes <= 255) {
      u8.assign(out.begin(), out.end());
      vd.type = VoxelType::U8;
      vd.data = u8.data();
    } else {
      u16.assign(out.begin(), out.end());
      vd.type = VoxelType::U16;
      vd.data = u16.data();
    }
    writeVolume((fs::path(o.out) / (name + ending)).string(), vd);
    voxels += raw[0] * raw[1] * raw[2];
    bar.update(++done);
  }
  bar.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("predicted %lld case(s) into %s in %.1f s (%.2f cases/s, %.2f Mvoxels/s)\n",
              static_cast<long long>(done), o.out.c_str(), seconds, done / std::max(seconds, 1e-9),
              voxels / 1e6 / std::max(seconds, 1e-9));
  return 0;
}

} // namespace medrun
