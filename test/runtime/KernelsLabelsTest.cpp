//===- KernelsLabelsTest.cpp - the label transforms on hand-computed cases ---------===//
//
// Small volumes whose results are written out by hand from the ops' definitions
// (BANIS's affinities, nnU-Net's remove-label and regions, torch's nearest-exact index),
// in every label type: test/check/labels.mlir compares the same kernels with LibTorch on
// random labels.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"
#include "medrun/Tensor.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <vector>

using namespace medrun;
using namespace medrun::cpu;

namespace {

/// Labels of type `dt` (Tensor::to converts floats only: integers are written here).
Tensor labels(DType dt, const Shape &shape, const std::vector<int64_t> &v) {
  Tensor t(isFloat(dt) ? DType::F64 : dt, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
    case DType::F64: t.data<double>()[i] = static_cast<double>(v[i]); break;
    case DType::I8: t.data<int8_t>()[i] = static_cast<int8_t>(v[i]); break;
    case DType::I32: t.data<int32_t>()[i] = static_cast<int32_t>(v[i]); break;
    case DType::I64: t.data<int64_t>()[i] = v[i]; break; // exactly, beyond 2^53
    default: ADD_FAILURE() << "no labels of type " << dtypeName(dt);
    }
  }
  return isFloat(dt) ? t.to(dt) : t;
}

std::vector<double> values(const Tensor &t) {
  if (isFloat(t.dtype())) {
    Tensor f = t.to(DType::F64);
    return std::vector<double>(f.data<double>(), f.data<double>() + f.numel());
  }
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
    case DType::I8: out.push_back(t.data<int8_t>()[i]); break;
    case DType::I32: out.push_back(t.data<int32_t>()[i]); break;
    case DType::I64: out.push_back(static_cast<double>(t.data<int64_t>()[i])); break;
    default: ADD_FAILURE() << "no labels of type " << dtypeName(t.dtype());
    }
  }
  return out;
}

const DType kLabelTypes[] = {DType::F32, DType::F64, DType::BF16, DType::I8, DType::I32, DType::I64};

} // namespace

TEST(KernelsLabels, AffinitiesAlongARow) {
  for (DType dt : kLabelTypes) {
    SCOPED_TRACE(dtypeName(dt));
    // ids along W: an object of two voxels, background, unlabelled, another object.
    Tensor seg = labels(dt, {1, 1, 1, 1, 6}, {2, 2, 0, 0, -1, 3});
    Tensor aff(DType::F32, {1, 1, 1, 1, 6}), mask(DType::F32, {1, 1, 1, 1, 6});
    affinities(seg, {0, 0, 1}, {0, 0, 0}, 0, aff, mask);
    // 2=2 | 2≠0 | background | 0,−1 unlabelled | −1 unlabelled | trailing edge
    EXPECT_EQ(values(aff), (std::vector<double>{1, 0, 0, 0, 0, 0}));
    EXPECT_EQ(values(mask), (std::vector<double>{1, 1, 1, 0, 0, 0}));

    // The first 4 voxels with offset 2: the other end may lie beyond the box (valid inside
    // the volume); with unlabelled_below = 1 background is unlabelled too.
    Tensor aff2(DType::F32, {1, 1, 1, 1, 4}), mask2(DType::F32, {1, 1, 1, 1, 4});
    affinities(seg, {0, 0, 2}, {0, 0, 0}, 0, aff2, mask2);
    EXPECT_EQ(values(aff2), (std::vector<double>{0, 0, 0, 0}));
    // 2,0 | 2,0 | 0,−1 | 0,3 (index 5, outside the box)
    EXPECT_EQ(values(mask2), (std::vector<double>{1, 1, 0, 1}));
    affinities(seg, {0, 0, 2}, {0, 0, 0}, 1, aff2, mask2);
    EXPECT_EQ(values(mask2), (std::vector<double>{0, 0, 0, 0}));
    // A negative offset from a box starting at 1: the leading edge is invalid.
    Tensor aff3(DType::F32, {1, 1, 1, 1, 5}), mask3(DType::F32, {1, 1, 1, 1, 5});
    affinities(seg, {0, 0, -1}, {0, 0, 1}, 0, aff3, mask3);
    EXPECT_EQ(values(aff3), (std::vector<double>{1, 0, 0, 0, 0}));
    EXPECT_EQ(values(mask3), (std::vector<double>{1, 1, 1, 0, 0}));
  }
}

TEST(KernelsLabels, AffinitiesPerAxisAndSample) {
  // 2 samples of 2x2x1: sample 0 one object, sample 1 split along D.
  Tensor seg = labels(DType::I32, {2, 1, 2, 2, 1}, {5, 5, 5, 5, 5, 5, 6, 6});
  Tensor aff(DType::F32, {2, 2, 2, 2, 1}), mask(DType::F32, {2, 2, 2, 2, 1});
  affinities(seg, {1, 0, 0, 0, 1, 0}, {0, 0, 0}, 0, aff, mask);
  // [n][k][z][y]: along D valid at z = 0, along H at y = 0.
  EXPECT_EQ(values(aff), (std::vector<double>{1, 1, 0, 0, 1, 0, 1, 0, //
                                              0, 0, 0, 0, 1, 0, 1, 0}));
  EXPECT_EQ(values(mask), (std::vector<double>{1, 1, 0, 0, 1, 0, 1, 0, //
                                               1, 1, 0, 0, 1, 0, 1, 0}));
}

TEST(KernelsLabels, AffinitiesCompareIdsInTheirType) {
  // 2^53 and 2^53 + 1 are one double: as i64 ids they are two objects.
  const int64_t big = int64_t{1} << 53;
  Tensor seg = labels(DType::I64, {1, 1, 1, 1, 2}, {big, big + 1});
  Tensor aff(DType::F32, {1, 1, 1, 1, 2}), mask(DType::F32, {1, 1, 1, 1, 2});
  affinities(seg, {0, 0, 1}, {0, 0, 0}, 0, aff, mask);
  EXPECT_EQ(values(aff), (std::vector<double>{0, 0}));
  EXPECT_EQ(values(mask), (std::vector<double>{1, 0}));
}

TEST(KernelsLabels, RemoveLabel) {
  for (DType dt : kLabelTypes) {
    SCOPED_TRACE(dtypeName(dt));
    Tensor x = labels(dt, {1, 1, 5}, {-1, 0, 3, -1, 2});
    Tensor y(dt, {1, 1, 5});
    removeLabel(x, -1, 0, y);
    EXPECT_EQ(values(y), (std::vector<double>{0, 0, 3, 0, 2}));
  }
}

TEST(KernelsLabels, Regions) {
  for (DType dt : kLabelTypes) {
    SCOPED_TRACE(dtypeName(dt));
    Tensor x = labels(dt, {2, 1, 4}, {0, 1, 2, 3, 3, 2, -1, 1});
    Tensor y(DType::F32, {2, 2, 4});
    labelRegions(x, {{1, 2, 3}, {3}}, y);
    EXPECT_EQ(values(y), (std::vector<double>{0, 1, 1, 1, 0, 0, 0, 1, //
                                              1, 1, 0, 1, 1, 0, 0, 0}));
  }
}

TEST(KernelsLabels, NearestExactIndices) {
  // Along W, input i holds i: the result is the index each output reads. torch's
  // nearest-exact: floor((j + 0.5)·n/m) (floor-nearest would read 0 1 3 5 7 for 9 -> 5).
  auto indices = [](int64_t n, int64_t m) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(i);
    Tensor x = labels(DType::I32, {1, 1, 1, 1, n}, v), y(DType::I32, {1, 1, 1, 1, m});
    downsampleNearest(x, y);
    return values(y);
  };
  EXPECT_EQ(indices(9, 5), (std::vector<double>{0, 2, 4, 6, 8}));
  EXPECT_EQ(indices(7, 3), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(indices(8, 4), (std::vector<double>{1, 3, 5, 7}));
  EXPECT_EQ(indices(2, 5), (std::vector<double>{0, 0, 1, 1, 1}));
  // All axes and channels at once: 2x2x2 -> 1x1x1 reads (1, 1, 1) of each channel.
  Tensor x =
      labels(DType::F32, {1, 2, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  Tensor y(DType::F32, {1, 2, 1, 1, 1});
  downsampleNearest(x, y);
  EXPECT_EQ(values(y), (std::vector<double>{7, 15}));
}
