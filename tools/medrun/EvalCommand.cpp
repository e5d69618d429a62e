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
  std::vector<int64_t> ids(static_cast<size_t>(n));
  if (isIntegerVoxel(info.type)) {
    r.read({0, 0, 0}, info.shape, ids.data());
    return ids;
  }
  std::vector<float> f(static_cast<size_t>(n));
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
  std::vector<float> buf(static_cast<size_t>(n)), sum;
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

int evalCommand(const EvalOptions &o) {
  if (o.labels.empty())
    throw Error("medrun eval needs the ground truth: --labels LABELS (instance ids for "
                "affinities, class indices for segmentations)");
  if (o.mode != "auto" && o.mode != "affinities" && o.mode != "segmentation" &&
      o.mode != "instances")
    throw Error(str("--mode: expected auto, affinities, segmentation or instances, got '",
                    o.mode, "'"));
  if (fs::is_directory(o.prediction) && !isArrayDir(o.prediction)) {
    // A folder of label maps against a folder of references: nnU-Net's summary.json.
    if (o.mode != "auto" || !o.thresholds.empty() || o.minSize > 0 || !o.out.empty())
      throw Error(str(o.prediction, " is a folder of label maps: --mode, --thresholds, "
                                    "--min-size and -o apply to one volume"));
    return evalFolders(o);
  }
  if (!o.datasetJson.empty() || !o.fileEnding.empty())
    throw Error("--dataset-json and --file-ending apply to folders of label maps "
                "(PRED_FOLDER --labels GT_FOLDER)");
  std::unique_ptr<VolumeReader> first = openChannel(o.prediction, 0);
  const VolumeInfo pred = first->info();
  const int64_t C = pred.channels;
  const int64_t n = pred.shape[0] * pred.shape[1] * pred.shape[2];
  std::unique_ptr<VolumeReader> labelReader = openVolume(o.labels);
  const VolumeInfo &lab = labelReader->info();
  if (lab.shape != pred.shape)
    throw Error(str(lab.name(), ": shape ", shapeText(lab.shape), " differs from the "
                    "prediction's ", shapeText(pred.shape), " (", pred.name(),
                    "): the labels must cover the predicted voxels"));
  const std::array<double, 3> unit{1, 1, 1};
  if (lab.spacing != pred.spacing && lab.spacing != unit && pred.spacing != unit)
    throw Error(str(lab.name(), ": spacing ", lab.spacing[0], " x ", lab.spacing[1], " x ",
                    lab.spacing[2], " differs from the prediction's ", pred.spacing[0], " x ",
                    pred.spacing[1], " x ", pred.spacing[2], " (", pred.name(), ")"));
  const std::vector<int64_t> gt = readLabels(*labelReader);

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

  const bool instanceMode = mode == "instances" || mode == "affinities" || mode == "auto";
  if (instanceMode) {
    bool any = false;
    for (int64_t id : gt)
      any = any || id > 0;
    if (!any && mode != "auto")
      throw Error(str(lab.name(), ": the labels hold no object (every id is 0 or negative, "
                      "background): nothing to score"));
  }

  json result = {{"prediction", pred.name()}, {"labels", lab.name()}};
  if (mode == "instances" && !o.thresholds.empty())
    throw Error(str(predText, " is an instance segmentation: --thresholds applies to "
                    "affinities"));
  if (mode == "instances") {
    std::vector<int64_t> seg(static_cast<size_t>(n));
    first->read({0, 0, 0}, pred.shape, seg.data());
    const int64_t objects = removeSmallObjects(seg, o.minSize);
    const InstanceScores s = compareInstances(seg.data(), gt.data(), n);
    std::printf("eval %s against %s: instances, %s, %lld ground-truth objects\n",
                pred.name().c_str(), lab.name().c_str(), shapeText(pred.shape).c_str(),
                (long long)s.gtObjects);
    std::printf("%8s %10s %10s %10s %8s\n", "objects", "voi_split", "voi_merge", "voi_sum",
                "arand");
    std::printf("%8lld %10.4f %10.4f %10.4f %8.4f\n", (long long)objects, s.voiSplit,
                s.voiMerge, s.voiSum(), s.arand);
    result.update({{"mode", "instances"}, {"shape", pred.shape}, {"min_size", o.minSize},
                   {"gt_objects", s.gtObjects}, {"objects", objects}});
    result["scores"] = scoresJson(s);
    if (!o.out.empty())
      writeSegmentation(o.out, seg, pred);
  } else {
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
    if (mode == "affinities") {
      bool any = false;
      for (int64_t id : gt)
        any = any || id > 0;
      if (!any)
        throw Error(str(lab.name(), ": the labels hold no object (every id is 0 or negative, "
                        "background): nothing to score"));
    }
    if (mode == "segmentation" && (!o.thresholds.empty() || o.minSize > 0))
      throw Error(str(predText, " is scored as a segmentation (class scores): --thresholds and "
                      "--min-size apply to affinities and instances"));
    if (mode == "segmentation") {
      std::vector<ClassScore> dice;
      try {
        dice = diceScores(ch.argmax->classes().data(), gt.data(), n, C);
      } catch (const Error &e) {
        throw Error(str(lab.name(), ": ", e.what()));
      }
      std::printf("eval %s against %s: segmentation, %lld classes, %s\n", pred.name().c_str(),
                  lab.name().c_str(), (long long)C, shapeText(pred.shape).c_str());
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
                     "either: every foreground Dice is nan\n", lab.name().c_str());
      result.update({{"mode", "segmentation"}, {"shape", pred.shape}, {"classes", C},
                     {"per_class", classes}, {"foreground_mean_dice", mean}});
      if (!o.out.empty())
        writeSegmentation(o.out, ch.argmax->classes(), pred);
    } else {
      const bool explicitSweep = !o.thresholds.empty();
      const std::vector<double> thresholds =
          explicitSweep ? o.thresholds : defaultSweep(ch.probabilities);
      std::fprintf(stderr, "eval %s: affinities (%s), %s; %zu thresholds%s%s\n",
                   pred.name().c_str(),
                   C == 3 ? "3 channels" : str(C, " channels, the first 3 short-range").c_str(),
                   shapeText(pred.shape).c_str(),
                   thresholds.size(),
                   explicitSweep ? "" : ch.probabilities
                                         ? " (BANIS's sweep: sigmoid(k), k = -1..11)"
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
      std::vector<std::pair<int64_t, InstanceScores>> rows;
      size_t best = 0;
      std::vector<int64_t> bestSeg;
      for (size_t k = 0; k < thresholds.size(); ++k) {
        int64_t objects = 0;
        std::vector<int64_t> seg = affinityInstances(ch.affinities.data(), pred.shape,
                                                     static_cast<float>(thresholds[k]), &objects);
        if (o.minSize > 1)
          objects = removeSmallObjects(seg, o.minSize);
        const InstanceScores s = compareInstances(seg.data(), gt.data(), n);
        rows.emplace_back(objects, s);
        // The best: the lowest VOI sum; the first of equals.
        if (k == 0 || s.voiSum() < rows[best].second.voiSum()) {
          best = k;
          if (!o.out.empty())
            bestSeg = std::move(seg);
        }
        json row = {{"threshold", thresholds[k]}, {"objects", objects}};
        row.update(scoresJson(s));
        sweep.push_back(row);
        bar.update(static_cast<int64_t>(k) + 1, {{"voi", s.voiSum()}});
      }
      bar.finish();
      std::printf("eval %s against %s: affinities, %s, %lld ground-truth objects\n",
                  pred.name().c_str(), lab.name().c_str(), shapeText(pred.shape).c_str(),
                  (long long)rows[0].second.gtObjects);
      std::printf("%10s %8s %10s %10s %10s %8s\n", "threshold", "objects", "voi_split",
                  "voi_merge", "voi_sum", "arand");
      for (size_t k = 0; k < rows.size(); ++k) {
        const InstanceScores &s = rows[k].second;
        std::printf("%10.6g %8lld %10.4f %10.4f %10.4f %8.4f%s\n", thresholds[k],
                    (long long)rows[k].first, s.voiSplit, s.voiMerge, s.voiSum(), s.arand,
                    k == best ? "  best" : "");
      }
      const InstanceScores &b = rows[best].second;
      std::printf("best: threshold %.6g (the lowest voi_sum): voi_split %.4f, voi_merge %.4f, "
                  "arand %.4f, %lld object%s\n",
                  thresholds[best], b.voiSplit, b.voiMerge, b.arand, (long long)rows[best].first,
                  rows[best].first == 1 ? "" : "s");
      json bestJson = {{"threshold", thresholds[best]}, {"objects", rows[best].first}};
      bestJson.update(scoresJson(b));
      result.update({{"mode", "affinities"},
                     {"shape", pred.shape},
                     {"thresholds_on", ch.probabilities ? "probabilities" : "logits"},
                     {"min_size", o.minSize},
                     {"gt_objects", b.gtObjects},
                     {"selection", "lowest voi_sum"},
                     {"sweep", sweep},
                     {"best", bestJson}});
      if (!o.out.empty())
        writeSegmentation(o.out, bestSeg, pred);
    }
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json, std::ios::trunc);
    f << result.dump(2) << "\n";
    if (!f)
      throw Error(str(o.json, ": cannot write the results"));
    std::fprintf(stderr, "wrote %s\n", o.json.c_str());
  }
  return 0;
}

} // namespace medrun
