//===- AdamDrift.h - how far AdamW carries two runs apart whose gradients agree ----===//
//
// Two backends whose gradients agree to a relative tolerance need not agree that well after
// AdamW: each element's update is m̂/(√v̂ + ε), so where an element's gradients are small or
// cancel over the steps, a gradient difference far below the tolerance moves the update by
// up to 2·lr·B_t (B_t bounds |m̂/√v̂|). This bounds that drift per element, from the reference
// run's second moments, for gradients that differ by at most δ_t = tolerance·‖g_t‖₂ per
// element (what a gradient passing the relative-error check may differ by):
//
//   |Δupdate_t| ≤ lr_t · min(2·B_t, δ_t·(1 + B_t) / (√v̂_t + ε − δ_t))
//
// since m̂ is a weighted mean and √v̂ a weighted root mean square of the gradients with
// weights summing to one, so each moves by at most δ_t. Weight decay only shrinks an earlier
// difference, so the steps' bounds add up. An EMA of the parameters, e = d·e + (1 − d)·p,
// carries the same recurrence of the bounds (emaStep).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_ADAMDRIFT_H
#define MEDRUN_ADAMDRIFT_H

#include "medrun/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace medrun {

class AdamDriftBound {
public:
  AdamDriftBound(double beta1, double beta2, double epsilon)
      : beta1(beta1), beta2(beta2), epsilon(epsilon) {}

  /// The bound B_t on |m̂_t / √v̂_t| after t steps (Cauchy–Schwarz over the moments' weights).
  double ratioBound(double t) const;

  /// Adds step t of parameter `name`: the second moment before and after the step (the
  /// gradient AdamW saw, after clipping and unscaling, is recovered from them), lr and the
  /// gradients' relative tolerance. `before` may be empty (moments start at zero).
  void step(const std::string &name, const Tensor &before, const Tensor &after, double t,
            double lr, double tolerance);

  /// After step(): the EMA of `name` updated with `decay` (its bound: d·bound + (1 − d)·the
  /// parameter's, from zero when the EMA starts equal on both sides).
  void emaStep(const std::string &name, double decay);

  /// The accumulated bound per element of `name` (of its EMA with `ema`), or null when no
  /// step was added.
  const std::vector<double> *slack(const std::string &name, bool ema = false) const;

  /// ‖max(|got − want| − slack, 0)‖₂ / ‖want‖₂ over the elements (NaN when either side is
  /// not finite); with no slack recorded, the plain relative error.
  double excessError(const std::string &name, const Tensor &got, const Tensor &want,
                     bool ema = false) const;

private:
  double beta1, beta2, epsilon;
  std::map<std::string, std::vector<double>> bound, emaBound;
};

} // namespace medrun

#endif // MEDRUN_ADAMDRIFT_H
