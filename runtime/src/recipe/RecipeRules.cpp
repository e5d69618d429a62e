//===- RecipeRules.cpp - the value rules of a training recipe (medc and medrun) -----===//
//
// Compiled into both halves (the library MedRecipeRules): no exceptions, no RTTI, nothing
// but the standard library, as medc is built with LLVM's flags.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/RecipeRules.h"

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

namespace medrun::recipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxI64 = 9223372036854775807.0;

// Constructors for the table's rows.
Rule word(const char *s, const char *k, bool required, const char *const *names = nullptr) {
  return {s, k, Type::Word, required, 0, 0, false, false, false, 0, names};
}
Rule integer(const char *s, const char *k, bool required, double lo, double hi = kMaxI64) {
  return {s, k, Type::Int, required, lo, hi, false, false, false, 0, nullptr};
}
Rule size3(const char *s, const char *k, bool required, double hi) {
  return {s, k, Type::Size3, required, 1, hi, false, false, false, 0, nullptr};
}
Rule real(const char *s, const char *k, bool required, double lo, bool loOpen, double hi,
          bool hiOpen, bool f32) {
  return {s, k, Type::Real, required, lo, hi, loOpen, hiOpen, f32, 0, nullptr};
}
Rule reals(const char *s, const char *k, int count, double lo, bool loOpen, double hi,
           bool hiOpen, bool f32) {
  return {s, k, Type::Reals, false, lo, hi, loOpen, hiOpen, f32, count, nullptr};
}
Rule boolean(const char *s, const char *k, bool required) {
  return {s, k, Type::Bool, required, 0, 0, false, false, false, 0, nullptr};
}
Rule words(const char *s, const char *k) {
  return {s, k, Type::Words, false, 0, 0, false, false, false, 0, nullptr};
}

// "1e+300", "0.001", "3": the shortest spelling that reads back as the same double.
std::string number(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  return buf;
}

std::string integerText(double d) {
  return d >= kMaxI64 ? "9223372036854775807" : std::to_string(static_cast<int64_t>(d));
}

bool isInteger(const Value &v) { return v.kind == Value::Int; }

bool inRange(const Rule &r, double v) {
  return (r.loOpen ? v > r.lo : v >= r.lo) && (r.hiOpen ? v < r.hi : v <= r.hi);
}

// The range of a Real in words: "> 0", ">= 0", "in [0, 1)".
std::string range(const Rule &r) {
  if (r.hi == kInf)
    return std::string(r.loOpen ? "> " : ">= ") + number(r.lo);
  return "in " + std::string(r.loOpen ? "(" : "[") + number(r.lo) + ", " + number(r.hi) +
         (r.hiOpen ? ")" : "]");
}

std::string intRange(const Rule &r) {
  return r.hi >= kMaxI64 ? ">= " + integerText(r.lo)
                         : "in " + integerText(r.lo) + ".." + integerText(r.hi);
}

// Why a number of an f32 key is not one f32 holds ("" if it is).
std::string f32Rule(double v) {
  const double a = std::fabs(v);
  if (a > FLT_MAX)
    return "at most 3.40282347e+38 in magnitude (the training step computes it in f32, "
           "where it would be infinite)";
  if (a != 0 && a < FLT_MIN)
    return "0 or at least 1.17549435e-38 in magnitude (the smallest normal f32; the training "
           "step computes it in f32, where it would lose its precision or become 0)";
  return "";
}

// One key's type and range; "" if kept.
std::string checkOne(const Rule &r, const Value &v) {
  const std::string key = keyName(r);
  auto expected = [&] { return key + ": expected " + describe(r) + ", got " + show(v); };
  switch (r.type) {
  case Type::Word:
    if (v.kind != Value::String)
      return expected();
    if (r.names) {
      for (const char *const *n = r.names; *n; ++n)
        if (v.s == *n)
          return "";
      return key + ": unknown value " + show(v) + " (expected " + describe(r) + ")";
    }
    if (v.s.size() > kMaxString)
      return key + ": a string of " + std::to_string(v.s.size()) + " bytes, over the limit of " +
             std::to_string(kMaxString);
    return "";
  case Type::Words:
    if (v.kind != Value::List)
      return expected();
    for (const Value &e : v.list)
      if (e.kind != Value::String)
        return expected();
      else if (e.s.size() > kMaxString)
        return key + ": a string of " + std::to_string(e.s.size()) +
               " bytes, over the limit of " + std::to_string(kMaxString);
    return "";
  case Type::Bool:
    return v.kind == Value::Bool ? "" : expected();
  case Type::Fold:
    if (v.kind == Value::String && v.s == "all")
      return "";
    if (!isInteger(v))
      return expected();
    return v.i >= 0 ? "" : key + " must be >= 0 or \"all\", got " + show(v);
  case Type::Int:
    if (!isInteger(v))
      return expected();
    if (v.d < r.lo || v.d > r.hi)
      return key + " must be " + intRange(r) + ", got " + show(v);
    return "";
  case Type::Size3:
    if (v.kind != Value::List || v.list.size() != 3)
      return expected();
    for (const Value &e : v.list)
      if (!isInteger(e))
        return expected();
    for (const Value &e : v.list)
      if (e.d < r.lo || e.d > r.hi)
        return key + " must each be " + intRange(r) + ", got " + show(v);
    return "";
  case Type::Real:
  case Type::Reals: {
    const bool list = r.type == Type::Reals;
    if (list ? v.kind != Value::List : v.kind != Value::Int && v.kind != Value::Real)
      return expected();
    if (list && r.count && v.list.size() != static_cast<size_t>(r.count))
      return expected();
    const std::vector<Value> one = {v};
    for (const Value &e : list ? v.list : one) {
      if (e.kind != Value::Int && e.kind != Value::Real)
        return expected();
      if (!std::isfinite(e.d))
        return key + (list ? " must each be a finite number, got " : " must be a finite number, got ") +
               show(e);
      if (!inRange(r, e.d))
        return key + (list ? " must each be " : " must be ") + range(r) + ", got " + show(e);
      if (r.f32)
        if (std::string why = f32Rule(e.d); !why.empty())
          return key + (list ? " must each be " : " must be ") + why + ", got " + show(e);
    }
    return "";
  }
  }
  return "";
}

// The rules between keys; "" if kept. Every value they read passed checkOne.
std::string crossRules(const Source &src) {
  auto get = [&](const char *s, const char *k) { return src.get(s, k); };
  const Value batch = get("data", "batch"), patch = get("data", "patch");
  if (batch.kind == Value::Int && patch.kind == Value::List) {
    int64_t voxels = batch.i;
    for (const Value &p : patch.list)
      if (__builtin_mul_overflow(voxels, p.i, &voxels) || voxels > kMaxBatchVoxels)
        return "data.batch x data.patch (" + show(batch) + " x " + show(patch) +
               ") must be at most 2^40 voxels: the plan cannot address a larger step";
    const Value source = get("data", "source"), shape = get("data", "volume_shape");
    const bool synthetic = source.kind == Value::Missing || source.s == "synthetic";
    if (synthetic && shape.kind == Value::List)
      for (int i = 0; i < 3; ++i)
        if (shape.list[i].i < patch.list[i].i)
          return "data.volume_shape " + show(shape) + " is smaller than data.patch " + show(patch) +
                 ": patches would be mostly padding (a loss of exactly 0 on masked targets); "
                 "make each volume at least the patch";
  }

  // The schedule (Schedule.h): every step's learning rate in (0, lr].
  const Value type = get("schedule", "type");
  if (type.kind == Value::String) {
    const std::string &t = type.s;
    const bool decay = t != "constant", usesMinLr = t == "cosine" || t == "linear";
    const Value total = get("schedule", "total_steps"), warmup = get("schedule", "warmup_steps"),
                minLr = get("schedule", "min_lr"), power = get("schedule", "power"),
                lr = get("optimizer", "lr");
    const int64_t w = warmup.kind == Value::Int ? warmup.i : 0;
    if (total.kind == Value::Int) {
      if (decay && total.i < 1)
        return "schedule.total_steps must be >= 1 for a " + t + " schedule, got " + show(total);
      if (decay && w >= total.i)
        return "schedule.warmup_steps must be < schedule.total_steps (" + show(total) +
               ") for a " + t + " schedule, so that its decay has at least one step, got " +
               std::to_string(w) + " (total_steps is train.steps unless given)";
      if (!decay && total.i > 0 && w > total.i)
        return "schedule.warmup_steps must be <= schedule.total_steps (" + show(total) +
               "), got " + std::to_string(w) + " (total_steps is train.steps unless given)";
    }
    if (minLr.kind != Value::Missing && !usesMinLr)
      return "schedule.min_lr: not used by a " + t +
             " schedule (only cosine and linear decay to min_lr), got " + show(minLr);
    if (minLr.kind != Value::Missing && lr.kind != Value::Missing && minLr.d > lr.d)
      return "schedule.min_lr must be <= optimizer.lr (" + show(lr) + "), got " + show(minLr);
    if (power.kind != Value::Missing && t != "poly")
      return "schedule.power: not used by a " + t + " schedule (only poly has an exponent), got " +
             show(power);
  }
  return "";
}

} // namespace

const std::vector<Rule> &rules() {
  static const std::vector<Rule> table = {
      // Every dropout layer's rate (0: none); absent: the rates the model holds.
      real("model", "dropout", false, 0, false, 1, true, false),
      integer("data", "batch", true, 1, kMaxBatch),
      size3("data", "patch", true, kMaxPatch),
      integer("data", "volumes", true, 1, kMaxVolumes),
      size3("data", "volume_shape", true, kMaxVolumeSize),
      integer("data", "seed", true, 0),
      integer("data", "workers", true, 1, kMaxWorkers),
      integer("data", "prefetch", true, 1, kMaxPrefetch),
      real("data", "foreground", true, 0, false, 1, false, false),
      word("data", "source", false, kDataSources),
      word("data", "path", false),
      words("data", "images"),
      words("data", "labels"),
      word("data", "image_key", false),
      word("data", "label_key", false),
      word("data", "normalization", false, kNormalizations),
      word("data", "splits", false),
      {"data", "fold", Type::Fold, false, 0, 0, false, false, false, 0, nullptr},
      real("data", "val_fraction", false, 0, false, 1, true, false),
      integer("data", "cache_mb", false, 1, double(int64_t(1) << 40)),
      reals("data", "spacing", 3, 0, true, kInf, true, false),
      word("loss", "type", true, kLossTypes),
      real("loss", "max_pos_weight", false, 0, true, kInf, true, true),
      reals("loss", "weights", 0, 0, false, kInf, true, true),
      integer("loss", "ignore_label", false, 0, 2147483647),
      word("optimizer", "type", false, kOptimizerTypes),
      real("optimizer", "lr", true, 0, true, kInf, true, true),
      reals("optimizer", "betas", 2, 0, false, 1, true, true),
      real("optimizer", "eps", false, 0, true, kInf, true, true),
      real("optimizer", "weight_decay", false, 0, false, kInf, true, true),
      real("optimizer", "momentum", false, 0, false, 1, true, true),
      real("", "clip_grad_norm", false, 0, true, kInf, true, true),
      real("ema", "decay", false, 0, false, 1, false, true),
      integer("ema", "warmup_steps", false, 0),
      word("schedule", "type", true, kScheduleTypes),
      integer("schedule", "total_steps", false, 0),
      integer("schedule", "warmup_steps", false, 0),
      real("schedule", "warmup_start_factor", false, 0, false, 1, false, false),
      real("schedule", "min_lr", false, 0, false, kInf, true, true),
      real("schedule", "power", false, 0, true, kInf, true, false),
      integer("train", "steps", true, 1),
      integer("train", "seed", true, 0),
      integer("train", "threads", true, 0, 1024),
      word("train", "out", true),
      word("train", "nan", true, kNanPolicies),
      word("train", "device", true, kDevices),
      integer("checkpoint", "every", true, 1),
      integer("checkpoint", "keep", true, 1, 1000000),
      integer("logging", "every", true, 1),
      boolean("logging", "tensorboard", true),
      integer("logging", "images_every", false, 0),
      integer("validation", "every", false, 0),
      size3("validation", "box", false, 4096),
      real("validation", "overlap", false, 0, false, 1, true, false),
      boolean("validation", "mirror", false),
      integer("validation", "volumes", false, 1, kMaxVolumes),
      integer("validation", "seed", false, 0),
      word("", "precision", false, kPrecisions),
      real("", "memory_budget_gib", false, 0, false, kInf, true, false),
      real("", "recompute_above_gib", false, 0, false, kInf, true, false),
      boolean("", "recompute_mlp", false),
      word("", "compile_hash", false),
  };
  return table;
}

std::string keyName(const Rule &r) {
  return *r.section ? std::string(r.section) + "." + r.key : std::string(r.key);
}

std::string describe(const Rule &r) {
  switch (r.type) {
  case Type::Word: {
    if (!r.names)
      return "a string";
    std::string out = "one of ";
    for (const char *const *n = r.names; *n; ++n)
      out += (n == r.names ? "" : ", ") + std::string(*n);
    return out;
  }
  case Type::Words: return "a list of strings";
  case Type::Bool: return "true or false";
  case Type::Fold: return "a fold number >= 0 or \"all\" (every case, as nnU-Net's fold all)";
  case Type::Int: return "an integer " + intRange(r);
  case Type::Size3: return "three sizes [D, H, W], each an integer " + intRange(r);
  case Type::Real: return std::string(r.f32 ? "a number (f32) " : "a number ") + range(r);
  case Type::Reals:
    return (r.count ? "a list of " + std::to_string(r.count) + " numbers" : std::string("a list of numbers")) +
           (r.f32 ? " (f32)" : "") + ", each " + range(r);
  }
  return "";
}

std::string show(const Value &v) {
  switch (v.kind) {
  case Value::Missing: return "nothing";
  case Value::Int: return std::to_string(v.i);
  case Value::Real: return number(v.d);
  case Value::Bool: return v.b ? "true" : "false";
  case Value::String: {
    std::string s = v.s.size() > 200 ? v.s.substr(0, 200) + "..." : v.s;
    return "\"" + s + "\"";
  }
  case Value::List: {
    std::string out = "[";
    for (size_t i = 0; i < v.list.size() && out.size() < 200; ++i)
      out += (i ? "," : "") + show(v.list[i]);
    return out + (out.size() >= 200 ? ",...]" : "]");
  }
  case Value::Other: return v.s;
  }
  return "";
}

std::string check(const Source &src, bool requireAll) {
  for (const Rule &r : rules()) {
    const Value v = src.get(r.section, r.key);
    if (v.kind == Value::Missing) {
      if (r.required && requireAll)
        return "missing '" + keyName(r) + "' (" + describe(r) +
               "; `medc recipe` fills it in)";
      continue;
    }
    if (std::string e = checkOne(r, v); !e.empty())
      return e;
  }
  return crossRules(src);
}

std::string checkFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return std::string("cannot read the recipe: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return std::string("not a regular file (") +
           (S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) ? "a character device"
                                  : S_ISFIFO(st.st_mode)             ? "a pipe"
                                                                      : "not a file") +
           "): a recipe is a YAML or JSON file";
  if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes)
    return std::to_string(st.st_size) + " bytes, over the limit of a recipe (" +
           std::to_string(kMaxFileBytes) + " bytes, 16 MiB)";
  return "";
}

} // namespace medrun::recipe
