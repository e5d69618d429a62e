//===- Metrics.cpp - VOI and adapted Rand error (CREMI), Dice (nnU-Net) --------------===//
//
// Both instance metrics come from one contingency table n[g][p]: the voxels with
// ground-truth object g (0 = background) and predicted id p (0 = background), built in one
// pass over sparse pairs. Sums of squared counts are exact in 64-bit integers.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Metrics.h"

#include <cmath>
#include <limits>
#include <unordered_map>

namespace medrun {

namespace {

/// Dense ids 1, 2, ... for the distinct values of a labelling in order of appearance; the
/// last lookup is remembered, since neighbouring voxels mostly share an id.
class DenseIds {
public:
  uint64_t operator()(int64_t id) {
    if (id == last_)
      return lastDense_;
    last_ = id;
    return lastDense_ = ids_.emplace(id, ids_.size() + 1).first->second;
  }

private:
  std::unordered_map<int64_t, uint64_t> ids_;
  int64_t last_ = std::numeric_limits<int64_t>::min();
  uint64_t lastDense_ = 0;
};

} // namespace

InstanceScores compareInstances(const int64_t *pred, const int64_t *gt, int64_t n) {
  DenseIds gtIds, predIds;
  std::unordered_map<uint64_t, uint64_t> table; // (g << 32 | p) -> voxels
  uint64_t lastKey = ~uint64_t(0), *lastCount = nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t g = gt[i] <= 0 ? 0 : gtIds(gt[i]);
    const uint64_t p = pred[i] == 0 ? 0 : predIds(pred[i]);
    const uint64_t key = g << 32 | p;
    if (key != lastKey) {
      lastKey = key;
      lastCount = &table[key];
    }
    ++*lastCount;
  }
  std::unordered_map<uint64_t, uint64_t> rows, cols; // over ground-truth objects only
  uint64_t voxels = 0;
  for (const auto &[key, count] : table)
    if (key >> 32) {
      rows[key >> 32] += count;
      cols[key & 0xffffffffu] += count;
      voxels += count;
    }
  if (voxels == 0)
    throw Error("the ground truth holds no object (every id is 0 or negative, background)");

  InstanceScores s;
  s.voxels = static_cast<int64_t>(voxels);
  s.gtObjects = static_cast<int64_t>(rows.size());
  s.predObjects = static_cast<int64_t>(cols.size()) - static_cast<int64_t>(cols.count(0));
  // VOI: H(pred|gt) = -sum p_gp log2(p_gp / p_g), H(gt|pred) = -sum p_gp log2(p_gp / p_p).
  // Adapted Rand: sum of squares over the rows (gt), the columns p > 0 and the cells p > 0.
  const double N = static_cast<double>(voxels);
  double split = 0, merge = 0;
  uint64_t cells2 = 0, rows2 = 0, cols2 = 0, background = 0;
  for (const auto &[key, count] : table) {
    const uint64_t g = key >> 32, p = key & 0xffffffffu;
    if (!g)
      continue;
    const double c = static_cast<double>(count);
    split -= c / N * std::log2(c / static_cast<double>(rows[g]));
    merge -= c / N * std::log2(c / static_cast<double>(cols[p]));
    if (p)
      cells2 += count * count;
    else
      background += count;
  }
  for (const auto &[g, count] : rows)
    rows2 += count * count;
  for (const auto &[p, count] : cols)
    if (p)
      cols2 += count * count;
  s.voiSplit = split + 0.0; // no -0
  s.voiMerge = merge + 0.0;
  // SNEMI3D's treatment of predicted background inside objects: sum(c) / n added to both.
  const double extra = static_cast<double>(background) / static_cast<double>(n);
  const double sumAB = static_cast<double>(cells2) + extra;
  s.randPrecision = sumAB / (static_cast<double>(cols2) + extra);
  s.randRecall = sumAB / static_cast<double>(rows2);
  const double pr = s.randPrecision + s.randRecall;
  s.arand = pr > 0 ? 1 - 2 * s.randPrecision * s.randRecall / pr : 1;
  return s;
}

void ArgmaxClasses::add(const float *scores) {
  const int64_t c = seen_++, n = static_cast<int64_t>(best_.size());
  for (int64_t i = 0; i < n; ++i)
    if (c == 0 || scores[i] > best_[i]) {
      best_[i] = scores[i];
      classes_[i] = c;
    }
}

std::vector<ClassScore> diceScores(const int64_t *pred, const int64_t *labels, int64_t n,
                                   int64_t classes) {
  std::vector<ClassScore> out(static_cast<size_t>(classes));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = labels[i], p = pred[i];
    if (l < 0 || l >= classes)
      throw Error(str("label value ", l, " at voxel ", i, ": expected a class index in 0..",
                      classes - 1, " (the prediction has ", classes, " classes)"));
    if (p < 0 || p >= classes)
      throw Error(str("predicted class ", p, " at voxel ", i, ": expected 0..", classes - 1));
    if (l == p) {
      ++out[l].tp;
    } else {
      ++out[p].fp;
      ++out[l].fn;
    }
  }
  for (ClassScore &c : out) {
    const double tp = static_cast<double>(c.tp), fp = static_cast<double>(c.fp),
                 fn = static_cast<double>(c.fn);
    const bool empty = c.tp + c.fp + c.fn == 0;
    c.dice = empty ? std::nan("") : 2 * tp / (2 * tp + fp + fn);
    c.iou = empty ? std::nan("") : tp / (tp + fp + fn);
  }
  return out;
}

} // namespace medrun
