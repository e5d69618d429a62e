//===- SlidingWindowTest.cpp - sliding-window inference: windows, blending, mirroring -===//
//
// Window corners as nnU-Net's compute_steps_for_sliding_window computes them; the Gaussian
// importance map; blending that returns a constant network output unchanged (the weights
// sum to one everywhere, also on volumes smaller than the window or not a multiple of it);
// mirroring that undoes its flips (an identity network gives the image back); results
// independent of the batch size; the errors.
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

using V = std::vector<int64_t>;

Tensor randomImage(int64_t c, int64_t d, int64_t h, int64_t w, uint32_t seed) {
  Tensor t(DType::F32, {c, d, h, w});
  std::mt19937 rng(seed);
  std::normal_distribution<float> n;
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = n(rng);
  return t;
}

/// A network of `cout` channels whose output is the constant c + 1.5 in channel c.
WindowPredictor constant(int64_t cout) {
  return [cout](const Tensor &x) {
    Tensor y(DType::F32, {x.dim(0), cout, x.dim(2), x.dim(3), x.dim(4)});
    const int64_t n = x.dim(2) * x.dim(3) * x.dim(4);
    for (int64_t b = 0; b < x.dim(0); ++b)
      for (int64_t c = 0; c < cout; ++c)
        for (int64_t i = 0; i < n; ++i)
          y.data<float>()[(b * cout + c) * n + i] = c + 1.5f;
    return y;
  };
}

/// Returns its input: blending and mirroring must give the image back.
Tensor identity(const Tensor &x) { return x.clone(); }

/// A window-dependent, position-dependent and non-linear network: each output voxel is
/// tanh(x) times (1 + the window's mean) plus its z index in the window.
Tensor nonlinear(const Tensor &x) {
  Tensor y = x.clone();
  const int64_t per = x.numel() / x.dim(0), hw = x.dim(3) * x.dim(4);
  for (int64_t b = 0; b < x.dim(0); ++b) {
    double mean = 0;
    for (int64_t i = 0; i < per; ++i)
      mean += x.data<float>()[b * per + i];
    mean /= per;
    for (int64_t i = 0; i < per; ++i) {
      float &v = y.data<float>()[b * per + i];
      v = std::tanh(v) * static_cast<float>(1 + mean) + static_cast<float>((i / hw) % x.dim(2));
    }
  }
  return y;
}

double maxAbsDiff(const Tensor &a, const Tensor &b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

TEST(SlidingWindow, WindowStartsAsNnUNet) {
  // ceil((size - window) / (window * (1 - overlap))) + 1 corners, evenly spaced, rounded.
  EXPECT_EQ(windowStarts(64, 64, 0.5), (V{0}));
  EXPECT_EQ(windowStarts(65, 64, 0.5), (V{0, 1}));
  EXPECT_EQ(windowStarts(100, 64, 0.5), (V{0, 18, 36}));
  EXPECT_EQ(windowStarts(128, 64, 0.5), (V{0, 32, 64}));
  EXPECT_EQ(windowStarts(9, 4, 0.5), (V{0, 2, 3, 5}));
  EXPECT_EQ(windowStarts(160, 64, 0), (V{0, 48, 96}));
  EXPECT_EQ(windowStarts(10, 4, 0.75), (V{0, 1, 2, 3, 4, 5, 6}));
  // The last window ends at the volume's end whatever the size.
  for (int64_t size = 16; size < 90; ++size)
    for (double overlap : {0.0, 0.25, 0.5, 0.8}) {
      V s = windowStarts(size, 16, overlap);
      EXPECT_EQ(s.back(), size - 16) << size;
      for (size_t i = 1; i < s.size(); ++i) // consecutive windows touch or overlap
        EXPECT_LE(s[i] - s[i - 1], 16) << size;
    }
  EXPECT_THROW(windowStarts(10, 16, 0.5), Error);
  EXPECT_THROW(windowStarts(20, 16, 1.0), Error);
  EXPECT_THROW(windowStarts(20, 16, -0.1), Error);
}

TEST(SlidingWindow, GaussianImportance) {
  const std::array<int64_t, 3> win{8, 16, 5};
  std::vector<float> w = gaussianImportance(win);
  ASSERT_EQ(w.size(), 8u * 16 * 5);
  // Maximum 1 at the centre (i // 2), exp(-d²/2σ²) with σ = window / 8 per axis.
  EXPECT_FLOAT_EQ(w[(4 * 16 + 8) * 5 + 2], 1.0f);
  auto g = [](double d, double window) { return std::exp(-d * d / (2 * (window / 8) * (window / 8))); };
  EXPECT_NEAR(w[(0 * 16 + 3) * 5 + 4], g(4, 8) * g(5, 16) * g(2, 5), 1e-7);
  EXPECT_NEAR(w[(7 * 16 + 15) * 5 + 0], g(3, 8) * g(7, 16) * g(2, 5), 1e-7);
  float lo = 2;
  for (float v : w) {
    EXPECT_LE(v, 1.0f);
    lo = std::min(lo, v);
  }
  EXPECT_GT(lo, 0.0f); // no zeros: every voxel of a window counts
}

TEST(SlidingWindow, ConstantOutputStaysConstant) {
  // The normalised accumulation of a constant network output is that constant: the
  // blending weights sum to one at every voxel. Volumes a multiple of the window, not a
  // multiple, and smaller than it on some axes (padded); with and without mirroring.
  for (auto shape : std::vector<std::array<int64_t, 3>>{{8, 16, 32}, {11, 23, 37}, {3, 40, 9}}) {
    for (bool mirror : {false, true}) {
      SlidingWindowOptions o;
      o.window = {4, 8, 16};
      o.mirror = mirror;
      o.batch = 3;
      Tensor img = randomImage(1, shape[0], shape[1], shape[2], 1);
      Tensor out = slidingWindow(img, o, constant(2));
      ASSERT_EQ(out.shape(), (Shape{2, shape[0], shape[1], shape[2]}));
      const int64_t n = shape[0] * shape[1] * shape[2];
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(out.data<float>()[c * n + i], c + 1.5f, 1e-5) << c << " " << i;
    }
  }
}

TEST(SlidingWindow, IdentityGivesTheImageBack) {
  // Every window (and every flip of it) predicts its own voxels: blending and flipping
  // back must put each prediction where it came from, and the division by the summed
  // weights must undo the weighting (overlaps would otherwise count several times).
  Tensor img = randomImage(2, 9, 21, 30, 7);
  for (bool mirror : {false, true})
    for (bool gaussian : {true, false}) {
      SlidingWindowOptions o;
      o.window = {4, 8, 12};
      o.mirror = mirror;
      o.gaussian = gaussian;
      o.batch = 5;
      Tensor out = slidingWindow(img, o, identity);
      ASSERT_EQ(out.shape(), img.shape());
      EXPECT_LT(maxAbsDiff(out, img), 1e-5) << mirror << gaussian;
    }
}

TEST(SlidingWindow, MirroringAverages) {
  // A network that is not flip-equivariant (its output depends on the z index inside the
  // window): mirroring averages z and window - 1 - z, so it changes the result.
  Tensor img = randomImage(1, 8, 8, 8, 3);
  SlidingWindowOptions o;
  o.window = {4, 4, 4};
  Tensor plain = slidingWindow(img, o, nonlinear);
  o.mirror = true;
  Tensor mirrored = slidingWindow(img, o, nonlinear);
  EXPECT_GT(maxAbsDiff(plain, mirrored), 0.1);
  // With one window over the whole volume, the flips average z and 7 - z: 3.5 everywhere.
  o.window = {8, 8, 8};
  Tensor whole = slidingWindow(img, o, nonlinear);
  double mean = 0;
  for (int64_t i = 0; i < img.numel(); ++i)
    mean += img.data<float>()[i];
  mean /= img.numel();
  for (int64_t i = 0; i < img.numel(); ++i)
    ASSERT_NEAR(whole.data<float>()[i], std::tanh(img.data<float>()[i]) * (1 + mean) + 3.5, 1e-5);
}

TEST(SlidingWindow, BatchSizeDoesNotChangeTheResult) {
  Tensor img = randomImage(1, 13, 17, 19, 11);
  for (bool mirror : {false, true}) {
    SlidingWindowOptions o;
    o.window = {6, 8, 8};
    o.mirror = mirror;
    o.batch = 1;
    int64_t calls = 0;
    Tensor ref = slidingWindow(img, o, nonlinear, [&](int64_t, int64_t) { ++calls; });
    EXPECT_EQ(calls, slidingWindowBatches({13, 17, 19}, o));
    for (int64_t batch : {2, 3, 7, 1000}) {
      o.batch = batch;
      Tensor out = slidingWindow(img, o, nonlinear);
      EXPECT_EQ(std::memcmp(out.raw(), ref.raw(), ref.nbytes()), 0) << batch << mirror;
    }
  }
}

TEST(SlidingWindow, Errors) {
  Tensor img = randomImage(1, 8, 8, 8, 1);
  SlidingWindowOptions o;
  o.window = {4, 4, 4};
  try {
    slidingWindow(img, o, [](const Tensor &x) {
      return Tensor(DType::F32, {x.dim(0), 2, 4, 4, 3});
    });
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("the network returned"), std::string::npos) << e.what();
  }
  o.batch = 0;
  EXPECT_THROW(slidingWindow(img, o, identity), Error);
  o.batch = 1;
  o.overlap = 1;
  EXPECT_THROW(slidingWindow(img, o, identity), Error);
}

TEST(SlidingWindow, Activations) {
  Tensor t(DType::F32, {3, 2});
  const float v[] = {0, 1, 2, -1, 0.5f, 3};
  std::memcpy(t.raw(), v, sizeof v);
  Tensor s = t.clone();
  applyActivation(s, "sigmoid");
  EXPECT_FLOAT_EQ(s.data<float>()[0], 0.5f);
  EXPECT_NEAR(s.data<float>()[1], 1 / (1 + std::exp(-1.0)), 1e-7);
  Tensor m = t.clone();
  applyActivation(m, "softmax"); // across the 3 channels of each of the 2 voxels
  const double z0 = std::exp(0.0) + std::exp(2.0) + std::exp(0.5);
  EXPECT_NEAR(m.data<float>()[0], 1 / z0, 1e-7);
  EXPECT_NEAR(m.data<float>()[2], std::exp(2.0) / z0, 1e-7);
  EXPECT_NEAR(m.data<float>()[1] + m.data<float>()[3] + m.data<float>()[5], 1, 1e-6);
  Tensor n = t.clone();
  applyActivation(n, "none");
  EXPECT_EQ(std::memcmp(n.raw(), t.raw(), t.nbytes()), 0);
  EXPECT_THROW(applyActivation(n, "relu"), Error);
}

} // namespace
