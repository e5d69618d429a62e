//===- Compare.cpp - a tensor against torch's, pass or fail, the report's lines ----===//
#include "Check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace medcheck {

/// `x` (any device and float type) against `ref`, as compare below.
Comparison compareTorch(const torch::Tensor &x, const torch::Tensor &ref) {
  Comparison c;
  torch::Tensor ours = x.to(torch::kCPU, torch::kDouble).contiguous();
  torch::Tensor theirs = ref.to(torch::kCPU, torch::kDouble).contiguous(); // from any device
  if (ours.sizes() != theirs.sizes()) {
    c.problem = str("shape ", medrun::shapeStr(medrun::Shape(x.sizes().begin(), x.sizes().end())),
                    " vs torch ",
                    medrun::shapeStr(medrun::Shape(ref.sizes().begin(), ref.sizes().end())));
    c.maxAbs = c.rel = NAN;
    return c;
  }
  if (ours.numel() == 0)
    return c;
  // Two results that are NaN everywhere agree on nothing: comparing them checks nothing.
  // (Infinities are compared, signs included.)
  if (!(~theirs.isnan()).any().item<bool>()) {
    c.problem = "torch's result is NaN everywhere: nothing to compare";
    c.maxAbs = c.rel = NAN;
    return c;
  }
  // Equal where both are NaN or both hold the same value (infinities included).
  torch::Tensor same = (ours.isnan() & theirs.isnan()) | ours.eq(theirs);
  torch::Tensor diff = torch::where(same, torch::zeros_like(ours), ours - theirs);
  c.maxAbs = diff.abs().max().item<double>();
  double diffNorm = diff.norm().item<double>();
  torch::Tensor finite = torch::where(theirs.isfinite(), theirs, torch::zeros_like(theirs));
  double refNorm = finite.norm().item<double>();
  c.refNorm = refNorm;
  c.oursNorm = torch::where(ours.isfinite(), ours, torch::zeros_like(ours)).norm().item<double>();
  c.rel = refNorm > 0 ? diffNorm / refNorm : diffNorm;
  if (std::isnan(c.maxAbs) || std::isnan(diffNorm))
    c.maxAbs = c.rel = NAN;
  return c;
}

/// How many elements the difference d = x - ref is spread over: (sum d^2)^2 / sum d^4 (1 when
/// one element holds it all, the element count when all are alike; 0 for no difference).
double spreadOf(const torch::Tensor &x, const torch::Tensor &ref) {
  torch::Tensor d = x.to(torch::kCPU, torch::kDouble) - ref.to(torch::kCPU, torch::kDouble);
  d = torch::where(d.isfinite(), d, torch::zeros_like(d));
  const double largest = d.numel() ? d.abs().max().item<double>() : 0;
  if (!(largest > 0))
    return 0;
  torch::Tensor sq = (d / largest).square(); // scaled: no underflow in d^4
  const double s2 = sq.sum().item<double>(), s4 = sq.square().sum().item<double>();
  return s2 * s2 / s4;
}

Comparison compare(const medrun::Tensor &ours, const torch::Tensor &ref) {
  return compareTorch(medcheck::toTorch(ours), ref);
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

std::string seconds(double s) {
  char buf[32];
  if (s < 1)
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double vanishingLimit(const std::vector<Comparison> &cs, const std::vector<bool> &isGrad,
                      double tolerance) {
  double largest = 0;
  for (size_t i = 0; i < cs.size(); ++i)
    if (isGrad[i] && std::isfinite(cs[i].refNorm))
      largest = std::max(largest, cs[i].refNorm);
  return kVanishing * tolerance * largest;
}

bool vanishes(const Comparison &c, double limit) {
  return c.problem.empty() && c.refNorm <= limit && c.oursNorm <= limit;
}

std::vector<bool> judge(const std::vector<Comparison> &cs, const std::vector<bool> &isGrad,
                        double tolerance, std::vector<std::string> &notes) {
  const double vanishing = vanishingLimit(cs, isGrad, tolerance);
  std::vector<bool> ok;
  for (size_t i = 0; i < cs.size(); ++i) {
    const Comparison &c = cs[i];
    bool pass = c.problem.empty() && c.rel <= tolerance;
    if (!pass && isGrad[i] && vanishes(c, vanishing)) {
      pass = true;
      notes[i] = str("vanishing: both norms below ", sci(vanishing));
    }
    ok.push_back(pass);
  }
  return ok;
}

void printLine(const std::string &fn, const std::string &name, const medrun::Shape &shape,
               const Comparison &c, bool ok, const std::string &note) {
  std::cout << fn << "  " << name << "  " << medrun::shapeStr(shape) << "  max_abs "
            << sci(c.maxAbs) << "  rel " << sci(c.rel) << "  " << (ok ? "ok" : "FAIL");
  if (!c.problem.empty())
    std::cout << " (" << c.problem << ")";
  if (!note.empty())
    std::cout << " (" << note << ")";
  std::cout << "\n";
}

std::string outputName(const medrun::Function &fn, size_t i) {
  if (i < fn.outputNames.size() && !fn.outputNames[i].empty())
    return fn.outputNames[i];
  return str("out", i);
}

} // namespace medcheck
