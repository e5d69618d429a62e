//===- AutocastCompare.cpp - a training step's values against torch's -------------===//
//
// --train-steps compares each step's scalars and each kind of tensor with torch's reference:
// within the tolerance, or by the ratio rule within R times the error of a lower-precision
// torch run against the same reference, with the rules for errors that sit in few elements
// (counted as events, or spread over the low run's shares) and at the low type's rounding
// level (see --help). --against-autocast: reference torch f32, low run torch autocast,
// R --autocast-ratio; --against-f64: reference torch f64, low run torch f32, R --f64-ratio.
// The messages call the low run `autocast` or `f32` (StepRules::lowName).
//
//===----------------------------------------------------------------------------------===//
#include "Check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace medcheck {

// Errors that small are f32 rounding: against autocast (our f32 steps match torch f32 to
// ~1e-6) bf16 played no part on either side; against f64, ours' reductions sum in f32 in
// other orders than torch's (its CPU sums are cascaded: its f32 loss is often within one
// rounding of f64's, ours 1e-7 to 2e-6 off). A ratio of two roundings says nothing.
bool withinRatio(double rel, double lowRel, double ratio) {
  return rel <= ratio * lowRel || rel <= kF32Level;
}

// A gradient stored in the autocast type carries a relative error of up to this much per
// element, whatever computed it. A gradient or moment of ours within that of torch f32 holds
// no more than that one rounding, which no run in the type can be asked to beat, even where
// autocast's own rounding happened to land closer on a tensor of a few elements (the squares
// of exp_avg_sq double it).
double unitRoundoff(medrun::Precision p) {
  return p == medrun::Precision::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

namespace {

/// The same for errors made of few discrete events (sign flips; elements moved by up to
/// the AdamW noise bound; a scalar), `rel` and `lowRel` (the low run's) in units of one
/// event: the counts k = rel^2 are compared as two Poisson counts. Ours fails only where
/// k_ours exceeds R^2 k_low by more than three standard deviations of that difference at the
/// limit (rates in the ratio R^2, estimated from both counts): the ratio rule for large
/// counts, and for a handful no more than chance gives two runs of equal quality.
bool withinCount(double rel, double lowRel, double ratio) {
  const double k = rel * rel, kAc = lowRel * lowRel, r2 = ratio * ratio;
  return k <= r2 * kAc || k - r2 * kAc <= 3 * ratio * std::sqrt(k + kAc);
}
double ratioOf(double rel, double lowRel) {
  if (std::isnan(rel) || std::isnan(lowRel))
    return INFINITY;
  return lowRel > 0 ? rel / lowRel : rel > 0 ? INFINITY : 0;
}
std::string ratioStr(double rel, double lowRel) {
  double r = ratioOf(rel, lowRel);
  if (!std::isfinite(r))
    return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", r);
  return buf;
}

/// The verdicts on one kind of tensors, and how many passed by each special rule.
struct KindVerdicts {
  std::vector<Comparison> cs, acCs; ///< against the reference; the low run's against it
  std::vector<bool> ok;
  std::vector<std::string> notes;
  size_t noisy = 0, floored = 0, rounded = 0, counted = 0, spread = 0, amplified = 0;
};

/// The largest relative error norm over tensors of one kind, with the tensor that has it.
struct KindSummary {
  size_t tensors = 0, failed = 0, vanishing = 0;
  double worst = 0;
  std::string worstName;
  std::string firstFailed;
};

/// By the ratio rule: ours' error against the low run's by the ratio, as a count of elements
/// moved by `elementBound`, as a count of the low run's per-element shares (`bySpreadToo`),
/// or at the low type's rounding level (`roundingLevel`). Sets v.ok[i] and v.notes[i].
void ratioVerdict(const StepRules &r, KindVerdicts &v, size_t i, const torch::Tensor &theirs,
                     const torch::Tensor &ac, double elementBound, bool bySpreadToo,
                     double roundingLevel) {
  const Comparison &c = v.cs[i], &a = v.acCs[i];
  const double unit = c.refNorm > 0 ? 2 * elementBound / c.refNorm : 0;
  const bool byRatio = withinRatio(c.rel, a.rel, r.ratio);
  const bool byCount =
      unit > 0 && withinCount(c.rel / unit, a.rel / unit, r.ratio);
  // The low run's error in units of its share per element it is spread over (only where
  // the ratio rule fails: the spread takes a pass over the tensor).
  const double n = bySpreadToo && !byRatio ? spreadOf(ac, theirs) : 0;
  const double share = n > 0 ? a.rel / std::sqrt(n) : 0;
  const bool bySpread =
      share > 0 && withinCount(c.rel / share, a.rel / share, r.ratio);
  const bool byRounding = c.rel <= roundingLevel;
  v.ok[i] = c.problem.empty() && a.problem.empty() &&
            (byRatio || byCount || bySpread || byRounding);
  if (v.ok[i] && !byRatio && !byCount && !bySpread) {
    ++v.rounded;
    v.notes[i] = str("rounding level: rel <= ", sci(roundingLevel), ", ", r.lowName, " ",
                     sci(a.rel));
  } else if (v.ok[i] && !byRatio && !byCount) {
    ++v.spread;
    v.notes[i] = str("spread: ", r.lowName, "'s error over ", sci(n), " elements, ratio ",
                     ratioStr(c.rel, a.rel));
  } else if (v.ok[i] && !byRatio) {
    ++v.counted;
    v.notes[i] = str("counted: ", sci(std::pow(c.rel / unit, 2)), " elements' worth, ",
                     r.lowName, " ", sci(std::pow(a.rel / unit, 2)));
  } else if (v.ok[i] && !(c.rel <= r.ratio * a.rel)) {
    ++v.floored;
    v.notes[i] = str("f32 level: rel <= ", sci(kF32Level));
  } else {
    v.notes[i] = str(r.lowName, " rel ", sci(a.rel), ", ratio ", ratioStr(c.rel, a.rel));
  }
}

/// The verdict on each tensor of one kind (StepJudge::kind).
KindVerdicts judgeKind(const StepRules &r, const std::string &kind,
                       const std::vector<std::string> &names,
                       const std::vector<medrun::Tensor> &ours,
                       const std::vector<torch::Tensor> &theirs,
                       const std::vector<torch::Tensor> &acs, bool gradients, double elementBound,
                       bool bySpreadToo) {
  KindVerdicts v;
  for (size_t i = 0; i < names.size(); ++i) {
    v.cs.push_back(compare(ours[i], theirs[i]));
    if (r.byRatio)
      v.acCs.push_back(compareTorch(acs[i], theirs[i]));
  }
  v.notes.assign(names.size(), "");
  v.ok = judge(v.cs, std::vector<bool>(names.size(), gradients), r.tolerance, v.notes);
  // Gradients and moments: one rounding to the low run's type (unitRoundoff).
  const double roundingLevel =
      r.byRatio && gradients ? r.roundoff * (kind == "exp_avg_sq" ? 2 : 1) : 0;
  // By the ratio rule: the vanishing rule's limit, as judge's.
  const double vanishing = r.byRatio && gradients
                               ? vanishingLimit(v.cs, std::vector<bool>(names.size(), true),
                                                r.tolerance)
                               : 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const Comparison &c = v.cs[i];
    if (!gradients && r.noiseBound > 0 && r.noiseDriven && r.noiseDriven->count(names[i]) &&
        c.problem.empty()) {
      ++v.noisy;
      v.ok[i] = c.maxAbs <= 2 * r.noiseBound;
      v.notes[i] = str("noise-driven: max_abs within 2 * ", sci(r.noiseBound));
    } else if (!gradients && !v.ok[i] && r.drift && r.drift->slack(names[i], kind == "ema") &&
               c.problem.empty()) {
      const double excess =
          r.drift->excessError(names[i], ours[i], fromTorch(theirs[i]), kind == "ema");
      if (excess <= r.tolerance) {
        v.ok[i] = true;
        ++v.amplified;
        v.notes[i] = str("amplified: rel ", sci(excess), " after AdamW's amplification of "
                         "gradient noise");
      }
    } else if (r.byRatio && gradients && vanishes(c, vanishing)) {
      v.ok[i] = true;
      v.notes[i] = str("vanishing: both norms below ", sci(vanishing));
    } else if (r.byRatio && gradients && c.problem.empty() && r.noiseDriven &&
               r.noiseDriven->count(names[i]) &&
               (c.refNorm > 0 ? c.rel * c.refNorm : c.rel) <= 2 * vanishing) {
      // A moment of a parameter whose gradient vanished holds that gradient's rounding noise
      // beside what does not vanish (SGD's weight decay term): both sides' noise below the
      // vanishing limit differs by at most twice that.
      ++v.noisy;
      v.ok[i] = true;
      v.notes[i] = str("noise-driven: |ours - reference| <= 2 * ", sci(vanishing));
    } else if (r.byRatio) {
      ratioVerdict(r, v, i, theirs[i], acs[i], elementBound, bySpreadToo, roundingLevel);
    }
  }
  return v;
}

/// Tensors of the kind, how many failed, and the worst that passed by no special rule.
KindSummary summarize(const StepRules &r, const std::vector<std::string> &names,
                      const KindVerdicts &v) {
  KindSummary k;
  for (size_t i = 0; i < names.size(); ++i) {
    ++k.tensors;
    const std::string &note = v.notes[i];
    bool special = note.rfind("vanishing", 0) == 0 || note.rfind("rounding", 0) == 0 ||
                   note.rfind("noise", 0) == 0 || note.rfind("f32 level", 0) == 0 ||
                   note.rfind("counted", 0) == 0 || note.rfind("spread", 0) == 0 ||
                   note.rfind("amplified", 0) == 0;
    if (note.rfind("vanishing", 0) == 0)
      ++k.vanishing;
    if (!v.ok[i]) {
      ++k.failed;
      if (k.firstFailed.empty())
        k.firstFailed = names[i];
    }
    // The worst: the largest relative error, or by the ratio rule the largest ratio.
    double worst = std::isnan(v.cs[i].rel) ? INFINITY : v.cs[i].rel;
    if (r.byRatio)
      worst = ratioOf(v.cs[i].rel, v.acCs[i].rel);
    if (!special && (k.worstName.empty() || worst > k.worst)) {
      k.worst = worst;
      k.worstName = names[i];
    }
  }
  return k;
}

} // namespace

std::vector<bool> judgeByRatio(const std::vector<Comparison> &cs,
                               const std::vector<Comparison> &lowCs,
                               const std::vector<bool> &isGrad, double tolerance, double ratio,
                               std::vector<std::string> &notes) {
  // Every tensor gets its verdict and note here (judge's would all be overwritten).
  std::vector<bool> ok(cs.size(), false);
  const double vanishing = vanishingLimit(cs, isGrad, tolerance);
  for (size_t i = 0; i < cs.size(); ++i) {
    const Comparison &c = cs[i], &a = lowCs[i];
    if (isGrad[i] && vanishes(c, vanishing)) { // the vanishing rule comes before the ratio
      ok[i] = true;
      notes[i] = str("vanishing: both norms below ", sci(vanishing));
      continue;
    }
    const bool byRatio = c.rel <= ratio * a.rel;
    ok[i] = c.problem.empty() && a.problem.empty() && withinRatio(c.rel, a.rel, ratio);
    notes[i] = ok[i] && !byRatio ? str("f32 level: rel <= ", sci(kF32Level), ", f32 ", sci(a.rel))
                                 : str("f32 rel ", sci(a.rel), ", ratio ", ratioStr(c.rel, a.rel));
  }
  return ok;
}

void StepJudge::scalar(const char *what, double ours, double theirs, double acValue) {
  auto relOf = [](double x, double ref) {
    return ref != 0 ? std::abs(x - ref) / std::abs(ref) : std::abs(x - ref);
  };
  double rel = relOf(ours, theirs);
  // Overflowed gradients give a non-finite norm, inf or NaN by the order of the operations
  // that met the infinities: any non-finite pair matches.
  bool ok = std::isfinite(ours) ? rel <= r_.tolerance : !std::isfinite(theirs);
  double acRel = relOf(acValue, theirs);
  if (r_.byRatio && !std::isfinite(ours)) // overflowed as autocast's fp16 run did
    ok = !std::isfinite(theirs) || !std::isfinite(acValue);
  if (r_.byRatio && std::isfinite(ours))
    // A scalar is one element: two runs of equal quality differ by 1.5x in a third of the
    // cases, so it is compared as a count of one as well.
    ok = withinRatio(rel, acRel, r_.ratio) ||
         (acRel > 0 && withinCount(rel / acRel, 1, r_.ratio));
  failed_ |= !ok;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", ours);
  std::cout << "step " << step_ << "  " << what << "  " << buf;
  if (std::isfinite(ours) && std::isfinite(theirs)) {
    std::cout << "  rel " << sci(rel);
    if (r_.byRatio)
      std::cout << "  " << r_.lowName << " " << sci(acRel) << "  ratio " << ratioStr(rel, acRel);
  } else {
    std::cout << "  torch " << theirs;
    if (r_.byRatio)
      std::cout << "  " << r_.lowName << " " << acValue;
  }
  std::cout << "  " << (ok ? "ok" : "FAIL") << "\n";
}

void StepJudge::exact(const char *what, double ours, double theirs) {
  bool ok = ours == theirs;
  failed_ |= !ok;
  std::cout << "step " << step_ << "  " << what << "  " << ours << "  torch " << theirs << "  "
            << (ok ? "ok" : "FAIL") << "\n";
}

// AdamW turns each gradient element of the other sign into an update of the other sign.
void StepJudge::signs(const std::vector<std::string> &names,
                      const std::vector<medrun::Tensor> &ours,
                      const std::vector<torch::Tensor> &theirs,
                      const std::vector<torch::Tensor> &acs) {
  int64_t totalOurs = 0, totalAc = 0, elements = 0;
  std::vector<std::string> failed;
  for (size_t i = 0; i < names.size(); ++i) {
    torch::Tensor ref = theirs[i].to(torch::kCPU, torch::kDouble).sign();
    torch::Tensor mine = toTorch(ours[i]).to(torch::kDouble).reshape(ref.sizes()).sign();
    torch::Tensor flipOurs = mine != ref,
                  flipAc = acs[i].to(torch::kCPU, torch::kDouble).sign() != ref;
    const int64_t nOurs = flipOurs.sum().item<int64_t>(), nAc = flipAc.sum().item<int64_t>();
    totalOurs += nOurs;
    totalAc += nAc;
    elements += ref.numel();
    if (!withinCount(std::sqrt(double(nOurs)), std::sqrt(double(nAc)), r_.ratio))
      failed.push_back(str(names[i], ": ", nOurs, " against ", r_.lowName, "'s ", nAc));
  }
  failed_ |= !failed.empty();
  std::cout << "step " << step_ << "  sign flips  ours " << totalOurs << ", " << r_.lowName << " "
            << totalAc
            << " of " << elements << " gradient elements";
  if (!failed.empty())
    std::cout << "  " << failed.size() << " FAIL, first " << failed.front();
  std::cout << "  " << (failed.empty() ? "ok" : "FAIL") << "\n";
}

void StepJudge::kind(const std::string &kind, const std::vector<std::string> &names,
                     const std::vector<medrun::Tensor> &ours,
                     const std::vector<torch::Tensor> &theirs,
                     const std::vector<torch::Tensor> &acs, bool gradients, double elementBound,
                     bool bySpreadToo) {
  const KindVerdicts v =
      judgeKind(r_, kind, names, ours, theirs, acs, gradients, elementBound, bySpreadToo);
  const KindSummary k = summarize(r_, names, v);
  failed_ |= k.failed > 0;
  std::cout << "step " << step_ << "  " << kind << "  " << k.tensors << " tensors  ";
  if (!r_.byRatio) {
    std::cout << "max rel " << sci(k.worst) << " (" << k.worstName << ")";
  } else if (k.worstName.empty()) {
    std::cout << "max ratio -";
  } else {
    size_t w = static_cast<size_t>(std::find(names.begin(), names.end(), k.worstName) -
                                   names.begin());
    std::cout << "max ratio " << ratioStr(v.cs[w].rel, v.acCs[w].rel) << " (" << k.worstName
              << ": rel " << sci(v.cs[w].rel) << ", " << r_.lowName << " "
              << sci(v.acCs[w].rel) << ")";
  }
  if (k.vanishing)
    std::cout << "  " << k.vanishing << " vanishing";
  if (v.noisy)
    std::cout << "  " << v.noisy << " noise-driven";
  if (v.amplified)
    std::cout << "  " << v.amplified << " within AdamW's amplification of gradient noise";
  if (v.floored)
    std::cout << "  " << v.floored << " at f32 level";
  if (v.rounded)
    std::cout << "  " << v.rounded << " at " << r_.lowTypeName << " rounding level";
  if (v.counted)
    std::cout << "  " << v.counted << " within the count of noise-moved elements";
  if (v.spread)
    std::cout << "  " << v.spread << " within the spread of " << r_.lowName << "'s error";
  if (k.failed)
    std::cout << "  " << k.failed << " FAIL, first " << k.firstFailed;
  std::cout << "  " << (k.failed ? "FAIL" : "ok") << "\n";
  for (size_t i = 0; i < names.size(); ++i)
    if (!v.ok[i])
      printLine(str("step ", step_, "  ", kind), names[i], ours[i].shape(), v.cs[i], false,
                v.notes[i]);
}

} // namespace medcheck
