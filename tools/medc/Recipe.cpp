//===- Recipe.cpp - training recipes (configs/*.yaml) ----------------------------===//
#include "Recipe.h"

#include "medrun/RecipeRules.h" // the value rules medrun applies to effective recipes too

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <algorithm>
#include <map>
#include <vector>

using namespace llvm;

namespace medc {
namespace {

// A recipe as plain data: scalars, lists of scalars, lists of such lists (Rows: the
// affinity offsets) and sections.
struct Node {
  std::string scalar;
  std::vector<std::string> list;
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, Node> section;
  enum Kind { Scalar, List, Rows, Section } kind = Scalar;
};

// The schema: every key a recipe may hold, its type and its default (nullptr: none; the
// pass or the runtime decides).
enum class Type { Word, Int, Number, Bool, List, Size3, Words, Params, Fold, Affinities };
struct Key {
  StringRef name;
  Type type;
  const char *fallback = nullptr;
  int64_t min = 0; // for Int and Size3
};
struct Section {
  StringRef name;
  std::vector<Key> keys;
};

const std::vector<Section> &schema() {
  static const std::vector<Section> s = {
      // dropout: every dropout layer's rate (0: none); absent: the rates the model holds
      // (docs/training.md, "Dropout").
      {"model", {{"file", Type::Word}, {"network", Type::Word}, {"dropout", Type::Number}}},
      {"data", // batch and patch: numbers, or `plan` (the preprocess cache's plan; sizesFromPlan)
       {{"batch", Type::Int, "2", 1},
        {"patch", Type::Size3, "128,128,128", 1},
        {"source", Type::Word, "synthetic"},
        {"volumes", Type::Int, "4", 1},
        {"volume_shape", Type::Size3, nullptr, 1}, // default: 1.5 x patch
        {"seed", Type::Int, "0"},
        {"workers", Type::Int, "2", 1},
        {"prefetch", Type::Int, "4", 1},
        {"foreground", Type::Number, "0.33"},
        // Volume files (runtime/include/medrun/Dataset.h); paths relative to the recipe.
        {"path", Type::Word},
        {"images", Type::Words},
        {"labels", Type::Words},
        {"image_key", Type::Word},
        {"label_key", Type::Word},
        {"normalization", Type::Word, "auto"},
        {"splits", Type::Word},
        {"fold", Type::Fold, "0"}, // a fold of the splits, or all: every case (nnU-Net's fold all)
        {"val_fraction", Type::Number, "0.2"},
        {"cache_mb", Type::Int, "1024", 1},
        // z, y, x: the voxel size of volumes that state none (Dataset.h)
        {"spacing", Type::List}}},
      {"loss",
       {{"type", Type::Word},
        {"mask", Type::Bool},
        {"reduction", Type::Word},
        {"auto_pos_weight", Type::Bool},
        {"max_pos_weight", Type::Number},
        {"weights", Type::List},
        {"batch_dice", Type::Bool},
        {"include_background", Type::Bool},
        // {offsets: [[d, h, w], ...]}: the affinity targets of bce_with_logits
        // (affinityOffsets below; default BANIS's six).
        {"affinities", Type::Affinities},
        // nnU-Net's `ignore` label (dataset.json labels.ignore): voxels holding it count
        // nowhere in the loss; medrun train checks it against the dataset.
        {"ignore_label", Type::Int}}},
      {"optimizer",
       {{"type", Type::Word},
        {"lr", Type::Number},
        {"betas", Type::List},
        {"eps", Type::Number},
        {"weight_decay", Type::Number},
        {"momentum", Type::Number},
        {"nesterov", Type::Bool},
        {"exempt_norm_bias", Type::Bool}}},
      {"ema", {{"decay", Type::Number, "0.999"}, {"warmup_steps", Type::Int, "0"}}},
      // The augmentation pipeline run first in train_step (docs/augment.md): a file relative
      // to the recipe, `nnunet` or `banis` (generated for the compiled batch and patch;
      // AugmentGenerate.cpp), or `none`.
      // `overrides`: values of the pipeline's tunable parameters by name, a number or a
      // range [lo, hi] each (docs/augment.md lists the names of each pipeline).
      // `channels`, `classes`, `levels` (nnunet; default: the network's) and `context`
      // (banis; default 10): the generated pipeline's sizes.
      {"augment",
       {{"pipeline", Type::Word},
        {"function", Type::Word, "augment"},
        {"overrides", Type::Params},
        {"channels", Type::Int, nullptr, 1},
        {"classes", Type::Int, nullptr, 2},
        {"levels", Type::Int, nullptr, 1},
        {"context", Type::Int, nullptr, 1}}},
      {"schedule", // the runtime's Schedule.h checks which keys a type uses
       {{"type", Type::Word, "constant"},
        {"total_steps", Type::Int}, // default: train.steps
        {"warmup_steps", Type::Int},
        {"warmup_start_factor", Type::Number},
        {"min_lr", Type::Number},
        {"power", Type::Number}}},
      {"train",
       {{"steps", Type::Int, "1000", 1},
        {"seed", Type::Int, "0"},
        {"threads", Type::Int, "0"},
        {"out", Type::Word, ""}, // "": runs/<recipe name>
        {"nan", Type::Word, "stop"},
        {"device", Type::Word, "auto"}}},
      {"checkpoint", {{"every", Type::Int, "500", 1}, {"keep", Type::Int, "3", 1}}},
      {"logging",
       {{"every", Type::Int, "10", 1},
        {"tensorboard", Type::Bool, "true"},
        // every N steps an image of the step's first augmented sample (0: none)
        {"images_every", Type::Int, "0"}}},
      {"validation", // runtime/include/medrun/Validation.h
       {{"every", Type::Int}, // default: checkpoint.every; 0 (off) for synthetic data
        {"box", Type::Size3, "256,256,256", 1},
        {"overlap", Type::Number, "0.5"},
        {"mirror", Type::Bool, "false"},
        {"volumes", Type::Int, "2", 1}, // synthetic validation volumes
        {"seed", Type::Int}}},          // default: data.seed + 1
  };
  return s;
}

// Top-level keys that are values, not sections.
const std::vector<Key> &topValues() {
  static const std::vector<Key> v = {{"clip_grad_norm", Type::Number},
                                     {"precision", Type::Word, "fp32"},
                                     {"recompute_mlp", Type::Bool, "false"},
                                     {"memory_budget_gib", Type::Number, "0"},
                                     {"recompute_above_gib", Type::Number, "16"}};
  return v;
}

const Section *findSection(StringRef name) {
  for (const Section &s : schema())
    if (s.name == name)
      return &s;
  return nullptr;
}

// The nearest of `valid` to `key`, as a hint for a message.
std::string suggest(StringRef key, ArrayRef<std::string> valid) {
  StringRef best;
  unsigned bestDistance = ~0u;
  for (StringRef v : valid) {
    unsigned d = key.edit_distance(v);
    if (d < bestDistance)
      best = v, bestDistance = d;
  }
  for (StringRef v : valid) { // a shared stem ("reduce" for "reduction") is close too
    size_t common = 0;
    while (common < key.size() && common < v.size() && key[common] == v[common])
      ++common;
    if (common >= 5)
      best = v, bestDistance = 0;
  }
  if (bestDistance <= std::max<size_t>(2, key.size() / 3))
    return " (did you mean '" + best.str() + "'?)";
  return " (valid: " + join(valid, ", ") + ")";
}

std::vector<std::string> names(const char *const *list) { // nullptr-terminated
  std::vector<std::string> out;
  for (; *list; ++list)
    out.push_back(*list);
  return out;
}

std::vector<std::string> keyNames(StringRef section) {
  std::vector<std::string> names;
  if (section.empty()) {
    for (const Section &s : schema())
      names.push_back(s.name.str());
    for (const Key &k : topValues())
      names.push_back(k.name.str());
  } else {
    for (const Key &k : findSection(section)->keys)
      names.push_back(k.name.str());
  }
  return names;
}

const Key *findKey(StringRef section, StringRef name) {
  const std::vector<Key> &keys = section.empty() ? topValues() : findSection(section)->keys;
  for (const Key &k : keys)
    if (k.name == name)
      return &k;
  return nullptr;
}

struct Reader {
  std::string path;

  Error fail(const Twine &msg) const {
    return createStringError(inconvertibleErrorCode(), path + ": " + msg);
  }

  // A scalar's text, within the recipe's string limit.
  Expected<std::string> text(yaml::ScalarNode *s, StringRef where) {
    SmallString<32> storage;
    StringRef v = s->getValue(storage);
    if (v.size() > medrun::recipe::kMaxString)
      return fail((where.empty() ? "a key" : where) + ": a string of " + Twine(v.size()) +
                  " bytes, over the limit of " + Twine(medrun::recipe::kMaxString));
    return v.str();
  }

  // `depth`: how deep `n` is nested; past the limit the reader stops before the YAML
  // parser and this recursion would exhaust the stack.
  Expected<Node> convert(yaml::Node *n, StringRef where, int depth = 1) {
    Node out;
    if (depth > medrun::recipe::kMaxDepth)
      return fail((where.empty() ? "the recipe" : where) + ": values nested more than " +
                  Twine(medrun::recipe::kMaxDepth) +
                  " deep (a recipe's sections hold values and lists of lists)");
    if (auto *s = dyn_cast_or_null<yaml::ScalarNode>(n)) {
      Expected<std::string> v = text(s, where);
      if (!v)
        return v.takeError();
      out.scalar = std::move(*v);
      return out;
    }
    if (auto *seq = dyn_cast_or_null<yaml::SequenceNode>(n)) {
      out.kind = Node::List;
      for (yaml::Node &e : *seq) {
        if (auto *row = dyn_cast<yaml::SequenceNode>(&e)) { // a list of lists: rows
          if (!out.list.empty())
            return fail(where + ": a list holds numbers or lists of numbers, not both");
          out.kind = Node::Rows;
          out.rows.emplace_back();
          for (yaml::Node &x : *row) {
            auto *s = dyn_cast<yaml::ScalarNode>(&x);
            if (!s)
              return fail(where + ": lists nest one level deep only");
            Expected<std::string> v = text(s, where);
            if (!v)
              return v.takeError();
            out.rows.back().push_back(std::move(*v));
          }
          continue;
        }
        auto *s = dyn_cast<yaml::ScalarNode>(&e);
        if (!s || out.kind == Node::Rows)
          return fail(where + ": lists hold numbers or words only");
        Expected<std::string> v = text(s, where);
        if (!v)
          return v.takeError();
        out.list.push_back(std::move(*v));
      }
      return out;
    }
    if (auto *map = dyn_cast_or_null<yaml::MappingNode>(n)) {
      out.kind = Node::Section;
      for (yaml::KeyValueNode &kv : *map) {
        auto *key = dyn_cast_or_null<yaml::ScalarNode>(kv.getKey());
        if (!key)
          return fail(where + ": keys must be words");
        Expected<std::string> keyText = text(key, where);
        if (!keyText)
          return keyText.takeError();
        std::string name = std::move(*keyText);
        std::string inner = (where.empty() ? "" : where.str() + ".") + name;
        Expected<Node> value = convert(kv.getValue(), inner, depth + 1);
        if (!value)
          return value.takeError();
        if (!out.section.emplace(name, std::move(*value)).second)
          return fail("key '" + inner + "' appears twice");
      }
      return out;
    }
    return fail(where + ": empty value");
  }

  // Rejects keys outside the schema, suggesting the nearest one.
  Error checkKeys(const Node &node, StringRef section) {
    std::vector<std::string> valid = keyNames(section);
    for (auto &[key, value] : node.section)
      if (!llvm::is_contained(valid, key))
        return fail("unknown key '" + (section.empty() ? "" : section.str() + ".") + key + "'" +
                    suggest(key, valid));
    return Error::success();
  }

  // loss.affinities: {offsets: [[d, h, w], ...]}, each offset three integers, not all 0.
  // Whether they fit the patch is checked with the patch compiled (medc's checkRecipePatch).
  Expected<json::Value> affinities(const Node &n, StringRef where) {
    const std::string key = where.str() + ".offsets";
    const char *example = "e.g. [[-1, 0, 0], [0, -1, 0], [0, 0, -1], [-3, 0, 0], [0, -9, 0], [0, 0, -9]]";
    if (n.kind != Node::Section)
      return fail(where + ": expected a section {offsets: [[d, h, w], ...]}, " + example);
    for (auto &[name, value] : n.section)
      if (name != "offsets")
        return fail("unknown key '" + where + "." + name + "' (valid: offsets)");
    auto it = n.section.find("offsets");
    if (it == n.section.end())
      return fail("missing '" + key + "' (one [d, h, w] offset per affinity channel, " + example + ")");
    const Node &o = it->second;
    if (o.kind != Node::Rows)
      return fail(key + ": expected a list of [d, h, w] offsets (one per affinity channel), " + example);
    if (o.rows.empty())
      return fail(key + ": expected at least one [d, h, w] offset, " + example);
    json::Array out;
    for (size_t k = 0; k < o.rows.size(); ++k) {
      const std::vector<std::string> &row = o.rows[k];
      const std::string which = key + ": offset " + std::to_string(k) + " [" + join(row, ", ") + "]";
      if (row.size() != 3)
        return fail(which + " has " + Twine(row.size()) +
                    " entries; expected three (along D, H, W)");
      json::Array offset;
      bool zero = true;
      for (const std::string &e : row) {
        int64_t i;
        if (StringRef(e).getAsInteger(10, i) || i <= -(int64_t(1) << 31) || i >= (int64_t(1) << 31))
          return fail(which + ": expected integers (voxels, |offset| < 2^31), got '" + e + "'");
        zero = zero && i == 0;
        offset.push_back(i);
      }
      if (zero)
        return fail(which + " is zero: an affinity pairs a voxel with another one");
      out.push_back(std::move(offset));
    }
    return json::Value(json::Object{{"offsets", std::move(out)}});
  }

  // "an integer in 1..256": the table's rule for the key where it has one.
  static std::string integerRule(StringRef where, int64_t min) {
    for (const medrun::recipe::Rule &rule : medrun::recipe::rules())
      if (medrun::recipe::keyName(rule) == where &&
          (rule.type == medrun::recipe::Type::Int || rule.type == medrun::recipe::Type::Size3)) {
        medrun::recipe::Rule element = rule;
        element.type = medrun::recipe::Type::Int;
        return medrun::recipe::describe(element);
      }
    return "an integer >= " + std::to_string(min);
  }

  // Checks a value against its key's type and returns it as JSON.
  Expected<json::Value> typed(const Node &n, const Key &key, StringRef where) {
    auto scalar = [&](StringRef s) -> Expected<json::Value> {
      int64_t i;
      double d;
      switch (key.type) {
      case Type::Word:
      case Type::Words:
        return json::Value(s.str());
      case Type::Int:
      case Type::Size3:
        if (s.getAsInteger(10, i) || i < key.min)
          return fail(where + ": expected " + integerRule(where, key.min) + ", got '" + s + "'");
        return json::Value(i);
      case Type::Number:
      case Type::List:
      case Type::Params:
      case Type::Affinities:
        if (s.getAsDouble(d))
          return fail(where + ": expected a number, got '" + s + "'");
        return json::Value(d);
      case Type::Bool:
        if (s != "true" && s != "false")
          return fail(where + ": expected true or false, got '" + s + "'");
        return json::Value(s == "true");
      case Type::Fold:
        if (s == "all")
          return json::Value("all");
        if (s.getAsInteger(10, i) || i < 0)
          return fail(where + ": expected a fold number >= 0 or all (every case, as nnU-Net's "
                              "fold all), got '" + s + "'");
        return json::Value(i);
      }
      llvm_unreachable("type");
    };
    if (key.type == Type::Affinities)
      return affinities(n, where);
    if (n.kind == Node::Rows)
      return fail(where + ": expected " +
                  (key.type == Type::Size3 ? "three sizes [D, H, W]" : "a list of numbers or words") +
                  ", got a list of lists");
    if (key.type == Type::Params) { // {name: number or [lo, hi], ...}
      if (n.kind != Node::Section)
        return fail(where + ": expected a mapping of parameter names to values, e.g. "
                            "{affine.p: 0.3, affine.rotation: [-0.5, 0.5]}");
      json::Object out;
      for (auto &[name, value] : n.section) {
        std::string inner = where.str() + "." + name;
        if (value.kind == Node::Section)
          return fail(inner + ": expected a number or a range [lo, hi]");
        if (value.kind == Node::Scalar) {
          Expected<json::Value> v = scalar(value.scalar);
          if (!v)
            return fail(inner + ": expected a number or a range [lo, hi], got '" + value.scalar +
                        "'");
          out[name] = std::move(*v);
          continue;
        }
        json::Array list;
        for (const std::string &e : value.list) {
          double d;
          if (StringRef(e).getAsDouble(d))
            return fail(inner + ": expected a number or a range [lo, hi], got '" + e + "' in the list");
          list.push_back(d);
        }
        out[name] = std::move(list);
      }
      return json::Value(std::move(out));
    }
    bool wantsList = key.type == Type::List || key.type == Type::Size3 || key.type == Type::Words;
    if (n.kind == Node::Section || (n.kind == Node::List) != wantsList) {
      if (key.type == Type::Size3)
        return fail(where + ": expected three sizes [D, H, W]");
      return fail(where + (wantsList ? ": expected a list" : ": expected a single value"));
    }
    if (!wantsList)
      return scalar(n.scalar);
    if (key.type == Type::Size3 && n.list.size() != 3)
      return fail(where + ": expected three sizes [D, H, W]");
    json::Array out;
    for (const std::string &e : n.list) {
      Expected<json::Value> v = scalar(e);
      if (!v)
        return v.takeError();
      out.push_back(std::move(*v));
    }
    return json::Value(std::move(out));
  }
};

// "weight_decay" -> "weight-decay", the spelling of pass options.
std::string optionName(StringRef key) {
  std::string s = key.str();
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

// "a,b,c" or "[a, b, c]" -> a list; anything else a scalar.
Node parseOverrideValue(StringRef v) {
  Node n;
  StringRef t = v.trim();
  if (t.consume_front("[")) {
    t.consume_back("]");
  } else if (!t.contains(',')) {
    n.scalar = t.str();
    return n;
  }
  n.kind = Node::List;
  SmallVector<StringRef> parts;
  t.split(parts, ',', -1, false);
  for (StringRef p : parts)
    n.list.push_back(p.trim().str());
  return n;
}

Error applyOverride(Node &root, const std::string &spec) {
  auto fail = [&](const Twine &msg) {
    return createStringError(inconvertibleErrorCode(), "--set " + spec + ": " + msg);
  };
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    return fail("expected section.key=value, e.g. data.batch=1");
  StringRef key(spec.data(), eq);
  Node value = parseOverrideValue(StringRef(spec).drop_front(eq + 1));
  auto [section, name] = key.split('.');
  std::vector<std::string> top = keyNames("");
  if (!llvm::is_contained(top, section.str()))
    return fail("unknown key '" + section + "'" + suggest(section, top));
  if (name.empty()) {
    if (findSection(section) && section != "model")
      return fail("'" + section + "' is a section; set one of its keys, e.g. " + section + "." +
                  findSection(section)->keys.front().name + "=...");
    root.section[section.str()] = std::move(value);
    return Error::success();
  }
  const Section *s = findSection(section);
  if (!s)
    return fail("'" + section + "' is a value, not a section; write " + section + "=...");
  std::vector<std::string> valid = keyNames(section);
  // A key of a Params key: augment.overrides.affine.p=0.3.
  auto [head, param] = name.split('.');
  if (const Key *k = findKey(section, head); k && k->type == Type::Params) {
    if (param.empty())
      return fail("set one parameter at a time, e.g. " + section + "." + head + ".affine.p=0.3");
    if (value.kind == Node::Section)
      return fail("expected a number or a range lo,hi");
    Node &target = root.section[section.str()];
    target.kind = Node::Section;
    Node &params = target.section[head.str()];
    params.kind = Node::Section;
    params.section[param.str()] = std::move(value);
    return Error::success();
  }
  if (const Key *k = findKey(section, head); k && k->type == Type::Affinities) {
    // loss.affinities.offsets=[[d,h,w],[d,h,w],...]
    if (param != "offsets")
      return fail("set " + section + "." + head + ".offsets=[[d,h,w],...] (one offset per "
                  "affinity channel)");
    Node rows;
    rows.kind = Node::Rows;
    StringRef t = StringRef(spec).drop_front(eq + 1).trim();
    if (!t.consume_front("[") || !t.consume_back("]"))
      return fail("expected a list of offsets [[d,h,w],...]");
    for (t = t.trim(); !t.empty(); t = t.trim()) {
      size_t close = t.find(']');
      if (!t.consume_front("[") || close == StringRef::npos)
        return fail("expected a list of offsets [[d,h,w],...]");
      StringRef row = t.take_front(close - 1);
      t = t.drop_front(close);
      t.consume_front(",");
      SmallVector<StringRef> parts;
      row.split(parts, ',', -1, false);
      rows.rows.emplace_back();
      for (StringRef p : parts)
        rows.rows.back().push_back(p.trim().str());
    }
    Node &target = root.section[section.str()];
    target.kind = Node::Section;
    Node &aff = target.section[head.str()];
    aff.kind = Node::Section;
    aff.section["offsets"] = std::move(rows);
    return Error::success();
  }
  if (!llvm::is_contained(valid, name.str()))
    return fail("unknown key '" + key + "'" + suggest(name, valid));
  Node &target = root.section[section.str()];
  if (target.kind == Node::Scalar && section == "model" && !target.scalar.empty()) {
    Node file; // model: FILE is short for model: {file: FILE}
    file.scalar = target.scalar;
    target.section["file"] = std::move(file);
  }
  target.kind = Node::Section;
  target.section[name.str()] = std::move(value);
  return Error::success();
}

// `data.patch: plan` and `data.batch: plan`: nnU-Net's 3d_fullres patch_size and batch_size
// of the plan that data.path's preprocess cache was made with (its preprocess.json names the
// plan; or data.path/nnUNetPlans.json), written into the recipe as numbers before the keys
// are typed, so the model, the generated augmentation and the compile hash follow the plan.
Error sizesFromPlan(const Reader &r, Node &root) {
  auto data = root.section.find("data");
  if (data == root.section.end() || data->second.kind != Node::Section)
    return Error::success();
  auto fromPlan = [&](const char *key) {
    auto it = data->second.section.find(key);
    return it != data->second.section.end() && it->second.kind == Node::Scalar &&
           it->second.scalar == "plan";
  };
  const bool patch = fromPlan("patch"), batch = fromPlan("batch");
  if (!patch && !batch)
    return Error::success();
  const std::string key = patch ? "data.patch" : "data.batch";
  auto pathNode = data->second.section.find("path");
  if (pathNode == data->second.section.end() || pathNode->second.kind != Node::Scalar)
    return r.fail(key + ": plan needs data.path, a `medrun preprocess` cache (its "
                        "preprocess.json names the plan) or a folder with nnUNetPlans.json");
  SmallString<256> dir(pathNode->second.scalar);
  if (!sys::path::is_absolute(dir)) {
    dir = sys::path::parent_path(r.path);
    sys::path::append(dir, pathNode->second.scalar);
    sys::path::remove_dots(dir, /*remove_dot_dot=*/true);
  }
  auto readJson = [&](const Twine &file) -> Expected<json::Value> {
    auto buffer = MemoryBuffer::getFile(file);
    if (!buffer)
      return r.fail(key + ": plan: cannot read '" + file + "': " + buffer.getError().message());
    Expected<json::Value> v = json::parse((*buffer)->getBuffer());
    if (!v)
      return r.fail(key + ": plan: '" + file + "' is not JSON: " + toString(v.takeError()));
    return v;
  };
  SmallString<256> plans(dir), manifest(dir);
  sys::path::append(plans, "nnUNetPlans.json");
  sys::path::append(manifest, "preprocess.json");
  if (sys::fs::exists(manifest)) {
    Expected<json::Value> m = readJson(manifest);
    if (!m)
      return m.takeError();
    std::optional<StringRef> named = m->getAsObject() ? m->getAsObject()->getString("plans")
                                                      : std::nullopt;
    if (!named)
      return r.fail(key + ": plan: " + manifest + " names no plans (run medrun preprocess again)");
    plans = *named;
  } else if (!sys::fs::exists(plans)) {
    return r.fail(key + ": plan: data.path '" + dir +
                  "' has neither preprocess.json (a medrun preprocess cache) nor nnUNetPlans.json");
  }
  Expected<json::Value> doc = readJson(plans);
  if (!doc)
    return doc.takeError();
  const json::Object *conf = doc->getAsObject() ? doc->getAsObject()->getObject("configurations")
                                                 : nullptr;
  conf = conf ? conf->getObject("3d_fullres") : nullptr;
  const json::Array *sizes = conf ? conf->getArray("patch_size") : nullptr;
  std::optional<int64_t> batchSize = conf ? conf->getInteger("batch_size") : std::nullopt;
  if (patch) {
    if (!sizes || sizes->size() != 3 ||
        llvm::any_of(*sizes, [](const json::Value &v) { return !v.getAsInteger() || *v.getAsInteger() < 1; }))
      return r.fail("data.patch: plan: " + plans +
                    " has no configurations.3d_fullres.patch_size of three sizes");
    Node &n = data->second.section["patch"];
    n.kind = Node::List;
    n.list.clear();
    for (const json::Value &v : *sizes)
      n.list.push_back(std::to_string(*v.getAsInteger()));
  }
  if (batch) {
    if (!batchSize || *batchSize < 1)
      return r.fail("data.batch: plan: " + plans +
                    " has no configurations.3d_fullres.batch_size of at least 1");
    data->second.section["batch"].scalar = std::to_string(*batchSize);
  }
  return Error::success();
}

// A value of the effective recipe as the rule table reads it.
medrun::recipe::Value toValue(const json::Value &v) {
  medrun::recipe::Value out;
  if (std::optional<int64_t> i = v.getAsInteger()) {
    out.kind = medrun::recipe::Value::Int;
    out.i = *i;
    out.d = static_cast<double>(*i);
  } else if (std::optional<double> d = v.getAsNumber()) {
    out.kind = medrun::recipe::Value::Real;
    out.d = *d;
  } else if (std::optional<bool> b = v.getAsBoolean()) {
    out.kind = medrun::recipe::Value::Bool;
    out.b = *b;
  } else if (std::optional<StringRef> s = v.getAsString()) {
    out.kind = medrun::recipe::Value::String;
    out.s = s->str();
  } else if (const json::Array *a = v.getAsArray()) {
    out.kind = medrun::recipe::Value::List;
    for (const json::Value &e : *a)
      out.list.push_back(toValue(e));
  } else {
    out.kind = medrun::recipe::Value::Other;
    out.s = v.getAsObject() ? "a section" : "null";
  }
  return out;
}

class EffectiveSource final : public medrun::recipe::Source {
public:
  explicit EffectiveSource(const json::Object &effective) : effective_(effective) {}
  medrun::recipe::Value get(const char *section, const char *key) const override {
    const json::Object *s = *section ? effective_.getObject(section) : &effective_;
    const json::Value *v = s ? s->get(key) : nullptr;
    return v ? toValue(*v) : medrun::recipe::Value{};
  }

private:
  const json::Object &effective_;
};

// The names of the loss, optimizer and schedule types, with the nearest valid name for a
// typo: errors name the recipe and key. (The rule table checks them too, without hints.)
Error checkNames(const Reader &r, const json::Object &effective) {
  auto checkName = [&](const char *section, const char *key,
                       const std::vector<std::string> &valid) -> Error {
    const json::Object *s = effective.getObject(section);
    std::optional<StringRef> v = s ? s->getString(key) : std::nullopt;
    if (!v || is_contained(valid, v->str()))
      return Error::success();
    std::string hint = suggest(*v, valid); // " (did you mean 'x'?)" or " (valid: ...)"
    if (StringRef(hint).starts_with(" (did"))
      hint = hint.substr(0, hint.size() - 1) + "; valid: " + join(valid, ", ") + ")";
    return r.fail(Twine(section) + "." + key + ": unknown " + section + " type '" + *v + "'" +
                  hint);
  };
  if (Error e = checkName("loss", "type", names(medrun::recipe::kLossTypes)))
    return e;
  if (Error e = checkName("optimizer", "type", names(medrun::recipe::kOptimizerTypes)))
    return e;
  if (Error e = checkName("schedule", "type", names(medrun::recipe::kScheduleTypes)))
    return e;
  if (Error e = checkName("data", "source", names(medrun::recipe::kDataSources)))
    return e;
  if (Error e = checkName("data", "normalization", names(medrun::recipe::kNormalizations)))
    return e;
  return Error::success();
}

} // namespace

Expected<Recipe> readRecipe(const std::string &path, const std::vector<std::string> &overrides) {
  Reader r{path};
  // A device, a pipe or a huge file would be read whole (or forever) before any check.
  if (std::string why = medrun::recipe::checkFile(path); !why.empty())
    return r.fail(why);
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return r.fail("cannot read the recipe: " + buffer.getError().message());
  SourceMgr sm;
  std::string diagnostics;
  sm.setDiagHandler(
      [](const SMDiagnostic &d, void *context) {
        raw_string_ostream(*static_cast<std::string *>(context)) << d.getLineNo() << ":"
                                                                 << d.getColumnNo() << ": "
                                                                 << d.getMessage();
      },
      &diagnostics);
  yaml::Stream stream((*buffer)->getBuffer(), sm);
  yaml::document_iterator doc = stream.begin();
  if (doc == stream.end() || !doc->getRoot())
    return r.fail("empty recipe");
  Expected<Node> parsed = r.convert(doc->getRoot(), "");
  if (!diagnostics.empty())
    return r.fail("malformed YAML at " + diagnostics);
  if (!parsed)
    return parsed.takeError();
  Node root = std::move(*parsed);
  if (root.kind != Node::Section)
    return r.fail("a recipe is a mapping of sections (model, data, loss, optimizer, ...)");
  if (Error e = r.checkKeys(root, ""))
    return std::move(e);
  for (const std::string &spec : overrides)
    if (Error e = applyOverride(root, spec))
      return std::move(e);
  if (Error e = sizesFromPlan(r, root))
    return std::move(e);
  auto &top = root.section;

  // Type-check every key and build the effective recipe, defaults filled in.
  json::Object effective;
  for (auto &[name, node] : top) {
    if (const Key *key = findKey("", name)) {
      Expected<json::Value> v = r.typed(node, *key, name);
      if (!v)
        return v.takeError();
      effective[name] = std::move(*v);
      continue;
    }
    if (name == "model" && node.kind == Node::Scalar)
      continue; // model: FILE, handled below
    if (node.kind != Node::Section)
      return r.fail("'" + name + "' is a section (" + join(keyNames(name), ", ") + ")");
    if (Error e = r.checkKeys(node, name))
      return std::move(e);
    json::Object section;
    for (auto &[key, value] : node.section) {
      Expected<json::Value> v = r.typed(value, *findKey(name, key), name + "." + key);
      if (!v)
        return v.takeError();
      section[key] = std::move(*v);
    }
    effective[name] = std::move(section);
  }
  for (const Section &s : schema()) {
    bool present = top.count(s.name.str());
    // Sections of the training loop exist with their defaults; the others when written.
    if (!present && !llvm::is_contained({"data", "train", "checkpoint", "logging", "schedule", "validation"},
                                        s.name))
      continue;
    json::Object *section = effective.getObject(s.name);
    if (!section) {
      effective[s.name] = json::Object();
      section = effective.getObject(s.name);
    }
    for (const Key &k : s.keys) {
      if (!k.fallback || section->get(k.name))
        continue;
      Node n;
      n.kind = k.type == Type::Size3 || k.type == Type::List || k.type == Type::Words ? Node::List : Node::Scalar;
      SmallVector<StringRef> parts;
      StringRef(k.fallback).split(parts, ',');
      for (StringRef p : parts)
        n.list.push_back(p.str());
      n.scalar = k.fallback;
      (*section)[k.name] = cantFail(r.typed(n, k, k.name));
    }
  }
  for (const Key &k : topValues())
    if (k.fallback && !effective.get(k.name)) { // typed, as a section's defaults
      Node n;
      n.kind = Node::Scalar;
      n.scalar = k.fallback;
      effective[k.name] = cantFail(r.typed(n, k, k.name));
    }

  Recipe recipe;
  // model: FILE, or {file: FILE, network: NAME}
  auto model = top.find("model");
  if (model == top.end())
    return r.fail("missing 'model' (the model file, e.g. model: ../models/mednext_l.mlir)");
  std::string modelFile;
  if (model->second.kind == Node::Scalar) {
    modelFile = model->second.scalar;
  } else {
    auto file = model->second.section.find("file");
    if (file == model->second.section.end())
      return r.fail("missing 'model.file'");
    modelFile = file->second.scalar;
    if (auto net = model->second.section.find("network"); net != model->second.section.end())
      recipe.network = net->second.scalar;
  }
  std::optional<json::Value> dropout;
  if (const json::Object *typedModel = effective.getObject("model"))
    if (const json::Value *d = typedModel->get("dropout"))
      dropout = *d;
  SmallString<256> resolved(modelFile);
  if (!sys::path::is_absolute(modelFile)) {
    resolved = sys::path::parent_path(path);
    sys::path::append(resolved, modelFile);
    sys::path::remove_dots(resolved, /*remove_dot_dot=*/true);
  }
  recipe.model = std::string(resolved);
  json::Object modelJson{{"file", recipe.model}};
  if (!recipe.network.empty())
    modelJson["network"] = recipe.network;
  if (dropout) {
    recipe.dropout = dropout->getAsNumber();
    modelJson["dropout"] = std::move(*dropout);
  }
  effective["model"] = std::move(modelJson);

  json::Object &data = *effective.getObject("data");
  recipe.batch = *data.getInteger("batch");
  for (int i = 0; i < 3; ++i)
    recipe.patch[i] = *(*data.getArray("patch"))[i].getAsInteger();
  if (!data.get("volume_shape")) {
    json::Array shape;
    for (int64_t p : recipe.patch)
      shape.push_back(p + p / 2);
    data["volume_shape"] = std::move(shape);
  }
  // Data paths are relative to the recipe, as the model file is.
  auto resolve = [&](StringRef p) {
    SmallString<256> out(p);
    if (!p.empty() && !sys::path::is_absolute(p)) {
      out = sys::path::parent_path(path);
      sys::path::append(out, p);
      sys::path::remove_dots(out, /*remove_dot_dot=*/true);
    }
    return std::string(out);
  };
  for (const char *key : {"path", "splits"})
    if (std::optional<StringRef> p = data.getString(key))
      data[key] = resolve(*p);
  for (const char *key : {"images", "labels"})
    if (json::Array *list = data.getArray(key))
      for (json::Value &v : *list)
        v = resolve(*v.getAsString());
  if (Error e = checkNames(r, effective))
    return std::move(e);
  json::Object &trainSection = *effective.getObject("train");
  StringRef nan = *trainSection.getString("nan"), device = *trainSection.getString("device");
  if (nan != "stop" && nan != "skip")
    return r.fail("train.nan: expected stop or skip, got '" + nan + "'");
  if (device != "cpu" && device != "cuda" && device != "auto")
    return r.fail("train.device: expected cpu, cuda or auto, got '" + device + "'");
  json::Object &validation = *effective.getObject("validation");
  if (!validation.get("every"))
    validation["every"] = *data.getString("source") == "synthetic"
                              ? 0
                              : *effective.getObject("checkpoint")->getInteger("every");
  if (!validation.get("seed"))
    validation["seed"] = *data.getInteger("seed") + 1;
  json::Object &schedule = *effective.getObject("schedule");
  if (!schedule.get("total_steps"))
    schedule["total_steps"] = *trainSection.getInteger("steps");

  std::vector<std::string> loss, train;
  auto loss_ = top.find("loss");
  if (loss_ == top.end())
    return r.fail("missing 'loss' section (e.g. loss: {type: bce_with_logits, mask: true})");
  for (auto &[key, value] : loss_->second.section)
    if (key != "affinities") // the targets' offsets: the augmentation's, below
      loss.push_back(optionName(key) + "=" +
                     (value.kind == Node::List ? join(value.list, ",") : value.scalar));
  if (!recipe.network.empty())
    loss.push_back("network=" + recipe.network);

  // A step whose update is not finite is skipped by medrun (update_nonfinite).
  train.push_back("guard-update=true");
  auto opt = top.find("optimizer");
  if (opt == top.end())
    return r.fail("missing 'optimizer' section (e.g. optimizer: {type: adamw, lr: 1.0e-3})");
  for (auto &[key, value] : opt->second.section) {
    if (key == "lr") // the schedule's base rate: an input of every step
      continue;
    if (key == "type") {
      train.push_back("optimizer=" + value.scalar);
    } else if (key == "betas") {
      if (value.list.size() != 2)
        return r.fail("optimizer.betas: expected two numbers [beta1, beta2]");
      train.push_back("beta1=" + value.list[0]);
      train.push_back("beta2=" + value.list[1]);
    } else {
      train.push_back(optionName(key) + "=" + value.scalar);
    }
  }
  if (auto clip = top.find("clip_grad_norm"); clip != top.end())
    train.push_back("clip=" + clip->second.scalar);
  if (top.count("ema"))
    train.push_back("ema=true");
  json::Object *augment = effective.getObject("augment");
  // The affinity targets' offsets (bce_with_logits): the recipe's, or BANIS's six, 1 and
  // augment.context (10) voxels along each axis.
  json::Object &lossSection = *effective.getObject("loss");
  const std::optional<StringRef> lossType = lossSection.getString("type");
  const bool affinityLoss = lossType == "bce_with_logits";
  if (const json::Object *given = lossSection.getObject("affinities")) {
    if (!affinityLoss)
      return r.fail("loss.affinities: affinity targets belong to loss type bce_with_logits, not '" +
                    lossType.value_or("") + "'");
    if (augment && augment->get("context"))
      return r.fail("augment.context: loss.affinities.offsets gives the affinities' reach; "
                    "remove augment.context");
    for (const json::Value &o : *given->getArray("offsets")) {
      const json::Array &a = *o.getAsArray();
      recipe.affinityOffsets.push_back({*a[0].getAsInteger(), *a[1].getAsInteger(), *a[2].getAsInteger()});
    }
    recipe.affinityOffsetsGiven = true;
  } else if (affinityLoss) {
    const int64_t c = augment ? augment->getInteger("context").value_or(10) : 10;
    recipe.affinityOffsets = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {c, 0, 0}, {0, c, 0}, {0, 0, c}};
    json::Array offsets;
    for (const auto &o : recipe.affinityOffsets)
      offsets.push_back(json::Array{o[0], o[1], o[2]});
    lossSection["affinities"] = json::Object{{"offsets", std::move(offsets)}};
  }
  if (augment && augment->getString("pipeline") == "none") {
    // No augmentation (e.g. --set augment.pipeline=none on a recipe that has it).
    for (StringRef key : {"overrides", "channels", "classes", "levels", "context"})
      if (augment->get(key))
        return r.fail("augment." + key + ": augment.pipeline is none (no augmentation)");
    effective.erase("augment");
    augment = nullptr;
  }
  if (!augment && recipe.affinityOffsetsGiven) {
    // The host loader makes BANIS's six only; other offsets are made on the device by the
    // label path alone (gen_augment.py affinities: no augmentation).
    effective["augment"] = json::Object{{"pipeline", "affinities"}, {"function", "augment"}};
    augment = effective.getObject("augment");
  }
  if (augment) {
    std::optional<StringRef> pipeline = augment->getString("pipeline");
    if (!pipeline)
      return r.fail("missing 'augment.pipeline' (nnunet, banis, none or a pipeline file, e.g. "
                    "augment: {pipeline: nnunet})");
    auto size = [&](const char *key) { return augment->getInteger(key).value_or(0); };
    if (isGeneratedPipeline(*pipeline)) {
      recipe.augmentGenerated = pipeline->str();
      const bool nnunet = *pipeline == "nnunet", banis = *pipeline == "banis";
      for (StringRef key : {"channels", "classes", "levels", "context"})
        if (augment->get(key) && (nnunet ? key == "context" : !banis || key != "context"))
          return r.fail("augment." + key + ": not a size of the " + *pipeline + " pipeline (" +
                        (nnunet ? "nnunet takes channels, classes and levels"
                                : banis ? "banis takes context"
                                        : "affinities takes none: loss.affinities.offsets") +
                        ")");
      recipe.augmentChannels = size("channels");
      recipe.augmentClasses = size("classes");
      recipe.augmentLevels = size("levels");
      recipe.augmentContext = banis ? (size("context") ? size("context") : 10) : 0;
      if (banis && !recipe.affinityOffsetsGiven &&
          recipe.augmentContext >= *std::min_element(recipe.patch.begin(), recipe.patch.end()))
        return r.fail("augment.context " + Twine(recipe.augmentContext) +
                      " must be smaller than each data.patch size (BANIS's long-range "
                      "affinities reach that far past the patch)");
      if (!nnunet && !affinityLoss)
        return r.fail("augment.pipeline " + *pipeline + ": makes affinity targets, for loss type "
                      "bce_with_logits, not '" + lossType.value_or("") + "'");
      if (!sys::fs::is_regular_file(augmentGenerator()))
        return r.fail("augment.pipeline " + *pipeline + ": its generator '" + augmentGenerator() +
                      "' is missing (set MEDC_AUGMENT_GENERATOR to scripts/gen_augment.py, or "
                      "give a pipeline file)");
    } else {
      for (StringRef key : {"channels", "classes", "levels", "context"})
        if (augment->get(key))
          return r.fail("augment." + key + ": a size of a generated pipeline (augment.pipeline: "
                        "nnunet or banis); the file '" + *pipeline + "' has its own");
      recipe.augment = resolve(*pipeline);
      (*augment)["pipeline"] = recipe.augment;
      if (!sys::fs::is_regular_file(recipe.augment))
        return r.fail("augment.pipeline: no such file '" + recipe.augment +
                      "' (relative to the recipe's folder; scripts/gen_augment.py writes one, or "
                      "name a generated pipeline: nnunet, banis)");
    }
    recipe.augmentFunction = augment->getString("function")->str();
    train.push_back("augment=" + recipe.augmentFunction);
    if (const json::Object *params = augment->getObject("overrides")) {
      std::map<std::string, std::vector<double>> sorted; // json::Object has no order
      for (const auto &[name, value] : *params) {
        std::vector<double> &values = sorted[name.str()];
        if (const json::Array *list = value.getAsArray())
          for (const json::Value &e : *list)
            values.push_back(*e.getAsNumber());
        else
          values.push_back(*value.getAsNumber());
      }
      for (auto &[name, values] : sorted) {
        recipe.augmentOverridesKey += name; // the values' bits, exact
        for (size_t i = 0; i < values.size(); ++i)
          recipe.augmentOverridesKey +=
              (i ? "," : "=") + utohexstr(llvm::bit_cast<uint64_t>(values[i]));
        recipe.augmentOverridesKey += "\n";
        recipe.augmentOverrides.push_back({name, std::move(values)});
      }
    }
  }
  StringRef precision = *effective.getString("precision");
  if (precision != "fp32" && precision != "bf16-mixed" && precision != "fp16-mixed")
    return r.fail("precision: expected fp32, bf16-mixed or fp16-mixed, got '" + precision + "'");
  if (precision != "fp32")
    train.push_back("precision=" + precision.str());
  recipe.recomputeMlp = *effective.getBoolean("recompute_mlp");
  recipe.memoryBudgetGib = *effective.getNumber("memory_budget_gib");
  if (recipe.memoryBudgetGib < 0)
    return r.fail("memory_budget_gib: expected a size in GiB (0: no budget), got " +
                  llvm::formatv("{0}", recipe.memoryBudgetGib).str());
  recipe.recomputeAboveGib = *effective.getNumber("recompute_above_gib");
  if (!(recipe.recomputeAboveGib >= 0))
    return r.fail("recompute_above_gib: expected a size in GiB (0: always recompute), got " +
                  llvm::formatv("{0}", recipe.recomputeAboveGib).str());
  // Every key medrun reads, by the table medrun applies too (RecipeRules.h).
  if (std::string broken = medrun::recipe::check(EffectiveSource(effective), /*requireAll=*/false);
      !broken.empty())
    return r.fail(broken);
  if (!sys::fs::is_regular_file(recipe.model))
    return r.fail("model: no such model file '" + recipe.model + "' (" +
                  (sys::path::is_absolute(modelFile) ? "" : "relative to the recipe's folder; ") +
                  "e.g. model: ../models/mednext_s.mlir)");
  recipe.lossOptions = join(loss, " ");
  recipe.trainOptions = join(train, " ");
  recipe.effective = std::move(effective);
  return recipe;
}

} // namespace medc
