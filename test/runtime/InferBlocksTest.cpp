//===- InferBlocksTest.cpp - block-wise sliding windows equal the whole volume's ------===//
//
// slidingWindowBlock over a partition of the volume into blocks (odd sizes, several blocks
// per axis, blocks smaller and larger than the window, a volume smaller than the window on
// one axis, mirroring) gives the whole-volume result bit for bit, reading only each block
// and its halo. The check is exact equality; negative controls: blocks predicted from their
// own voxels only (no halo), blocks with unit window weights (no Gaussian blending), and
// blocks blended on a grid of their own (each block with its halo predicted as a volume of
// its own) must all fail it.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/SlidingWindow.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace medrun;

namespace {

using Index3 = std::array<int64_t, 3>;

Tensor randomImage(int64_t c, const Index3 &s, uint32_t seed) {
  Tensor t(DType::F32, {c, s[0], s[1], s[2]});
  std::mt19937 rng(seed);
  std::normal_distribution<float> n;
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = n(rng);
  return t;
}

/// Position-dependent and non-linear, with two output channels: tanh(x) times (1 + the
/// window's mean) plus the z index in the window, and x squared.
Tensor nonlinear(const Tensor &x) {
  const int64_t n = x.dim(2) * x.dim(3) * x.dim(4), hw = x.dim(3) * x.dim(4);
  Tensor y(DType::F32, {x.dim(0), 2, x.dim(2), x.dim(3), x.dim(4)});
  for (int64_t b = 0; b < x.dim(0); ++b) {
    const float *in = x.data<float>() + b * x.dim(1) * n;
    double mean = 0;
    for (int64_t i = 0; i < x.dim(1) * n; ++i)
      mean += in[i];
    mean /= static_cast<double>(x.dim(1) * n);
    float *out = y.data<float>() + b * 2 * n;
    for (int64_t i = 0; i < n; ++i) {
      out[i] = std::tanh(in[i]) * static_cast<float>(1 + mean) + static_cast<float>(i / hw);
      out[n + i] = in[i] * in[i];
    }
  }
  return y;
}

/// Reads boxes of `image` (C x shape), recording the largest box read.
struct Reader {
  const Tensor &image;
  int64_t largest = 0;
  void operator()(const Index3 &lo, const Index3 &size, float *dst) {
    const int64_t c = image.dim(0);
    const Index3 s{image.dim(1), image.dim(2), image.dim(3)};
    largest = std::max(largest, size[0] * size[1] * size[2]);
    for (int64_t k = 0; k < c; ++k)
      for (int64_t z = 0; z < size[0]; ++z)
        for (int64_t y = 0; y < size[1]; ++y)
          std::memcpy(dst + ((k * size[0] + z) * size[1] + y) * size[2],
                      image.data<float>() + ((k * s[0] + lo[0] + z) * s[1] + lo[1] + y) * s[2] + lo[2],
                      size[2] * sizeof(float));
  }
};

Tensor crop(const Tensor &t, const Index3 &lo, const Index3 &size) {
  Tensor out(DType::F32, {t.dim(0), size[0], size[1], size[2]});
  Reader r{t};
  r(lo, size, out.data<float>());
  return out;
}

/// Puts `block` (C x size) at `lo` of `into` (C x shape).
void place(Tensor &into, const Tensor &block, const Index3 &lo) {
  const Index3 s{into.dim(1), into.dim(2), into.dim(3)}, b{block.dim(1), block.dim(2), block.dim(3)};
  for (int64_t c = 0; c < into.dim(0); ++c)
    for (int64_t z = 0; z < b[0]; ++z)
      for (int64_t y = 0; y < b[1]; ++y)
        std::memcpy(into.data<float>() + ((c * s[0] + lo[0] + z) * s[1] + lo[1] + y) * s[2] + lo[2],
                    block.data<float>() + ((c * b[0] + z) * b[1] + y) * b[2], b[2] * sizeof(float));
}

/// The blocks of `block` tiling `shape` (the last of each axis shorter), corner and size.
std::vector<std::pair<Index3, Index3>> tiles(const Index3 &shape, const Index3 &block) {
  std::vector<std::pair<Index3, Index3>> out;
  for (int64_t z = 0; z < shape[0]; z += block[0])
    for (int64_t y = 0; y < shape[1]; y += block[1])
      for (int64_t x = 0; x < shape[2]; x += block[2])
        out.push_back({{z, y, x},
                       {std::min(block[0], shape[0] - z), std::min(block[1], shape[1] - y),
                        std::min(block[2], shape[2] - x)}});
  return out;
}

/// The check: the stitched blocks equal the whole volume's prediction bit for bit.
bool sameBits(const Tensor &a, const Tensor &b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

double maxAbsDiff(const Tensor &a, const Tensor &b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

struct Case {
  Index3 shape, window, block;
  bool mirror;
};

const Case kCases[] = {
    {{11, 23, 37}, {4, 8, 16}, {3, 5, 7}, false},   // blocks smaller than the window
    {{11, 23, 37}, {4, 8, 16}, {5, 9, 17}, true},   // larger, mirrored
    {{13, 17, 19}, {6, 8, 8}, {13, 6, 10}, false},  // one block along z
    {{3, 40, 9}, {4, 8, 16}, {2, 16, 4}, false},    // smaller than the window: padded
};

} // namespace

TEST(InferBlocks, BlocksEqualTheWholeVolumeBitForBit) {
  for (const Case &k : kCases) {
    SlidingWindowOptions o;
    o.window = k.window;
    o.mirror = k.mirror;
    o.batch = 3;
    Tensor img = randomImage(2, k.shape, 5);
    Tensor whole = slidingWindow(img, o, nonlinear);
    Tensor stitched(DType::F32, {2, k.shape[0], k.shape[1], k.shape[2]});
    Reader reader{img};
    int64_t most = 0;
    for (auto &[lo, size] : tiles(k.shape, k.block)) {
      int64_t calls = 0;
      Tensor t = slidingWindowBlock(k.shape, 2, lo, size, o, std::ref(reader), nonlinear,
                                    [&](int64_t, int64_t) { ++calls; });
      EXPECT_EQ(calls, slidingWindowBlockBatches(k.shape, lo, size, o));
      ASSERT_EQ(t.shape(), (Shape{2, size[0], size[1], size[2]}));
      place(stitched, t, lo);
      // The input read is the block and at most a window less one voxel around it.
      int64_t bound = 1;
      for (int a = 0; a < 3; ++a)
        bound *= std::min(k.shape[a], size[a] + 2 * (k.window[a] - 1));
      EXPECT_LE(reader.largest, bound);
      most = std::max(most, reader.largest);
      reader.largest = 0;
      // The memory bound covers the input with its halo, the sums and the result.
      EXPECT_GE(slidingWindowBlockBytes(k.shape, 2, 2, k.block, o),
                4 * (2 * bound + 5 * size[0] * size[1] * size[2]));
    }
    EXPECT_LT(most, k.shape[0] * k.shape[1] * k.shape[2]) << "a block read the whole input";
    EXPECT_TRUE(sameBits(stitched, whole))
        << k.shape[0] << "x" << k.shape[1] << "x" << k.shape[2]
        << ": max difference " << maxAbsDiff(stitched, whole);
  }
}

TEST(InferBlocks, WrongVariantsFailTheCheck) {
  for (const Case &k : kCases) {
    SlidingWindowOptions o;
    o.window = k.window;
    o.mirror = k.mirror;
    o.batch = 3;
    Tensor img = randomImage(2, k.shape, 5);
    Tensor whole = slidingWindow(img, o, nonlinear);
    Tensor noHalo(DType::F32, whole.shape()), noWeight(DType::F32, whole.shape()),
        ownGrid(DType::F32, whole.shape());
    Reader reader{img};
    SlidingWindowOptions flat = o;
    flat.gaussian = false;
    for (auto &[lo, size] : tiles(k.shape, k.block)) {
      // No halo: the block's own voxels as the volume to predict.
      place(noHalo, slidingWindow(crop(img, lo, size), o, nonlinear), lo);
      // No blending weight: every window's voxels count 1.
      place(noWeight, slidingWindowBlock(k.shape, 2, lo, size, flat, std::ref(reader), nonlinear),
            lo);
      // The halo read, but blended on the block's own window grid.
      Index3 hlo, hsize;
      for (int a = 0; a < 3; ++a) {
        hlo[a] = std::max<int64_t>(0, lo[a] - (k.window[a] - 1));
        hsize[a] = std::min(k.shape[a], lo[a] + size[a] + k.window[a] - 1) - hlo[a];
      }
      Tensor own = slidingWindow(crop(img, hlo, hsize), o, nonlinear);
      place(ownGrid, crop(own, {lo[0] - hlo[0], lo[1] - hlo[1], lo[2] - hlo[2]}, size), lo);
    }
    EXPECT_FALSE(sameBits(noHalo, whole)) << "no halo passed";
    EXPECT_GT(maxAbsDiff(noHalo, whole), 1e-3);
    EXPECT_FALSE(sameBits(noWeight, whole)) << "no blending weight passed";
    EXPECT_GT(maxAbsDiff(noWeight, whole), 1e-3);
    EXPECT_FALSE(sameBits(ownGrid, whole)) << "a grid of the block's own passed";
  }
}

TEST(InferBlocks, BlockOutsideTheVolumeIsAnError) {
  SlidingWindowOptions o;
  o.window = {4, 4, 4};
  Tensor img = randomImage(1, {8, 8, 8}, 1);
  Reader reader{img};
  try {
    slidingWindowBlock({8, 8, 8}, 1, {4, 0, 0}, {5, 8, 8}, o, std::ref(reader), nonlinear);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("the block [4:9, 0:8, 0:8] is not inside the volume 8x8x8"),
              std::string::npos)
        << e.what();
  }
}
