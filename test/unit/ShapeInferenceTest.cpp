//===- ShapeInferenceTest.cpp - inferred shapes vs brute-force counts ----------===//
//
// Output sizes of convolutions are checked against an enumeration of the valid window
// positions (conv) and of the written output indices (transposed conv), over many random
// configurations with odd sizes; broadcasting against NumPy's rule written out per axis.
//
//===----------------------------------------------------------------------------------===//
#include "TestUtil.h"

#include "med/IR/MedOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "gtest/gtest.h"

#include <random>
#include <sstream>

using namespace mlir;

namespace {

std::string tensor(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << "tensor<";
  for (int64_t d : shape)
    os << (d < 0 ? std::string("?") : std::to_string(d)) << "x";
  os << "f32>";
  return os.str();
}

std::string array(const std::vector<int64_t> &v) {
  std::ostringstream os;
  os << "array<i64: ";
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? ", " : "") << v[i];
  os << ">";
  return os.str();
}

// Parses `op` applied to function arguments of the given types, declared with a dynamic
// result of rank `rank`, and returns the re-inferred result shape (empty on failure).
std::vector<int64_t> inferShape(medtest::Context &c, const std::string &op,
                                const std::vector<std::vector<int64_t>> &args, int64_t rank) {
  std::ostringstream text, types;
  text << "func.func @f(";
  for (size_t i = 0; i < args.size(); ++i) {
    text << (i ? ", " : "") << "%a" << i << ": " << tensor(args[i]);
    types << (i ? ", " : "") << tensor(args[i]);
  }
  std::vector<int64_t> dyn(rank, -1);
  text << ") {\n  %r = " << op << " : (" << types.str() << ") -> " << tensor(dyn)
       << "\n  return\n}\n";
  auto module = c.parse(text.str());
  if (!module)
    return {};
  auto f = *module->getOps<func::FuncOp>().begin();
  Operation *target = &f.getBody().front().front();
  SmallVector<Type> inferred;
  if (failed(cast<InferTypeOpInterface>(target).inferReturnTypes(
          &c.ctx, target->getLoc(), target->getOperands(), target->getAttrDictionary(),
          target->getPropertiesStorage(), target->getRegions(), inferred)))
    return {};
  auto shape = cast<RankedTensorType>(inferred[0]).getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

// Number of output positions o >= 0 whose dilated window lies inside the padded input.
int64_t convOutputByEnumeration(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t count = 0;
  for (int64_t o = 0; o * s + d * (k - 1) <= n + 2 * p - 1; ++o)
    ++count;
  return count;
}

// One past the largest output index an input element writes to, after cropping `p` on
// both sides and extending by the output padding.
int64_t transposedOutputByEnumeration(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d,
                                      int64_t op) {
  int64_t last = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < k; ++t)
      last = std::max(last, i * s + t * d);
  return last + 1 - 2 * p + op;
}

TEST(ShapeInference, Conv3dMatchesEnumeration) {
  medtest::Context c;
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    int64_t groups = pick(1, 3), cin = groups * pick(1, 3), cout = groups * pick(1, 3);
    std::vector<int64_t> in = {pick(1, 3), cin}, w = {cout, cin / groups}, stride, pad, dil;
    std::vector<int64_t> expected = {in[0], cout};
    for (int a = 0; a < 3; ++a) {
      int64_t k = pick(1, 5), s = pick(1, 3), d = pick(1, 2), p = pick(0, 2);
      int64_t n = d * (k - 1) + 1 + pick(0, 9); // never empty
      in.push_back(n);
      w.push_back(k);
      stride.push_back(s);
      pad.push_back(p);
      dil.push_back(d);
      expected.push_back(convOutputByEnumeration(n, k, s, p, d));
    }
    std::string op = "med.conv3d %a0, %a1 {stride = " + array(stride) + ", padding = " +
                     array(pad) + ", dilation = " + array(dil) +
                     ", groups = " + std::to_string(groups) + " : i64}";
    EXPECT_EQ(inferShape(c, op, {in, w}, 5), expected) << op << "\n" << c.diagnostics;
  }
}

TEST(ShapeInference, Conv3dTransposeMatchesEnumeration) {
  medtest::Context c;
  std::mt19937 rng(11);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    int64_t groups = pick(1, 3), cin = groups * pick(1, 3), coutPerGroup = pick(1, 3);
    std::vector<int64_t> in = {pick(1, 3), cin}, w = {cin, coutPerGroup}, stride, pad, dil, outPad;
    std::vector<int64_t> expected = {in[0], coutPerGroup * groups};
    for (int a = 0; a < 3; ++a) {
      int64_t k = pick(1, 5), s = pick(1, 3), d = pick(1, 2), n = pick(1, 9);
      int64_t op = pick(0, std::max(s, d) - 1);
      int64_t p = std::min<int64_t>(pick(0, 2), ((n - 1) * s + d * (k - 1) + op) / 2);
      in.push_back(n);
      w.push_back(k);
      stride.push_back(s);
      pad.push_back(p);
      dil.push_back(d);
      outPad.push_back(op);
      expected.push_back(transposedOutputByEnumeration(n, k, s, p, d, op));
    }
    std::string op = "med.conv3d_transpose %a0, %a1 {stride = " + array(stride) +
                     ", padding = " + array(pad) + ", dilation = " + array(dil) +
                     ", output_padding = " + array(outPad) +
                     ", groups = " + std::to_string(groups) + " : i64}";
    EXPECT_EQ(inferShape(c, op, {in, w}, 5), expected) << op << "\n" << c.diagnostics;
  }
}

TEST(ShapeInference, MedNeXtUpBlockRestoresSize) {
  // Depthwise transposed k3 stride 2 padding 1 gives 2n-1; the (1,0) pad restores 2n.
  medtest::Context c;
  for (int64_t n : {4, 8, 33}) {
    auto up = inferShape(c,
                         "med.conv3d_transpose %a0, %a1 {stride = array<i64: 2, 2, 2>, padding = "
                         "array<i64: 1, 1, 1>, groups = 8 : i64}",
                         {{1, 8, n, n, n}, {8, 1, 3, 3, 3}}, 5);
    EXPECT_EQ(up, (std::vector<int64_t>{1, 8, 2 * n - 1, 2 * n - 1, 2 * n - 1}));
    auto padded = inferShape(c,
                             "med.pad %a0 {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, "
                             "0, 0, 0, 0>}",
                             {up}, 5);
    EXPECT_EQ(padded, (std::vector<int64_t>{1, 8, 2 * n, 2 * n, 2 * n}));
  }
}

TEST(ShapeInference, Broadcasting) {
  medtest::Context c;
  struct Case {
    std::vector<int64_t> a, b, expected;
  } cases[] = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
      {{2, 3, 4}, {4}, {2, 3, 4}},
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},
      {{1}, {5, 1, 7}, {5, 1, 7}},
      {{-1, 3, 1}, {1, 3, 9}, {-1, 3, 9}},
      {{-1, 3}, {5, 1}, {5, 3}},
  };
  for (auto &cs : cases) {
    int64_t rank = std::max(cs.a.size(), cs.b.size());
    std::vector<int64_t> got = inferShape(c, "med.mul %a0, %a1", {cs.a, cs.b}, rank);
    std::vector<int64_t> expected = cs.expected;
    for (auto &d : got)
      if (ShapedType::isDynamic(d))
        d = -1;
    EXPECT_EQ(got, expected) << c.diagnostics;
  }
  EXPECT_TRUE(inferShape(c, "med.add %a0, %a1", {{2, 3}, {4, 3, 2}}, 3).empty());
  EXPECT_NE(c.diagnostics.find("operands do not broadcast"), std::string::npos) << c.diagnostics;
}

TEST(ShapeInference, ReduceAndConcat) {
  medtest::Context c;
  EXPECT_EQ(inferShape(c, "med.reduce sum %a0 {axes = array<i64: 0, 2>}", {{3, 5, 7}}, 1),
            (std::vector<int64_t>{5}));
  EXPECT_EQ(inferShape(c, "med.reduce max %a0 {axes = array<i64: 1>, keepdims}", {{3, 5, 7}}, 3),
            (std::vector<int64_t>{3, 1, 7}));
  EXPECT_EQ(inferShape(c, "med.concat %a0, %a1, %a2 {axis = 1 : i64}",
                       {{2, 1, 3}, {2, 4, 3}, {2, 2, 3}}, 3),
            (std::vector<int64_t>{2, 7, 3}));
  EXPECT_EQ(inferShape(c,
                       "med.slice %a0 {offsets = array<i64: 1, 0>, sizes = array<i64: 3, 2>, "
                       "strides = array<i64: 2, 3>}",
                       {{7, 5}}, 2),
            (std::vector<int64_t>{3, 2}));
}

} // namespace
