//===- AdamDrift.cpp - per-element bound on AdamW's amplification of gradient noise ---===//
#include "medrun/AdamDrift.h"

#include "medrun/Error.h"

#include <algorithm>
#include <cmath>

namespace medrun {

double AdamDriftBound::ratioBound(double t) const {
  // m̂ = Σ a_s g_s, v̂ = Σ b_s g_s² with a_s = (1−β1)β1^(t−s)/(1−β1^t) and
  // b_s = (1−β2)β2^(t−s)/(1−β2^t): |m̂| ≤ √(Σ a_s²/b_s) · √v̂.
  double geometric = 0;
  for (int j = 0; j < static_cast<int>(t); ++j)
    geometric += std::pow(beta1 * beta1 / beta2, j);
  return (1 - beta1) / (1 - std::pow(beta1, t)) * std::sqrt((1 - std::pow(beta2, t)) / (1 - beta2)) *
         std::sqrt(geometric);
}

void AdamDriftBound::step(const std::string &name, const Tensor &before, const Tensor &after,
                          double t, double lr, double tolerance) {
  Tensor v = after.to(DType::F64);
  const int64_t n = v.numel();
  Tensor v0 = before.numel() ? before.to(DType::F64) : Tensor();
  if (v0.numel() && v0.numel() != n)
    throw Error(str("second moment of '", name, "': ", v0.numel(), " elements before the step, ",
                    n, " after"));
  // v_t = β2·v_{t−1} + (1−β2)·g_t², so ‖g_t‖₂² = Σ (v_t − β2·v_{t−1}) / (1−β2).
  double gsq = 0;
  for (int64_t i = 0; i < n; ++i) {
    double prev = v0.numel() ? v0.data<double>()[i] : 0.0;
    gsq += std::max(0.0, (v.data<double>()[i] - beta2 * prev) / (1 - beta2));
  }
  const double delta = n ? tolerance * std::sqrt(gsq / n) : 0.0, b = ratioBound(t);
  const double correction = 1 - std::pow(beta2, t);
  std::vector<double> &acc = bound[name];
  acc.resize(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const double denominator = std::sqrt(v.data<double>()[i] / correction) + epsilon - delta;
    const double drift = denominator > 0 ? std::min(2 * b, delta * (1 + b) / denominator) : 2 * b;
    acc[i] += lr * drift;
  }
}

void AdamDriftBound::emaStep(const std::string &name, double decay) {
  const std::vector<double> &p = bound.at(name);
  std::vector<double> &e = emaBound[name];
  e.resize(p.size(), 0.0);
  for (size_t i = 0; i < p.size(); ++i)
    e[i] = decay * e[i] + (1 - decay) * p[i];
}

const std::vector<double> *AdamDriftBound::slack(const std::string &name, bool ema) const {
  const auto &bounds = ema ? emaBound : bound;
  auto it = bounds.find(name);
  return it == bounds.end() ? nullptr : &it->second;
}

double AdamDriftBound::excessError(const std::string &name, const Tensor &got,
                                   const Tensor &want, bool ema) const {
  Tensor x = got.to(DType::F64), y = want.to(DType::F64);
  const std::vector<double> *s = slack(name, ema);
  if (x.numel() != y.numel() || (s && static_cast<int64_t>(s->size()) != y.numel()))
    throw Error(str("'", name, "': ", x.numel(), " and ", y.numel(), " elements compared with ",
                    s ? s->size() : 0, " bounds"));
  double excess = 0, norm = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double p = x.data<double>()[i], q = y.data<double>()[i];
    if (!std::isfinite(p) || !std::isfinite(q))
      return NAN;
    const double d = std::abs(p - q), allowed = s ? (*s)[i] : 0.0;
    excess += std::max(0.0, d - allowed) * std::max(0.0, d - allowed);
    norm += q * q;
  }
  return norm > 0 ? std::sqrt(excess / norm) : (excess > 0 ? INFINITY : 0.0);
}

} // namespace medrun
