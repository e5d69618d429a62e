//===- AutocastCompare.cpp - a training step's values against torch's -------------===//
//
// --train-steps compares each step's scalars and each kind of tensor with torch f32: within
// the tolerance, or with --against-autocast within --autocast-ratio times torch autocast's
// own error, with the rules for errors that sit in few elements (counted as events, or
// spread over autocast's shares) and at the autocast type's rounding level (see --help).
//
//===----------------------------------------------------------------------------------===//
#include "Check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace medcheck {

// Errors that small are f32 rounding (our f32 steps match torch to ~1e-6), where bf16 played
// no part on either side and a ratio of two roundings says nothing.
bool withinAutocast(double rel, double autocastRel, double ratio) {
  return rel <= ratio * autocastRel || rel <= kAutocastFloor;
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
/// the AdamW noise bound; a scalar), `rel` and `autocastRel` in units of one event: the
/// counts k = rel^2 are compared as two Poisson counts. Ours fails only where k_ours exceeds
/// R^2 k_autocast by more than three standard deviations of that difference at the limit
/// (rates in the ratio R^2, estimated from both counts): the ratio rule for large counts,
/// and for a handful no more than chance gives two runs of equal quality.
bool withinAutocastCount(double rel, double autocastRel, double ratio) {
  const double k = rel * rel, kAc = autocastRel * autocastRel, r2 = ratio * ratio;
  return k <= r2 * kAc || k - r2 * kAc <= 3 * ratio * std::sqrt(k + kAc);
}
double ratioOf(double rel, double autocastRel) {
  if (std::isnan(rel) || std::isnan(autocastRel))
    return INFINITY;
  return autocastRel > 0 ? rel / autocastRel : rel > 0 ? INFINITY : 0;
}
std::string ratioStr(double rel, double autocastRel) {
  double r = ratioOf(rel, autocastRel);
  if (!std::isfinite(r))
    return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", r);
  return buf;
}

/// The verdicts on one kind of tensors, and how many passed by each special rule.
struct KindVerdicts {
  std::vector<Comparison> cs, acCs; ///< against torch f32; autocast's against torch f32
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

/// With autocast: ours' error against autocast's by the ratio, as a count of elements moved
/// by `elementBound`, as a count of autocast's per-element shares (`bySpreadToo`), or at the
/// type's rounding level (`roundingLevel`). Sets v.ok[i] and v.notes[i].
void autocastVerdict(const StepRules &r, KindVerdicts &v, size_t i, const torch::Tensor &theirs,
                     const torch::Tensor &ac, double elementBound, bool bySpreadToo,
                     double roundingLevel) {
  const Comparison &c = v.cs[i], &a = v.acCs[i];
  const double unit = c.refNorm > 0 ? 2 * elementBound / c.refNorm : 0;
  const bool byRatio = withinAutocast(c.rel, a.rel, r.autocastRatio);
  const bool byCount =
      unit > 0 && withinAutocastCount(c.rel / unit, a.rel / unit, r.autocastRatio);
  // Autocast's error in units of its share per element it is spread over (only where the
  // ratio rule fails: the spread takes a pass over the tensor).
  const double n = bySpreadToo && !byRatio ? spreadOf(ac, theirs) : 0;
  const double share = n > 0 ? a.rel / std::sqrt(n) : 0;
  const bool bySpread =
      share > 0 && withinAutocastCount(c.rel / share, a.rel / share, r.autocastRatio);
  const bool byRounding = c.rel <= roundingLevel;
  v.ok[i] = c.problem.empty() && a.problem.empty() &&
            (byRatio || byCount || bySpread || byRounding);
  if (v.ok[i] && !byRatio && !byCount && !bySpread) {
    ++v.rounded;
    v.notes[i] = str("rounding level: rel <= ", sci(roundingLevel), ", autocast ", sci(a.rel));
  } else if (v.ok[i] && !byRatio && !byCount) {
    ++v.spread;
    v.notes[i] = str("spread: autocast's error over ", sci(n), " elements, ratio ",
                     ratioStr(c.rel, a.rel));
  } else if (v.ok[i] && !byRatio) {
    ++v.counted;
    v.notes[i] = str("counted: ", sci(std::pow(c.rel / unit, 2)), " elements' worth, autocast ",
                     sci(std::pow(a.rel / unit, 2)));
  } else if (v.ok[i] && !(c.rel <= r.autocastRatio * a.rel)) {
    ++v.floored;
    v.notes[i] = str("f32 level: rel <= ", sci(kAutocastFloor));
  } else {
    v.notes[i] = str("autocast rel ", sci(a.rel), ", ratio ", ratioStr(c.rel, a.rel));
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
    if (r.autocast)
      v.acCs.push_back(compareTorch(acs[i], theirs[i]));
  }
  v.notes.assign(names.size(), "");
  v.ok = judge(v.cs, std::vector<bool>(names.size(), gradients), r.tolerance, v.notes);
  // Gradients and moments: one rounding to the autocast type (unitRoundoff).
  const double roundingLevel =
      r.autocast && gradients ? unitRoundoff(r.autocastType) * (kind == "exp_avg_sq" ? 2 : 1)
                              : 0;
  double vanishing = 0; // with autocast: the vanishing rule's limit, as judge's
  if (r.autocast && gradients)
    for (const Comparison &c : v.cs)
      if (std::isfinite(c.refNorm))
        vanishing = std::max(vanishing, kVanishing * r.tolerance * c.refNorm);
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
    } else if (r.autocast && gradients && c.problem.empty() && c.refNorm <= vanishing &&
               c.oursNorm <= vanishing) {
      v.ok[i] = true;
      v.notes[i] = str("vanishing: both norms below ", sci(vanishing));
    } else if (r.autocast) {
      autocastVerdict(r, v, i, theirs[i], acs[i], elementBound, bySpreadToo, roundingLevel);
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
                   note.rfind("noise", 0) == 0 || note.rfind("f32", 0) == 0 ||
                   note.rfind("counted", 0) == 0 || note.rfind("spread", 0) == 0 ||
                   note.rfind("amplified", 0) == 0;
    if (note.rfind("vanishing", 0) == 0)
      ++k.vanishing;
    if (!v.ok[i]) {
      ++k.failed;
      if (k.firstFailed.empty())
        k.firstFailed = names[i];
    }
    // The worst: the largest relative error, or with autocast the largest ratio.
    double worst = std::isnan(v.cs[i].rel) ? INFINITY : v.cs[i].rel;
    if (r.autocast)
      worst = ratioOf(v.cs[i].rel, v.acCs[i].rel);
    if (!special && (k.worstName.empty() || worst > k.worst)) {
      k.worst = worst;
      k.worstName = names[i];
    }
  }
  return k;
}

} // namespace

void StepJudge::scalar(const char *what, double ours, double theirs, double acValue) {
  auto relOf = [](double x, double ref) {
    return ref != 0 ? std::abs(x - ref) / std::abs(ref) : std::abs(x - ref);
  };
  double rel = relOf(ours, theirs);
  // Overflowed gradients give a non-finite norm, inf or NaN by the order of the operations
  // that met the infinities: any non-finite pair matches.
  bool ok = std::isfinite(ours) ? rel <= r_.tolerance : !std::isfinite(theirs);
  double acRel = relOf(acValue, theirs);
  if (r_.autocast && !std::isfinite(ours)) // overflowed as autocast's fp16 run did
    ok = !std::isfinite(theirs) || !std::isfinite(acValue);
  if (r_.autocast && std::isfinite(ours))
    // A scalar is one element: two runs of equal quality differ by 1.5x in a third of the
    // cases, so it is compared as a count of one as well.
    ok = withinAutocast(rel, acRel, r_.autocastRatio) ||
         (acRel > 0 && withinAutocastCount(rel / acRel, 1, r_.autocastRatio));
  failed_ |= !ok;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", ours);
  std::cout << "step " << step_ << "  " << what << "  " << buf;
  if (std::isfinite(ours) && std::isfinite(theirs)) {
    std::cout << "  rel " << sci(rel);
    if (r_.autocast)
      std::cout << "  autocast " << sci(acRel) << "  ratio " << ratioStr(rel, acRel);
  } else {
    std::cout << "  torch " << theirs;
    if (r_.autocast)
      std::cout << "  autocast " << acValue;
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
    if (!withinAutocastCount(std::sqrt(double(nOurs)), std::sqrt(double(nAc)),
                             r_.autocastRatio))
      failed.push_back(str(names[i], ": ", nOurs, " against autocast's ", nAc));
  }
  failed_ |= !failed.empty();
  std::cout << "step " << step_ << "  sign flips  ours " << totalOurs << ", autocast " << totalAc
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
  if (!r_.autocast) {
    std::cout << "max rel " << sci(k.worst) << " (" << k.worstName << ")";
  } else if (k.worstName.empty()) {
    std::cout << "max ratio -";
  } else {
    size_t w = static_cast<size_t>(std::find(names.begin(), names.end(), k.worstName) -
                                   names.begin());
    std::cout << "max ratio " << ratioStr(v.cs[w].rel, v.acCs[w].rel) << " (" << k.worstName
              << ": rel " << sci(v.cs[w].rel) << ", autocast " << sci(v.acCs[w].rel) << ")";
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
    std::cout << "  " << v.rounded << " at " << r_.autocastName << " rounding level";
  if (v.counted)
    std::cout << "  " << v.counted << " within the count of noise-moved elements";
  if (v.spread)
    std::cout << "  " << v.spread << " within the spread of autocast's error";
  if (k.failed)
    std::cout << "  " << k.failed << " FAIL, first " << k.firstFailed;
  std::cout << "  " << (k.failed ? "FAIL" : "ok") << "\n";
  for (size_t i = 0; i < names.size(); ++i)
    if (!v.ok[i])
      printLine(str("step ", step_, "  ", kind), names[i], ours[i].shape(), v.cs[i], false,
                v.notes[i]);
}

} // namespace medcheck
