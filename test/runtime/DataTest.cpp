//===- DataTest.cpp - synthetic data, BANIS affinities, sampler and loader -----===//
//
// References are computed here independently: affinities by a per-voxel loop over the
// offsets, patches by per-voxel reads with bounds checks (so cropping, padding, channel
// selection and the strided deep-supervision downsamples are checked voxel by voxel),
// connected pieces by a flood fill, nnU-Net's oversampling rule by its Python formula
// evaluated by hand. Determinism: byte equality across thread counts, worker counts and
// resumed runs; different seeds must differ.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Data.h"
#include "medrun/Error.h"
#include "medrun/Parallel.h"

#include "gtest/gtest.h"
#include "ExpectError.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

using namespace medrun;

namespace {

bool sameBytes(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool sameVolume(const Volume &a, const Volume &b) {
  return sameBytes(a.image, b.image) && sameBytes(a.labels, b.labels) &&
         sameBytes(a.affinity, b.affinity) && sameBytes(a.affinityMask, b.affinityMask) &&
         sameBytes(a.segmentation, b.segmentation);
}

bool sameBatch(const Batch &a, const Batch &b) {
  if (a.step != b.step || a.tensors.size() != b.tensors.size())
    return false;
  for (const auto &[name, t] : a.tensors)
    if (!b.tensors.count(name) || !sameBytes(t, b.tensors.at(name)))
      return false;
  return true;
}

/// The reference affinities: one explicit loop per channel and voxel.
void naiveAffinities(const Tensor &labels, std::vector<uint8_t> &aff, std::vector<uint8_t> &mask) {
  const int64_t D = labels.dim(1), H = labels.dim(2), W = labels.dim(3);
  const int offsets[6][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {10, 0, 0}, {0, 10, 0}, {0, 0, 10}};
  aff.assign(6 * D * H * W, 7);
  mask.assign(6 * D * H * W, 7);
  const int32_t *l = labels.data<int32_t>();
  auto at = [&](int64_t z, int64_t y, int64_t x) { return l[(z * H + y) * W + x]; };
  for (int c = 0; c < 6; ++c)
    for (int64_t z = 0; z < D; ++z)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          int64_t z2 = z + offsets[c][0], y2 = y + offsets[c][1], x2 = x + offsets[c][2];
          bool inside = z2 < D && y2 < H && x2 < W;
          int64_t i = ((c * D + z) * H + y) * W + x;
          mask[i] = inside;
          aff[i] = inside && at(z, y, x) != 0 && at(z, y, x) == at(z2, y2, x2);
        }
}

void expectAffinitiesMatch(const Tensor &labels, const Tensor &aff, const Tensor &mask) {
  std::vector<uint8_t> refAff, refMask;
  naiveAffinities(labels, refAff, refMask);
  ASSERT_EQ(aff.shape(), (Shape{6, labels.dim(1), labels.dim(2), labels.dim(3)}));
  ASSERT_EQ(mask.shape(), aff.shape());
  int64_t bad = 0;
  for (int64_t i = 0; i < aff.numel(); ++i)
    bad += aff.data<uint8_t>()[i] != refAff[i] || mask.data<uint8_t>()[i] != refMask[i];
  EXPECT_EQ(bad, 0);
}

/// Reference patch value: the volume array read with bounds checks, 0 outside.
float voxelOf(const Volume &v, const std::string &name, int64_t c, int64_t z, int64_t y,
              int64_t x) {
  const int64_t D = v.image.dim(1), H = v.image.dim(2), W = v.image.dim(3);
  if (z < 0 || y < 0 || x < 0 || z >= D || y >= H || x >= W)
    return 0;
  const int64_t i = (z * H + y) * W + x, n = D * H * W;
  if (name == "image")
    return v.image.data<float>()[i];
  if (name == "labels")
    return static_cast<float>(v.labels.data<int32_t>()[i]);
  if (name == "affinity")
    return v.affinity.data<uint8_t>()[c * n + i];
  if (name == "affinity_mask")
    return v.affinityMask.data<uint8_t>()[c * n + i];
  return v.segmentation.data<uint8_t>()[i];
}

/// Checks every tensor of `b` voxel by voxel against reads of the volumes.
void expectBatchMatchesVolumes(const Batch &b, const std::vector<Volume> &vols,
                               const LoaderSpec &spec) {
  ASSERT_EQ(b.samples.size(), static_cast<size_t>(spec.batch));
  for (const auto &[name, t] : b.tensors) {
    const std::string base = name.substr(0, name.find('/'));
    const int64_t f = name.find('/') == std::string::npos ? 1 : std::stoll(name.substr(13));
    const int64_t C = t.dim(1), P0 = t.dim(2), P1 = t.dim(3), P2 = t.dim(4);
    EXPECT_EQ(P0 * f, spec.patch[0]) << name;
    EXPECT_EQ(P2 * f, spec.patch[2]) << name;
    int64_t bad = 0;
    const float *d = t.data<float>();
    for (int64_t j = 0; j < spec.batch; ++j) {
      const PatchInfo &s = b.samples[j];
      const Volume &v = vols[s.volume];
      for (int64_t c = 0; c < C; ++c)
        for (int64_t z = 0; z < P0; ++z)
          for (int64_t y = 0; y < P1; ++y)
            for (int64_t x = 0; x < P2; ++x) {
              float want = voxelOf(v, base, c, s.corner[0] + f * z, s.corner[1] + f * y,
                                   s.corner[2] + f * x);
              bad += *d++ != want;
            }
    }
    EXPECT_EQ(bad, 0) << name << " step " << b.step;
  }
}

SyntheticSpec smallSpec(uint64_t seed = 7) {
  SyntheticSpec s;
  s.shape = {37, 29, 41};
  s.volumes = 3;
  s.seed = seed;
  return s;
}

const std::shared_ptr<const std::vector<Volume>> &smallDataset() {
  static auto data = makeSyntheticDataset(smallSpec());
  return data;
}

LoaderSpec allTensors() {
  LoaderSpec s;
  s.batch = 3;
  s.patch = {24, 16, 32};
  s.tensors = {"image",        "labels",         "affinity",      "affinity_mask",
               "segmentation", "segmentation/2", "segmentation/8"};
  s.workers = 2;
  s.seed = 11;
  return s;
}

std::vector<Batch> collect(const std::shared_ptr<const std::vector<Volume>> &data,
                           const LoaderSpec &spec, int64_t first, int64_t count) {
  DataLoader loader(data, spec, first);
  std::vector<Batch> out;
  for (int64_t i = 0; i < count; ++i) {
    const Batch &b = loader.next();
    Batch copy = b;
    for (auto &[name, t] : copy.tensors)
      t = t.clone();
    out.push_back(copy);
    loader.release(b);
  }
  return out;
}

// ---- Affinities -----------------------------------------------------------------------

TEST(Data, AffinitiesMatchNaiveReferenceOnRandomLabels) {
  // Few labels so that equal neighbours are common; sizes odd, one axis shorter than 10.
  Tensor labels(DType::I32, {1, 13, 7, 23});
  uint32_t state = 12345;
  for (int64_t i = 0; i < labels.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    labels.data<int32_t>()[i] = (state >> 28) % 3; // 0, 1, 2
  }
  Tensor aff, mask;
  computeAffinities(labels, aff, mask);
  expectAffinitiesMatch(labels, aff, mask);
  // The y axis (7) is shorter than the long-range offset: channel 4 is fully masked.
  for (int64_t i = 4 * 13 * 7 * 23; i < 5 * 13 * 7 * 23; ++i)
    ASSERT_EQ(mask.data<uint8_t>()[i], 0);
}

TEST(Data, AffinitiesRejectWrongLabels) {
  Tensor aff, mask;
  EXPECT_ERROR(computeAffinities(Tensor(DType::F32, {1, 4, 4, 4}), aff, mask), "labels",
               "i32", "1xDxHxW", "f32 1x4x4x4");
}

// ---- Synthetic volumes ----------------------------------------------------------------

TEST(Data, SyntheticVolumeAffinitiesMatchReference) {
  const Volume &v = (*smallDataset())[1];
  expectAffinitiesMatch(v.labels, v.affinity, v.affinityMask);
}

TEST(Data, SyntheticVolumeIsDeterministicForAnyThreadCount) {
  const SyntheticSpec spec = smallSpec();
  const int saved = numThreads();
  setNumThreads(1);
  Volume one = makeSyntheticVolume(spec, 2);
  setNumThreads(3);
  Volume three = makeSyntheticVolume(spec, 2);
  setNumThreads(saved);
  EXPECT_TRUE(sameVolume(one, three));
  EXPECT_TRUE(sameVolume(one, (*smallDataset())[2]));
  // Another index or another seed gives another volume.
  EXPECT_FALSE(sameBytes(one.labels, (*smallDataset())[1].labels));
  Volume other = makeSyntheticVolume(smallSpec(8), 2);
  EXPECT_FALSE(sameBytes(one.labels, other.labels));
  EXPECT_FALSE(sameBytes(one.image, other.image));
}

TEST(Data, SyntheticVolumeContents) {
  for (const Volume &v : *smallDataset()) {
    const int64_t D = v.image.dim(1), H = v.image.dim(2), W = v.image.dim(3), n = D * H * W;
    ASSERT_EQ(v.image.shape(), (Shape{1, 37, 29, 41}));
    ASSERT_EQ(v.labels.shape(), v.image.shape());
    ASSERT_EQ(v.segmentation.shape(), v.image.shape());
    const int32_t *l = v.labels.data<int32_t>();
    const uint8_t *s = v.segmentation.data<uint8_t>();
    const float *img = v.image.data<float>();
    // Ids are 1..N in order of first appearance; each is one 6-connected piece with one
    // class; background is exactly class 0.
    int32_t maxId = 0;
    std::vector<int> classOf(1, 0);
    std::vector<int64_t> first(1, -1), size(1, 0);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LE(l[i], maxId + 1);
      if (l[i] == maxId + 1) {
        ++maxId;
        classOf.push_back(s[i]);
        first.push_back(i);
        size.push_back(0);
      }
      ASSERT_EQ(l[i] == 0, s[i] == 0);
      ASSERT_EQ(s[i], classOf[l[i]]);
      ASSERT_LE(s[i], 2);
      ++size[l[i]];
    }
    EXPECT_GE(maxId, 3);
    std::set<int> classes(classOf.begin() + 1, classOf.end());
    EXPECT_EQ(classes, (std::set<int>{1, 2}));
    std::vector<char> seen(n, 0);
    for (int32_t id = 1; id <= maxId; ++id) {
      std::vector<int64_t> stack = {first[id]};
      seen[first[id]] = 1;
      int64_t reached = 0;
      while (!stack.empty()) {
        int64_t u = stack.back();
        stack.pop_back();
        ++reached;
        int64_t z = u / (H * W), y = u / W % H, x = u % W;
        const int64_t nb[6][3] = {{z - 1, y, x}, {z + 1, y, x}, {z, y - 1, x},
                                  {z, y + 1, x}, {z, y, x - 1}, {z, y, x + 1}};
        for (auto &p : nb) {
          if (p[0] < 0 || p[1] < 0 || p[2] < 0 || p[0] >= D || p[1] >= H || p[2] >= W)
            continue;
          int64_t w = (p[0] * H + p[1]) * W + p[2];
          if (!seen[w] && l[w] == id)
            seen[w] = 1, stack.push_back(w);
        }
      }
      EXPECT_EQ(reached, size[id]) << "instance " << id << " is not one connected piece";
    }
    // A sensible foreground fraction; objects brighter than background; image in [0, 1].
    double fg = 0, sumFg = 0, sumBg = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_GE(img[i], 0.0f);
      ASSERT_LE(img[i], 1.0f);
      fg += l[i] != 0;
      (l[i] ? sumFg : sumBg) += img[i];
    }
    EXPECT_GT(fg / n, 0.1);
    EXPECT_LT(fg / n, 0.8);
    EXPECT_GT(sumFg / fg, sumBg / (n - fg) + 0.1);
  }
}

TEST(Data, SyntheticMembranesAreDark) {
  // Voxels where two instances touch are darker than voxels inside an instance.
  const Volume &v = (*smallDataset())[0];
  const int64_t D = v.image.dim(1), H = v.image.dim(2), W = v.image.dim(3);
  const int32_t *l = v.labels.data<int32_t>();
  const float *img = v.image.data<float>();
  double sumM = 0, sumI = 0, nM = 0, nI = 0;
  for (int64_t z = 1; z + 1 < D; ++z)
    for (int64_t y = 1; y + 1 < H; ++y)
      for (int64_t x = 1; x + 1 < W; ++x) {
        int64_t i = (z * H + y) * W + x;
        if (l[i] == 0)
          continue;
        int touch = 0, same = 0;
        for (int64_t o : {H * W, -H * W, W, -W, int64_t(1), int64_t(-1)}) {
          touch += l[i + o] != 0 && l[i + o] != l[i];
          same += l[i + o] == l[i];
        }
        if (touch)
          sumM += img[i], ++nM;
        else if (same == 6)
          sumI += img[i], ++nI;
      }
  ASSERT_GT(nM, 20);
  ASSERT_GT(nI, 20);
  EXPECT_LT(sumM / nM, sumI / nI - 0.1);
}

TEST(Data, SyntheticZScoreImage) {
  SyntheticSpec spec = smallSpec();
  spec.scale = ImageScale::ZScore;
  Volume v = makeSyntheticVolume(spec, 0);
  double s1 = 0, s2 = 0;
  const int64_t n = v.image.numel();
  for (int64_t i = 0; i < n; ++i)
    s1 += v.image.data<float>()[i], s2 += double(v.image.data<float>()[i]) * v.image.data<float>()[i];
  EXPECT_NEAR(s1 / n, 0.0, 1e-4);
  EXPECT_NEAR(s2 / n, 1.0, 1e-3);
  EXPECT_TRUE(sameBytes(v.labels, (*smallDataset())[0].labels));
}

TEST(Data, SyntheticSpecErrors) {
  SyntheticSpec s = smallSpec();
  s.volumes = 0;
  EXPECT_ERROR(makeSyntheticDataset(s), "data.volumes", "an integer in 1..", "got 0");
  s = smallSpec();
  s.shape = {32, 0, 32};
  EXPECT_ERROR(makeSyntheticVolume(s, 0), "data.volume_shape", "1..2048", "32x0x32");
  EXPECT_ERROR(makeSyntheticVolume(smallSpec(), 3), "synthetic volume 3", "0..2");
}

// ---- Sampler --------------------------------------------------------------------------

TEST(Data, OversamplingRuleIsNnUNets) {
  // nnU-Net: forced iff not j < round(B * (1 - f)), Python's round (half to even).
  auto forcedCount = [](int64_t B, double f) {
    int64_t n = 0, firstForced = -1;
    for (int64_t j = 0; j < B; ++j)
      if (oversampled(j, B, f)) {
        n += 1;
        if (firstForced < 0)
          firstForced = j;
      }
    // The forced samples are always the last ones.
    for (int64_t j = firstForced < 0 ? B : firstForced; j < B; ++j)
      EXPECT_TRUE(oversampled(j, B, f));
    return n;
  };
  EXPECT_EQ(forcedCount(2, 1.0 / 3), 1); // round(1.333) = 1: sample 1 forced
  EXPECT_EQ(forcedCount(4, 1.0 / 3), 1); // round(2.667) = 3
  EXPECT_EQ(forcedCount(3, 0.5), 1);     // round(1.5) = 2 (half to even)
  EXPECT_EQ(forcedCount(5, 0.5), 3);     // round(2.5) = 2 (half to even)
  EXPECT_EQ(forcedCount(1, 0.5), 1);     // round(0.5) = 0
  EXPECT_EQ(forcedCount(1, 1.0 / 3), 0); // round(0.667) = 1
  EXPECT_EQ(forcedCount(8, 0.0), 0);
  EXPECT_EQ(forcedCount(8, 1.0), 8);
}

TEST(Data, SamplerForcedSamplesHoldForegroundAndStatistics) {
  const auto &data = smallDataset();
  LoaderSpec spec = allTensors();
  spec.batch = 3; // sample 2 is forced
  spec.patch = {16, 16, 16};
  Sampler sampler(data, spec);
  const int64_t steps = 2000;
  int64_t cls[3] = {0, 0, 0}, volumeCount[3] = {0, 0, 0}, blobRandom = 0, blobForced = 0;
  double cornerSum = 0;
  int64_t cornerMin = 100, cornerMax = -100;
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t j = 0; j < 3; ++j) {
      PatchInfo p = sampler.sample(s, j);
      EXPECT_EQ(p.forced, j == 2);
      ++volumeCount[p.volume];
      const Volume &v = (*data)[p.volume];
      // Voxels of the chosen class and of the rare class (blobs), from the reference reader.
      int64_t blob = 0, ofClass = 0;
      for (int64_t z = 0; z < 16; z += 1)
        for (int64_t y = 0; y < 16; y += 1)
          for (int64_t x = 0; x < 16; x += 1) {
            float c = voxelOf(v, "segmentation", 0, p.corner[0] + z, p.corner[1] + y,
                              p.corner[2] + x);
            blob += c == 2;
            ofClass += c == p.cls;
          }
      if (p.forced) {
        ASSERT_TRUE(p.cls == 1 || p.cls == 2);
        ASSERT_GT(ofClass, 0) << "forced sample of step " << s << " lacks class " << p.cls;
        ++cls[p.cls];
        blobForced += blob;
      } else {
        EXPECT_EQ(p.cls, 0);
        blobRandom += blob;
        cornerSum += p.corner[1];
        cornerMin = std::min(cornerMin, p.corner[1]);
        cornerMax = std::max(cornerMax, p.corner[1]);
      }
      for (int a = 0; a < 3; ++a) {
        ASSERT_GE(p.corner[a], 0);
        ASSERT_LE(p.corner[a], v.image.dim(1 + a) - 16);
      }
    }
  // Classes are chosen uniformly among those present (all volumes hold both).
  EXPECT_NEAR(double(cls[1]) / steps, 0.5, 0.05);
  // Volumes uniformly; random corners uniform over 0..V-P (29 - 16 = 13 on axis 1).
  for (int64_t c : volumeCount)
    EXPECT_NEAR(double(c) / (3 * steps), 1.0 / 3, 0.03);
  EXPECT_EQ(cornerMin, 0);
  EXPECT_EQ(cornerMax, 13);
  EXPECT_NEAR(cornerSum / (2 * steps), 6.5, 0.3);
  // Forcing raises the content of the rare class (blobs, ~5% of the voxels) a lot.
  EXPECT_GT(double(blobForced) / steps, 3 * double(blobRandom) / (2 * steps));
}

TEST(Data, SamplerWithoutForegroundFallsBackToRandom) {
  auto data = std::make_shared<std::vector<Volume>>();
  Volume v;
  v.image = Tensor(DType::F32, {1, 9, 10, 11});
  v.labels = Tensor(DType::I32, {1, 9, 10, 11});
  data->push_back(v);
  LoaderSpec spec;
  spec.batch = 2;
  spec.patch = {4, 4, 4};
  spec.foreground = 1.0;
  Sampler sampler(data, spec);
  for (int64_t s = 0; s < 50; ++s) {
    PatchInfo p = sampler.sample(s, 1);
    EXPECT_FALSE(p.forced);
    EXPECT_LE(p.corner[2], 7);
  }
}

// ---- Loader ---------------------------------------------------------------------------

TEST(Data, BatchesMatchVolumeReads) {
  const LoaderSpec spec = allTensors();
  std::vector<Batch> batches = collect(smallDataset(), spec, 0, 4);
  for (const Batch &b : batches) {
    EXPECT_EQ(b.tensors.at("affinity").shape(), (Shape{3, 6, 24, 16, 32}));
    EXPECT_EQ(b.tensors.at("segmentation/8").shape(), (Shape{3, 1, 3, 2, 4}));
    expectBatchMatchesVolumes(b, *smallDataset(), spec);
  }
}

TEST(Data, PatchLargerThanVolumeIsPadded) {
  SyntheticSpec sspec = smallSpec(3);
  sspec.shape = {13, 19, 9};
  sspec.volumes = 2;
  auto data = makeSyntheticDataset(sspec);
  LoaderSpec spec = allTensors();
  spec.patch = {16, 16, 16}; // larger on axes 0 and 2, smaller on axis 1
  spec.tensors = {"image", "affinity", "affinity_mask", "segmentation", "segmentation/4"};
  DataLoader loader(data, spec);
  std::set<int64_t> corners0;
  for (int i = 0; i < 20; ++i) {
    const Batch &b = loader.next();
    expectBatchMatchesVolumes(b, *data, spec);
    for (const PatchInfo &p : b.samples) {
      EXPECT_GE(p.corner[0], 13 - 16);
      EXPECT_LE(p.corner[0], 0);
      EXPECT_GE(p.corner[1], 0);
      EXPECT_LE(p.corner[1], 19 - 16);
      corners0.insert(p.corner[0]);
    }
    loader.release(b);
  }
  EXPECT_GT(corners0.size(), 1u); // the volume moves within the patch
}

TEST(Data, ConnectedComponentsSplitPiecesOfOneId) {
  // 1 x 3 x 5: id 7 in two pieces (apart in the crop), id 3 touching the first piece.
  const std::vector<int32_t> ids = {7, 7, 0, 7, 0, //
                                    3, 0, 0, 7, 0, //
                                    3, 3, 0, 0, 9};
  std::vector<int32_t> out(ids.size(), -5);
  const std::vector<int32_t> rawOf = connectedComponents(ids.data(), {1, 3, 5}, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, 0, 2, 0, //
                                       3, 0, 0, 2, 0, //
                                       3, 3, 0, 0, 4}));
  EXPECT_EQ(rawOf, (std::vector<int32_t>{0, 7, 7, 3, 9}));
}

TEST(Data, RawLabelsForAugmentation) {
  // A patch larger than the volume on two axes (padding), and small patches of larger
  // volumes (instances cut into pieces by the crop).
  SyntheticSpec padded = smallSpec(5);
  padded.shape = {13, 19, 9};
  padded.volumes = 2;
  const std::pair<std::shared_ptr<const std::vector<Volume>>, Index3> cases[] = {
      {makeSyntheticDataset(padded), {16, 16, 16}}, {smallDataset(), {10, 10, 10}}};
  int64_t split = 0, outside = 0;
  for (const auto &[data, P] : cases) {
    LoaderSpec spec = allTensors();
    spec.patch = P;
    spec.tensors = {"labels", "segmentation", "instances", "classes"};
    DataLoader loader(data, spec);
    const int64_t n = P[0] * P[1] * P[2];
    for (int step = 0; step < 6; ++step) {
      const Batch &b = loader.next();
      const Tensor &inst = b.tensors.at("instances"), &cls = b.tensors.at("classes");
      ASSERT_EQ(inst.dtype(), DType::I32);
      ASSERT_EQ(cls.dtype(), DType::I32);
      ASSERT_EQ(inst.shape(), (Shape{3, 1, P[0], P[1], P[2]}));
      const float *lab = b.tensors.at("labels").data<float>();
      const float *seg = b.tensors.at("segmentation").data<float>();
      const int32_t *in = inst.data<int32_t>(), *c = cls.data<int32_t>();
      for (int64_t j = 0; j < spec.batch; ++j) {
        const PatchInfo &p = b.samples[j];
        const Tensor &img = (*data)[p.volume].image;
        const int64_t V[3] = {img.dim(1), img.dim(2), img.dim(3)};
        std::map<int32_t, std::set<int32_t>> piecesOf; // raw id -> its pieces in the crop
        for (int64_t z = 0; z < P[0]; ++z)
          for (int64_t y = 0; y < P[1]; ++y)
            for (int64_t x = 0; x < P[2]; ++x) {
              const int64_t v = j * n + (z * P[1] + y) * P[2] + x;
              const int64_t at[3] = {p.corner[0] + z, p.corner[1] + y, p.corner[2] + x};
              bool inside = true;
              for (int a = 0; a < 3; ++a)
                inside = inside && at[a] >= 0 && at[a] < V[a];
              outside += !inside;
              // classes: the segmentation inside the volume, -1 outside.
              ASSERT_EQ(c[v], inside ? static_cast<int32_t>(seg[v]) : -1);
              // instances: -1 outside the volume (unlabelled), 0 exactly where the labels
              // are inside it; equal neighbours share a piece.
              ASSERT_EQ(in[v] == -1, !inside);
              ASSERT_EQ(in[v] == 0, inside && lab[v] == 0);
              if (lab[v] == 0)
                continue;
              piecesOf[static_cast<int32_t>(lab[v])].insert(in[v]);
              const int64_t next[3] = {z + 1 < P[0] ? v + P[1] * P[2] : -1,
                                       y + 1 < P[1] ? v + P[2] : -1, x + 1 < P[2] ? v + 1 : -1};
              for (int64_t u : next)
                if (u >= 0)
                  ASSERT_EQ(in[u] == in[v], lab[u] == lab[v]) << "voxel " << v << " and " << u;
            }
        for (auto &[raw, pieces] : piecesOf)
          split += static_cast<int64_t>(pieces.size()) - 1;
      }
      loader.release(b);
    }
  }
  EXPECT_GT(outside, 0); // padding was checked
  EXPECT_GT(split, 0);   // some instance is cut into pieces by a crop, and they differ
}

TEST(Data, WorkerCountDoesNotChangeBatches) {
  LoaderSpec spec = allTensors();
  spec.workers = 1;
  std::vector<Batch> one = collect(smallDataset(), spec, 0, 8);
  spec.workers = 3;
  spec.prefetch = 5;
  std::vector<Batch> three = collect(smallDataset(), spec, 0, 8);
  for (int64_t s = 0; s < 8; ++s) {
    EXPECT_EQ(one[s].step, s);
    EXPECT_TRUE(sameBatch(one[s], three[s])) << "step " << s;
  }
  EXPECT_FALSE(sameBatch(one[0], one[1]));
}

TEST(Data, ResumeReproducesBatches) {
  const LoaderSpec spec = allTensors();
  std::vector<Batch> full = collect(smallDataset(), spec, 0, 8);
  std::vector<Batch> resumed = collect(smallDataset(), spec, 5, 3);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(resumed[i].step, 5 + i);
    EXPECT_TRUE(sameBatch(full[5 + i], resumed[i])) << "step " << 5 + i;
  }
}

TEST(Data, SeedAndRankChangeBatches) {
  LoaderSpec spec = allTensors();
  Batch a = collect(smallDataset(), spec, 0, 1)[0];
  spec.seed = 12;
  Batch b = collect(smallDataset(), spec, 0, 1)[0];
  spec.seed = 11;
  spec.ranks = 2;
  spec.rank = 1;
  Batch c = collect(smallDataset(), spec, 0, 1)[0];
  EXPECT_FALSE(sameBytes(a.tensors.at("image"), b.tensors.at("image")));
  EXPECT_FALSE(sameBytes(a.tensors.at("image"), c.tensors.at("image")));
}

// R ranks of batch b see exactly the samples one rank of batch R*b sees, rank r the slice
// r*b .. r*b+b-1 of it, foreground oversampling included (it is decided over the global
// batch). Control: ranks that do not know of each other (each a job of one rank) all draw
// the first b samples.
TEST(Data, RanksShareOutTheGlobalBatch) {
  LoaderSpec one = allTensors();
  one.batch = 6;
  const Batch whole = collect(smallDataset(), one, 2, 1)[0];
  int forced = 0;
  for (const PatchInfo &p : whole.samples)
    forced += p.forced;
  EXPECT_EQ(forced, 2); // round(6 * 2/3) = 4: samples 4 and 5
  LoaderSpec part = allTensors();
  part.batch = 2;
  part.ranks = 3;
  auto slice = [](const Tensor &t, int64_t first, int64_t n, int64_t batch) {
    const size_t per = t.nbytes() / static_cast<size_t>(batch);
    return std::string(static_cast<const char *>(t.raw()) + first * per, n * per);
  };
  for (int64_t r = 0; r < 3; ++r) {
    part.rank = r;
    const Batch b = collect(smallDataset(), part, 2, 1)[0];
    for (const auto &[name, t] : b.tensors)
      EXPECT_EQ(slice(t, 0, 2, 2), slice(whole.tensors.at(name), 2 * r, 2, 6))
          << name << " of rank " << r;
    for (int64_t j = 0; j < 2; ++j) {
      EXPECT_EQ(b.samples[j].volume, whole.samples[2 * r + j].volume);
      EXPECT_EQ(b.samples[j].corner, whole.samples[2 * r + j].corner);
      EXPECT_EQ(b.samples[j].forced, whole.samples[2 * r + j].forced);
    }
  }
  part.ranks = 1;
  part.rank = 0;
  const Batch alone = collect(smallDataset(), part, 2, 1)[0];
  EXPECT_NE(slice(alone.tensors.at("image"), 0, 2, 2), slice(whole.tensors.at("image"), 2, 2, 6));
  part.ranks = 2;
  part.rank = 2;
  EXPECT_THROW(DataLoader(smallDataset(), part), Error);
}

TEST(Data, AffinityChannelsFollowTheModel) {
  LoaderSpec spec = allTensors();
  spec.tensors = {"affinity", "affinity_mask"};
  spec.affinityChannels = 3;
  std::vector<Batch> b3 = collect(smallDataset(), spec, 2, 1);
  EXPECT_EQ(b3[0].tensors.at("affinity").shape(), (Shape{3, 3, 24, 16, 32}));
  expectBatchMatchesVolumes(b3[0], *smallDataset(), spec);
  // The first three channels of the six-channel batch.
  spec.affinityChannels = 6;
  std::vector<Batch> b6 = collect(smallDataset(), spec, 2, 1);
  const int64_t per = 3 * 24 * 16 * 32;
  const float *x3 = b3[0].tensors.at("affinity").data<float>();
  const float *x6 = b6[0].tensors.at("affinity").data<float>();
  for (int64_t j = 0; j < 3; ++j)
    EXPECT_EQ(std::memcmp(x3 + j * per, x6 + j * 2 * per, per * sizeof(float)), 0);
}

TEST(Data, BuffersAreReusedAndHeldBatchesStayIntact) {
  LoaderSpec spec = allTensors();
  spec.tensors = {"image"};
  spec.prefetch = 2;
  spec.workers = 3;
  int allocations = 0;
  std::set<const void *> pool; // the buffers the allocator made
  DataLoader loader(smallDataset(), spec, 0, [&](DType dtype, const Shape &shape) {
    ++allocations;
    Tensor t(dtype, shape);
    pool.insert(t.raw());
    return t;
  });
  EXPECT_EQ(allocations, 2);
  std::vector<Batch> reference = collect(smallDataset(), spec, 0, 6);
  // Hold two batches at once, then release in the other order.
  const Batch &b0 = loader.next();
  // ready(): the next batch is filled (the workers get there; nothing else changes it).
  auto waitReady = [&] {
    for (int i = 0; i < 10000 && !loader.ready(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return loader.ready();
  };
  EXPECT_TRUE(waitReady());
  const Batch &b1 = loader.next();
  EXPECT_FALSE(loader.ready()); // both buffers held: step 2 cannot be filled
  EXPECT_ERROR(loader.next(), "all 2 batch buffers are held", "release()");
  EXPECT_TRUE(sameBatch(b0, reference[0]));
  EXPECT_TRUE(sameBatch(b1, reference[1]));
  loader.release(b1);
  EXPECT_TRUE(waitReady()); // step 2 is filled now, so an overwrite of b0 would show
  EXPECT_TRUE(sameBatch(b0, reference[0])); // workers refilled only the released buffer
  loader.release();
  EXPECT_ERROR(loader.release(), "no batch held");
  EXPECT_ERROR(loader.release(b0), "not hand out", "already released");
  std::set<const void *> buffers;
  for (int64_t s = 2; s < 6; ++s) {
    double wait = -1;
    const Batch &b = loader.next(&wait);
    EXPECT_GE(wait, 0.0);
    EXPECT_TRUE(sameBatch(b, reference[s]));
    buffers.insert(b.tensors.at("image").raw());
    // Held until step s+1 is filled, which puts s+1 in the other buffer. The loader does
    // not promise that otherwise: a worker claims the lowest free buffer when it runs, and
    // one that runs only after this release (a loaded machine) takes this same buffer.
    EXPECT_TRUE(waitReady());
    loader.release(b);
  }
  EXPECT_EQ(buffers, pool); // both pool buffers, and no others
  EXPECT_EQ(loader.nextStep(), 6);
}

TEST(Data, ShutdownWithoutConsuming) {
  LoaderSpec spec = allTensors();
  spec.workers = 4;
  spec.prefetch = 2;
  { DataLoader loader(smallDataset(), spec); } // workers blocked on a full pool
  {
    DataLoader loader(smallDataset(), spec, 100);
    loader.next(); // held, never released
  }
  {
    spec.prefetch = 1;
    DataLoader loader(smallDataset(), spec, 3);
    const Batch &b = loader.next();
    EXPECT_EQ(b.step, 3);
    loader.release(b);
  }
}

TEST(Data, LoaderSpecErrors) {
  const auto &data = smallDataset();
  auto make = [&](const std::function<void(LoaderSpec &)> &edit) {
    LoaderSpec s = allTensors();
    edit(s);
    DataLoader loader(data, s);
  };
  EXPECT_ERROR(make([](LoaderSpec &s) { s.batch = 0; }), "data.batch", "1..4096", "got 0");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.patch = {64, 2048, 64}; }), "data.patch", "1..1024",
               "64x2048x64");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.patch = {64, 0, 64}; }), "data.patch");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.tensors = {}; }), "data.tensors", "at least one");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.tensors = {"image", "target"}; }), "data.tensors",
               "unknown tensor 'target'", "affinity_mask");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.tensors = {"image", "image"}; }), "'image'",
               "listed twice");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.tensors = {"segmentation/3"}; }), "segmentation/3",
               "power of two");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.tensors = {"segmentation/x"}; }), "segmentation/x",
               "power of two");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.tensors = {"segmentation/16"}; }), "segmentation/16",
               "does not divide the patch 24x16x32");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.affinityChannels = 7; }), "affinity channels", "1..6");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.workers = 0; }), "data.workers", "got 0");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.prefetch = 0; }), "data.prefetch", "got 0");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.foreground = 1.5; }), "data.foreground", "[0, 1]");
  EXPECT_ERROR(make([](LoaderSpec &s) { s.foreground = std::nan(""); }), "data.foreground");
  EXPECT_ERROR(DataLoader(std::make_shared<std::vector<Volume>>(), allTensors()),
               "no volumes");
  EXPECT_ERROR(DataLoader(data, allTensors(), -1), "first step", ">= 0");
  // A volume that lacks a requested array.
  auto partial = std::make_shared<std::vector<Volume>>(*data);
  (*partial)[1].affinityMask = Tensor();
  EXPECT_ERROR(DataLoader(partial, allTensors()), "volume 1", "affinity_mask",
               "u8 6x37x29x41", "nothing");
  (*partial)[1].affinityMask = Tensor(DType::U8, {3, 37, 29, 41});
  EXPECT_ERROR(DataLoader(partial, allTensors()), "volume 1", "affinity_mask", "got u8 3x37");
  // An allocator that returns the wrong shape.
  EXPECT_ERROR(DataLoader(data, allTensors(), 0,
                          [](DType d, const Shape &) { return Tensor(d, {1}); }),
               "allocator", "expected f32");
}

} // namespace
