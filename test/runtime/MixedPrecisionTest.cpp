//===- MixedPrecisionTest.cpp - binary16 rounding, loss-scaling kernels, precisions ---===//
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Kernels.h"
#include "medrun/Tensor.h"

#include "ArtifactFiles.h"

#include "gtest/gtest.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

using namespace medrun;

namespace {

// IEEE binary16 decoded from its fields, independently of medrun::f16.
double decode(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 31)
    v = mant ? NAN : INFINITY;
  return (h & 0x8000) ? -v : v;
}

uint16_t bits(float x) { return f16(x).bits; }

TEST(Half, EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    double v = decode(static_cast<uint16_t>(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(f16(static_cast<float>(v)))));
      continue;
    }
    f16 x;
    x.bits = static_cast<uint16_t>(h);
    ASSERT_EQ(static_cast<double>(static_cast<float>(x)), v) << std::hex << h;
    ASSERT_EQ(bits(static_cast<float>(v)), h) << std::hex << h;
  }
}

// Between two neighbours a < b: below the midpoint a, above it b, at it the even one.
TEST(Half, RoundsToNearestEven) {
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    float a = static_cast<float>(decode(h)), b = static_cast<float>(decode(h + 1));
    float mid = static_cast<float>((static_cast<double>(a) + b) / 2); // exact: 12 bits
    uint16_t even = (h & 1) ? h + 1 : h;
    for (float sign : {1.0f, -1.0f}) {
      uint16_t s = sign < 0 ? 0x8000 : 0;
      ASSERT_EQ(bits(sign * mid), even | s) << std::hex << h;
      ASSERT_EQ(bits(sign * std::nextafter(mid, 0.0f)), h | s) << std::hex << h;
      ASSERT_EQ(bits(sign * std::nextafter(mid, INFINITY)), (h + 1) | s) << std::hex << h;
    }
  }
}

TEST(Half, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(bits(65504.0f), 0x7bff);
  EXPECT_EQ(bits(65520.0f), 0x7c00); // the midpoint to 65536 rounds to the even: inf
  EXPECT_EQ(bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(bits(1e6f), 0x7c00);
  EXPECT_EQ(bits(-3e38f), 0xfc00);
  EXPECT_EQ(bits(INFINITY), 0x7c00);
  EXPECT_EQ(bits(-INFINITY), 0xfc00);
  EXPECT_TRUE(std::isnan(roundToF16(NAN)));
  EXPECT_EQ(bits(std::ldexp(1.0f, -25)), 0x0000); // half the smallest subnormal: tie to 0
  EXPECT_EQ(bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(bits(3 * std::ldexp(1.0f, -25)), 0x0002); // 1.5 units: tie to the even 2
  EXPECT_EQ(bits(3 * std::ldexp(1.0f, -26)), 0x0001); // 0.75 units
  EXPECT_EQ(bits(-0.0f), 0x8000);
  EXPECT_EQ(bits(1e-30f), 0x0000);
  EXPECT_EQ(roundToF16(1.0f + std::ldexp(1.0f, -11)), 1.0f); // tie: to the even 1
  EXPECT_EQ(roundToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
}

TEST(Half, TensorConversion) {
  Tensor t(DType::F32, {4});
  float *p = t.data<float>();
  p[0] = 0.1f, p[1] = 70000.0f, p[2] = -2.5f, p[3] = 1e-8f;
  Tensor h = t.to(DType::F16);
  EXPECT_EQ(h.dtype(), DType::F16);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(h.at(i), static_cast<double>(roundToF16(p[i])));
  Tensor back = h.to(DType::F32);
  EXPECT_EQ(back.data<float>()[0], roundToF16(0.1f));
  EXPECT_TRUE(std::isinf(back.data<float>()[1]));
}

// Tensor::to's typed loops (f32 to and from f64, bf16, f16) give what converting element by
// element gives, on bit patterns from every range (subnormals, overflow, NaN, inf).
TEST(Conversion, TypedLoopsMatchElementwise) {
  Tensor t(DType::F32, {4096});
  uint32_t u = 12345;
  for (int64_t i = 0; i < t.numel(); ++i) {
    u = u * 1664525u + 1013904223u;
    uint32_t bits = i < 8 ? std::array<uint32_t, 8>{0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00000001u,
                                                     0x80000000u, 0x477ff000u, 0x38800000u, 0x33000000u}[i]
                          : u;
    std::memcpy(&t.data<float>()[i], &bits, 4);
  }
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  for (DType d : {DType::F64, DType::BF16, DType::F16}) {
    Tensor c = t.to(d), back = c.to(DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i) {
      float x = t.data<float>()[i];
      double want = d == DType::F64    ? static_cast<double>(x)
                    : d == DType::BF16 ? static_cast<double>(static_cast<float>(bf16(x)))
                                       : static_cast<double>(roundToF16(x));
      ASSERT_TRUE(same(c.at(i), want)) << dtypeName(d) << " element " << i;
      ASSERT_TRUE(same(back.data<float>()[i], static_cast<float>(want))) << dtypeName(d) << " back, element " << i;
    }
  }
}

// ---- kernels of dynamic loss scaling --------------------------------------------

Tensor vec(DType dtype, std::vector<double> v) {
  Tensor f(DType::F64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i)
    f.data<double>()[i] = v[i];
  return f.to(dtype);
}

Tensor scalar(double v) {
  Tensor t(DType::F32, {});
  t.data<float>()[0] = static_cast<float>(v);
  return t;
}

TEST(LossScaleKernels, AnyNonFinite) {
  Tensor y(DType::F32, {});
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    Tensor a = vec(d, {1, -2, 3e4}), b = vec(d, {0.5, 0});
    cpu::anyNonFinite({&a, &b}, y);
    EXPECT_EQ(y.at(0), 0) << dtypeName(d);
    for (double bad : {INFINITY, -INFINITY, NAN}) {
      Tensor c = vec(d, {0.5, bad});
      cpu::anyNonFinite({&a, &b, &c}, y);
      EXPECT_EQ(y.at(0), 1) << dtypeName(d) << " " << bad;
    }
  }
  // Many elements (several parallel chunks), one inf somewhere in the middle.
  Tensor big(DType::F32, {300007});
  cpu::anyNonFinite({&big}, y);
  EXPECT_EQ(y.at(0), 0);
  big.data<float>()[123457] = INFINITY;
  cpu::anyNonFinite({&big}, y);
  EXPECT_EQ(y.at(0), 1);
  // A bf16 overflow: 3e38 · 2 is inf in bf16 as in f32.
  Tensor over = vec(DType::F32, {3e38}).to(DType::BF16);
  over.data<bf16>()[0] = bf16(static_cast<float>(over.at(0)) * 2);
  cpu::anyNonFinite({&over}, y);
  EXPECT_EQ(y.at(0), 1);
}

TEST(LossScaleKernels, SelectTakesOneOperandWhole) {
  Tensor old = vec(DType::F32, {1, 2, 3}), fresh = vec(DType::F32, {NAN, INFINITY, 4});
  Tensor y(DType::F32, {3});
  cpu::select(scalar(1), old, fresh, y);
  EXPECT_EQ(std::memcmp(y.raw(), old.raw(), old.nbytes()), 0);
  cpu::select(scalar(0), old, fresh, y);
  EXPECT_EQ(std::memcmp(y.raw(), fresh.raw(), fresh.nbytes()), 0);
  cpu::select(scalar(NAN), old, fresh, y); // NaN counts as true
  EXPECT_EQ(std::memcmp(y.raw(), old.raw(), old.nbytes()), 0);
  Tensor wrong(DType::F32, {4});
  EXPECT_THROW(cpu::select(scalar(1), old, wrong, y), Error);
  Tensor notScalar(DType::F32, {2});
  EXPECT_THROW(cpu::select(notScalar, old, fresh, y), Error);
}

// torch._amp_update_scale_ worked by hand.
TEST(LossScaleKernels, UpdateLossScale) {
  struct Case {
    double scale, tracker, found;
    cpu::LossScaleParams p;
    double newScale, newTracker;
  };
  cpu::LossScaleParams torchDefaults; // 2, 0.5, 2000
  cpu::LossScaleParams every2{2.0, 0.5, 2};
  cpu::LossScaleParams odd{3.3, 0.3, 1};
  const Case cases[] = {
      {65536, 0, 0, torchDefaults, 65536, 1},        // a success counts
      {65536, 1998, 0, torchDefaults, 65536, 1999},  // not yet
      {65536, 1999, 0, torchDefaults, 131072, 0},    // the 2000th success grows
      {65536, 1999, 1, torchDefaults, 32768, 0},     // an overflow backs off, resets
      {65536, 5, NAN, torchDefaults, 32768, 0},      // NaN found_inf counts as found
      {3e38, 1, 0, every2, static_cast<float>(3e38), 0}, // no growth past f32's range
      {1, 0, 0, every2, 1, 1},
      {1, 1, 0, every2, 2, 0},
      {1.5, 0, 0, odd, static_cast<float>(1.5 * 3.3), 0},          // factors in double,
      {1.5, 7, 1, odd, static_cast<float>(static_cast<float>(1.5) * 0.3), 0}, // rounded to f32
  };
  for (const Case &c : cases) {
    Tensor s(DType::F32, {}), n(DType::F32, {});
    cpu::updateLossScale(scalar(c.scale), scalar(c.tracker), scalar(c.found), c.p, s, n);
    EXPECT_EQ(s.at(0), c.newScale) << c.scale << " " << c.tracker << " " << c.found;
    EXPECT_EQ(n.at(0), c.newTracker) << c.scale << " " << c.tracker << " " << c.found;
  }
}

// ---- the executor's precisions ------------------------------------------------------

// x (4), s (scalar), rng (i64); w read twice: as an activation (rounded under mixed
// precision) and, marked fp32, as a master weight.
//   a = x·w, b = a·s (overflows f16 for s = 1e5), t = Σ a (a scalar: f32),
//   c = w + w (fp32), assign w ← c (fp32).
const char *kMixedPlan = R"({"format":"medc-artifact","compiler":"test","source":"t.mlir",
 "source_sha256":"00","options":{},
 "parameters":[{"name":"w","dtype":"f32","shape":[4],"init":"zeros"}],
 "functions":[{"name":"f","precision":"fp16-mixed","init_loss_scale":1024,
   "values":[{"dtype":"f32","shape":[4],"storage":"f16"},{"dtype":"f32","shape":[],"storage":"f32"},
     {"dtype":"i64","shape":[],"storage":"i64"},{"dtype":"f32","shape":[4],"storage":"f16"},
     {"dtype":"f32","shape":[4],"storage":"f16"},{"dtype":"f32","shape":[4],"storage":"f16"},
     {"dtype":"f32","shape":[4],"storage":"f32"},{"dtype":"f32","shape":[4],"storage":"f32"},
     {"dtype":"f32","shape":[],"storage":"f32"}],
   "inputs":[0,1,2],"input_names":["x","s","rng"],"outputs":[4,5,7,8],
   "ops":[{"op":"param","operands":{},"results":[3],"attrs":{"name":"w"},"loc":""},
     {"op":"mul","operands":{"lhs":[0],"rhs":[3]},"results":[4],"attrs":{},"loc":""},
     {"op":"mul","operands":{"lhs":[4],"rhs":[1]},"results":[5],"attrs":{},"loc":""},
     {"op":"param","operands":{},"results":[6],"attrs":{"name":"w"},"loc":"","fp32":true},
     {"op":"add","operands":{"lhs":[6],"rhs":[6]},"results":[7],"attrs":{},"loc":"","fp32":true},
     {"op":"reduce","operands":{"input":[4]},"results":[8],
      "attrs":{"kind":"sum","axes":[0],"keepdims":false},"loc":""},
     {"op":"assign","operands":{"value":[7]},"results":[],"attrs":{"name":"w"},"loc":"","fp32":true}]}]})";

struct MixedRun {
  std::vector<Tensor> outputs;
  TensorMap updates;
};

const float kFine = 1.0f + std::ldexp(1.0f, -13); // not a binary16 number (11 bits)

MixedRun runMixed(Precision precision, TensorMap &params, double s = 1e5) {
  static Artifact a = Artifact::load(test::writeTemp("mixed.medc", test::container(kMixedPlan)));
  Tensor x(DType::F32, {4});
  for (int i = 0; i < 4; ++i)
    x.data<float>()[i] = kFine * static_cast<float>(i + 1);
  Tensor rng(DType::I64, {});
  rng.data<int64_t>()[0] = 7;
  MixedRun r;
  r.outputs = runCpu(a, a.function("f"), {x, scalar(s), rng}, params, precision, nullptr,
                     &r.updates);
  return r;
}

TensorMap masterWeights() {
  TensorMap params;
  params["w"] = vec(DType::F32, {kFine, kFine, kFine, kFine});
  return params;
}

TEST(Precision, NamesAndRecordedPrecision) {
  EXPECT_EQ(parsePrecision("fp16-mixed"), Precision::F16);
  EXPECT_EQ(parsePrecision("f16"), Precision::F16);
  EXPECT_EQ(parsePrecision("bf16-mixed"), Precision::BF16);
  EXPECT_EQ(storageType(Precision::F16), DType::F32);
  Artifact a = Artifact::load(test::writeTemp("mixed2.medc", test::container(kMixedPlan)));
  EXPECT_EQ(precisionOf(a.function("f")), Precision::F16);
  EXPECT_EQ(a.function("f").initLossScale, 1024);
  Function plain;
  EXPECT_EQ(precisionOf(plain), Precision::F32);
}

TEST(Precision, F16RoundsActivationsOnly) {
  TensorMap params = masterWeights();
  MixedRun r = runMixed(Precision::F16, params);
  const Tensor &a = r.outputs[0], &b = r.outputs[1], &c = r.outputs[2], &t = r.outputs[3];
  ASSERT_EQ(a.dtype(), DType::F32);
  for (int i = 0; i < 4; ++i) {
    // x and w are rounded to binary16 (kFine -> 1) before the product, which is rounded too
    EXPECT_EQ(a.data<float>()[i], roundToF16(roundToF16(kFine * (i + 1)) * 1.0f)) << i;
    EXPECT_TRUE(std::isinf(b.data<float>()[i])) << i; // over 65504
    EXPECT_EQ(c.data<float>()[i], 2 * kFine) << i;    // fp32: the master, not rounded
  }
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.at(0), a.at(0) + a.at(1) + a.at(2) + a.at(3)); // a scalar: not rounded
  ASSERT_EQ(r.updates.at("w").dtype(), DType::F32);
  EXPECT_EQ(r.updates.at("w").data<float>()[0], 2 * kFine);
  // The caller's master weights are untouched (values are rounded in copies).
  EXPECT_EQ(params.at("w").data<float>()[0], kFine);
}

TEST(Precision, BF16StoresActivationsInBF16) {
  TensorMap params = masterWeights();
  MixedRun r = runMixed(Precision::BF16, params);
  EXPECT_EQ(r.outputs[0].dtype(), DType::BF16);
  EXPECT_EQ(r.outputs[1].dtype(), DType::BF16);
  EXPECT_TRUE(std::isfinite(r.outputs[1].at(0))); // bf16 has f32's range
  EXPECT_EQ(r.outputs[2].dtype(), DType::F32);
  EXPECT_EQ(r.outputs[2].data<float>()[0], 2 * kFine);
  EXPECT_EQ(r.outputs[3].dtype(), DType::F32);
  EXPECT_EQ(r.updates.at("w").dtype(), DType::F32);
}

TEST(Precision, F32KeepsEverything) {
  TensorMap params = masterWeights();
  MixedRun r = runMixed(Precision::F32, params);
  EXPECT_EQ(r.outputs[0].data<float>()[1], kFine * 2 * kFine);
  EXPECT_TRUE(std::isfinite(r.outputs[1].at(0)));
}

TEST(Precision, IntegerScalarInputs) {
  Artifact a = Artifact::load(test::writeTemp("mixed3.medc", test::container(kMixedPlan)));
  TensorMap params = masterWeights(), updates;
  Tensor x(DType::F32, {4});
  // A float holding an integer is taken for the i64 input (medrun --input rng=7) ...
  EXPECT_NO_THROW(runCpu(a, a.function("f"), {x, scalar(1), scalar(7)}, params,
                         Precision::F32, nullptr, &updates));
  // ... anything else is not.
  try {
    runCpu(a, a.function("f"), {x, scalar(1), scalar(7.5)}, params, Precision::F32, nullptr,
           &updates);
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("argument arg2 'rng': expected an integer, got 7.5"),
              std::string::npos)
        << e.what();
  }
  try {
    runCpu(a, a.function("f"), {x, scalar(1), vec(DType::F32, {7})}, params, Precision::F32,
           nullptr, &updates);
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("argument arg2 'rng': expected scalar i64, got 1 f32"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
