//===- AdamDriftTest.cpp - AdamW's amplification bound holds and is not loose -------===//
//
// Two AdamW runs in double from zero-initialized parameters (a bias, where the check has
// the least room), fed gradients that differ per element by at most tolerance·‖g‖₂: every
// element stays within the bound, including elements whose gradients cancel over the steps.
// Controls: the plain relative error fails the same runs (the bound is needed), and a
// gradient off by ten times what the tolerance allows, or a wrong β1, exceeds it.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/AdamDrift.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace medrun;

namespace {

constexpr double kB1 = 0.9, kB2 = 0.999, kEps = 1e-8, kLr = 1e-3, kWd = 0.01, kTol = 1e-4;

constexpr double kDecay = 0.9; // the EMA's

struct Run {
  std::vector<double> p, m, v, ema;
  explicit Run(size_t n) : p(n, 0.0), m(n, 0.0), v(n, 0.0), ema(n, 0.0) {}
  void step(const std::vector<double> &g, int t, double beta1 = kB1) {
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = kB2 * v[i] + (1 - kB2) * g[i] * g[i];
      const double mh = m[i] / (1 - std::pow(beta1, t)), vh = v[i] / (1 - std::pow(kB2, t));
      p[i] = p[i] * (1 - kLr * kWd) - kLr * mh / (std::sqrt(vh) + kEps);
      ema[i] = kDecay * ema[i] + (1 - kDecay) * p[i];
    }
  }
};

Tensor tensor(const std::vector<double> &x) {
  Tensor t(DType::F64, {static_cast<int64_t>(x.size())});
  std::copy(x.begin(), x.end(), t.data<double>());
  return t;
}

double norm(const std::vector<double> &x) {
  double s = 0;
  for (double e : x)
    s += e * e;
  return std::sqrt(s);
}

// Gradients of 64 elements over 3 steps; elements 0..7 cancel (g2 ≈ −0.9·g1, g3 ≈ −g2/10),
// elements 8..15 are tiny, the rest ordinary.
std::vector<std::vector<double>> gradients(std::mt19937 &rng) {
  std::normal_distribution<double> d(0.0, 1e-2);
  std::vector<std::vector<double>> g(3, std::vector<double>(64));
  for (size_t i = 0; i < 64; ++i) {
    for (int s = 0; s < 3; ++s)
      g[s][i] = d(rng) * (i >= 8 && i < 16 ? 1e-4 : 1.0);
    if (i < 8) {
      g[1][i] = -0.9 * g[0][i] * (1 + 1e-3 * d(rng));
      g[2][i] = -0.1 * g[1][i];
    }
  }
  return g;
}

struct Outcome {
  double plain, excess, emaExcess;
};

// Runs the reference and a perturbed run (per-element gradient difference `scale` ×
// tolerance·‖g‖₂, random sign; β1 of the perturbed run `beta1`), and compares parameters.
Outcome compare(unsigned seed, double scale, double beta1 = kB1) {
  std::mt19937 rng(seed);
  auto g = gradients(rng);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Run ref(64), other(64);
  AdamDriftBound bound(kB1, kB2, kEps);
  for (int t = 1; t <= 3; ++t) {
    std::vector<double> h = g[t - 1];
    const double delta = kTol * norm(g[t - 1]) / std::sqrt(64.0);
    for (double &e : h)
      e += scale * delta * u(rng);
    Tensor before = tensor(ref.v);
    ref.step(g[t - 1], t);
    other.step(h, t, beta1);
    bound.step("b", before, tensor(ref.v), t, kLr, kTol);
    bound.emaStep("b", kDecay);
  }
  Tensor want = tensor(ref.p), got = tensor(other.p);
  AdamDriftBound none(kB1, kB2, kEps);
  return {none.excessError("b", got, want), bound.excessError("b", got, want),
          bound.excessError("b", tensor(other.ema), tensor(ref.ema), /*ema=*/true)};
}

TEST(AdamDrift, GradientsWithinToleranceStayWithinTheBound) {
  int plainFailures = 0;
  for (unsigned seed = 1; seed <= 50; ++seed) {
    Outcome o = compare(seed, 1.0);
    EXPECT_EQ(o.excess, 0.0) << "seed " << seed;
    EXPECT_EQ(o.emaExcess, 0.0) << "seed " << seed;
    plainFailures += o.plain > kTol;
  }
  // Control: without the bound, most of these runs fail the relative error check.
  EXPECT_GT(plainFailures, 25);
}

TEST(AdamDrift, TenfoldGradientErrorExceedsTheBound) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    Outcome o = compare(seed, 10.0);
    EXPECT_GT(o.excess, kTol) << "seed " << seed;
    EXPECT_GT(o.emaExcess, 0.0) << "seed " << seed; // the EMA's bound is not the parameter's
  }
}

TEST(AdamDrift, WrongBeta1ExceedsTheBound) {
  for (unsigned seed = 1; seed <= 20; ++seed)
    EXPECT_GT(compare(seed, 0.0, 0.85).excess, kTol) << "seed " << seed;
}

TEST(AdamDrift, TheEmaBoundFollowsTheEmaRecurrence) {
  AdamDriftBound bound(kB1, kB2, kEps);
  Tensor before = tensor({0.0, 0.0}), after = tensor({1e-6, 1e-12});
  bound.step("b", before, after, 1, kLr, kTol);
  bound.emaStep("b", kDecay);
  const std::vector<double> &p = *bound.slack("b"), &e = *bound.slack("b", /*ema=*/true);
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_DOUBLE_EQ(e[i], (1 - kDecay) * p[i]);
  EXPECT_EQ(bound.slack("c", true), nullptr);
}

TEST(AdamDrift, RatioBoundIsOneAtTheFirstStep) {
  AdamDriftBound bound(kB1, kB2, kEps);
  EXPECT_NEAR(bound.ratioBound(1), 1.0, 1e-12);
  EXPECT_GT(bound.ratioBound(3), 1.0);
}

} // namespace
