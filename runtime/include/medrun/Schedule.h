//===- Schedule.h - learning-rate schedules ------------------------------------------===//
//
// The runtime computes the `lr` input of every training step from a ScheduleConfig, so
// the compiled step function stays schedule-agnostic. The formulas match the PyTorch /
// nnU-Net schedulers users already run, so a run reproduces its Python counterpart:
//
//   warm-up (any type), step < W:  lr * (f + (1 - f) * step / W)
//       torch.optim.lr_scheduler.LinearLR(start_factor = f, total_iters = W)
//   afterwards, t = step - W, T = totalSteps - W:
//   constant  lr
//   cosine    minLr + (lr - minLr) * (1 + cos(pi * t / T)) / 2, t clamped to T
//       CosineAnnealingLR(T_max = T, eta_min = minLr) stepped once per step (BANIS:
//       T_max = n_steps, no warm-up)
//   poly      lr * (1 - t / T)^power, 0 from t = T on
//       nnU-Net's PolyLRScheduler / poly_lr (power 0.9)
//   linear    lr + (minLr - lr) * t / T, t clamped to T
//       LinearLR(start_factor = 1, end_factor = minLr / lr, total_iters = T)
//
// `step` is 0-based: learningRate(c, k) is the lr used by the step with index k, so a run of
// totalSteps steps uses steps 0 .. totalSteps - 1 (poly's last lr is not yet 0, as in
// nnU-Net). Steps past the end keep the final value.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SCHEDULE_H
#define MEDRUN_SCHEDULE_H

#include <cstdint>
#include <map>
#include <string>

namespace medrun {

struct ScheduleConfig {
  std::string type = "constant"; // "constant", "cosine", "poly", "linear"
  double lr = 1e-3;              // base (peak) learning rate
  int64_t totalSteps = 0;        // steps of the whole run (cosine/poly/linear need > 0)
  int64_t warmupSteps = 0;       // linear warm-up from warmupStartFactor*lr to lr
  double warmupStartFactor = 0.0;
  double minLr = 0.0; // cosine: eta_min; linear: end value
  double power = 0.9; // poly exponent (nnU-Net: 0.9)
};

/// Checks the config; throws Error naming the bad key (snake_case, as in parseSchedule)
/// and the expected range:
///   type in {constant, cosine, poly, linear}; lr finite and > 0;
///   total_steps >= 0, and > 0 for cosine/poly/linear;
///   warmup_steps >= 0, < total_steps for cosine/poly/linear (the decay needs a step),
///     <= total_steps for constant when total_steps is given;
///   warmup_start_factor in [0, 1]; min_lr in [0, lr] for cosine/linear and 0 otherwise
///   (poly and constant never reach it); power finite and > 0 (poly).
void validate(const ScheduleConfig &c);

/// The learning rate for step `step` (0-based: the lr used by the step with index `step`).
/// Validates `c`; throws Error for a negative step.
double learningRate(const ScheduleConfig &c, int64_t step);

/// Parses a schedule from a key=value map of strings: type, lr, total_steps, warmup_steps,
/// warmup_start_factor, min_lr, power (missing keys keep ScheduleConfig's defaults). Unknown
/// keys, unknown types and malformed numbers are an Error; an unknown key or type suggests
/// the nearest valid one ("did you mean 'warmup_steps'?"). A key the type does not use
/// (power without type=poly, min_lr without cosine/linear) is an Error too, so a setting is
/// never silently ignored. The result is validated.
ScheduleConfig parseSchedule(const std::map<std::string, std::string> &kv);

} // namespace medrun

#endif // MEDRUN_SCHEDULE_H
