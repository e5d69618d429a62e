//===- PlanningTest.cpp - nnU-Net's network topology (Planning.h) ---------------------===//
//
// The worked examples of ../shared/reference/nnunet-pipeline.md §3; the whole planner is
// compared with a NumPy port in test/medrun/plan.test.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Planning.h"
#include "medrun/Resample.h"

#include "gtest/gtest.h"

using namespace medrun;

TEST(Planning, IsotropicPatchPoolsEveryAxisFiveTimes) {
  const Topology t = poolAndConvProps({1, 1, 1}, {128, 128, 128});
  ASSERT_EQ(t.strides.size(), 6u);
  EXPECT_EQ(t.strides[0], (std::array<int64_t, 3>{1, 1, 1}));
  for (size_t s = 1; s < 6; ++s)
    EXPECT_EQ(t.strides[s], (std::array<int64_t, 3>{2, 2, 2})) << s;
  ASSERT_EQ(t.kernels.size(), 6u);
  for (const auto &k : t.kernels)
    EXPECT_EQ(k, (std::array<int64_t, 3>{3, 3, 3}));
  EXPECT_EQ(t.patch, (std::array<int64_t, 3>{128, 128, 128}));
  EXPECT_EQ(t.pools, (std::array<int64_t, 3>{5, 5, 5}));
}

TEST(Planning, AnisotropicPatchPoolsInPlaneFirst) {
  const Topology t = poolAndConvProps({3.0, 0.78, 0.78}, {40, 256, 224});
  const std::vector<std::array<int64_t, 3>> strides = {{1, 1, 1}, {1, 2, 2}, {2, 2, 2},
                                                       {2, 2, 2}, {2, 2, 2}, {1, 2, 2}};
  EXPECT_EQ(t.strides, strides);
  const std::vector<std::array<int64_t, 3>> kernels = {{1, 3, 3}, {3, 3, 3}, {3, 3, 3},
                                                       {3, 3, 3}, {3, 3, 3}, {3, 3, 3}};
  EXPECT_EQ(t.kernels, kernels);
  // 2^3 along z, 2^5 in-plane: 40, 256 and 224 are multiples already.
  EXPECT_EQ(t.patch, (std::array<int64_t, 3>{40, 256, 224}));
  // A patch that is not a multiple is padded up (nnU-Net's pad_shape): 100 pools 4 times
  // (7 < 8 stops it), 128 and 130 five times.
  const Topology odd = poolAndConvProps({1, 1, 1}, {100, 128, 130});
  EXPECT_EQ(odd.pools, (std::array<int64_t, 3>{4, 5, 5}));
  EXPECT_EQ(odd.patch, (std::array<int64_t, 3>{112, 128, 160}));
}

// nnU-Net's separate-z decision (default_resampling.py, get_do_separate_z / get_lowres_axis).
TEST(Planning, SeparateZOnTheOneCoarseAxis) {
  EXPECT_EQ(separateAxis({3.0, 0.8, 0.8}, {2.0, 0.8, 0.8}), 0);  // the current spacing decides
  EXPECT_EQ(separateAxis({1.0, 1.0, 1.0}, {1.0, 0.7, 4.0}), 2);  // else the target's
  EXPECT_EQ(separateAxis({2.0, 1.0, 1.0}, {2.0, 1.0, 1.0}), -1); // ratio 2: not anisotropic
  EXPECT_EQ(separateAxis({4.0, 4.0, 1.0}, {4.0, 4.0, 1.0}), -1); // two coarse axes: none
}
