//===- ModelStatsTest.cpp - parameter, FLOP and memory counts by hand -----------===//
#include "TestUtil.h"

#include "med/Analysis/ModelStats.h"

#include "gtest/gtest.h"

using namespace mlir;

namespace {

const char *kNet = R"mlir(
med.parameter @"c.weight" : tensor<4x2x3x3x3xf32> init uniform(54)
med.parameter @"c.bias" : tensor<4xf32> init uniform(54)
med.parameter @"t.weight" : tensor<4x3x3x3x3xf32> init uniform(81)
med.parameter @"n.weight" : tensor<3xf32> init ones
func.func @net(%x: tensor<1x2x5x6x7xf32>) -> tensor<1x3x9x11x13xf32> {
  %w = med.param @"c.weight" : tensor<4x2x3x3x3xf32>
  %b = med.param @"c.bias" : tensor<4xf32>
  %t = med.param @"t.weight" : tensor<4x3x3x3x3xf32>
  %g = med.param @"n.weight" : tensor<3xf32>
  %g2 = med.param @"n.weight" : tensor<3xf32>
  %0 = med.conv3d %x, %w, %b {padding = array<i64: 1, 1, 1>} : (tensor<1x2x5x6x7xf32>, tensor<4x2x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x6x7xf32>
  %1 = med.conv3d_transpose %0, %t {stride = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>} : (tensor<1x4x5x6x7xf32>, tensor<4x3x3x3x3xf32>) -> tensor<1x3x9x11x13xf32>
  %2 = med.group_norm %1, %g, %g2 {groups = 3 : i64} : (tensor<1x3x9x11x13xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x9x11x13xf32>
  %3 = med.gelu %2 : tensor<1x3x9x11x13xf32>
  return %3 : tensor<1x3x9x11x13xf32>
}
)mlir";

TEST(ModelStats, CountsByHand) {
  medtest::Context c;
  auto module = c.parse(kNet);
  ASSERT_TRUE(module) << c.diagnostics;
  auto f = *module->getOps<func::FuncOp>().begin();
  FailureOr<mlir::med::ModelStats> s = mlir::med::computeModelStats(f);
  ASSERT_TRUE(succeeded(s)) << c.diagnostics;

  // Parameters are counted once each, however often they are read.
  EXPECT_EQ(s->parameterCount, 4 * 2 * 27 + 4 + 4 * 3 * 27 + 3);
  EXPECT_EQ(s->parameterTensors, 4);
  // conv: every output element reads Cin/groups * k^3 = 54 inputs.
  double conv = 4.0 * 5 * 6 * 7 * 54;
  // transposed: every input element writes Cout/groups * k^3 = 81 outputs.
  double transposed = 4.0 * 5 * 6 * 7 * 81;
  EXPECT_DOUBLE_EQ(s->convMacs, conv + transposed);
  EXPECT_DOUBLE_EQ(s->flopsByFamily.lookup("conv dense"), 2 * conv);
  EXPECT_DOUBLE_EQ(s->flopsByFamily.lookup("conv transposed"), 2 * transposed);
  double out = 3.0 * 9 * 11 * 13;
  EXPECT_DOUBLE_EQ(s->flopsByFamily.lookup("normalization"), 7 * out);
  // GELU, and the conv's bias: one add per output element.
  EXPECT_DOUBLE_EQ(s->flopsByFamily.lookup("elementwise"), out + 4.0 * 5 * 6 * 7);

  int64_t x = 2 * 5 * 6 * 7 * 4, c0 = 4 * 5 * 6 * 7 * 4, t = 3 * 9 * 11 * 13 * 4;
  EXPECT_EQ(s->activationBytes, c0 + t + t + t);
  // Peak: while the norm runs, its input and output are alive (x and c0 are freed).
  EXPECT_EQ(s->peakLiveBytes, std::max({x + c0, c0 + t, 2 * t}));
}

TEST(ModelStats, RejectsDynamicShapes) {
  medtest::Context c;
  auto module = c.parse(R"mlir(
func.func @f(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = med.gelu %x : tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
)mlir");
  ASSERT_TRUE(module) << c.diagnostics;
  auto f = *module->getOps<func::FuncOp>().begin();
  EXPECT_TRUE(failed(mlir::med::computeModelStats(f)));
  EXPECT_NE(c.diagnostics.find("needs static shapes"), std::string::npos) << c.diagnostics;
}

} // namespace
