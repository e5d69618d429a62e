//===- EvalCommand.cpp - `medrun eval` ----------------------------------------------===//
//
// The prediction is read one channel at a time (openChannel), so memory holds the three
// short-range affinities (or one channel and the running argmax), the labels and one
// segmentation, never every channel of a BANIS prediction at once.
//
//===----------------------------------------------------------------------------------===//
#include "EvalCommand.h"

#include "medrun/Error.h"
#include "medrun/Metrics.h"
#include "medrun/Parallel.h"
#include "medrun/Segmentation.h"
#include "medrun/Sizes.h"
#include "medrun/Skeleton.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

namespace medrun {
namespace {

using json = nlohmann::ordered_json;

std::string shapeText(const Box3 &s) { return str(s[0], "x", s[1], "x", s[2]); }

std::string voxelText(const Box3 &shape, int64_t i) {
  return str("(z, y, x) = (", i / (shape[1] * shape[2]), ", ", i / shape[2] % shape[1], ", ",
             i % shape[2], ")");
}

/// The labels as int64 ids: integer volumes as stored, float ones only if every value is
/// a whole number.
std::vector<int64_t> readLabels(const VolumeReader &r) {
  const VolumeInfo &info = r.info();
  const int64_t n = info.shape[0] * info.shape[1] * info.shape[2];
  // Eval holds whole volumes: one the file declares larger than memory is an error naming it.
  const std::string whole = str("the whole volume, ", shapeText(info.shape));
  std::vector<int64_t> ids = allocate<int64_t>(n, info.name(), whole);
  if (isIntegerVoxel(info.type)) {
    r.read({0, 0, 0}, info.shape, ids.data());
    return ids;
  }
  std::vector<float> f = allocate<float>(n, info.name(), whole);
  r.read({0, 0, 0}, info.shape, f.data());
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::nearbyint(f[i]) == f[i]))
      throw Error(str(info.name(), ": ", voxelTypeName(info.type), " labels with the value ",
                      f[i], " at voxel ", voxelText(info.shape, i),
                      ": expected whole numbers (instance ids or class indices)"));
    ids[i] = static_cast<int64_t>(f[i]);
  }
  return ids;
}

/// What `medrun eval` reads from the prediction, channel by channel.
struct Channels {
  std::vector<float> affinities;      ///< the first 3 channels, when wanted
  std::unique_ptr<ArgmaxClasses> argmax; ///< when wanted
  bool sumsToOne = true;              ///< every voxel's channels sum to 1 (softmax)
  bool probabilities = true;          ///< the first 3 channels lie in [0, 1]
};

Channels readChannels(const std::string &path, std::unique_ptr<VolumeReader> first,
                      bool wantAffinities, bool wantClasses, bool wantSums) {
  const VolumeInfo info = first->info();
  const int64_t n = info.shape[0] * info.shape[1] * info.shape[2], C = info.channels;
  Channels out;
  std::vector<float> buf = allocate<float>(n, info.name(), str("one channel, ", shapeText(info.shape))),
                     sum;
  if (wantAffinities)
    out.affinities.resize(static_cast<size_t>(3 * n));
  if (wantClasses)
    out.argmax = std::make_unique<ArgmaxClasses>(n);
  if (wantSums)
    sum.assign(static_cast<size_t>(n), 0.f);
  for (int64_t c = 0; c < C; ++c) {
    if (!wantClasses && !wantSums && c >= 3)
      break; // affinities: the short-range channels are all we need
    std::unique_ptr<VolumeReader> r = c == 0 ? std::move(first) : openChannel(path, c);
    r->read({0, 0, 0}, info.shape, buf.data());
    if (wantAffinities && c < 3) {
      std::copy(buf.begin(), buf.end(), out.affinities.begin() + c * n);
      for (float v : buf)
        if (!(v >= 0 && v <= 1))
          out.probabilities = false;
    }
    if (wantClasses)
      out.argmax->add(buf.data());
    if (wantSums)
      for (int64_t i = 0; i < n; ++i)
        sum[i] += buf[i];
  }
  if (wantSums)
    for (float s : sum)
      if (!(std::abs(s - 1) <= 1e-3f)) {
        out.sumsToOne = false;
        break;
      }
  return out;
}

/// BANIS's validation sweep (BANIS.py eval_ranges): its sigmoid(0.2 x) above
/// sigmoid(0.2 k) for k = -1..11, that is the logit x above k; on our sigmoid outputs,
/// sigmoid(k).
std::vector<double> defaultSweep(bool probabilities) {
  std::vector<double> t;
  for (int k = -1; k <= 11; ++k)
    t.push_back(probabilities ? 1 / (1 + std::exp(-double(k))) : double(k));
  return t;
}

json scoresJson(const InstanceScores &s) {
  return {{"voi_split", s.voiSplit},   {"voi_merge", s.voiMerge},
          {"voi_sum", s.voiSum()},     {"arand", s.arand},
          {"rand_precision", s.randPrecision}, {"rand_recall", s.randRecall},
          {"pred_objects", s.predObjects}};
}

/// Writes ids in the smallest unsigned type that holds them, as nnU-Net writes
/// segmentations: uint8 below 255, else uint16, else uint32; int64 only beyond that.
void writeSegmentation(const std::string &path, const std::vector<int64_t> &ids,
                       const VolumeInfo &like) {
  int64_t lo = 0, hi = 0;
  for (int64_t v : ids) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  VolumeData data;
  data.shape = like.shape;
  data.spacing = like.spacing;
  data.affine = like.affine;
  std::vector<uint8_t> u8;
  std::vector<uint16_t> u16;
  std::vector<uint32_t> u32;
  if (lo >= 0 && hi < 255) {
    u8.assign(ids.begin(), ids.end());
    data.type = VoxelType::U8;
    data.data = u8.data();
  } else if (lo >= 0 && hi <= 0xffff) {
    u16.assign(ids.begin(), ids.end());
    data.type = VoxelType::U16;
    data.data = u16.data();
  } else if (lo >= 0 && hi <= 0xffffffffLL) {
    u32.assign(ids.begin(), ids.end());
    data.type = VoxelType::U32;
    data.data = u32.data();
  } else {
    data.type = VoxelType::I64;
    data.data = ids.data();
  }
  writeVolume(path, data);
  std::fprintf(stderr, "wrote %s: %s %s\n", path.c_str(), shapeText(like.shape).c_str(),
               voxelTypeName(data.type));
}

namespace fs = std::filesystem;

bool isArrayDir(const fs::path &p) {
  return fs::exists(p / ".zarray") || fs::exists(p / ".zgroup");
}

/// What a folder evaluation scores: a label (one value) or a region (the union of values),
/// named as nnU-Net names it in summary.json ("1", "(1, 2)").
struct EvalKey {
  std::string name;
  std::vector<int64_t> values;
};

/// nnU-Net's metrics of one key in one case (evaluation/evaluate_predictions.py).
struct KeyCounts {
  int64_t tp = 0, fp = 0, fn = 0, tn = 0;
  double dice() const { return tp + fp + fn ? 2.0 * tp / (2.0 * tp + fp + fn) : NAN; }
  double iou() const { return tp + fp + fn ? double(tp) / double(tp + fp + fn) : NAN; }
};

/// A JSON number, NaN marked so that dumpPython writes it as Python's json does.
nlohmann::json number(double v) {
  return std::isnan(v) ? nlohmann::json("\x01NaN") : nlohmann::json(v);
}

/// json.dump(obj, indent=4, sort_keys=True) as Python writes it (NaN as NaN).
std::string dumpPython(const nlohmann::json &j) {
  std::string text = j.dump(4);
  const std::string mark = "\"\\u0001NaN\"";
  for (size_t at; (at = text.find(mark)) != std::string::npos;)
    text.replace(at, mark.size(), "NaN");
  return text;
}

int evalFolders(const EvalOptions &o) {
  const fs::path predDir(o.prediction), refDir(o.labels);
  if (!fs::is_directory(refDir) || isArrayDir(refDir))
    throw Error(str(o.labels,
                    ": --labels must be a folder of label maps too when the "
                    "prediction is a folder (",
                    o.prediction, ")"));
  // Labels, regions and the ignore label: dataset.json (given, or the labels folder's
  // dataset's), else every value > 0 found.
  std::string datasetJson = o.datasetJson;
  if (datasetJson.empty() && fs::exists(refDir.parent_path() / "dataset.json"))
    datasetJson = (refDir.parent_path() / "dataset.json").string();
  std::string ending = o.fileEnding;
  std::vector<EvalKey> keys;
  std::optional<int64_t> ignore;
  if (!datasetJson.empty()) {
    std::ifstream in(datasetJson);
    if (!in)
      throw Error(str(datasetJson, ": cannot read"));
    nlohmann::json d = nlohmann::json::parse(in, nullptr, false);
    if (d.is_discarded())
      throw Error(str(datasetJson, ": malformed JSON"));
    if (!d.is_object() || !d.contains("labels") || !d["labels"].is_object())
      throw Error(str(datasetJson, ": expected the key labels (nnU-Net v2 dataset.json)"));
    if (ending.empty() && d.contains("file_ending") && d["file_ending"].is_string())
      ending = d["file_ending"].get<std::string>();
    for (auto &[name, v] : d["labels"].items()) {
      if (name == "ignore") {
        if (!v.is_number_integer())
          throw Error(str(datasetJson, ": labels.ignore: expected an integer"));
        ignore = v.get<int64_t>();
        continue;
      }
      EvalKey k;
      if (v.is_number_integer()) {
        k.values = {v.get<int64_t>()};
      } else if (v.is_array() && !v.empty()) {
        for (const auto &x : v) {
          if (!x.is_number_integer())
            throw Error(str(datasetJson, ": labels.", name, ": expected integers"));
          k.values.push_back(x.get<int64_t>());
        }
      } else {
        throw Error(str(datasetJson, ": labels.", name, " = ", v.dump(),
                        ": expected an integer or a list of integers (a region)"));
      }
      if (name == "background" || (k.values.size() == 1 && k.values[0] == 0))
        continue;
      if (k.values.size() == 1) {
        k.name = std::to_string(k.values[0]);
      } else {
        k.name = "(";
        for (size_t i = 0; i < k.values.size(); ++i)
          k.name += (i ? ", " : "") + std::to_string(k.values[i]);
        k.name += ")";
      }
      keys.push_back(k);
    }
    if (keys.empty())
      throw Error(str(datasetJson, ": labels: no foreground label to evaluate"));
  }
  if (ending.empty())
    ending = ".nii.gz";
  auto listed = [&](const fs::path &dir) {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (n.size() > ending.size() &&
          n.compare(n.size() - ending.size(), ending.size(), ending) == 0 && n[0] != '.')
        names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> preds = listed(predDir), refs = listed(refDir);
  if (preds.empty())
    throw Error(str(o.prediction, ": no prediction ending in ", ending,
                    " (--file-ending, or dataset.json's file_ending)"));
  for (const std::string &r : refs)
    if (!std::binary_search(preds.begin(), preds.end(), r))
      throw Error(str(o.prediction, ": no prediction for the reference ", (refDir / r).string(),
                      " (every case of --labels needs one)"));
  for (const std::string &p : preds)
    if (!std::binary_search(refs.begin(), refs.end(), p))
      throw Error(str((predDir / p).string(), ": no reference ", (refDir / p).string()));

  // Each case: the label maps, checked, and the counts of every key.
  const size_t n = preds.size();
  std::vector<std::vector<int64_t>> predIds(n), refIds(n); // only kept without dataset.json
  std::vector<std::vector<KeyCounts>> counts(n);
  std::vector<std::set<int64_t>> seen(n);
  std::vector<std::exception_ptr> errors(n);
  Progress::Options po;
  po.total = static_cast<int64_t>(n);
  po.desc = "eval";
  po.mode = o.progress == 1   ? Progress::Mode::Bar
            : o.progress == 2 ? Progress::Mode::Lines
                              : Progress::Mode::Auto;
  Progress bar(stderr, po);
  std::mutex barLock; // the workers report to one bar
  int64_t done = 0;
  auto score = [&](size_t i, const std::vector<int64_t> &pred, const std::vector<int64_t> &ref) {
    std::vector<KeyCounts> &c = counts[i];
    c.assign(keys.size(), KeyCounts{});
    for (size_t k = 0; k < keys.size(); ++k) {
      const std::vector<int64_t> &vals = keys[k].values;
      auto in = [&](int64_t v) { return std::find(vals.begin(), vals.end(), v) != vals.end(); };
      KeyCounts &kc = c[k];
      for (size_t v = 0; v < pred.size(); ++v) {
        if (ignore && ref[v] == *ignore)
          continue;
        const bool p = in(pred[v]), r = in(ref[v]);
        kc.tp += p && r;
        kc.fp += p && !r;
        kc.fn += !p && r;
        kc.tn += !p && !r;
      }
    }
  };
  parallelFor(static_cast<int64_t>(n), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      try {
        const std::string pp = (predDir / preds[i]).string(), rp = (refDir / preds[i]).string();
        auto pr = openVolume(pp), rr = openVolume(rp);
        const VolumeInfo &a = pr->info(), &r = rr->info();
        if (a.channels != 1 || r.channels != 1)
          throw Error(str(a.channels != 1 ? pp : rp, ": ",
                          a.channels != 1 ? a.channels : r.channels,
                          " channels: expected a label map (one channel of class indices)"));
        if (a.shape != r.shape)
          throw Error(str("case ", preds[i], ": the prediction ", pp, " is ", shapeText(a.shape),
                          " but the reference ", rp, " is ", shapeText(r.shape),
                          " (expected one shape)"));
        for (int k = 0; k < 3; ++k)
          if (std::abs(a.spacing[k] - r.spacing[k]) > 1e-3 * std::max(a.spacing[k], r.spacing[k]))
            throw Error(str("case ", preds[i], ": the prediction ", pp, " has spacing ",
                            a.spacing[0], " x ", a.spacing[1], " x ", a.spacing[2],
                            " but the reference ", r.spacing[0], " x ", r.spacing[1], " x ",
                            r.spacing[2], " (expected the same geometry)"));
        if (std::string g = geometryMismatch(r, a); !g.empty())
          throw Error(str("case ", preds[i], ": the prediction ", pp,
                          " is not where the reference ", rp, " is: ", g,
                          " (expected the same geometry)"));
        std::vector<int64_t> pred = readLabels(*pr), ref = readLabels(*rr);
        for (int64_t v : pred)
          if (v < 0)
            throw Error(str(pp, ": label value ", v, ": expected class indices >= 0"));
        if (keys.empty()) {
          for (int64_t v : pred)
            if (v > 0)
              seen[i].insert(v);
          for (int64_t v : ref)
            if (v > 0)
              seen[i].insert(v);
          predIds[i] = std::move(pred);
          refIds[i] = std::move(ref);
        } else {
          score(static_cast<size_t>(i), pred, ref);
        }
        std::lock_guard<std::mutex> hold(barLock);
        bar.update(++done);
      } catch (...) {
        errors[i] = std::current_exception();
      }
  });
  for (auto &e : errors)
    if (e)
      std::rethrow_exception(e);
  if (keys.empty()) {
    std::set<int64_t> all;
    for (const auto &s : seen)
      all.insert(s.begin(), s.end());
    if (all.empty())
      throw Error(str(o.labels, ": neither the references nor the predictions hold a label > 0 "
                                "(and no dataset.json names the labels): nothing to score"));
    for (int64_t v : all)
      keys.push_back({std::to_string(v), {v}});
    for (size_t i = 0; i < n; ++i)
      score(i, predIds[i], refIds[i]);
  }
  bar.finish();

  // summary.json as nnU-Net writes it.
  nlohmann::json perCase = nlohmann::json::array();
  std::vector<std::vector<std::array<double, 8>>> values(keys.size());
  static const char *kMetrics[] = {"Dice", "FN", "FP", "IoU", "TN", "TP", "n_pred", "n_ref"};
  for (size_t i = 0; i < n; ++i) {
    nlohmann::json metrics = nlohmann::json::object();
    for (size_t k = 0; k < keys.size(); ++k) {
      const KeyCounts &c = counts[i][k];
      const std::array<double, 8> v = {
          c.dice(),     double(c.fn), double(c.fp),        c.iou(),
          double(c.tn), double(c.tp), double(c.tp + c.fp), double(c.tp + c.fn)};
      values[k].push_back(v);
      metrics[keys[k].name] = {{"Dice", number(c.dice())}, {"FN", c.fn},          {"FP", c.fp},
                               {"IoU", number(c.iou())},   {"TN", c.tn},          {"TP", c.tp},
                               {"n_pred", c.tp + c.fp},    {"n_ref", c.tp + c.fn}};
    }
    perCase.push_back({{"metrics", metrics},
                       {"prediction_file", (predDir / preds[i]).string()},
                       {"reference_file", (refDir / preds[i]).string()}});
  }
  nlohmann::json mean = nlohmann::json::object(), foreground = nlohmann::json::object();
  std::vector<std::array<double, 8>> keyMeans(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    nlohmann::json m = nlohmann::json::object();
    for (int f = 0; f < 8; ++f) { // np.nanmean over the cases
      double sum = 0;
      int64_t count = 0;
      for (const auto &v : values[k])
        if (!std::isnan(v[f])) {
          sum += v[f];
          ++count;
        }
      keyMeans[k][f] = count ? sum / double(count) : NAN;
      m[kMetrics[f]] = number(keyMeans[k][f]);
    }
    mean[keys[k].name] = m;
  }
  for (int f = 0; f < 8; ++f) { // np.mean over the keys' means (a NaN stays NaN)
    double sum = 0;
    for (size_t k = 0; k < keys.size(); ++k)
      sum += keyMeans[k][f];
    foreground[kMetrics[f]] = number(sum / double(keys.size()));
  }
  nlohmann::json summary = {
      {"foreground_mean", foreground}, {"mean", mean}, {"metric_per_case", perCase}};
  const std::string out = o.json.empty() ? (predDir / "summary.json").string() : o.json;
  {
    std::ofstream f(out, std::ios::trunc);
    f << dumpPython(summary);
    if (!f)
      throw Error(str(out, ": cannot write the summary"));
  }
  size_t regions = 0;
  for (const EvalKey &k : keys)
    regions += k.values.size() > 1;
  const size_t labels = keys.size() - regions;
  std::printf("eval %s against %s: %zu cases, %zu label%s%s%s\n", o.prediction.c_str(),
              o.labels.c_str(), n, labels, labels == 1 ? "" : "s",
              regions ? str(", ", regions, regions == 1 ? " region" : " regions").c_str() : "",
              ignore ? str(", ignore label ", *ignore, " left out").c_str() : "");
  std::printf("%12s %8s %8s\n", "label", "dice", "iou");
  for (size_t k = 0; k < keys.size(); ++k)
    std::printf("%12s %8.4f %8.4f\n", keys[k].name.c_str(), keyMeans[k][0], keyMeans[k][3]);
  std::printf("%12s %8.4f %8.4f\n", "foreground",
              foreground["Dice"].is_number() ? foreground["Dice"].get<double>() : NAN,
              foreground["IoU"].is_number() ? foreground["IoU"].get<double>() : NAN);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

} // namespace

std::vector<double> parseThresholds(const std::string &text) {
  std::vector<double> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos
                                                                        : comma - pos);
    size_t used = 0;
    double v = NAN;
    try {
      v = std::stod(part, &used);
    } catch (...) {
      used = 0;
    }
    if (part.empty() || used != part.size() || !std::isfinite(v))
      throw Error(str("--thresholds: expected numbers separated by commas (e.g. 0.5,0.7,0.9), "
                      "got '", text, "'"));
    out.push_back(v);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return out;
}

namespace {

/// What `--tune` records and `--params`/`--run` apply: the segmentation of affinities.
struct SegmentationParams {
  /// BANIS's connected components of the short-range affinities above the threshold, or
  /// the seeded watershed's fragments merged by mean affinity down to the threshold
  /// (Segmentation.h).
  std::string method = "components";
  double threshold = 0;
  /// mean-agglomeration: the watershed's settings (Segmentation.h's defaults unless recorded).
  float seedThreshold = SegmentParams().seedThreshold;
  int64_t minSeedSize = SegmentParams().minSeedSize;
  float low = SegmentParams().low;
  /// mean-agglomeration block by block (medrun segment --block): the block, {0, 0, 0} for
  /// the whole volume. Stitching can give other fragments than the whole volume, so the
  /// block is part of the parameters.
  Box3 block{0, 0, 0};
  bool onLogits = false; ///< the threshold is on logits (infer --activation none)
  int64_t minSize = 0;
  std::string file;      ///< where they were read from ("" when not read)
  json chosenOn;         ///< the volume and score they were chosen by
};

const char *kParamsFormat = "medrun-segmentation-params";

json paramsJson(const SegmentationParams &p) {
  json j = {{"format", kParamsFormat},
            {"version", 1},
            {"method", p.method},
            {"threshold", p.threshold},
            {"thresholds_on", p.onLogits ? "logits" : "probabilities"},
            {"min_size", p.minSize}};
  // The float settings written as their shortest decimal (0.9, not 0.8999999761581421).
  auto decimal = [](float v) { return std::stod(fmt::format("{}", v)); };
  if (p.method == "mean-agglomeration") {
    j["watershed"] = {{"seed_threshold", decimal(p.seedThreshold)},
                      {"min_seed_size", p.minSeedSize},
                      {"low", decimal(p.low)}};
    j["block"] = p.block == Box3{0, 0, 0} ? json(nullptr) : json(p.block);
  }
  j["chosen_on"] = p.chosenOn;
  return j;
}

SegmentationParams readParams(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw Error(str(path, ": cannot read the segmentation parameters (written by medrun eval "
                          "--tune on a validation volume)"));
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(str(path, ": malformed JSON (expected the segmentation parameters that "
                          "medrun eval --tune writes)"));
  if (!j.contains("format") || j["format"] != kParamsFormat)
    throw Error(str(path, ": not segmentation parameters (expected \"format\": \"",
                    kParamsFormat, "\", as medrun eval --tune writes)"));
  SegmentationParams p;
  p.file = path;
  auto need = [&](const char *key) -> const json & {
    if (!j.contains(key))
      throw Error(str(path, ": no key ", key));
    return j[key];
  };
  const json &method = need("method");
  if (method != "components" && method != "mean-agglomeration")
    throw Error(str(path, ": method = ", method.dump(),
                    ": expected \"components\" or \"mean-agglomeration\""));
  p.method = method.get<std::string>();
  if (j.contains("watershed")) {
    const json &w = j["watershed"];
    auto num = [&](const char *key) {
      if (!w.is_object() || !w.contains(key) || !w[key].is_number())
        throw Error(str(path, ": watershed.", key, ": expected a number"));
      return w[key].get<double>();
    };
    p.seedThreshold = static_cast<float>(num("seed_threshold"));
    p.minSeedSize = static_cast<int64_t>(num("min_seed_size"));
    p.low = static_cast<float>(num("low"));
  }
  if (j.contains("block") && !j["block"].is_null()) {
    const json &b = j["block"];
    if (!b.is_array() || b.size() != 3)
      throw Error(str(path, ": block = ", b.dump(), ": expected [z, y, x] or null"));
    for (int k = 0; k < 3; ++k) {
      if (!b[k].is_number_integer() || b[k].get<int64_t>() < 1)
        throw Error(str(path, ": block = ", b.dump(), ": expected 3 sizes >= 1"));
      p.block[k] = b[k].get<int64_t>();
    }
  }
  const json &t = need("threshold");
  if (!t.is_number() || !std::isfinite(t.get<double>()))
    throw Error(str(path, ": threshold = ", t.dump(), ": expected a number"));
  p.threshold = t.get<double>();
  const json &on = need("thresholds_on");
  if (on != "probabilities" && on != "logits")
    throw Error(str(path, ": thresholds_on = ", on.dump(),
                    ": expected \"probabilities\" or \"logits\""));
  p.onLogits = on == "logits";
  const json &m = need("min_size");
  if (!m.is_number_integer() || m.get<int64_t>() < 0)
    throw Error(str(path, ": min_size = ", m.dump(), ": expected an integer >= 0"));
  p.minSize = m.get<int64_t>();
  if (j.contains("chosen_on"))
    p.chosenOn = j["chosen_on"];
  return p;
}

void writeJson(const std::string &path, const json &j, const char *what) {
  std::ofstream f(path, std::ios::trunc);
  f << j.dump(2) << "\n";
  if (!f)
    throw Error(str(path, ": cannot write ", what));
  std::fprintf(stderr, "wrote %s\n", path.c_str());
}

/// A run directory's recorded parameters.
fs::path runParamsPath(const std::string &run) {
  if (!fs::exists(fs::path(run) / "config.json"))
    throw Error(str(run, ": not a run directory (no config.json; --run takes medrun train's "
                         "--out directory)"));
  return fs::path(run) / "segmentation_params.json";
}

json skeletonJson(const RunLengthScores &r) {
  json j = {{"erl", r.erl}, {"max_erl", r.maxErl}, {"nerl", r.nerl}};
  for (size_t k = 0; k < r.adaptedNerl.size(); ++k)
    j[RunLengthScores::kAdaptedNames[k]] = r.adaptedNerl[k];
  j.update({{"voi_split", r.nodeScores.voiSplit},
            {"voi_merge", r.nodeScores.voiMerge},
            {"voi_sum", r.nodeScores.voiSum()},
            {"arand", r.nodeScores.arand},
            {"n_mergers", r.mergers},
            {"n_non0_mergers", r.nonzeroMergers},
            {"n_splits", r.splitEdges},
            {"edges", {{"correct", r.correctEdges},
                       {"split", r.splitEdges},
                       {"merged", r.mergedEdges},
                       {"omitted", r.omittedEdges}}},
            {"skeletons", r.skeletons},
            {"nodes", r.nodes},
            {"length", r.length}});
  return j;
}

/// The scores of one segmentation: on the voxels of the labels, on the skeletons, or both.
struct Scored {
  std::optional<InstanceScores> voxels;
  std::optional<RunLengthScores> skeleton;
  int64_t objects = 0;
};

/// The ground truth of an instance evaluation: labels, skeletons or both.
struct Truth {
  std::vector<int64_t> gt; ///< empty without --labels
  std::optional<Skeletons> skeletons;
  Box3 shape{};
};

Scored scoreSegmentation(const std::vector<int64_t> &seg, int64_t objects, const Truth &t) {
  Scored s;
  s.objects = objects;
  const int64_t n = static_cast<int64_t>(seg.size());
  if (!t.gt.empty())
    s.voxels = compareInstances(seg.data(), t.gt.data(), n);
  if (t.skeletons)
    s.skeleton = runLengthScores(*t.skeletons, nodeSegments(*t.skeletons, seg.data(), t.shape));
  return s;
}

json scoredJson(const Scored &s) {
  json j = json::object();
  if (s.voxels)
    j = scoresJson(*s.voxels);
  else
    j["pred_objects"] = s.objects;
  if (s.skeleton)
    j["skeleton"] = skeletonJson(*s.skeleton);
  return j;
}

/// The table's columns for one row.
void printHeader(const Truth &t, const char *first) {
  std::printf("%10s %8s", first, "objects");
  if (!t.gt.empty())
    std::printf(" %10s %10s %10s %8s", "voi_split", "voi_merge", "voi_sum", "arand");
  if (t.skeletons)
    std::printf(" %12s %8s", "erl", "nerl");
  std::printf("\n");
}

void printRow(const Scored &s, const std::string &first, bool best) {
  std::printf("%10s %8lld", first.c_str(), (long long)s.objects);
  if (s.voxels)
    std::printf(" %10.4f %10.4f %10.4f %8.4f", s.voxels->voiSplit, s.voxels->voiMerge,
                s.voxels->voiSum(), s.voxels->arand);
  if (s.skeleton)
    std::printf(" %12.6g %8.4f", s.skeleton->erl, s.skeleton->nerl);
  std::printf("%s\n", best ? "  best" : "");
}

std::string numberText(double v) { return fmt::format("{:.6g}", v); }

/// The offsets a run trained with, where its config.json states them
/// (loss.affinities.offsets); empty otherwise (a BANIS run: +1 first, eval's default).
Offsets recordedOffsets(const std::string &run) {
  const fs::path path = fs::path(run) / "config.json";
  std::ifstream in(path);
  const json config = json::parse(in, nullptr, false);
  if (!in || config.is_discarded() || !config.is_object())
    return {};
  const json *loss = config.contains("loss") ? &config["loss"] : nullptr;
  if (!loss || !loss->is_object() || !loss->contains("affinities") ||
      !(*loss)["affinities"].is_object() || !(*loss)["affinities"].contains("offsets"))
    return {};
  return parseOffsets((*loss)["affinities"]["offsets"].dump(),
                      path.string() + ": loss.affinities.offsets");
}

/// Replaces `ch.affinities` by the short-range channels of `offsets` in the forward
/// convention eval segments with (channel a at v joins v and v + e_a): a channel of offset
/// -e_a at v joins v and v - e_a, so it is the forward affinity of v - e_a.
void shortRangeForward(Channels &ch, const std::string &path, const VolumeInfo &pred,
                       const Offsets &offsets, const std::string &from) {
  checkOffsets(offsets, pred.channels, true, from);
  const Box3 &shape = pred.shape;
  const int64_t n = shape[0] * shape[1] * shape[2];
  const int64_t stride[3] = {shape[1] * shape[2], shape[2], 1};
  std::vector<float> buf(static_cast<size_t>(n));
  ch.probabilities = true;
  for (int a = 0; a < 3; ++a) {
    int64_t channel = -1, sign = 0;
    for (size_t k = 0; k < offsets.size(); ++k) {
      const Offset &o = offsets[k];
      if (std::abs(o[0]) + std::abs(o[1]) + std::abs(o[2]) == 1 && o[a] != 0) {
        channel = static_cast<int64_t>(k);
        sign = o[a];
        break;
      }
    }
    openChannel(path, channel)->read({0, 0, 0}, shape, buf.data());
    float *dst = ch.affinities.data() + a * n;
    for (int64_t v = 0; v < n; ++v) {
      const int64_t coord = v / stride[a] % shape[a];
      dst[v] = sign > 0 ? buf[v] : coord + 1 < shape[a] ? buf[v + stride[a]] : 0.f;
    }
    for (float v : buf)
      if (!(v >= 0 && v <= 1))
        ch.probabilities = false;
  }
}

/// --block: N or Z,Y,X voxels (as medrun segment takes it).
Box3 parseBlock(const std::string &text) {
  Box3 b{};
  std::vector<int64_t> parts;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos)
      comma = text.size();
    const std::string one = text.substr(pos, comma - pos);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(one, &used);
    } catch (...) {
      used = 0;
    }
    if (one.empty() || used != one.size() || v < 1)
      throw Error(str("--block: expected N or Z,Y,X voxels (each >= 1), got '", text, "'"));
    parts.push_back(v);
    pos = comma + 1;
  }
  if (parts.size() == 1)
    return {parts[0], parts[0], parts[0]};
  if (parts.size() != 3)
    throw Error(str("--block: expected N or Z,Y,X voxels (each >= 1), got '", text, "'"));
  std::copy(parts.begin(), parts.end(), b.begin());
  return b;
}

/// The skeletons' ids must be objects of the labels: a skeleton of an id the labels do not
/// hold traces another volume (or another labelling) than the one scored.
void checkSkeletonIds(const Skeletons &s, const std::vector<int64_t> &gt, const std::string &labels) {
  std::set<int64_t> present(gt.begin(), gt.end());
  std::set<int64_t> reported;
  for (size_t i = 0; i < s.size(); ++i)
    if (!present.count(s.skeleton[i]) && reported.insert(s.skeleton[i]).second)
      throw Error(str(s.file, ": skeleton ", s.skeleton[i], " (node ", s.nodeIds[i],
                      ") is not an object of the labels ", labels,
                      ": the skeletons trace another volume or labelling"));
}

} // namespace

int evalCommand(const EvalOptions &o) {
  if (o.mode != "auto" && o.mode != "affinities" && o.mode != "segmentation" &&
      o.mode != "instances")
    throw Error(str("--mode: expected auto, affinities, segmentation or instances, got '",
                    o.mode, "'"));
  if (o.labels.empty() && o.skeletons.empty())
    throw Error("medrun eval needs the ground truth: --labels LABELS (instance ids for "
                "affinities, class indices for segmentations) or --skeletons FILE");
  if (!o.select.empty() && o.select != "nerl" && o.select != "voi")
    throw Error(str("--select: expected nerl or voi, got '", o.select, "'"));
  const bool recorded = !o.params.empty() || (!o.run.empty() && !o.tune);
  if (o.tune && !o.params.empty())
    throw Error("--tune chooses the parameters on this volume and --params applies recorded "
                "ones: give one of them");
  if (!o.saveParams.empty() && !o.tune)
    throw Error("--save-params records the parameters that --tune chooses: add --tune (on a "
                "validation volume)");
  if (!o.params.empty() && !o.run.empty())
    throw Error("--params and --run both name recorded parameters: give one of them");
  if (fs::is_directory(o.prediction) && !isArrayDir(o.prediction)) {
    // A folder of label maps against a folder of references: nnU-Net's summary.json.
    if (o.mode != "auto" || !o.thresholds.empty() || o.minSize > 0 || !o.out.empty() ||
        !o.skeletons.empty() || o.tune || recorded || !o.run.empty() || !o.select.empty() ||
        !o.method.empty())
      throw Error(str(o.prediction, " is a folder of label maps: --mode, --thresholds, "
                                    "--min-size, -o, --skeletons, --tune, --params, --run, "
                                    "--select and --method apply to one volume"));
    if (!o.offsets.empty() || !o.block.empty())
      throw Error(str(o.prediction, " is a folder of label maps: --offsets and --block apply "
                                    "to affinities"));
    if (o.labels.empty())
      throw Error(str(o.prediction, " is a folder of label maps: it needs --labels GT_FOLDER"));
    return evalFolders(o);
  }
  if (!o.datasetJson.empty() || !o.fileEnding.empty())
    throw Error("--dataset-json and --file-ending apply to folders of label maps "
                "(PRED_FOLDER --labels GT_FOLDER)");
  std::unique_ptr<VolumeReader> first = openChannel(o.prediction, 0);
  const VolumeInfo pred = first->info();
  const int64_t C = pred.channels;
  const int64_t n = pred.shape[0] * pred.shape[1] * pred.shape[2];
  const std::array<double, 3> unit{1, 1, 1};
  std::unique_ptr<VolumeReader> labelReader;
  std::vector<int64_t> gt;
  std::array<double, 3> spacing = pred.spacing;
  if (!o.labels.empty()) {
    labelReader = openVolume(o.labels);
    const VolumeInfo &lab = labelReader->info();
    if (lab.shape != pred.shape)
      throw Error(str(lab.name(), ": shape ", shapeText(lab.shape), " differs from the "
                      "prediction's ", shapeText(pred.shape), " (", pred.name(),
                      "): the labels must cover the predicted voxels"));
    if (lab.spacing != pred.spacing && lab.spacing != unit && pred.spacing != unit)
      throw Error(str(lab.name(), ": spacing ", lab.spacing[0], " x ", lab.spacing[1], " x ",
                      lab.spacing[2], " differs from the prediction's ", pred.spacing[0], " x ",
                      pred.spacing[1], " x ", pred.spacing[2], " (", pred.name(), ")"));
    if (spacing == unit)
      spacing = lab.spacing;
    gt = readLabels(*labelReader);
  }
  const std::string labName = labelReader ? labelReader->info().name() : std::string();

  // The mode: an integer volume of one channel is a segmentation already; class scores
  // sum to one over their channels (softmax); anything else of 3 or more channels is
  // affinities.
  std::string mode = o.mode;
  if (mode == "auto" && isIntegerVoxel(pred.type) && C == 1)
    mode = "instances";
  const std::string predText =
      str(pred.name(), " (", C, C == 1 ? " channel" : " channels", " of ", voxelTypeName(pred.type),
          ")");
  if (mode == "instances" && (C != 1 || !isIntegerVoxel(pred.type)))
    throw Error(str(predText, ": --mode instances needs a segmentation, one channel of "
                    "integer ids"));
  if (mode == "affinities" && C < 3)
    throw Error(str(predText, ": --mode affinities needs the 3 short-range affinities (z, y, "
                    "x) as the first channels"));
  if (mode == "segmentation" && C < 2)
    throw Error(str(predText, ": --mode segmentation needs a score per class (2 or more "
                    "channels, background first)"));
  if (mode == "auto" && C < 2)
    throw Error(str(predText, ": expected affinities (3 or more channels), class scores (2 "
                    "or more) or an integer segmentation; choose with --mode"));

  auto noObject = [&]() {
    throw Error(str(labName, ": the labels hold no object (every id is 0 or negative, "
                    "background): nothing to score"));
  };
  const bool instanceMode = mode == "instances" || mode == "affinities" || mode == "auto";
  if (instanceMode && !gt.empty() && mode != "auto" &&
      std::none_of(gt.begin(), gt.end(), [](int64_t id) { return id > 0; }))
    noObject();

  // The skeletons, read once the volume's shape and spacing are known.
  Truth truth;
  truth.shape = pred.shape;
  if (!o.skeletons.empty()) {
    truth.skeletons = readSkeletons(o.skeletons, pred.shape, spacing, pred.name());
    if (!gt.empty())
      checkSkeletonIds(*truth.skeletons, gt, labName);
  }

  json result = {{"prediction", pred.name()}};
  if (!o.labels.empty())
    result["labels"] = labName;
  if (!o.skeletons.empty())
    result["skeletons"] = o.skeletons;
  if (mode == "instances" && !o.offsets.empty())
    throw Error(str(predText, ": --offsets applies to affinities"));
  if (mode == "instances" && (!o.thresholds.empty() || o.tune || recorded || !o.method.empty()))
    throw Error(str(predText, " is an instance segmentation: --thresholds, --tune, --params, "
                    "--run and --method apply to affinities"));
  if (mode == "instances") {
    std::vector<int64_t> seg(static_cast<size_t>(n));
    first->read({0, 0, 0}, pred.shape, seg.data());
    const int64_t objects = removeSmallObjects(seg, o.minSize);
    truth.gt = std::move(gt);
    const Scored s = scoreSegmentation(seg, objects, truth);
    std::printf("eval %s against %s: instances, %s", pred.name().c_str(),
                (labName.empty() ? o.skeletons : labName).c_str(), shapeText(pred.shape).c_str());
    if (s.voxels)
      std::printf(", %lld ground-truth objects", (long long)s.voxels->gtObjects);
    if (s.skeleton)
      std::printf(", %lld skeletons", (long long)s.skeleton->skeletons);
    std::printf("\n");
    printHeader(truth, "");
    printRow(s, "", false);
    result.update({{"mode", "instances"}, {"shape", pred.shape}, {"min_size", o.minSize}});
    if (s.voxels)
      result["gt_objects"] = s.voxels->gtObjects;
    result["objects"] = objects;
    result["scores"] = scoredJson(s);
    if (!o.out.empty())
      writeSegmentation(o.out, seg, pred);
  } else {
    if (mode != "affinities" && o.labels.empty())
      throw Error(str(predText, ": with --skeletons only, choose the mode (--mode affinities or "
                      "an integer segmentation); class scores need --labels"));
    Channels ch = readChannels(o.prediction, std::move(first),
                               mode != "segmentation", mode != "affinities", mode == "auto");
    if (mode == "auto") {
      if (ch.sumsToOne)
        mode = "segmentation";
      else if (C >= 3)
        mode = "affinities";
      else
        throw Error(str(predText, ": 2 channels that do not sum to 1 (not softmax "
                        "probabilities): choose with --mode (segmentation for class logits)"));
    }
    if (mode == "affinities" && !gt.empty() &&
        std::none_of(gt.begin(), gt.end(), [](int64_t id) { return id > 0; }))
      noObject();
    // The short-range channels: --offsets, else the run's recorded offsets, else the first
    // 3 channels as +1 along z, y, x (BANIS's).
    if (mode == "affinities") {
      if (!o.offsets.empty())
        shortRangeForward(ch, o.prediction, pred, parseOffsets(o.offsets, "--offsets"),
                          "--offsets");
      else if (!o.run.empty())
        if (const Offsets off = recordedOffsets(o.run); !off.empty())
          shortRangeForward(ch, o.prediction, pred, off,
                            (fs::path(o.run) / "config.json").string() +
                                ": loss.affinities.offsets");
    } else if (!o.offsets.empty()) {
      throw Error(str(predText, ": --offsets applies to affinities"));
    }
    if (mode == "segmentation" && (!o.thresholds.empty() || o.minSize > 0 || o.tune ||
                                   recorded || !o.skeletons.empty() || !o.method.empty()))
      throw Error(str(predText, " is scored as a segmentation (class scores): --thresholds, "
                      "--min-size, --tune, --params, --run, --method and --skeletons apply "
                      "to affinities and instances"));
    if (mode == "segmentation") {
      std::vector<ClassScore> dice;
      try {
        dice = diceScores(ch.argmax->classes().data(), gt.data(), n, C);
      } catch (const Error &e) {
        throw Error(str(labName, ": ", e.what()));
      }
      std::printf("eval %s against %s: segmentation, %lld classes, %s\n", pred.name().c_str(),
                  labName.c_str(), (long long)C, shapeText(pred.shape).c_str());
      std::printf("%5s %8s %8s %12s %12s %12s\n", "class", "dice", "iou", "tp", "fp", "fn");
      json classes = json::array();
      double sum = 0;
      int64_t counted = 0;
      for (int64_t c = 0; c < C; ++c) {
        const ClassScore &d = dice[c];
        std::printf("%5lld %8.4f %8.4f %12lld %12lld %12lld\n", (long long)c, d.dice, d.iou,
                    (long long)d.tp, (long long)d.fp, (long long)d.fn);
        classes.push_back({{"class", c}, {"dice", d.dice}, {"iou", d.iou}, {"tp", d.tp},
                           {"fp", d.fp}, {"fn", d.fn}});
        if (c > 0 && !std::isnan(d.dice)) {
          sum += d.dice;
          ++counted;
        }
      }
      const double mean = counted ? sum / counted : NAN;
      std::printf("foreground mean dice %.4f (classes 1..%lld; nan: a class in neither the "
                  "prediction nor the labels, left out)\n",
                  mean, (long long)C - 1);
      if (!counted)
        std::fprintf(stderr, "warning: %s holds no foreground class and the prediction none "
                     "either: every foreground Dice is nan\n", labName.c_str());
      result.update({{"mode", "segmentation"}, {"shape", pred.shape}, {"classes", C},
                     {"per_class", classes}, {"foreground_mean_dice", mean}});
      if (!o.out.empty())
        writeSegmentation(o.out, ch.argmax->classes(), pred);
    } else {
      truth.gt = std::move(gt);
      const bool onLogits = !ch.probabilities;
      const std::string against = labName.empty() ? o.skeletons : labName;
      // The rule that picks the best row: BANIS keeps the threshold of the highest
      // validation NERL; without skeletons, the lowest VOI sum.
      const std::string select = !o.select.empty() ? o.select : truth.skeletons ? "nerl" : "voi";
      if (select == "nerl" && !truth.skeletons)
        throw Error("--select nerl needs --skeletons FILE");
      if (select == "voi" && truth.gt.empty())
        throw Error("--select voi needs --labels LABELS");
      // The short-range channels eval reads: +1 along z, y, x (the first 3 channels).
      const Offsets shortRange = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
      auto agglomeration = [&](const SegmentationParams &p) {
        if (p.onLogits)
          throw Error(str(pred.name(), " holds logits: mean-agglomeration merges by mean "
                          "affinity in [0, 1] (infer with the sigmoid)"));
        SegmentParams sp;
        sp.method = SegmentMethod::MeanAgglomeration;
        sp.threshold = p.threshold;
        sp.seedThreshold = p.seedThreshold;
        sp.minSeedSize = p.minSeedSize;
        sp.low = p.low;
        return sp;
      };
      // medrun segment --block's segmentation: the blocks' raw ids held in memory, mapped
      // to each threshold's labels.
      auto blockwise = [&](const SegmentationParams &p, const std::vector<double> &thresholds,
                           const std::function<void(size_t, std::vector<int64_t> &)> &each) {
        const int64_t n = pred.shape[0] * pred.shape[1] * pred.shape[2];
        AffinityReader read = [&](const Box3 &lo, const Box3 &size, float *dst) {
          const int64_t m = size[0] * size[1] * size[2];
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t z = 0; z < size[0]; ++z)
              for (int64_t y = 0; y < size[1]; ++y) {
                const float *src = ch.affinities.data() + c * n +
                                   ((lo[0] + z) * pred.shape[1] + lo[1] + y) * pred.shape[2] +
                                   lo[2];
                std::copy(src, src + size[2], dst + c * m + (z * size[1] + y) * size[2]);
              }
        };
        Box3 block = p.block;
        for (int a = 0; a < 3; ++a)
          block[a] = std::min(block[a], pred.shape[a]);
        MemoryLabels raw(pred.shape);
        const BlockwiseResult r = segmentBlockwise(read, pred.shape, block, shortRange,
                                                   agglomeration(p), raw, thresholds);
        std::vector<int64_t> seg(static_cast<size_t>(n));
        for (size_t k = 0; k < r.maps.size(); ++k) {
          for (int64_t v = 0; v < n; ++v)
            seg[v] = static_cast<int64_t>(r.maps[k][raw.labels()[v]]);
          each(k, seg);
        }
      };
      auto finish = [](std::vector<int64_t> &seg, int64_t minSize, int64_t &objects) {
        objects = 0;
        for (int64_t id : seg)
          objects = std::max(objects, id);
        if (minSize > 1)
          objects = removeSmallObjects(seg, minSize);
      };
      auto segmentWith = [&](const SegmentationParams &p, int64_t &objects) {
        std::vector<int64_t> seg;
        if (p.method == "components") {
          seg = affinityInstances(ch.affinities.data(), pred.shape,
                                  static_cast<float>(p.threshold), &objects);
        } else if (p.block != Box3{0, 0, 0}) {
          blockwise(p, {p.threshold}, [&](size_t, std::vector<int64_t> &s) { seg.swap(s); });
        } else {
          const std::vector<uint64_t> ids =
              segmentAffinities(ch.affinities.data(), pred.shape, shortRange, agglomeration(p));
          seg.assign(ids.begin(), ids.end());
        }
        finish(seg, p.minSize, objects);
        return seg;
      };
      // Every threshold of a sweep, handed to `each` (k, segmentation, objects): the
      // agglomeration computes them in one run, highest first.
      auto sweepWith = [&](const SegmentationParams &p, const std::vector<double> &thresholds,
                           const std::function<void(size_t, std::vector<int64_t> &, int64_t)> &each) {
        if (p.method == "mean-agglomeration" && p.block != Box3{0, 0, 0}) {
          blockwise(p, thresholds, [&](size_t k, std::vector<int64_t> &seg) {
            int64_t objects = 0;
            finish(seg, p.minSize, objects);
            each(k, seg, objects);
          });
          return;
        }
        if (p.method == "components") {
          for (size_t k = 0; k < thresholds.size(); ++k) {
            SegmentationParams at = p;
            at.threshold = thresholds[k];
            int64_t objects = 0;
            std::vector<int64_t> seg = segmentWith(at, objects);
            each(k, seg, objects);
          }
          return;
        }
        segmentAffinitiesSweep(ch.affinities.data(), pred.shape, shortRange, agglomeration(p),
                               thresholds, [&](size_t k, const std::vector<uint64_t> &ids) {
                                 std::vector<int64_t> seg(ids.begin(), ids.end());
                                 int64_t objects = 0;
                                 finish(seg, p.minSize, objects);
                                 each(k, seg, objects);
                               });
      };
      const std::string method = o.method.empty() ? "components" : o.method;
      if (method != "components" && method != "mean-agglomeration")
        throw Error(str("--method: expected components or mean-agglomeration, got '", method,
                        "'"));
      const Box3 block = o.block.empty() ? Box3{0, 0, 0} : parseBlock(o.block);
      if (!o.block.empty() && !recorded && method != "mean-agglomeration")
        throw Error("--block applies to --method mean-agglomeration (medrun segment --block)");

      if (!o.tune) {
        // Recorded parameters (chosen on a validation volume) or one given threshold:
        // one segmentation, never a sweep.
        SegmentationParams p;
        std::string from;
        if (!o.params.empty()) {
          p = readParams(o.params);
          from = o.params;
        } else if (!o.run.empty()) {
          const fs::path file = runParamsPath(o.run);
          if (!fs::exists(file))
            throw Error(str(o.run, ": no recorded segmentation parameters (", file.string(),
                            "): choose them on a validation volume first: medrun eval "
                            "VAL_PRED --labels VAL_LABELS --tune --run ",
                            o.run));
          p = readParams(file.string());
          from = file.string();
        }
        if (!from.empty()) {
          if (!o.method.empty() && o.method != p.method)
            throw Error(str("--method ", o.method, ": ", from, " records the method ", p.method));
          if (!o.block.empty())
            throw Error(str("--block: ", from, " records the block (",
                            p.block == Box3{0, 0, 0} ? std::string("the whole volume")
                                                    : shapeText(p.block),
                            ")"));
          if (!o.thresholds.empty() || o.minSize > 0)
            throw Error(str("--thresholds and --min-size: ", from,
                            " records the parameters (chosen on ",
                            p.chosenOn.value("prediction", std::string("a validation volume")),
                            "); the volume scored with them is never re-tuned"));
          if (p.onLogits != onLogits)
            throw Error(str(from, ": the threshold ", numberText(p.threshold), " is on ",
                            p.onLogits ? "logits" : "probabilities", " but ", pred.name(),
                            " holds ", onLogits ? "logits" : "probabilities",
                            " (infer both volumes with the same --activation)"));
        } else if (o.thresholds.size() == 1) {
          p.method = method;
          p.block = block;
          p.threshold = o.thresholds[0];
          p.minSize = o.minSize;
          p.onLogits = onLogits;
        } else {
          throw Error(str(
              pred.name(), ": affinities need segmentation parameters: --params FILE or --run "
              "DIR (recorded by --tune on a validation volume), one --thresholds T, or --tune "
              "to sweep ",
              o.thresholds.empty() ? std::string("BANIS's thresholds")
                                   : str(o.thresholds.size(), " thresholds"),
              " and choose on this volume (a validation volume: the test volume is never "
              "tuned on)"));
        }
        int64_t objects = 0;
        const std::vector<int64_t> seg = segmentWith(p, objects);
        const Scored s = scoreSegmentation(seg, objects, truth);
        std::printf("eval %s against %s: affinities, %s", pred.name().c_str(), against.c_str(),
                    shapeText(pred.shape).c_str());
        if (s.voxels)
          std::printf(", %lld ground-truth objects", (long long)s.voxels->gtObjects);
        if (s.skeleton)
          std::printf(", %lld skeletons", (long long)s.skeleton->skeletons);
        std::printf("; %s\n", from.empty() ? "the threshold given"
                                           : str("the parameters of ", from).c_str());
        printHeader(truth, "threshold");
        printRow(s, numberText(p.threshold), false);
        json params = paramsJson(p);
        params.erase("format");
        params.erase("version");
        result.update({{"mode", "affinities"},
                       {"shape", pred.shape},
                       {"params", params},
                       {"params_from", from.empty() ? json(nullptr) : json(from)},
                       {"objects", objects}});
        if (s.voxels)
          result["gt_objects"] = s.voxels->gtObjects;
        result["scores"] = scoredJson(s);
        if (!o.out.empty())
          writeSegmentation(o.out, seg, pred);
      } else {
        // --tune: the sweep on this (validation) volume; the best is recorded.
        fs::path runFile;
        if (!o.run.empty()) {
          runFile = runParamsPath(o.run);
          if (fs::exists(runFile)) {
            const SegmentationParams old = readParams(runFile.string());
            const std::string was = old.chosenOn.value("prediction", std::string());
            if (was != pred.name())
              throw Error(str(runFile.string(), " records parameters chosen on ",
                              was.empty() ? std::string("another volume") : was,
                              "; tuning on ", pred.name(),
                              " would replace them (the test volume is never tuned on; to "
                              "choose again on a validation volume, remove the file)"));
          }
        }
        SegmentationParams chosen;
        chosen.method = method;
        chosen.block = block;
        chosen.onLogits = onLogits;
        chosen.minSize = o.minSize;
        const bool explicitSweep = !o.thresholds.empty();
        // Mean agglomeration's default: waterz's thresholds as mean affinities, 0.1..0.9.
        const std::vector<double> thresholds =
            explicitSweep                  ? o.thresholds
            : method == "components"       ? defaultSweep(ch.probabilities)
                                           : std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6,
                                                                 0.7, 0.8, 0.9};
        std::fprintf(stderr, "eval %s: affinities (%s), %s; %s%s, %zu thresholds%s%s\n",
                     pred.name().c_str(),
                     C == 3 ? "3 channels" : str(C, " channels, the first 3 short-range").c_str(),
                     shapeText(pred.shape).c_str(), method.c_str(),
                     o.block.empty() ? "" : str(" in blocks of ", shapeText(block)).c_str(),
                     thresholds.size(),
                     explicitSweep                ? ""
                     : method != "components"     ? " (mean affinity 0.1..0.9)"
                     : ch.probabilities           ? " (BANIS's sweep: sigmoid(k), k = -1..11)"
                                                  : " (BANIS's sweep on logits: k = -1..11)",
                     o.minSize > 1 ? str(", objects under ", o.minSize, " voxels removed").c_str()
                                   : "");
        Progress::Options po;
        po.total = static_cast<int64_t>(thresholds.size());
        po.desc = "eval";
        po.mode = o.progress == 1   ? Progress::Mode::Bar
                  : o.progress == 2 ? Progress::Mode::Lines
                                    : Progress::Mode::Auto;
        po.every = 1;
        Progress bar(stderr, po);
        json sweep = json::array();
        std::vector<Scored> rows(thresholds.size());
        auto better = [&](const Scored &a, const Scored &b) {
          return select == "nerl" ? a.skeleton->nerl > b.skeleton->nerl
                                  : a.voxels->voiSum() < b.voxels->voiSum();
        };
        int64_t done = 0;
        sweepWith(chosen, thresholds, [&](size_t k, std::vector<int64_t> &seg, int64_t objects) {
          rows[k] = scoreSegmentation(seg, objects, truth);
          bar.update(++done, {{select == "nerl" ? "nerl" : "voi",
                               select == "nerl" ? rows[k].skeleton->nerl
                                                : rows[k].voxels->voiSum()}});
        });
        size_t best = 0; // the first of equals, in the order given
        for (size_t k = 0; k < rows.size(); ++k) {
          if (better(rows[k], rows[best]))
            best = k;
          json row = {{"threshold", thresholds[k]}, {"objects", rows[k].objects}};
          row.update(scoredJson(rows[k]));
          sweep.push_back(row);
        }
        bar.finish();
        std::printf("eval %s against %s: affinities, %s", pred.name().c_str(), against.c_str(),
                    shapeText(pred.shape).c_str());
        if (rows[0].voxels)
          std::printf(", %lld ground-truth objects", (long long)rows[0].voxels->gtObjects);
        if (rows[0].skeleton)
          std::printf(", %lld skeletons", (long long)rows[0].skeleton->skeletons);
        std::printf("\n");
        printHeader(truth, "threshold");
        for (size_t k = 0; k < rows.size(); ++k)
          printRow(rows[k], numberText(thresholds[k]), k == best);
        const Scored &b = rows[best];
        const std::string rule = select == "nerl" ? "the highest nerl" : "the lowest voi_sum";
        std::printf("best: threshold %.6g (%s):", thresholds[best], rule.c_str());
        if (b.voxels)
          std::printf(" voi_split %.4f, voi_merge %.4f, arand %.4f,", b.voxels->voiSplit,
                      b.voxels->voiMerge, b.voxels->arand);
        if (b.skeleton)
          std::printf(" nerl %.4f,", b.skeleton->nerl);
        std::printf(" %lld object%s\n", (long long)b.objects, b.objects == 1 ? "" : "s");
        json bestJson = {{"threshold", thresholds[best]}, {"objects", b.objects}};
        bestJson.update(scoredJson(b));

        chosen.threshold = thresholds[best];
        chosen.chosenOn = {{"prediction", pred.name()},
                           {"labels", labName.empty() ? json(nullptr) : json(labName)},
                           {"skeletons", o.skeletons.empty() ? json(nullptr) : json(o.skeletons)},
                           {"selection", rule},
                           {"thresholds", thresholds},
                           {"best", bestJson}};
        const json params = paramsJson(chosen);
        if (!o.saveParams.empty())
          writeJson(o.saveParams, params, "the segmentation parameters");
        if (!runFile.empty())
          writeJson(runFile.string(), params, "the segmentation parameters");
        json summary = params;
        summary.erase("format");
        summary.erase("version");
        summary.erase("chosen_on");
        result.update({{"mode", "affinities"},
                       {"shape", pred.shape},
                       {"thresholds_on", ch.probabilities ? "probabilities" : "logits"},
                       {"method", method},
                       {"min_size", o.minSize}});
        if (b.voxels)
          result["gt_objects"] = b.voxels->gtObjects;
        result.update({{"selection", rule}, {"sweep", sweep}, {"best", bestJson},
                       {"params", summary}});
        if (!o.out.empty()) {
          int64_t objects = 0;
          writeSegmentation(o.out, segmentWith(chosen, objects), pred);
        }
      }
    }
  }
  if (!o.json.empty())
    writeJson(o.json, result, "the results");
  return 0;
}

} // namespace medrun
