//===- ScheduleTest.cpp - learning-rate schedules vs the torch / nnU-Net recurrences ----===//
//
// The closed forms in Schedule.cpp are checked against independent references: the
// recursive update formulas of torch.optim.lr_scheduler's CosineAnnealingLR and LinearLR as
// given in the PyTorch docs, stepped one step at a time in long double, and nnU-Net's
// poly_lr evaluated directly with pow. Also: warm-up boundaries, the end of the schedule,
// validation and parse errors and their messages.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Schedule.h"

#include "gtest/gtest.h"
#include "ExpectError.h"

#include <cmath>
#include <functional>

using namespace medrun;

namespace {

using LD = long double;
const LD kPiL = 3.141592653589793238462643383279502884L;

/// |actual - expected| <= rel * |expected| (so an expected 0 must be met exactly).
::testing::AssertionResult relNear(double actual, LD expected, double rel) {
  LD err = std::fabs(static_cast<LD>(actual) - expected);
  if (err <= rel * std::fabs(expected))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "actual " << actual << " expected " << static_cast<double>(expected)
         << " relative error " << static_cast<double>(err / std::fabs(expected));
}

/// The message of the Error `fn` throws ("" and a test failure if it does not throw).
ScheduleConfig make(const std::string &type, double lr, int64_t total, int64_t warmup = 0,
                    double startFactor = 0.0, double minLr = 0.0, double power = 0.9) {
  ScheduleConfig c;
  c.type = type, c.lr = lr, c.totalSteps = total, c.warmupSteps = warmup;
  c.warmupStartFactor = startFactor, c.minLr = minLr, c.power = power;
  return c;
}

/// CosineAnnealingLR's recursive form (PyTorch docs), for T_cur < T_max:
///   eta_{t+1} = eta_min + (eta_t - eta_min) * (1 + cos(pi (t+1) / T)) / (1 + cos(pi t / T))
/// starting at eta_0 = base lr. Returns eta_0 .. eta_T.
std::vector<LD> cosineRecurrence(LD lr, LD etaMin, int64_t T) {
  std::vector<LD> eta{lr};
  for (int64_t t = 0; t < T; ++t)
    eta.push_back(etaMin + (eta.back() - etaMin) * (1 + std::cos(kPiL * (t + 1) / T)) /
                               (1 + std::cos(kPiL * t / T)));
  return eta;
}

/// LinearLR's recursive form (PyTorch docs), factor after k steps of total_iters n:
///   f_k = f_{k-1} * (1 + (e - s) / (n s + (k - 1)(e - s))),  f_0 = s; constant after n.
std::vector<LD> linearLrFactors(LD s, LD e, int64_t n) {
  std::vector<LD> f{s};
  for (int64_t k = 1; k <= n; ++k)
    f.push_back(f.back() * (1 + (e - s) / (n * s + (k - 1) * (e - s))));
  return f;
}

//===----------------------------------------------------------------------------------===//
// Closed forms vs recurrences
//===----------------------------------------------------------------------------------===//

TEST(Schedule, CosineMatchesTorchRecurrence) {
  // BANIS: CosineAnnealingLR(T_max = n_steps) stepped every step, eta_min 0; also a floor
  // and an odd T_max.
  struct Case {
    double lr, minLr;
    int64_t total;
  } cases[] = {{1e-3, 0.0, 1000}, {3e-4, 1e-6, 1000}, {1e-2, 0.0, 999}, {1.0, 0.25, 7},
               {5e-3, 0.0, 1},    {5e-3, 1e-4, 2}};
  for (const Case &k : cases) {
    ScheduleConfig c = make("cosine", k.lr, k.total, 0, 0.0, k.minLr);
    std::vector<LD> ref = cosineRecurrence(k.lr, k.minLr, k.total);
    for (int64_t s = 0; s <= k.total; ++s)
      EXPECT_TRUE(relNear(learningRate(c, s), ref[s], 1e-12))
          << "T " << k.total << " min_lr " << k.minLr << " step " << s;
    // The formula as written in the docs, in plain double (cancels near the end, hence the
    // absolute tolerance).
    for (int64_t s = 0; s <= k.total; ++s) {
      double naive = k.minLr + (k.lr - k.minLr) *
                                   (1 + std::cos(M_PI * static_cast<double>(s) / k.total)) / 2;
      EXPECT_NEAR(learningRate(c, s), naive, 1e-15 * k.lr) << "step " << s;
    }
  }
}

TEST(Schedule, CosineWithWarmupMatchesSequentialLR) {
  // SequentialLR([LinearLR(start_factor=0.1, total_iters=50),
  //               CosineAnnealingLR(T_max=950, eta_min=1e-5)], milestones=[50]).
  const double lr = 2e-3, f = 0.1, minLr = 1e-5;
  const int64_t W = 50, total = 1000;
  ScheduleConfig c = make("cosine", lr, total, W, f, minLr);
  std::vector<LD> warm = linearLrFactors(f, 1, W);
  for (int64_t s = 0; s < W; ++s)
    EXPECT_TRUE(relNear(learningRate(c, s), lr * warm[s], 1e-12)) << "warm-up step " << s;
  std::vector<LD> cos = cosineRecurrence(lr, minLr, total - W);
  for (int64_t s = W; s <= total; ++s)
    EXPECT_TRUE(relNear(learningRate(c, s), cos[s - W], 1e-12)) << "step " << s;
}

TEST(Schedule, PolyMatchesNnUNetPolyLr) {
  // nnU-Net: initial_lr * (1 - epoch / max_epochs) ** 0.9, epochs 0 .. max_epochs - 1.
  const double lr = 1e-2;
  const int64_t total = 1000;
  ScheduleConfig c = make("poly", lr, total);
  for (int64_t s = 0; s < total; ++s) {
    LD ref = lr * std::pow(static_cast<LD>(total - s) / total, 0.9L);
    EXPECT_TRUE(relNear(learningRate(c, s), ref, 1e-12)) << "step " << s;
    // Bit-identical to the Python expression evaluated in double.
    EXPECT_EQ(learningRate(c, s), lr * std::pow(1 - static_cast<double>(s) / total, 0.9));
  }
  EXPECT_DOUBLE_EQ(learningRate(c, 0), lr);
  // Last epoch: lr * 0.001^0.9 ~ 2e-5 (1 - 999/1000 is 1e-3 only to ~1e-14 in double).
  EXPECT_TRUE(relNear(learningRate(c, 999), 1e-2L * std::pow(1e-3L, 0.9L), 1e-12));
  EXPECT_GT(learningRate(c, 999), 0.0);

  // Other exponents, and poly after a warm-up: t and T count from the end of the warm-up.
  for (double power : {0.5, 1.0, 2.0}) {
    ScheduleConfig w = make("poly", 3e-4, 250, 20, 0.0, 0.0, power);
    for (int64_t s = 20; s < 250; ++s) {
      LD ref = 3e-4L * std::pow(static_cast<LD>(250 - s) / 230, static_cast<LD>(power));
      EXPECT_TRUE(relNear(learningRate(w, s), ref, 1e-12)) << "power " << power << " step " << s;
    }
  }
}

TEST(Schedule, LinearMatchesTorchLinearLR) {
  // LinearLR(start_factor=1, end_factor=min_lr/lr, total_iters=T) after the warm-up.
  for (double minLr : {0.0, 1e-5}) {
    const double lr = 1e-3;
    const int64_t W = 10, total = 1000;
    ScheduleConfig c = make("linear", lr, total, W, 0.0, minLr);
    std::vector<LD> fac = linearLrFactors(1, static_cast<LD>(minLr) / lr, total - W);
    for (int64_t s = W; s <= total; ++s)
      EXPECT_TRUE(relNear(learningRate(c, s), lr * fac[s - W], 1e-12))
          << "min_lr " << minLr << " step " << s;
  }
}

//===----------------------------------------------------------------------------------===//
// Warm-up and the ends of the schedule
//===----------------------------------------------------------------------------------===//

TEST(Schedule, WarmupBoundaries) {
  const double lr = 1e-3;
  for (const char *type : {"constant", "cosine", "poly", "linear"}) {
    ScheduleConfig c = make(type, lr, 100, 10, 0.0);
    EXPECT_EQ(learningRate(c, 0), 0.0) << type; // start factor 0: the first step is lr * 0
    EXPECT_DOUBLE_EQ(learningRate(c, 1), lr * 0.1) << type;
    EXPECT_DOUBLE_EQ(learningRate(c, 9), lr * 0.9) << type;
    EXPECT_EQ(learningRate(c, 10), lr) << type; // first step after warm-up: the peak
    if (std::string(type) == "constant")
      EXPECT_EQ(learningRate(c, 11), lr);
    else
      EXPECT_LT(learningRate(c, 11), lr) << type;
    for (int64_t s = 1; s <= 10; ++s)
      EXPECT_GT(learningRate(c, s), learningRate(c, s - 1)) << type << " step " << s;
  }
  // Start factor and a one-step warm-up.
  ScheduleConfig c = make("cosine", 2.0, 10, 1, 0.25);
  EXPECT_EQ(learningRate(c, 0), 0.5);
  EXPECT_EQ(learningRate(c, 1), 2.0);
  // Start factor 1 is no warm-up at all.
  ScheduleConfig flat = make("constant", 3e-4, 0, 5, 1.0);
  for (int64_t s = 0; s < 8; ++s)
    EXPECT_EQ(learningRate(flat, s), 3e-4);
  // Constant with a warm-up needs no total_steps.
  ScheduleConfig cw = make("constant", 1.0, 0, 4, 0.0);
  EXPECT_EQ(learningRate(cw, 2), 0.5);
  EXPECT_EQ(learningRate(cw, 1000000), 1.0);
}

TEST(Schedule, EndOfSchedule) {
  const double lr = 1e-2, minLr = 1e-4;
  const int64_t total = 500, W = 25;
  ScheduleConfig cosine = make("cosine", lr, total, W, 0.0, minLr);
  ScheduleConfig poly = make("poly", lr, total, W);
  ScheduleConfig linear = make("linear", lr, total, W, 0.0, minLr);
  // The last step of the run is still above the floor...
  EXPECT_GT(learningRate(cosine, total - 1), minLr);
  EXPECT_GT(learningRate(poly, total - 1), 0.0);
  EXPECT_GT(learningRate(linear, total - 1), minLr);
  EXPECT_DOUBLE_EQ(learningRate(linear, total - 1), minLr + (lr - minLr) / (total - W));
  // ... and from total_steps on the final value holds (no cosine restart).
  for (int64_t s : {total, total + 1, total + 475, 10 * total}) {
    EXPECT_EQ(learningRate(cosine, s), minLr) << s;
    EXPECT_EQ(learningRate(poly, s), 0.0) << s;
    EXPECT_EQ(learningRate(linear, s), minLr) << s;
  }
  // Monotone decay between the warm-up and the end.
  for (int64_t s = W + 1; s <= total; ++s) {
    EXPECT_LT(learningRate(cosine, s), learningRate(cosine, s - 1)) << s;
    EXPECT_LT(learningRate(poly, s), learningRate(poly, s - 1)) << s;
    EXPECT_LT(learningRate(linear, s), learningRate(linear, s - 1)) << s;
  }
  // Cosine: halfway through the decay the lr is the midpoint.
  EXPECT_NEAR(learningRate(make("cosine", lr, 200, 0, 0.0, minLr), 100), (lr + minLr) / 2,
              1e-17);
  EXPECT_EQ(learningRate(make("constant", lr, 0), 123456789), lr);
}

//===----------------------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------------------===//

TEST(Schedule, ValidationErrors) {
  EXPECT_NO_THROW(validate(ScheduleConfig{}));
  EXPECT_ERROR(validate(make("cosin", 1e-3, 10)), "type 'cosin'", "did you mean 'cosine'?",
               "constant, cosine, poly, linear");
  EXPECT_ERROR(validate(make("step", 1e-3, 10)), "type 'step'", "constant, cosine, poly, linear");
  EXPECT_ERROR(validate(make("constant", 0.0, 0)), "lr = 0", "finite number > 0");
  EXPECT_ERROR(validate(make("constant", -1e-3, 0)), "lr = -0.001", "> 0");
  EXPECT_ERROR(validate(make("constant", NAN, 0)), "lr = nan", "> 0");
  EXPECT_ERROR(validate(make("constant", INFINITY, 0)), "lr = inf", "finite");
  for (const char *type : {"cosine", "poly", "linear"}) {
    std::string needs = std::string("a ") + type + " schedule needs total_steps >= 1";
    EXPECT_ERROR(validate(make(type, 1e-3, 0)), "total_steps = 0", needs.c_str());
  }
  EXPECT_ERROR(validate(make("constant", 1e-3, -5)), "total_steps = -5", ">= 0");
  EXPECT_ERROR(validate(make("constant", 1e-3, 0, -1)), "warmup_steps = -1", ">= 0");
  EXPECT_ERROR(validate(make("cosine", 1e-3, 100, 100)), "warmup_steps = 100",
               "warmup_steps < total_steps = 100");
  EXPECT_NO_THROW(validate(make("cosine", 1e-3, 100, 99)));
  EXPECT_ERROR(validate(make("constant", 1e-3, 100, 101)), "warmup_steps = 101",
               "warmup_steps <= total_steps = 100");
  EXPECT_NO_THROW(validate(make("constant", 1e-3, 100, 100)));
  EXPECT_ERROR(validate(make("constant", 1e-3, 0, 5, 1.5)), "warmup_start_factor = 1.5",
               "[0, 1]");
  EXPECT_ERROR(validate(make("constant", 1e-3, 0, 5, -0.1)), "warmup_start_factor = -0.1");
  EXPECT_ERROR(validate(make("constant", 1e-3, 0, 5, NAN)), "warmup_start_factor = nan");
  EXPECT_ERROR(validate(make("cosine", 1e-3, 10, 0, 0.0, 2e-3)), "min_lr = 0.002",
               "[0, lr = 0.001]");
  EXPECT_ERROR(validate(make("linear", 1e-3, 10, 0, 0.0, -1e-6)), "min_lr = -1e-06");
  EXPECT_ERROR(validate(make("poly", 1e-3, 10, 0, 0.0, 1e-6)), "min_lr = 1e-06",
               "not used by a poly schedule");
  EXPECT_ERROR(validate(make("constant", 1e-3, 10, 0, 0.0, 1e-6)), "min_lr",
               "not used by a constant schedule");
  EXPECT_ERROR(validate(make("poly", 1e-3, 10, 0, 0.0, 0.0, 0.0)), "power = 0", "> 0");
  EXPECT_ERROR(validate(make("poly", 1e-3, 10, 0, 0.0, 0.0, NAN)), "power = nan");
  EXPECT_NO_THROW(validate(make("cosine", 1e-3, 10, 0, 0.0, 0.0, -1.0))); // power unused

  // learningRate validates too, and rejects negative steps.
  EXPECT_ERROR(learningRate(make("cosine", 1e-3, 0), 0), "total_steps = 0");
  EXPECT_ERROR(learningRate(make("cosine", 1e-3, 10), -1), "step -1 is negative");
}

//===----------------------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------------------===//

TEST(Schedule, ParseAllKeys) {
  ScheduleConfig c = parseSchedule({{"type", "cosine"},
                                    {"lr", "3e-4"},
                                    {"total_steps", "250000"},
                                    {"warmup_steps", "1000"},
                                    {"warmup_start_factor", "0.01"},
                                    {"min_lr", "1e-6"}});
  EXPECT_EQ(c.type, "cosine");
  EXPECT_EQ(c.lr, 3e-4);
  EXPECT_EQ(c.totalSteps, 250000);
  EXPECT_EQ(c.warmupSteps, 1000);
  EXPECT_EQ(c.warmupStartFactor, 0.01);
  EXPECT_EQ(c.minLr, 1e-6);

  ScheduleConfig p = parseSchedule({{"type", "poly"}, {"lr", "0.01"}, {"total_steps", "1000"},
                                    {"power", "0.9"}});
  EXPECT_EQ(p.type, "poly");
  EXPECT_EQ(p.power, 0.9);
  EXPECT_EQ(learningRate(p, 999), 0.01 * std::pow(1 - 999.0 / 1000, 0.9));

  // Defaults: a constant 1e-3.
  ScheduleConfig d = parseSchedule({});
  EXPECT_EQ(d.type, "constant");
  EXPECT_EQ(d.lr, 1e-3);
  EXPECT_EQ(learningRate(d, 42), 1e-3);
}

TEST(Schedule, ParseUnknownKeySuggestsNearest) {
  EXPECT_ERROR(parseSchedule({{"type", "cosine"}, {"warmup_step", "10"}}),
               "unknown key 'warmup_step'", "did you mean 'warmup_steps'?",
               "valid keys: type, lr, total_steps, warmup_steps, warmup_start_factor, min_lr, "
               "power");
  EXPECT_ERROR(parseSchedule({{"totalSteps", "10"}}), "did you mean 'total_steps'?");
  EXPECT_ERROR(parseSchedule({{"LR", "1e-3"}}), "did you mean 'lr'?");
  EXPECT_ERROR(parseSchedule({{"minlr", "0"}}), "did you mean 'min_lr'?");
  EXPECT_ERROR(parseSchedule({{"pwoer", "1"}}), "did you mean 'power'?"); // transposition
  EXPECT_ERROR(parseSchedule({{"warmup_start", "0.1"}}), "did you mean 'warmup_steps'?");
  // Nothing close: no guess, just the list.
  std::string msg = test::errorOf([] { parseSchedule({{"momentum", "0.9"}}); });
  EXPECT_NE(msg.find("unknown key 'momentum'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
  EXPECT_NE(msg.find("valid keys:"), std::string::npos) << msg;
  // Unknown types are suggested too.
  EXPECT_ERROR(parseSchedule({{"type", "Cosine"}, {"total_steps", "10"}}),
               "type 'Cosine'", "did you mean 'cosine'?");
  EXPECT_ERROR(parseSchedule({{"type", "polynomial"}, {"total_steps", "10"}}),
               "type 'polynomial'", "expected one of constant, cosine, poly, linear");
}

TEST(Schedule, ParseMalformedValues) {
  EXPECT_ERROR(parseSchedule({{"lr", "1e-3x"}}), "lr = '1e-3x' is not a number",
               "finite number > 0");
  EXPECT_ERROR(parseSchedule({{"lr", ""}}), "lr = '' is not a number");
  EXPECT_ERROR(parseSchedule({{"lr", " 1e-3"}}), "is not a number");
  EXPECT_ERROR(parseSchedule({{"lr", "1e-3 "}}), "is not a number");
  EXPECT_ERROR(parseSchedule({{"lr", "1e999"}}), "is not a number");
  EXPECT_ERROR(parseSchedule({{"type", "cosine"}, {"total_steps", "1.5"}}),
               "total_steps = '1.5' is not an integer", "an integer >= 0");
  EXPECT_ERROR(parseSchedule({{"type", "cosine"}, {"total_steps", "1e4"}}), "not an integer");
  EXPECT_ERROR(parseSchedule({{"type", "cosine"}, {"total_steps", "99999999999999999999"}}),
               "not an integer");
  EXPECT_ERROR(parseSchedule({{"warmup_steps", "ten"}}), "warmup_steps = 'ten'");
  EXPECT_ERROR(parseSchedule({{"warmup_start_factor", "0,5"}}), "warmup_start_factor = '0,5'");
  // Parsed values are validated, naming the key and the range.
  EXPECT_ERROR(parseSchedule({{"lr", "-1"}}), "lr = -1", "> 0");
  EXPECT_ERROR(parseSchedule({{"type", "cosine"}, {"total_steps", "-3"}}), "total_steps = -3");
  EXPECT_ERROR(parseSchedule({{"type", "linear"}, {"total_steps", "10"}, {"warmup_steps", "10"}}),
               "warmup_steps = 10", "warmup_steps < total_steps = 10");
}

TEST(Schedule, ParseRejectsKeysTheTypeDoesNotUse) {
  EXPECT_ERROR(parseSchedule({{"type", "cosine"}, {"total_steps", "10"}, {"power", "0.9"}}),
               "power is not used by a cosine schedule");
  EXPECT_ERROR(parseSchedule({{"power", "1"}}), "power is not used by a constant schedule");
  EXPECT_ERROR(parseSchedule({{"type", "poly"}, {"total_steps", "10"}, {"min_lr", "0"}}),
               "min_lr is not used by a poly schedule");
  EXPECT_ERROR(parseSchedule({{"type", "poly"}, {"total_steps", "10"}, {"min_lr", "1e-5"}}),
               "min_lr = 1e-05 is not used by a poly schedule");
  EXPECT_NO_THROW(parseSchedule({{"type", "linear"}, {"total_steps", "10"}, {"min_lr", "0"}}));
}

} // namespace
