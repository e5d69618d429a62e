//===- SegmentationTest.cpp - watershed, mean agglomeration, mutex watershed ---------===//
//
// Hand-made cases with known answers: two cubes split by a low-affinity plane (every
// method, whole and block-wise); a chain of regions merged in a known order, where the
// count-weighted mean, the max and the mean of means give different answers; a repulsive
// edge that keeps two regions apart in the mutex watershed. Each known answer is shown to
// reject a wrong variant. Labels do not depend on the thread count; the sweep equals
// separate runs. The NumPy/SciPy cross-check on random inputs is test/medrun/segment.test.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Parallel.h"
#include "medrun/Segmentation.h"

#include "ExpectError.h"
#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace medrun;

namespace {

using Labels = std::vector<uint64_t>;

/// Affinities of `shape` for `offsets`, every edge `inside`, the edges between voxels on
/// different sides of x = cut (x < cut vs x >= cut) `across`.
std::vector<float> twoCubes(const Box3 &shape, const Offsets &offsets, int64_t cut, float inside,
                            float across) {
  const int64_t n = shape[0] * shape[1] * shape[2];
  std::vector<float> affs(offsets.size() * n);
  for (size_t k = 0; k < offsets.size(); ++k)
    for (int64_t v = 0; v < n; ++v) {
      const int64_t x = v % shape[2], to = x + offsets[k][2];
      affs[k * n + v] = (x < cut) != (to < cut) ? across : inside;
    }
  return affs;
}

/// The known answer: 1 left of the cut, 2 right of it.
bool isTwoCubes(const Labels &l, const Box3 &shape, int64_t cut) {
  for (size_t v = 0; v < l.size(); ++v)
    if (l[v] != (static_cast<int64_t>(v % shape[2]) < cut ? 1u : 2u))
      return false;
  return true;
}

Labels blockwise(const std::vector<float> &affs, const Box3 &shape, const Box3 &block,
                 const Offsets &offsets, const SegmentParams &p) {
  const int64_t n = shape[0] * shape[1] * shape[2];
  AffinityReader read = [&](const Box3 &lo, const Box3 &size, float *dst) {
    for (size_t k = 0; k < offsets.size(); ++k)
      for (int64_t z = 0; z < size[0]; ++z)
        for (int64_t y = 0; y < size[1]; ++y)
          for (int64_t x = 0; x < size[2]; ++x)
            *dst++ = affs[k * n + ((lo[0] + z) * shape[1] + lo[1] + y) * shape[2] + lo[2] + x];
  };
  MemoryLabels raw(shape);
  BlockwiseResult r = segmentBlockwise(read, shape, block, offsets, p, raw);
  Labels out(raw.labels().size());
  for (size_t v = 0; v < out.size(); ++v)
    out[v] = r.maps[0][raw.labels()[v]];
  return out;
}

const Offsets kShort = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};

TEST(Segmentation, TwoCubesSplitByALowAffinityPlane) {
  const Box3 shape{4, 5, 8};
  const Offsets offsets = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0, 0, 3}, {2, 0, 0}};
  const auto affs = twoCubes(shape, offsets, 4, 0.95f, 0.05f);
  for (SegmentMethod m :
       {SegmentMethod::Watershed, SegmentMethod::MeanAgglomeration, SegmentMethod::Mutex}) {
    SegmentParams p;
    p.method = m;
    EXPECT_TRUE(isTwoCubes(segmentAffinities(affs.data(), shape, offsets, p), shape, 4))
        << segmentMethodName(m);
    // Blocks cutting through both cubes are stitched back.
    EXPECT_TRUE(isTwoCubes(blockwise(affs, shape, {3, 2, 4}, offsets, p), shape, 4))
        << segmentMethodName(m) << " block-wise";
    // A block holding the plane: the seeds keep the watershed exact; the mutex watershed
    // takes the block's weak attractive edge across the plane before the repulsive edges
    // that leave the block (the bound Segmentation.h states), so it is not checked here.
    if (m != SegmentMethod::Mutex)
      EXPECT_TRUE(isTwoCubes(blockwise(affs, shape, {3, 2, 3}, offsets, p), shape, 4))
          << segmentMethodName(m) << " block-wise, the plane inside a block";
  }
  // Below the plane's mean affinity, the agglomeration joins the cubes.
  SegmentParams p;
  p.threshold = 0.04;
  Labels one = segmentAffinities(affs.data(), shape, offsets, p);
  EXPECT_EQ(*std::max_element(one.begin(), one.end()), 1u);
  EXPECT_FALSE(isTwoCubes(one, shape, 4));
  // Negative control: without the plane the known answer is rejected.
  const auto flat = twoCubes(shape, offsets, 4, 0.95f, 0.95f);
  for (SegmentMethod m : {SegmentMethod::Watershed, SegmentMethod::Mutex}) {
    p.method = m;
    EXPECT_FALSE(isTwoCubes(segmentAffinities(flat.data(), shape, offsets, p), shape, 4));
  }
}

TEST(Segmentation, WatershedSeedsAndBackground) {
  // 1 x 1 x 7: a strong pair (seed A), a weak link, a strong pair (seed B), a voxel with no
  // edge above `low`. The weak middle voxel goes to the seed of its stronger edge.
  const Box3 shape{1, 1, 7};
  std::vector<float> affs(3 * 7, 0.0f);
  float *x = affs.data() + 2 * 7;
  const float chain[6] = {0.95f, 0.5f, 0.6f, 0.95f, 0.00005f, 0.00005f};
  std::copy(chain, chain + 6, x);
  SegmentParams p;
  p.method = SegmentMethod::Watershed;
  Labels l = segmentAffinities(affs.data(), shape, kShort, p);
  EXPECT_EQ(l, (Labels{1, 1, 2, 2, 2, 0, 0}));
  // A minimum seed size of 3 leaves no seed: everything above `low` floods together.
  p.minSeedSize = 3;
  EXPECT_EQ(segmentAffinities(affs.data(), shape, kShort, p), (Labels{1, 1, 1, 1, 1, 0, 0}));
}

TEST(Segmentation, ChainMergedInAKnownOrder) {
  // Fragments 1 - 2 - 3 - 4 in a chain, and 1 - 3. Means: (1,2) 0.9; (2,3) {0.95, 0.45} =
  // 0.7; (3,4) 0.8; (1,3) {0.5, 0.5, 0.5} = 0.5. Merge order: (1,2) at 0.9, (3,4) at 0.8,
  // then {1,2}-{3,4}: (0.95 + 0.45 + 1.5) / 5 = 0.58.
  const std::vector<RegionEdge> edges = {
      {1, 2, 0.9, 1}, {2, 3, 1.4, 2}, {3, 4, 0.8, 1}, {1, 3, 1.5, 3}};
  const std::vector<double> ts = {0.85, 0.75, 0.59, 0.55};
  const auto maps = agglomerateMean(4, edges, ts);
  const std::vector<Labels> want = {
      {0, 1, 1, 2, 3}, {0, 1, 1, 2, 2}, {0, 1, 1, 2, 2}, {0, 1, 1, 1, 1}};
  EXPECT_EQ(maps, want);
  // Wrong variants the known answer rejects: the max of each boundary (2-3 first at 0.95)
  // and the unweighted mean of the pair means ({1,2}-{3,4} at (0.7 + 0.5) / 2 = 0.6, above
  // 0.59, where the count-weighted 0.58 stays below).
  std::vector<RegionEdge> maxEdges = {
      {1, 2, 0.9, 1}, {2, 3, 0.95, 1}, {3, 4, 0.8, 1}, {1, 3, 0.5, 1}};
  EXPECT_NE(agglomerateMean(4, maxEdges, ts), want);
  std::vector<RegionEdge> meanOfMeans = {
      {1, 2, 0.9, 1}, {2, 3, 0.7, 1}, {3, 4, 0.8, 1}, {1, 3, 0.5, 1}};
  const auto wrong = agglomerateMean(4, meanOfMeans, ts);
  EXPECT_NE(wrong, want);
}

TEST(Segmentation, ARepulsiveEdgeKeepsTwoRegionsApart) {
  // a - b - c along x, attractive 0.6 each; a long-range (0, 0, 2) affinity of 0.1 between
  // a and c: repulsion 0.9, taken first, so b joins a and c stays apart.
  const Box3 shape{1, 1, 3};
  const Offsets offsets = {{0, 0, 1}, {0, 0, 2}};
  const std::vector<float> affs = {0.6f, 0.6f, 0.0f, 0.1f, 0.0f, 0.0f};
  SegmentParams p;
  p.method = SegmentMethod::Mutex;
  EXPECT_EQ(mutexWatershed(affs.data(), shape, offsets, p), (Labels{1, 1, 2}));
  // Negative control: the repulsive channel ignored joins all three.
  EXPECT_EQ(mutexWatershed(affs.data(), shape, {{0, 0, 1}}, p), (Labels{1, 1, 1}));
  // With a high long-range affinity (weak repulsion, 0.1) the attractive edges win.
  const std::vector<float> friendly = {0.6f, 0.6f, 0.0f, 0.9f, 0.0f, 0.0f};
  EXPECT_EQ(mutexWatershed(friendly.data(), shape, offsets, p), (Labels{1, 1, 1}));
  // A stride of 2 on x keeps the repulsive edge at x = 0.
  p.repulsiveStride = {1, 1, 2};
  EXPECT_EQ(mutexWatershed(affs.data(), shape, offsets, p), (Labels{1, 1, 2}));
}

std::vector<float> randomAffinities(const Box3 &shape, size_t channels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> affs(channels * shape[0] * shape[1] * shape[2]);
  for (float &a : affs)
    a = std::round(u(rng) * 16) / 16; // ties on purpose
  return affs;
}

TEST(Segmentation, SameLabelsForAnyThreadCountAndSweepEqualsRuns) {
  const Box3 shape{20, 21, 23};
  const Offsets offsets = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {3, 0, 0}, {0, 3, 0}, {0, 0, 3}};
  const auto affs = randomAffinities(shape, offsets.size(), 3);
  const int threads = numThreads();
  for (SegmentMethod m :
       {SegmentMethod::Watershed, SegmentMethod::MeanAgglomeration, SegmentMethod::Mutex}) {
    SegmentParams p;
    p.method = m;
    p.seedThreshold = 0.8f;
    setNumThreads(1);
    const Labels one = segmentAffinities(affs.data(), shape, offsets, p);
    setNumThreads(3);
    EXPECT_EQ(segmentAffinities(affs.data(), shape, offsets, p), one) << segmentMethodName(m);
    EXPECT_EQ(blockwise(affs, shape, {7, 8, 9}, offsets, p),
              blockwise(affs, shape, {7, 8, 9}, offsets, p));
  }
  SegmentParams p;
  p.seedThreshold = 0.8f;
  const std::vector<double> ts = {0.3, 0.6, 0.45};
  const auto all = segmentAffinitiesSweep(affs.data(), shape, offsets, p, ts);
  for (size_t i = 0; i < ts.size(); ++i) {
    p.threshold = ts[i];
    EXPECT_EQ(all[i], segmentAffinities(affs.data(), shape, offsets, p)) << ts[i];
  }
  setNumThreads(threads);
}

TEST(Segmentation, ErrorsNameTheOffsetsAndTheVoxel) {
  const Box3 shape{2, 2, 2};
  std::vector<float> affs(3 * 8, 0.5f);
  SegmentParams p;
  EXPECT_ERROR(checkOffsets({{1, 0, 0}, {0, 1, 0}}, 3, false, "--offsets for a.npy"),
               "--offsets for a.npy", "2 offsets", "3 affinity channels");
  EXPECT_ERROR(segmentAffinities(affs.data(), shape, {{1, 0, 0}, {0, 1, 0}, {0, 2, 0}}, p),
               "0 short-range offsets along x");
  EXPECT_ERROR(parseOffsets("1,0,0;0,0", "--offsets"), "--offsets", "not 3 integers");
  EXPECT_ERROR(parseOffsets("[[1,0,0],[0,0,0]]", "--offsets"), "--offsets", "zero offset");
  EXPECT_EQ(parseOffsets("1,0,0; 0,-1,0", "x"), (Offsets{{1, 0, 0}, {0, -1, 0}}));
  EXPECT_EQ(parseOffsets("[[1,0,0],[0,0,10]]", "x"), (Offsets{{1, 0, 0}, {0, 0, 10}}));
  affs[8 + 5] = NAN;
  EXPECT_ERROR(segmentAffinities(affs.data(), shape, kShort, p), "NaN in channel 1",
               "(1, 0, 1)");
  EXPECT_ERROR(parseSegmentMethod("waterz", "--method"), "--method", "waterz");
}

} // namespace
