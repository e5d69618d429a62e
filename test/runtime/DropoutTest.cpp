// med.dropout's CPU kernel (runtime/src/cpu/Random.cpp, medrun/Random.h) against its
// definition: the fraction kept is 1 − p (five standard errors over 2^20 elements), each kept
// element is exactly x · f32(1/(1 − p)) and every other one 0, the mask depends on nothing but
// (key, stream, sample, element) — so the gradient, which draws it again on dy, drops the
// same elements — and it is apart from med.random's numbers under the same key. Each rule is
// also run on a deliberately wrong variant (a mask kept with 1 − p ± 0.01, the scaling 1/p,
// med.random's counter word), which it must reject.
#include "medrun/Error.h"
#include "medrun/Kernels.h"
#include "medrun/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

using namespace medrun;

namespace {

constexpr int64_t kElements = 1 << 20;

Tensor keyTensor(int64_t key) {
  Tensor k(DType::I64, {});
  k.data<int64_t>()[0] = key;
  return k;
}

/// x: uniform in [0.5, 1.5) (never 0, so that a dropped element is told by its 0).
Tensor input(const Shape &shape, uint64_t seed, DType dtype = DType::F32) {
  Tensor x(DType::F32, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = u(rng);
  return dtype == DType::F32 ? x : x.to(dtype);
}

Tensor dropout(const Tensor &x, int64_t key, int64_t stream, double p) {
  Tensor y(x.dtype(), x.shape());
  cpu::dropout(x, keyTensor(key), stream, p, y);
  return y;
}

/// Fraction of the elements of y (f32) that are not 0.
double keptFraction(const Tensor &y) {
  int64_t kept = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    kept += y.data<float>()[i] != 0.0f;
  return static_cast<double>(kept) / static_cast<double>(y.numel());
}

/// The rule for the fraction kept: within five standard errors of 1 − p.
bool keepsOneMinusP(double fraction, double p, int64_t n) {
  return std::abs(fraction - (1 - p)) < 5 * std::sqrt(p * (1 - p) / static_cast<double>(n));
}

/// The rule for the values: each element 0 or exactly x · scale (f32 product).
bool scaledExactly(const Tensor &x, const Tensor &y, float scale) {
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float v = y.data<float>()[i];
    if (v != 0.0f && v != x.data<float>()[i] * scale)
      return false;
  }
  return true;
}

} // namespace

TEST(Dropout, KeepsOneMinusPOfTheElements) {
  const Tensor x = input({4, kElements / 4}, 1);
  for (double p : {0.1, 0.25, 0.5, 0.9}) {
    const Tensor y = dropout(x, stepKey(11, 0, 5), 2, p);
    const double f = keptFraction(y);
    EXPECT_TRUE(keepsOneMinusP(f, p, kElements)) << "p " << p << ": kept " << f;
    // Controls: the rule rejects a mask that keeps 1% more or fewer elements.
    EXPECT_FALSE(keepsOneMinusP(f, p - 0.01, kElements)) << "p " << p;
    EXPECT_FALSE(keepsOneMinusP(f, p + 0.01, kElements)) << "p " << p;
  }
}

TEST(Dropout, ScalesKeptElementsExactly) {
  const Tensor x = input({3, 5, 7, 11}, 2);
  for (double p : {0.1, 0.3, 0.5, 0.97}) {
    const Tensor y = dropout(x, stepKey(1, 0, 1), 0, p);
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    EXPECT_EQ(scale, dropoutScale(p));
    EXPECT_TRUE(scaledExactly(x, y, scale)) << "p " << p;
    // Control: the scaling 1/p (the kept probability mistaken for the dropped one; the same
    // at p = 0.5) fails, as does no scaling at all.
    if (p != 0.5)
      EXPECT_FALSE(scaledExactly(x, y, static_cast<float>(1.0 / p))) << "p " << p;
    EXPECT_FALSE(scaledExactly(x, y, 1.0f)) << "p " << p;
  }
  // p = 0: the identity.
  const Tensor same = dropout(x, stepKey(1, 0, 1), 0, 0.0);
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(same.data<float>()[i], x.data<float>()[i]);
  // f64: x / (1 − p) in double; bf16: the f32 product rounded once.
  const Tensor x64 = input({2, 3, 4, 5}, 3, DType::F64);
  const Tensor y64 = dropout(x64, 9, 1, 0.3);
  for (int64_t i = 0; i < x64.numel(); ++i) {
    const double v = y64.data<double>()[i];
    EXPECT_TRUE(v == 0 || v == x64.data<double>()[i] * (1.0 / 0.7)) << i;
  }
  const Tensor xb = input({2, 3, 4, 5}, 4, DType::BF16);
  const Tensor yb = dropout(xb, 9, 1, 0.3).to(DType::F32), xf = xb.to(DType::F32);
  for (int64_t i = 0; i < xb.numel(); ++i) {
    const float v = yb.data<float>()[i];
    EXPECT_TRUE(v == 0 || v == static_cast<float>(bf16(xf.data<float>()[i] * dropoutScale(0.3))))
        << i;
  }
}

TEST(Dropout, MaskIsAFunctionOfKeyStreamSampleAndElement) {
  const Shape shape{4, 3, 5, 7};
  const Tensor x = input(shape, 5), dy = input(shape, 6);
  const int64_t key = stepKey(3, 1, 8);
  const Tensor a = dropout(x, key, 4, 0.4), b = dropout(dy, key, 4, 0.4);
  // The gradient's dropout of dy (same key, stream and p) drops the same elements.
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(a.data<float>()[i] == 0.0f, b.data<float>()[i] == 0.0f) << i;
  // Element j of sample n keeps where its draw of the counter (j, n, stream, 1) does.
  const int64_t per = x.numel() / shape[0];
  for (int64_t i = 0; i < x.numel(); ++i) {
    const PhiloxCounter w = dropoutWords(key, 4, static_cast<uint32_t>(i / per),
                                         static_cast<uint32_t>(i % per));
    ASSERT_EQ(a.data<float>()[i] != 0.0f, dropoutKeeps(w, 0.4)) << i;
  }
  // Control: another stream, step or rank drops other elements (about 48% of them differ).
  for (auto [otherKey, otherStream] : {std::pair{key, int64_t(5)}, std::pair{stepKey(3, 1, 9), int64_t(4)},
                                       std::pair{stepKey(3, 0, 8), int64_t(4)}}) {
    const Tensor c = dropout(x, otherKey, otherStream, 0.4);
    int64_t differ = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
      differ += (a.data<float>()[i] == 0.0f) != (c.data<float>()[i] == 0.0f);
    EXPECT_GT(differ, x.numel() / 4);
  }
}

TEST(Dropout, MaskIsApartFromTheAugmentationsNumbers) {
  // med.random's Bernoulli gate of the same key and stream (counter word 3 = 0) against
  // dropout's mask (word 3 = 1): uncorrelated; a mask drawn from word 0 would equal it.
  const int64_t key = stepKey(2, 0, 3);
  const Tensor x = input({4, kElements / 4}, 7);
  const Tensor y = dropout(x, key, 6, 0.5);
  Tensor gate(DType::F32, x.shape());
  cpu::random(keyTensor(key), 6, cpu::Distribution::Bernoulli, 0.5, gate);
  double agree = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    agree += (y.data<float>()[i] == 0.0f) == (gate.data<float>()[i] == 1.0f);
  agree /= static_cast<double>(x.numel());
  EXPECT_LT(std::abs(agree - 0.5), 5 * 0.5 / std::sqrt(static_cast<double>(kElements)));
  // Control: the mask of counter word 0 is med.random's gate exactly (drop where u < p).
  int64_t same = 0;
  const int64_t per = x.numel() / 4;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const PhiloxCounter w = randomWords(key, 6, static_cast<uint32_t>(i / per),
                                        static_cast<uint32_t>(i % per));
    same += !dropoutKeeps(w, 0.5) == (gate.data<float>()[i] == 1.0f);
  }
  EXPECT_EQ(same, x.numel());
}

TEST(Dropout, ArgumentsAreChecked) {
  const Tensor x = input({2, 3}, 8);
  Tensor y(DType::F32, {2, 3});
  EXPECT_THROW(cpu::dropout(x, keyTensor(1), 0, 1.0, y), Error);
  EXPECT_THROW(cpu::dropout(x, keyTensor(1), 0, -0.5, y), Error);
  EXPECT_THROW(cpu::dropout(x, keyTensor(1), int64_t(1) << 32, 0.5, y), Error);
  Tensor f(DType::F32, {});
  EXPECT_THROW(cpu::dropout(x, f, 0, 0.5, y), Error);
  Tensor wrong(DType::F32, {3, 2});
  EXPECT_THROW(cpu::dropout(x, keyTensor(1), 0, 0.5, wrong), Error);
}
