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
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

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

void writeSegmentation(const std::string &path, const std::vector<int64_t> &ids,
                       const VolumeInfo &like) {
  VolumeData data;
  data.shape = like.shape;
  data.type = VoxelType::I64;
  data.data = ids.data();
  data.spacing = like.spacing;
  data.affine = like.affine;
  writeVolume(path, data);
  std::fprintf(stderr, "wrote %s: %s int64\n", path.c_str(), shapeText(like.shape).c_str());
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
