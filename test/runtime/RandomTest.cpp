// med.random's numbers (runtime/src/cpu/Random.cpp, medrun/Random.h): a known answer, the
// distributions (mean, variance, Kolmogorov-Smirnov distance) and the independence of
// streams, samples, steps and ranks, over 2^20 draws of fixed keys. Each rule is at five
// standard errors (KS: the 0.1% critical value), so the fixed draws pass by a wide margin
// while a wrong generator fails: every rule is also run on a deliberately wrong variant.
#include "medrun/Kernels.h"
#include "medrun/Error.h"
#include "medrun/Random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

using namespace medrun;

namespace {

constexpr int64_t kDraws = 1 << 20;

std::vector<float> draws(int64_t key, int64_t stream, bool normal, int64_t samples = 4) {
  Tensor k(DType::I64, {});
  k.data<int64_t>()[0] = key;
  Tensor y(DType::F32, {samples, kDraws / samples});
  cpu::random(k, stream, normal ? cpu::Distribution::Normal : cpu::Distribution::Uniform, 0.5, y);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

double mean(const std::vector<float> &v) {
  double s = 0;
  for (float x : v)
    s += x;
  return s / static_cast<double>(v.size());
}
double variance(const std::vector<float> &v) {
  const double m = mean(v);
  double s = 0;
  for (float x : v)
    s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}
double correlation(const std::vector<float> &a, const std::vector<float> &b) {
  const double ma = mean(a), mb = mean(b);
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += (a[i] - ma) * (b[i] - mb);
    aa += (a[i] - ma) * (a[i] - ma);
    bb += (b[i] - mb) * (b[i] - mb);
  }
  return ab / std::sqrt(aa * bb);
}
/// sup |F_n(x) − F(x)|.
double ksDistance(std::vector<float> v, const std::function<double(double)> &cdf) {
  std::sort(v.begin(), v.end());
  const double n = static_cast<double>(v.size());
  double d = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double f = cdf(v[i]);
    d = std::max({d, f - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - f});
  }
  return d;
}

const double kSigma = 1.0 / std::sqrt(static_cast<double>(kDraws)); // one standard error unit
const double kKs = 1.95 / std::sqrt(static_cast<double>(kDraws));   // KS at p = 0.001

double uniformCdf(double x) { return std::clamp(x, 0.0, 1.0); }
double normalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// The rules, applied to the real draws and to wrong ones alike.
bool uniformOk(const std::vector<float> &u) {
  return std::abs(mean(u) - 0.5) < 5 * kSigma * std::sqrt(1.0 / 12) &&
         std::abs(variance(u) - 1.0 / 12) < 5 * kSigma * std::sqrt(1.0 / 180) &&
         ksDistance(u, uniformCdf) < kKs &&
         *std::min_element(u.begin(), u.end()) >= 0 && *std::max_element(u.begin(), u.end()) < 1;
}
bool normalOk(const std::vector<float> &z) {
  return std::abs(mean(z)) < 5 * kSigma && std::abs(variance(z) - 1) < 5 * kSigma * std::sqrt(2.0) &&
         ksDistance(z, normalCdf) < kKs;
}
bool independent(const std::vector<float> &a, const std::vector<float> &b) {
  return std::abs(correlation(a, b)) < 5 * kSigma;
}

} // namespace

TEST(Random, KnownAnswer) {
  // Element 0 of sample 0 of stream 0 under key 0 is Philox's counter 0 under key 0, whose
  // first word is 0x6627e8d5 (Random123's kat_vectors): uniform (w0 >> 8) · 2^-24.
  Tensor k(DType::I64, {});
  k.data<int64_t>()[0] = 0;
  Tensor y(DType::F32, {1, 1});
  cpu::random(k, 0, cpu::Distribution::Uniform, 0.5, y);
  EXPECT_EQ(y.data<float>()[0], static_cast<float>(0x6627e8u) * 0x1p-24f);
}

TEST(Random, UniformAndNormalFollowTheirDistributions) {
  const int64_t key = stepKey(7, 0, 12);
  EXPECT_TRUE(uniformOk(draws(key, 3, false)));
  EXPECT_TRUE(normalOk(draws(key, 3, true)));
  // Controls: half the range (a shift too many), and a normal of the wrong spread.
  std::vector<float> half = draws(key, 3, false), wide = draws(key, 3, true);
  for (float &x : half)
    x *= 0.5f;
  for (float &x : wide)
    x *= 1.01f;
  EXPECT_FALSE(uniformOk(half));
  EXPECT_FALSE(normalOk(wide));
}

TEST(Random, BernoulliGatesOpenWithTheirProbability) {
  Tensor k(DType::I64, {});
  k.data<int64_t>()[0] = stepKey(3, 2, 40);
  Tensor y(DType::F32, {8, kDraws / 8});
  for (double p : {0.0, 0.05, 0.2, 0.5, 1.0}) {
    cpu::random(k, 9, cpu::Distribution::Bernoulli, p, y);
    const std::vector<float> v(y.data<float>(), y.data<float>() + y.numel());
    const double sd = std::sqrt(p * (1 - p) / static_cast<double>(kDraws));
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0 || x == 1; }));
    EXPECT_LE(std::abs(mean(v) - p), 5 * sd) << "probability " << p;
    // Control: the rule rejects a gate that opens 1% more or less often.
    if (p > 0.02 && p < 0.98) {
      EXPECT_GT(std::abs(mean(v) - (p + 0.01)), 5 * sd) << "probability " << p;
      EXPECT_GT(std::abs(mean(v) - (p - 0.01)), 5 * sd) << "probability " << p;
    }
  }
}

TEST(Random, StreamsSamplesStepsAndRanksDrawApart) {
  const int64_t key = stepKey(7, 0, 12);
  const std::vector<float> base = draws(key, 3, false);
  EXPECT_TRUE(independent(base, draws(key, 4, false)));              // another stream
  EXPECT_TRUE(independent(base, draws(stepKey(7, 0, 13), 3, false))); // the next step
  EXPECT_TRUE(independent(base, draws(stepKey(7, 1, 12), 3, false))); // another rank
  EXPECT_TRUE(independent(base, draws(stepKey(8, 0, 12), 3, false))); // another seed
  // Samples: sample 0's numbers against sample 1's (the layout is [samples, per sample]).
  const std::vector<float> two = draws(key, 3, false, 2);
  const std::vector<float> s0(two.begin(), two.begin() + kDraws / 2),
      s1(two.begin() + kDraws / 2, two.end());
  EXPECT_TRUE(independent(s0, s1));
  // The same (seed, rank, step) and stream: the same numbers.
  EXPECT_EQ(base, draws(stepKey(7, 0, 12), 3, false));
  // Control: a rank that drew with rank 0's key would repeat its numbers.
  EXPECT_FALSE(independent(base, draws(stepKey(7, 0, 12), 3, false)));
}

TEST(Random, KeyAndStreamAreChecked) {
  Tensor k(DType::I64, {}), y(DType::F32, {2, 3});
  k.data<int64_t>()[0] = 1;
  EXPECT_THROW(cpu::random(k, int64_t(1) << 32, cpu::Distribution::Uniform, 0.5, y), Error);
  Tensor f(DType::F32, {});
  EXPECT_THROW(cpu::random(f, 0, cpu::Distribution::Uniform, 0.5, y), Error);
}
