//===- SpatialKernelsTest.cpp - med.spatial_transform's CPU kernel by hand --------===//
//
// Cases small enough to compute by hand, along the W axis of a 1x1x1x1x4 input (D and H of
// size 1, sampled at their centre): interpolation weights, each border, rounding half to
// even, linear_argmax's tie rule and its outside value, and i32 labels. LibTorch checks
// the general case (test/check/spatial-transform.mlir).
//
//===----------------------------------------------------------------------------------===//
#include "ExpectError.h"

#include "medrun/Kernels.h"
#include "medrun/Parallel.h"
#include "medrun/Tensor.h"

#include "gtest/gtest.h"

#include <cstring>
#include <random>

using namespace medrun;
using namespace medrun::cpu;

namespace {

/// x (1x1x1x1x4, f32 or i32) sampled at W positions c_in + (o − c_out) + shift, o = 0, 1, 2.
std::vector<double> sampleW(const std::vector<double> &x, double shift, SpatialParams p,
                            DType dt = DType::F32) {
  Tensor in(dt, {1, 1, 1, 1, 4}), m(DType::F32, {1, 3, 4}), y(dt, {1, 1, 1, 1, 3});
  for (int i = 0; i < 4; ++i) {
    if (dt == DType::I32)
      in.data<int32_t>()[i] = static_cast<int32_t>(x[i]);
    else
      in.data<float>()[i] = static_cast<float>(x[i]);
  }
  const float mat[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, static_cast<float>(shift)};
  std::copy(mat, mat + 12, m.data<float>());
  spatialTransform(in, m, p, y);
  std::vector<double> out;
  for (int i = 0; i < 3; ++i)
    out.push_back(dt == DType::I32 ? y.data<int32_t>()[i] : y.data<float>()[i]);
  return out;
}

SpatialParams params(SpatialMode mode, SpatialBorder border = SpatialBorder::Zeros,
                     double value = 0, std::vector<int64_t> labels = {}) {
  SpatialParams p;
  p.mode = mode;
  p.border = border;
  p.value = value;
  p.labels = std::move(labels);
  return p;
}

const std::vector<double> kRamp = {10, 20, 30, 40};

} // namespace

// c_in = 1.5, c_out = 1: a shift s samples at o + 0.5 + s.
TEST(KernelsSpatial, LinearWeights) {
  EXPECT_EQ(sampleW(kRamp, 0.25, params(SpatialMode::Linear)),
            (std::vector<double>{17.5, 27.5, 37.5}));
  EXPECT_EQ(sampleW(kRamp, -0.5, params(SpatialMode::Linear)),
            (std::vector<double>{10, 20, 30})); // on voxel centres: the voxels themselves
}

TEST(KernelsSpatial, Borders) {
  // Positions 2.5, 3.5, 4.5: the neighbours past the last voxel read 0 or the constant.
  EXPECT_EQ(sampleW(kRamp, 2, params(SpatialMode::Linear)), (std::vector<double>{35, 20, 0}));
  EXPECT_EQ(sampleW(kRamp, 2, params(SpatialMode::Linear, SpatialBorder::Constant, 7)),
            (std::vector<double>{35, 23.5, 7}));
  // Reflection about 3.5 (the outer edge), then clamped to 3: 3.5 -> 3.5 -> 3 (40), 4.5 ->
  // 2.5 (35); 2.5 stays (35).
  EXPECT_EQ(sampleW(kRamp, 2, params(SpatialMode::Linear, SpatialBorder::Reflection)),
            (std::vector<double>{35, 40, 35}));
  // Positions -1.75, -0.75, 0.25: reflected about -0.5 to 0.75, -0.25 -> clamped 0, 0.25.
  EXPECT_EQ(sampleW(kRamp, -2.25, params(SpatialMode::Linear, SpatialBorder::Reflection)),
            (std::vector<double>{17.5, 10, 12.5}));
  // Nearest: 3.5 rounds to 4 (outside), 4.5 to 4.
  EXPECT_EQ(sampleW(kRamp, 2, params(SpatialMode::Nearest, SpatialBorder::Constant, -1)),
            (std::vector<double>{30, -1, -1}));
}

TEST(KernelsSpatial, NearestRoundsHalfToEven) {
  // Positions 0.5, 1.5, 2.5 -> 0, 2, 2 (grid_sample's nearbyint).
  EXPECT_EQ(sampleW(kRamp, 0, params(SpatialMode::Nearest)), (std::vector<double>{10, 30, 30}));
}

TEST(KernelsSpatial, LinearArgmaxTiesAndOutside) {
  const std::vector<double> labels = {0, 1, 1, 2};
  for (DType dt : {DType::F32, DType::I32}) {
    SCOPED_TRACE(dtypeName(dt));
    auto p = params(SpatialMode::LinearArgmax, SpatialBorder::Zeros, -1, {0, 1, 2});
    // 0.5: 0 and 1 tie, the lower wins; 1.5: 1; 2.5: 1 and 2 tie -> 1.
    EXPECT_EQ(sampleW(labels, 0, p, dt), (std::vector<double>{0, 1, 1}));
    // 1.75: 1; 2.75: 2 outweighs 1; 3.75 is outside: -1.
    EXPECT_EQ(sampleW(labels, 1.25, p, dt), (std::vector<double>{1, 2, -1}));
    // 3.0 is the last voxel (inside), 4.0 is not.
    EXPECT_EQ(sampleW(labels, 1.5, p, dt), (std::vector<double>{1, 2, -1}));
    // -0.25 is outside (below 0) even though a trilinear sample would still see voxel 0.
    EXPECT_EQ(sampleW(labels, -0.75, p, dt), (std::vector<double>{-1, 1, 1}));
    // A label missing from the list counts for none: 1 is not listed.
    auto q = params(SpatialMode::LinearArgmax, SpatialBorder::Zeros, -1, {0, 2});
    EXPECT_EQ(sampleW(labels, 0, q, dt), (std::vector<double>{0, 0, 2}));
  }
}

TEST(KernelsSpatial, SameBitsForAnyThreadCount) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  Tensor x(DType::F32, {2, 3, 9, 11, 7}), m(DType::F32, {2, 3, 4});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = d(rng);
  for (int64_t i = 0; i < m.numel(); ++i)
    m.data<float>()[i] = d(rng);
  const int saved = numThreads();
  Tensor a(DType::F32, {2, 3, 5, 6, 7}), b(DType::F32, {2, 3, 5, 6, 7});
  setNumThreads(1);
  spatialTransform(x, m, params(SpatialMode::Linear, SpatialBorder::Reflection), a);
  setNumThreads(3);
  spatialTransform(x, m, params(SpatialMode::Linear, SpatialBorder::Reflection), b);
  setNumThreads(saved);
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes()));
}

TEST(KernelsSpatial, RejectsMismatchedOperands) {
  Tensor x(DType::F32, {2, 1, 4, 4, 4}), y(DType::F32, {2, 1, 3, 3, 3});
  Tensor m3(DType::F32, {2, 3, 3}), m64(DType::I32, {2, 3, 4});
  EXPECT_ERROR(spatialTransform(x, m3, params(SpatialMode::Linear), y), "spatial_transform",
               "matrix 2x3x3");
  EXPECT_ERROR(spatialTransform(x, m64, params(SpatialMode::Linear), y), "matrix",
               "element type i32", "expected f32");
  Tensor labels(DType::I32, {2, 1, 4, 4, 4}), ly(DType::I32, {2, 1, 3, 3, 3});
  Tensor m(DType::F32, {2, 3, 4});
  EXPECT_ERROR(spatialTransform(labels, m, params(SpatialMode::Linear), ly), "mode linear",
               "float input");
  EXPECT_ERROR(spatialTransform(labels, m, params(SpatialMode::LinearArgmax), ly),
               "at least one label");
}
