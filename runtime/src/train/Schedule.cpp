//===- Schedule.cpp - learning-rate schedules ----------------------------------------===//
//
// Closed forms of the schedules in Schedule.h. Where PyTorch steps a recurrence, the closed
// form is written so that it stays accurate to a few ulps over the whole run (the tests
// compare against the recurrences in extended precision):
//   cosine  (1 + cos(pi t / T)) / 2 == cos^2(pi t / 2T) == sin^2(pi (T - t) / 2T); the
//           sine form is used in the second half, where 1 + cos(...) would cancel.
//   linear  minLr + (lr - minLr) * (T - t) / T, which has no cancellation near the end.
//   poly    evaluated exactly as nnU-Net does, lr * (1 - t / T) ** power, so the values are
//           bit-identical to a Python run on the same libm.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Schedule.h"
#include "medrun/Error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <locale>
#include <sstream>
#include <vector>

namespace medrun {
namespace {

constexpr double kPi = 3.14159265358979323846;

const std::vector<std::string> &validKeys() {
  static const std::vector<std::string> keys = {
      "type", "lr", "total_steps", "warmup_steps", "warmup_start_factor", "min_lr", "power"};
  return keys;
}

const std::vector<std::string> &validTypes() {
  static const std::vector<std::string> types = {"constant", "cosine", "poly", "linear"};
  return types;
}

bool isDecay(const std::string &type) { return type != "constant"; }
bool usesMinLr(const std::string &type) { return type == "cosine" || type == "linear"; }

std::string lower(std::string s) {
  for (char &ch : s)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of
/// adjacent characters each cost 1 ("lr" vs "rl" is 1).
size_t editDistance(const std::string &a, const std::string &b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= m; ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

/// "; did you mean 'x'?" for the nearest candidate (case-insensitive), or "" when none is
/// close: at most a third of the longer name's characters may differ (at least one).
std::string suggestion(const std::string &name, const std::vector<std::string> &candidates) {
  const std::string key = lower(name);
  const std::string *best = nullptr;
  size_t bestDist = 0;
  for (const std::string &c : candidates) {
    size_t dist = editDistance(key, c);
    size_t limit = std::max<size_t>(1, (std::max(key.size(), c.size()) + 2) / 3);
    if (dist <= limit && (!best || dist < bestDist))
      best = &c, bestDist = dist;
  }
  return best ? str("; did you mean '", *best, "'?") : std::string();
}

std::string join(const std::vector<std::string> &items) {
  std::string out;
  for (const std::string &s : items)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// Parses the whole string as a T in the "C" locale; false on anything else (leading or
/// trailing characters, overflow, empty).
template <typename T> bool parseWhole(const std::string &s, T &out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())))
    return false;
  std::istringstream is(s);
  is.imbue(std::locale::classic());
  is >> out;
  return !is.fail() && is.peek() == std::char_traits<char>::eof();
}

double parseDouble(const std::string &key, const std::string &value, const char *expected) {
  double v = 0;
  if (!parseWhole(value, v))
    throw Error(str("schedule: ", key, " = '", value, "' is not a number (expected ", expected,
                    ")"));
  return v;
}

int64_t parseInt(const std::string &key, const std::string &value, const char *expected) {
  int64_t v = 0;
  if (!parseWhole(value, v))
    throw Error(str("schedule: ", key, " = '", value, "' is not an integer (expected ",
                    expected, ")"));
  return v;
}

} // namespace

void validate(const ScheduleConfig &c) {
  const auto &types = validTypes();
  if (std::find(types.begin(), types.end(), c.type) == types.end())
    throw Error(str("schedule: type '", c.type, "' is unknown", suggestion(c.type, types),
                    " (expected one of ", join(types), ")"));
  if (!std::isfinite(c.lr) || c.lr <= 0)
    throw Error(str("schedule: lr = ", c.lr, " is out of range (expected a finite number > 0)"));
  if (isDecay(c.type)) {
    if (c.totalSteps <= 0)
      throw Error(str("schedule: total_steps = ", c.totalSteps,
                      " is out of range (a ", c.type, " schedule needs total_steps >= 1)"));
  } else if (c.totalSteps < 0) {
    throw Error(str("schedule: total_steps = ", c.totalSteps,
                    " is out of range (expected an integer >= 0)"));
  }
  if (c.warmupSteps < 0)
    throw Error(str("schedule: warmup_steps = ", c.warmupSteps,
                    " is out of range (expected an integer >= 0)"));
  if (isDecay(c.type) && c.warmupSteps >= c.totalSteps)
    throw Error(str("schedule: warmup_steps = ", c.warmupSteps,
                    " is out of range (expected warmup_steps < total_steps = ", c.totalSteps,
                    ", so that the ", c.type, " phase has at least one step)"));
  if (!isDecay(c.type) && c.totalSteps > 0 && c.warmupSteps > c.totalSteps)
    throw Error(str("schedule: warmup_steps = ", c.warmupSteps,
                    " is out of range (expected warmup_steps <= total_steps = ", c.totalSteps,
                    ")"));
  if (!(c.warmupStartFactor >= 0 && c.warmupStartFactor <= 1))
    throw Error(str("schedule: warmup_start_factor = ", c.warmupStartFactor,
                    " is out of range (expected a number in [0, 1])"));
  if (usesMinLr(c.type)) {
    if (!(c.minLr >= 0 && c.minLr <= c.lr))
      throw Error(str("schedule: min_lr = ", c.minLr,
                      " is out of range (expected a number in [0, lr = ", c.lr, "])"));
  } else if (c.minLr != 0) {
    throw Error(str("schedule: min_lr = ", c.minLr, " is not used by a ", c.type,
                    " schedule (expected 0; only cosine and linear decay to min_lr)"));
  }
  if (c.type == "poly" && (!std::isfinite(c.power) || c.power <= 0))
    throw Error(
        str("schedule: power = ", c.power, " is out of range (expected a finite number > 0)"));
}

double learningRate(const ScheduleConfig &c, int64_t step) {
  validate(c);
  if (step < 0)
    throw Error(str("schedule: step ", step, " is negative (steps are counted from 0)"));

  const int64_t w = c.warmupSteps;
  if (step < w) {
    // torch LinearLR(start_factor = f, end_factor = 1, total_iters = w).
    const double f = c.warmupStartFactor;
    return c.lr * (f + (1 - f) * static_cast<double>(step) / static_cast<double>(w));
  }
  if (c.type == "constant")
    return c.lr;

  const int64_t total = c.totalSteps - w; // >= 1 (validated)
  const int64_t t = std::min(step - w, total);
  const double T = static_cast<double>(total);
  if (c.type == "cosine") {
    // (1 + cos(pi t / T)) / 2, evaluated without cancellation (see the file comment).
    double h = 2 * t <= total ? std::cos(kPi * static_cast<double>(t) / (2 * T))
                              : std::sin(kPi * static_cast<double>(total - t) / (2 * T));
    return c.minLr + (c.lr - c.minLr) * (h * h);
  }
  if (c.type == "poly") {
    if (t >= total)
      return 0.0;
    return c.lr * std::pow(1.0 - static_cast<double>(t) / T, c.power);
  }
  // linear
  return c.minLr + (c.lr - c.minLr) * (static_cast<double>(total - t) / T);
}

ScheduleConfig parseSchedule(const std::map<std::string, std::string> &kv) {
  const auto &keys = validKeys();
  for (const auto &[key, value] : kv)
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw Error(str("schedule: unknown key '", key, "'", suggestion(key, keys),
                      " (valid keys: ", join(keys), ")"));

  ScheduleConfig c;
  auto get = [&](const char *key) -> const std::string * {
    auto it = kv.find(key);
    return it == kv.end() ? nullptr : &it->second;
  };
  if (auto *v = get("type"))
    c.type = *v;
  if (auto *v = get("lr"))
    c.lr = parseDouble("lr", *v, "a finite number > 0");
  if (auto *v = get("total_steps"))
    c.totalSteps = parseInt("total_steps", *v, "an integer >= 0");
  if (auto *v = get("warmup_steps"))
    c.warmupSteps = parseInt("warmup_steps", *v, "an integer >= 0");
  if (auto *v = get("warmup_start_factor"))
    c.warmupStartFactor = parseDouble("warmup_start_factor", *v, "a number in [0, 1]");
  if (auto *v = get("min_lr"))
    c.minLr = parseDouble("min_lr", *v, "a number in [0, lr]");
  if (auto *v = get("power"))
    c.power = parseDouble("power", *v, "a finite number > 0");

  validate(c); // checks the type before the per-type key checks below
  if (get("power") && c.type != "poly")
    throw Error(str("schedule: power is not used by a ", c.type,
                    " schedule (only type=poly has an exponent)"));
  if (get("min_lr") && !usesMinLr(c.type))
    throw Error(str("schedule: min_lr is not used by a ", c.type,
                    " schedule (only cosine and linear decay to min_lr)"));
  return c;
}

} // namespace medrun
