//===- RecipeCheck.cpp - checking an effective recipe (JSON) -------------------------===//
#include "medrun/RecipeCheck.h"

#include "medrun/Error.h"
#include "medrun/RecipeRules.h"

#include <iterator>

namespace medrun {
namespace {

using json = nlohmann::json;

enum class Kind { Word, Int, Number, Bool, Size3, Numbers, Words, Fold };

struct KeyType {
  const char *section, *key;
  Kind kind;
  int64_t min; // Int and Size3
  bool required;
};

// Every key the training loop reads, with its type (the schema medc fills in).
const KeyType kKeys[] = {
    {"data", "batch", Kind::Int, 1, true},
    {"data", "patch", Kind::Size3, 1, true},
    {"data", "volumes", Kind::Int, 1, true},
    {"data", "volume_shape", Kind::Size3, 1, true},
    {"data", "seed", Kind::Int, 0, true},
    {"data", "workers", Kind::Int, 1, true},
    {"data", "prefetch", Kind::Int, 1, true},
    {"data", "foreground", Kind::Number, 0, true},
    {"data", "source", Kind::Word, 0, false},
    {"data", "path", Kind::Word, 0, false},
    {"data", "images", Kind::Words, 0, false},
    {"data", "labels", Kind::Words, 0, false},
    {"data", "image_key", Kind::Word, 0, false},
    {"data", "label_key", Kind::Word, 0, false},
    {"data", "normalization", Kind::Word, 0, false},
    {"data", "splits", Kind::Word, 0, false},
    {"data", "fold", Kind::Fold, 0, false},
    {"data", "val_fraction", Kind::Number, 0, false},
    {"data", "cache_mb", Kind::Int, 1, false},
    {"data", "spacing", Kind::Numbers, 0, false},
    {"loss", "type", Kind::Word, 0, true},
    {"loss", "max_pos_weight", Kind::Number, 0, false},
    {"loss", "weights", Kind::Numbers, 0, false},
    {"optimizer", "type", Kind::Word, 0, false},
    {"optimizer", "lr", Kind::Number, 0, true},
    {"optimizer", "betas", Kind::Numbers, 0, false},
    {"optimizer", "eps", Kind::Number, 0, false},
    {"optimizer", "weight_decay", Kind::Number, 0, false},
    {"optimizer", "momentum", Kind::Number, 0, false},
    {"", "clip_grad_norm", Kind::Number, 0, false},
    {"ema", "decay", Kind::Number, 0, false},
    {"ema", "warmup_steps", Kind::Int, 0, false},
    {"schedule", "type", Kind::Word, 0, true},
    {"schedule", "total_steps", Kind::Int, 0, false},
    {"schedule", "warmup_steps", Kind::Int, 0, false},
    {"schedule", "warmup_start_factor", Kind::Number, 0, false},
    {"schedule", "min_lr", Kind::Number, 0, false},
    {"schedule", "power", Kind::Number, 0, false},
    {"train", "steps", Kind::Int, 1, true},
    {"train", "seed", Kind::Int, 0, true},
    {"train", "threads", Kind::Int, 0, true},
    {"train", "out", Kind::Word, 0, true},
    {"train", "nan", Kind::Word, 0, true},
    {"train", "device", Kind::Word, 0, true},
    {"checkpoint", "every", Kind::Int, 1, true},
    {"checkpoint", "keep", Kind::Int, 1, true},
    {"logging", "every", Kind::Int, 1, true},
    {"logging", "tensorboard", Kind::Bool, 0, true},
    {"validation", "every", Kind::Int, 0, false},
    {"validation", "box", Kind::Size3, 1, false},
    {"validation", "overlap", Kind::Number, 0, false},
    {"validation", "mirror", Kind::Bool, 0, false},
    {"validation", "volumes", Kind::Int, 1, false},
    {"validation", "seed", Kind::Int, 0, false},
    {"", "compile_hash", Kind::Word, 0, false},
};

std::string name(const char *section, const char *key) {
  return *section ? str(section, ".", key) : std::string(key);
}

const json *find(const json &config, const char *section, const char *key) {
  const json *s = &config;
  if (*section) {
    auto it = config.find(section);
    if (it == config.end() || !it->is_object())
      return nullptr;
    s = &*it;
  }
  auto it = s->find(key);
  return it == s->end() ? nullptr : &*it;
}

bool isInt(const json &v, int64_t min) {
  return v.is_number_integer() && v.get<int64_t>() >= min;
}

const char *expected(const KeyType &k) {
  switch (k.kind) {
  case Kind::Word: return "a string";
  case Kind::Int: return k.min == 1 ? "an integer >= 1" : "an integer >= 0";
  case Kind::Number: return "a number";
  case Kind::Bool: return "true or false";
  case Kind::Size3: return "three sizes [D, H, W], each an integer >= 1";
  case Kind::Numbers: return "a list of numbers";
  case Kind::Words: return "a list of strings";
  case Kind::Fold: return "a fold number >= 0 or \"all\" (every case, as nnU-Net's fold all)";
  }
  return "";
}

bool fits(const KeyType &k, const json &v) {
  switch (k.kind) {
  case Kind::Word: return v.is_string();
  case Kind::Int: return isInt(v, k.min);
  case Kind::Fold: return isInt(v, 0) || (v.is_string() && v.get<std::string>() == "all");
  case Kind::Number: return v.is_number();
  case Kind::Bool: return v.is_boolean();
  case Kind::Size3:
    if (!v.is_array() || v.size() != 3)
      return false;
    for (const json &e : v)
      if (!isInt(e, k.min))
        return false;
    return true;
  case Kind::Numbers:
  case Kind::Words:
    if (!v.is_array())
      return false;
    for (const json &e : v)
      if (k.kind == Kind::Numbers ? !e.is_number() : !e.is_string())
        return false;
    return true;
  }
  return false;
}

template <size_t N>
void checkName(const json &config, const std::string &file, const char *section, const char *key,
               const char *const (&valid)[N]) {
  const json *v = find(config, section, key);
  if (!v)
    return;
  std::string list;
  for (const char *n : valid) {
    if (*v == n)
      return;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  throw Error(str(file, ": ", name(section, key), ": unknown value ", v->dump(),
                  " (expected one of ", list, ")"));
}

} // namespace

void checkEffectiveRecipe(const json &config, const std::string &file) {
  if (!config.is_object())
    throw Error(str(file, ": not an effective recipe (a JSON object, as `medc recipe` prints)"));
  for (const KeyType &k : kKeys) {
    const json *v = find(config, k.section, k.key);
    if (!v) {
      if (k.required)
        throw Error(str(file, ": missing '", name(k.section, k.key),
                        "' (run the recipe through `medc recipe`)"));
      continue;
    }
    if (!fits(k, *v))
      throw Error(str(file, ": ", name(k.section, k.key), ": expected ", expected(k), ", got ",
                      v->dump()));
  }
  for (const recipe::Range &r : recipe::kRanges) {
    const json *v = find(config, r.section, r.key);
    if (!v)
      continue;
    for (const json &e : v->is_array() ? *v : json::array({*v}))
      if (e.is_number() && !recipe::inRange(r, e.get<double>()))
        throw Error(str(file, ": ", name(r.section, r.key), v->is_array() ? " must each be " : " must be ",
                        r.rule, ", got ", v->dump()));
  }
  if (const json *aff = find(config, "loss", "affinities")) { // {offsets: [[d, h, w], ...]}
    const json *offsets = aff->is_object() && aff->contains("offsets") ? &(*aff)["offsets"] : nullptr;
    bool ok = offsets && offsets->is_array() && !offsets->empty();
    for (size_t k = 0; ok && k < offsets->size(); ++k) {
      const json &o = (*offsets)[k];
      ok = o.is_array() && o.size() == 3 && o[0].is_number_integer() && o[1].is_number_integer() &&
           o[2].is_number_integer() && (o[0] != 0 || o[1] != 0 || o[2] != 0);
    }
    if (!ok)
      throw Error(str(file, ": loss.affinities.offsets: expected a list of [d, h, w] offsets, "
                            "integers not all 0, got ", aff->dump()));
  }
  checkName(config, file, "loss", "type", recipe::kLossTypes);
  checkName(config, file, "optimizer", "type", recipe::kOptimizerTypes);
  checkName(config, file, "schedule", "type", recipe::kScheduleTypes);
  checkName(config, file, "data", "source", recipe::kDataSources);
  checkName(config, file, "data", "normalization", recipe::kNormalizations);

  const json &data = config["data"];
  int64_t voxels = data["batch"].get<int64_t>();
  for (int i = 0; i < 3; ++i)
    if (__builtin_mul_overflow(voxels, data["patch"][i].get<int64_t>(), &voxels) ||
        voxels > recipe::kMaxBatchVoxels)
      throw Error(str(file, ": data.batch x data.patch (", data["batch"].dump(), " x ",
                      data["patch"].dump(), ") must be at most 2^40 voxels: the plan cannot "
                      "address a larger step"));
  const bool synthetic = data.value("source", "synthetic") == "synthetic";
  for (int i = 0; i < 3 && synthetic; ++i)
    if (data["volume_shape"][i].get<int64_t>() < data["patch"][i].get<int64_t>())
      throw Error(str(file, ": data.volume_shape ", data["volume_shape"].dump(),
                      " is smaller than data.patch ", data["patch"].dump(),
                      ": patches would be mostly padding (a loss of exactly 0 on masked "
                      "targets); make each volume at least the patch"));
}

} // namespace medrun
