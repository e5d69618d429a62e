//===- MetricsTest.cpp - instances from affinities, VOI, adapted Rand error, Dice ----===//
//
// Hand-computed cases: identical segmentations score 0; one object cut in halves is one
// bit of split, two joined one bit of merge, each an adapted Rand error of 1/3; the
// ground-truth background is left out; predicted background inside objects counts as
// SNEMI3D counts it. Connected components equal a union-find written here on random
// affinities, numbered by first voxel. The Python cross-check of the CREMI formulas on
// random volumes is test/medrun/eval.test.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Metrics.h"

#include "gtest/gtest.h"

#include <cmath>
#include <map>
#include <numeric>
#include <random>

using namespace medrun;

namespace {

using Ids = std::vector<int64_t>;

InstanceScores compare(const Ids &pred, const Ids &gt) {
  EXPECT_EQ(pred.size(), gt.size());
  return compareInstances(pred.data(), gt.data(), static_cast<int64_t>(gt.size()));
}

TEST(Metrics, IdenticalSegmentationsScoreZero) {
  Ids gt = {1, 1, 2, 2, 2, 0, 3, 7};
  InstanceScores s = compare(gt, gt);
  EXPECT_EQ(s.voiSplit, 0);
  EXPECT_EQ(s.voiMerge, 0);
  EXPECT_EQ(s.arand, 0);
  EXPECT_EQ(s.gtObjects, 4);
  EXPECT_EQ(s.voxels, 7);
  // Renaming the objects changes nothing.
  s = compare({5, 5, 9, 9, 9, 4, 1, 2}, gt);
  EXPECT_EQ(s.voiSum(), 0);
  EXPECT_EQ(s.arand, 0);
}

TEST(Metrics, ASplitIsOneBitOfSplit) {
  // One object of 8 voxels cut into halves: H(pred|gt) = 1 bit, H(gt|pred) = 0.
  // Rand: sum a^2 = 64, sum b^2 = 32, sum n^2 = 32 -> precision 1, recall 1/2.
  InstanceScores s = compare({1, 1, 1, 1, 2, 2, 2, 2}, Ids(8, 4));
  EXPECT_DOUBLE_EQ(s.voiSplit, 1.0);
  EXPECT_DOUBLE_EQ(s.voiMerge, 0.0);
  EXPECT_DOUBLE_EQ(s.randPrecision, 1.0);
  EXPECT_DOUBLE_EQ(s.randRecall, 0.5);
  EXPECT_DOUBLE_EQ(s.arand, 1.0 / 3);
  // Cut into four quarters: 2 bits.
  EXPECT_DOUBLE_EQ(compare({1, 1, 2, 2, 3, 3, 4, 4}, Ids(8, 4)).voiSplit, 2.0);
}

TEST(Metrics, AMergeIsOneBitOfMerge) {
  InstanceScores s = compare(Ids(8, 3), {1, 1, 1, 1, 2, 2, 2, 2});
  EXPECT_DOUBLE_EQ(s.voiSplit, 0.0);
  EXPECT_DOUBLE_EQ(s.voiMerge, 1.0);
  EXPECT_DOUBLE_EQ(s.randPrecision, 0.5);
  EXPECT_DOUBLE_EQ(s.randRecall, 1.0);
  EXPECT_DOUBLE_EQ(s.arand, 1.0 / 3);
  EXPECT_EQ(s.gtObjects, 2);
  EXPECT_EQ(s.predObjects, 1);
}

TEST(Metrics, UnevenSplitEntropy) {
  // 1 voxel of 4 split off: H = -(1/4 log2 1/4 + 3/4 log2 3/4).
  InstanceScores s = compare({1, 2, 2, 2}, Ids(4, 1));
  EXPECT_NEAR(s.voiSplit, 0.25 * 2 + 0.75 * std::log2(4.0 / 3), 1e-12);
  EXPECT_EQ(s.voiMerge, 0);
}

TEST(Metrics, GroundTruthBackgroundIsLeftOut) {
  // Whatever the prediction does on ground-truth 0 (and negative, "no label") voxels.
  Ids gt = {1, 1, 0, 0, -1, 2, 2};
  InstanceScores a = compare({1, 1, 5, 6, 7, 2, 2}, gt);
  InstanceScores b = compare({1, 1, 1, 2, 2, 2, 2}, gt);
  EXPECT_EQ(a.voiSum(), 0);
  EXPECT_EQ(b.voiSum(), 0);
  EXPECT_EQ(a.arand, 0);
  EXPECT_EQ(b.arand, 0);
  EXPECT_EQ(a.voxels, 4);
}

TEST(Metrics, PredictedBackgroundInsideObjects) {
  // CREMI: predicted 0 is a segment for the VOI; the Rand sums add sum(c)/n to the
  // columns and the cells (c: predicted 0 inside objects, n: all voxels).
  InstanceScores s = compare({1, 1, 0, 0}, Ids(4, 1));
  EXPECT_DOUBLE_EQ(s.voiSplit, 1.0);
  EXPECT_DOUBLE_EQ(s.voiMerge, 0.0);
  const double ab = 4 + 2.0 / 4, p = ab / (4 + 2.0 / 4), r = ab / 16;
  EXPECT_DOUBLE_EQ(s.randPrecision, p);
  EXPECT_DOUBLE_EQ(s.randRecall, r);
  EXPECT_DOUBLE_EQ(s.arand, 1 - 2 * p * r / (p + r));
  EXPECT_EQ(s.predObjects, 1);
  // n counts the ground-truth background too.
  InstanceScores t = compare({1, 1, 0, 0, 0, 0}, {1, 1, 1, 1, 0, 0});
  const double ab2 = 4 + 2.0 / 6;
  EXPECT_DOUBLE_EQ(t.randRecall, ab2 / 16);
}

TEST(Metrics, NoGroundTruthObjectIsAnError) {
  EXPECT_THROW(compare({1, 2, 3}, {0, 0, -1}), Error);
}

/// Instances by union-find over all edges above the threshold, renumbered by first voxel;
/// voxels on no edge are 0. Written independently of the flood fill.
Ids unionFind(const std::vector<float> &aff, const Box3 &s, float t) {
  const int64_t n = s[0] * s[1] * s[2];
  std::vector<int64_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> edge(n, false);
  auto find = [&](int64_t v) {
    while (parent[v] != v)
      v = parent[v] = parent[parent[v]];
    return v;
  };
  const int64_t st[3] = {s[1] * s[2], s[2], 1};
  for (int64_t z = 0; z < s[0]; ++z)
    for (int64_t y = 0; y < s[1]; ++y)
      for (int64_t x = 0; x < s[2]; ++x) {
        const int64_t v = (z * s[1] + y) * s[2] + x, c[3] = {z, y, x};
        for (int a = 0; a < 3; ++a)
          if (c[a] + 1 < s[a] && aff[a * n + v] > t) {
            edge[v] = edge[v + st[a]] = true;
            parent[find(v)] = find(v + st[a]);
          }
      }
  Ids out(n, 0);
  std::map<int64_t, int64_t> ids;
  for (int64_t v = 0; v < n; ++v)
    if (edge[v])
      out[v] = ids.emplace(find(v), ids.size() + 1).first->second;
  return out;
}

TEST(Instances, HandCase) {
  // 1x2x4: x affinities 1 0 1 [1 out of the volume]; y affinity of (0, 0) -> (1, 0).
  const Box3 s = {1, 2, 4};
  std::vector<float> aff(3 * 8, 0.f);
  float *ax = aff.data() + 2 * 8, *ay = aff.data() + 8;
  ax[0] = 0.9f, ax[2] = 0.9f, ax[3] = 0.9f; // (0,3)'s edge leaves the volume: nothing
  ay[0] = 0.6f;                             // (0,0) - (1,0)
  ax[5] = 0.5f;                             // exactly the threshold: not joined
  int64_t objects = 0;
  Ids got = affinityInstances(aff.data(), s, 0.5f, &objects);
  EXPECT_EQ(got, (Ids{1, 1, 2, 2, 1, 0, 0, 0}));
  EXPECT_EQ(objects, 2);
  // Lower the threshold: (1,1)-(1,2) joins.
  got = affinityInstances(aff.data(), s, 0.4f, &objects);
  EXPECT_EQ(got, (Ids{1, 1, 2, 2, 1, 3, 3, 0}));
}

TEST(Instances, FillFollowsEdgesBackward) {
  // A ring around (1, 1) in a 3x3 plane, started at (0, 0): (0, 1) is reached only from
  // (0, 2), through the edge stored at (0, 1), and (0, 2) only from (1, 2) the same way.
  const Box3 s = {1, 3, 3};
  std::vector<float> aff(27, 0.f);
  float *ay = aff.data() + 9, *ax = aff.data() + 18;
  ay[0] = ay[3] = 1; // column x = 0 down
  ax[6] = ax[7] = 1; // bottom row across
  ay[5] = ay[2] = 1; // column x = 2 up to (0, 2)
  ax[1] = 1;         // (0, 1) - (0, 2)
  Ids got = affinityInstances(aff.data(), s, 0.5f);
  EXPECT_EQ(got, (Ids{1, 1, 1, 1, 0, 1, 1, 1, 1}));
}

TEST(Instances, EqualsUnionFindOnRandomAffinities) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  for (Box3 s : {Box3{5, 7, 9}, Box3{1, 1, 13}, Box3{9, 4, 3}, Box3{2, 2, 2}})
    for (float t : {0.3f, 0.6f, 0.9f}) {
      const int64_t n = s[0] * s[1] * s[2];
      std::vector<float> aff(3 * n);
      for (float &v : aff)
        v = u(rng);
      int64_t objects = 0;
      Ids got = affinityInstances(aff.data(), s, t, &objects);
      Ids want = unionFind(aff, s, t);
      EXPECT_EQ(got, want) << s[0] << "x" << s[1] << "x" << s[2] << " at " << t;
      EXPECT_EQ(objects, *std::max_element(want.begin(), want.end()));
    }
}

TEST(Instances, RemoveSmallObjects) {
  Ids l = {3, 3, 1, 2, 2, 2, 0, 1, 4};
  // Sizes: 3 -> 2, 1 -> 2, 2 -> 3, 4 -> 1. Keep >= 2, renumbered by first appearance.
  EXPECT_EQ(removeSmallObjects(l, 2), 3);
  EXPECT_EQ(l, (Ids{1, 1, 2, 3, 3, 3, 0, 2, 0}));
  EXPECT_EQ(removeSmallObjects(l, 3), 1);
  EXPECT_EQ(l, (Ids{0, 0, 0, 1, 1, 1, 0, 0, 0}));
  // Sparse ids, as read from a file.
  Ids big = {int64_t(1) << 40, 5, int64_t(1) << 40};
  EXPECT_EQ(removeSmallObjects(big, 0), 2);
  EXPECT_EQ(big, (Ids{1, 2, 1}));
}

TEST(Dice, PerClassWithEmptyClassNaN) {
  // Classes 0..3; class 3 in neither: NaN (nnU-Net).
  Ids labels = {0, 0, 1, 1, 1, 2, 2, 0};
  Ids pred = {0, 1, 1, 1, 2, 2, 2, 0};
  std::vector<ClassScore> d = diceScores(pred.data(), labels.data(), 8, 4);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].tp, 2);
  EXPECT_EQ(d[0].fn, 1);
  EXPECT_DOUBLE_EQ(d[0].dice, 4.0 / 5);
  EXPECT_DOUBLE_EQ(d[1].dice, 4.0 / 6); // tp 2, fp 1, fn 1
  EXPECT_DOUBLE_EQ(d[1].iou, 2.0 / 4);
  EXPECT_DOUBLE_EQ(d[2].dice, 4.0 / 5); // tp 2, fp 1
  EXPECT_TRUE(std::isnan(d[3].dice));
  EXPECT_TRUE(std::isnan(d[3].iou));
  Ids bad = {0, 0, 5, 0, 0, 0, 0, 0};
  EXPECT_THROW(diceScores(pred.data(), bad.data(), 8, 4), Error);
}

TEST(Dice, ArgmaxTakesTheFirstOnTies) {
  ArgmaxClasses am(4);
  const float c0[] = {0.5f, 0.2f, 0.1f, -1.f}, c1[] = {0.5f, 0.3f, 0.0f, -2.f},
              c2[] = {0.1f, 0.3f, 0.9f, -1.f};
  am.add(c0);
  am.add(c1);
  am.add(c2);
  EXPECT_EQ(am.classes(), (Ids{0, 1, 2, 0}));
}

} // namespace
