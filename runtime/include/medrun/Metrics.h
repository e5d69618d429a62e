//===- Metrics.h - instances from affinities; VOI, adapted Rand error, Dice -----------===//
//
// What `medrun eval` computes, on whole volumes in memory (C order, z, y, x; x fastest):
//
//   - affinityInstances: BANIS's segmentation of predicted affinities, connected components
//     of the voxels joined by short-range affinities above a threshold;
//   - removeSmallObjects: objects below a size become background;
//   - compareInstances: CREMI's variation of information (split, merge) and adapted Rand
//     error of a segmentation against ground-truth ids;
//   - diceScores: nnU-Net's per-class Dice of a class map against class labels.
//
// Ground-truth ids <= 0 are background: 0, and negative ids (CREMI's uint64(-1), "no
// label", read as -1) are left out as CREMI leaves out its background.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_METRICS_H
#define MEDRUN_METRICS_H

#include "medrun/Volume.h"

#include <cstdint>
#include <vector>

namespace medrun {

/// BANIS's instances (inference.py, connected components of thresholded affinities):
/// `aff` holds (at least) the three short-range channels, [3][D][H][W], in the forward
/// convention of the training targets: aff[a] at voxel v is the affinity of v and v + e_a
/// (a = z, y, x). Voxels joined by an affinity > `threshold` are one object (6-connected);
/// a voxel joined to none is background 0. Objects are numbered 1..N in the order of their
/// first voxel in C order, as BANIS's flood fill numbers them, so the labelling depends
/// only on the affinities. (BANIS also starts an object at a voxel whose only affinity
/// above the threshold points out of the volume, a lone voxel; here such an edge joins
/// nothing.) Returns the labels, one per voxel; `objects` receives N.
std::vector<int64_t> affinityInstances(const float *aff, const Box3 &shape, float threshold,
                                       int64_t *objects = nullptr);

/// Sets the objects (ids > 0) of fewer than `minSize` voxels to 0 and renumbers the others
/// 1..N, keeping their order (the order of their first voxel). Returns N.
int64_t removeSmallObjects(std::vector<int64_t> &labels, int64_t minSize);

/// Agreement of a segmentation with ground truth, CREMI's definitions
/// (cremi/evaluation/voi.py, rand.py). Voxels of ground-truth background are left out of
/// the VOI; predicted id 0 is an object like any other (CREMI ignores nothing in the
/// prediction).
struct InstanceScores {
  /// H(pred | gt) and H(gt | pred) in bits (log2) over the voxels of ground-truth objects:
  /// split grows when an object is cut into pieces, merge when objects are joined.
  double voiSplit = 0, voiMerge = 0;
  /// 1 - F-score of the Rand precision and recall (SNEMI3D's adapted Rand error, the
  /// ground-truth background row left out; predicted background inside objects counted
  /// as CREMI counts it, each voxel its own object weighted 1/n). 0 is perfect.
  double arand = 0, randPrecision = 1, randRecall = 1;
  int64_t gtObjects = 0;   ///< distinct ground-truth ids > 0
  int64_t predObjects = 0; ///< distinct predicted ids > 0 on those voxels
  int64_t voxels = 0;      ///< voxels of ground-truth objects (the VOI's population)
  double voiSum() const { return voiSplit + voiMerge; }
};

/// Compares `pred` with `gt` (both n ids). Throws Error if `gt` has no object.
InstanceScores compareInstances(const int64_t *pred, const int64_t *gt, int64_t n);

/// The class of each voxel: the channel with the largest score, the first on ties (as
/// numpy's argmax). Fed one channel at a time, in order, so one channel is in memory.
class ArgmaxClasses {
public:
  explicit ArgmaxClasses(int64_t n) : best_(static_cast<size_t>(n)), classes_(best_.size(), 0) {}
  /// The scores of the next channel (n of them).
  void add(const float *scores);
  const std::vector<int64_t> &classes() const { return classes_; }

private:
  std::vector<float> best_;
  std::vector<int64_t> classes_;
  int64_t seen_ = 0;
};

/// One class's overlap (nnU-Net's evaluate_predictions.py): Dice = 2 TP / (2 TP + FP + FN),
/// NaN where the class is in neither the prediction nor the labels.
struct ClassScore {
  int64_t tp = 0, fp = 0, fn = 0;
  double dice = 0;
  double iou = 0; ///< TP / (TP + FP + FN), NaN as Dice is
};

/// Per-class scores of the class map `pred` against `labels` (n class indices each, in
/// [0, classes); throws Error for a label outside).
std::vector<ClassScore> diceScores(const int64_t *pred, const int64_t *labels, int64_t n,
                                   int64_t classes);

} // namespace medrun

#endif // MEDRUN_METRICS_H
