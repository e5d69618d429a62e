//===- InputRoles.cpp - random inputs for a function, by how it uses each argument ---===//
#include "medrun/InputRoles.h"

#include "medrun/Error.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace medrun {
namespace {

bool startsWith(const std::string &s, const char *prefix) { return s.rfind(prefix, 0) == 0; }

// The label transforms: they read object ids (background, unlabelled −1, a few objects).
bool labelTransform(const OpInfo &op) {
  return op.kind == "affinities" || op.kind == "remove_label" || op.kind == "label_regions" ||
         op.kind == "downsample_nearest";
}

// A label transform, or a nearest resampling whose result a label transform of `fn` reads (a
// resample fusion's ids, resampled before their affinities).
bool readsLabels(const OpInfo &op, const Function &fn) {
  if (labelTransform(op))
    return true;
  if (op.kind != "spatial_transform" || op.strAttr("mode") != "nearest")
    return false;
  for (const OpInfo &user : fn.ops)
    if (labelTransform(user))
      for (const auto &[name, ids] : user.operands)
        if (std::find(ids.begin(), ids.end(), op.results.at(0)) != ids.end())
          return true;
  return false;
}

const std::vector<int64_t> kObjectIds = {-1, 0, 1, 2, 3, 4};

// The role operand `name` (its j-th value) of `op` gives what it reads, if any: the table.
std::optional<ArgumentRole> operandRole(const OpInfo &op, const std::string &name, size_t j,
                                        const Function &fn, const RoleOptions &options) {
  ArgumentRole r;
  if (name == "mask") {
    r.role = InputRole::Mask;
  } else if (startsWith(op.kind, "dice_ce") && name == "targets") {
    r.role = InputRole::ClassIndex;
    const std::vector<int> &logits = op.operand("logits");
    if (j < logits.size() && fn.values.at(logits[j]).shape.size() >= 2)
      r.classes = fn.values.at(logits[j]).shape[1];
  } else if (startsWith(op.kind, "bce_with_logits") && name == "target") {
    r.role = InputRole::Target;
  } else if (startsWith(op.kind, "bce_with_logits") && name == "pos_weight") {
    r.role = InputRole::PositiveWeight;
  } else if (op.kind == "spatial_transform" && name == "input" &&
             op.strAttr("mode") == "linear_argmax") {
    r.role = options.labelTies ? InputRole::Ties : InputRole::Label;
    if (!options.labelTies)
      r.labels = op.intsAttr("labels");
  } else if (readsLabels(op, fn)) {
    r.role = InputRole::Label;
    r.labels = kObjectIds;
  } else if ((op.kind == "adamw" || op.kind == "sgd") && name == "lr") {
    r.role = InputRole::LearningRate;
  } else if (op.kind == "adamw" && name == "exp_avg_sq") {
    r.role = InputRole::SecondMoment;
  } else if (op.kind == "adamw" && name == "step") {
    r.role = InputRole::Step;
  } else if ((op.kind == "random" || op.kind == "dropout") && name == "key") {
    r.role = InputRole::Key;
  } else if (op.kind == "sqrt" || op.kind == "log" || (op.kind == "pow" && name == "lhs")) {
    r.role = InputRole::Positive;
  } else {
    return std::nullopt;
  }
  return r;
}

// The roles of `fn`'s values that its ops read, by value id.
std::map<int, ArgumentRole> valueRoles(const Function &fn, const RoleOptions &options) {
  std::map<int, ArgumentRole> byValue;
  // The first use decides, except that class indices win over any other role (dice_ce
  // refuses targets outside [0, C), even ones a label transform also reads) and several
  // dice_ce uses take the fewest classes.
  auto give = [&](int id, const ArgumentRole &r) {
    auto [it, fresh] = byValue.emplace(id, r);
    if (fresh || r.role != InputRole::ClassIndex)
      return;
    if (it->second.role == InputRole::ClassIndex)
      it->second.classes = std::min(it->second.classes, r.classes);
    else
      it->second = r;
  };
  for (const OpInfo &op : fn.ops) {
    if (op.kind == "fusion" && op.body) { // its inputs play the roles of its body's arguments
      const Function &body = *op.body;
      const std::vector<int> &outer = op.operand("inputs");
      const std::map<int, ArgumentRole> inner = valueRoles(body, options);
      for (size_t j = 0; j < body.inputs.size() && j < outer.size(); ++j)
        if (auto it = inner.find(body.inputs[j]); it != inner.end())
          give(outer[j], it->second);
      // What sqrt or log reads through the body's ops before it (a variance divided by a
      // count): the inputs it comes from are drawn positive.
      std::set<int> rooted;
      for (auto it = body.ops.rbegin(); it != body.ops.rend(); ++it) {
        const bool feeds = it->kind == "sqrt" || it->kind == "log" ||
                           std::any_of(it->results.begin(), it->results.end(),
                                       [&](int r) { return rooted.count(r) != 0; });
        if (feeds)
          for (const auto &[name, ids] : it->operands)
            rooted.insert(ids.begin(), ids.end());
      }
      for (size_t j = 0; j < body.inputs.size() && j < outer.size(); ++j)
        if (rooted.count(body.inputs[j]))
          give(outer[j], {InputRole::Positive, 0, {}});
      continue;
    }
    for (const auto &[name, ids] : op.operands)
      for (size_t j = 0; j < ids.size(); ++j)
        if (std::optional<ArgumentRole> r = operandRole(op, name, j, fn, options))
          give(ids[j], *r);
  }
  return byValue;
}

// The first op of `fn` that reads value `id` and whether that operand may hold labels (the op
// table's `label`), for integer arguments without a role.
const OpInfo *firstUse(const Function &fn, int id, std::string *operand, bool *label) {
  for (const OpInfo &op : fn.ops)
    for (const auto &[name, ids] : op.operands)
      if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
        *operand = name;
        const med::ops::OperandSpec *spec = op.schema ? op.schema->operand(name) : nullptr;
        *label = spec && spec->label;
        return &op;
      }
  return nullptr;
}

} // namespace

const char *roleName(InputRole role) {
  switch (role) {
  case InputRole::Real: return "real";
  case InputRole::Mask: return "mask";
  case InputRole::ClassIndex: return "class_index";
  case InputRole::Target: return "target";
  case InputRole::PositiveWeight: return "positive_weight";
  case InputRole::Positive: return "positive";
  case InputRole::SecondMoment: return "second_moment";
  case InputRole::LearningRate: return "learning_rate";
  case InputRole::Step: return "step";
  case InputRole::EmaDecay: return "ema_decay";
  case InputRole::Key: return "key";
  case InputRole::Label: return "label";
  case InputRole::Ties: return "ties";
  }
  throw Error("an input role without a name");
}

namespace {

// The role of argument `i`: by its uses (`byValue`), else by its name; an integer that no rule
// gives a role is an Error.
ArgumentRole roleOfArgument(const Function &fn, size_t i,
                            const std::map<int, ArgumentRole> &byValue) {
  // The scalars medc gives a training step, by name, where no op gives them a role.
  static const std::map<std::string, InputRole> byName = {{"lr", InputRole::LearningRate},
                                                          {"step", InputRole::Step},
                                                          {"ema_decay", InputRole::EmaDecay},
                                                          {"rng", InputRole::Key}};
  const int id = fn.inputs.at(i);
  ArgumentRole r;
  if (auto it = byValue.find(id); it != byValue.end())
    r = it->second;
  else if (auto n = i < fn.inputNames.size() ? byName.find(fn.inputNames[i]) : byName.end();
           n != byName.end())
    r.role = n->second;
  const ValueInfo &info = fn.values.at(id);
  if (r.role != InputRole::Real || isFloat(info.dtype))
    return r;
  // Integers that an operand which may hold labels reads (mirror, shift_slices, a resampling,
  // random's `like`): object ids. Integers no op reads: any values. Any other integer is an
  // error.
  std::string operand;
  bool label = false;
  const OpInfo *use = firstUse(fn, id, &operand, &label);
  if (!use)
    return r;
  const std::string arg = i < fn.inputNames.size() ? fn.inputNames[i] : str("arg", i);
  if (!label)
    throw Error(str("function '", fn.name, "': argument '", arg, "' (", dtypeName(info.dtype),
                    ") is read by med.", use->kind, " (operand '", operand,
                    "'), which gives it no input role: random integers there would check "
                    "nothing (give the input, or add a rule to "
                    "runtime/src/artifact/InputRoles.cpp)"));
  r.role = InputRole::Label;
  r.labels = kObjectIds;
  return r;
}

} // namespace

std::vector<ArgumentRole> argumentRoles(const Function &fn, const RoleOptions &options) {
  const std::map<int, ArgumentRole> byValue = valueRoles(fn, options);
  std::vector<ArgumentRole> roles;
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    roles.push_back(roleOfArgument(fn, i, byValue));
  return roles;
}

Tensor randomInput(const ValueInfo &info, const ArgumentRole &role, std::mt19937_64 &rng) {
  Tensor t(info.dtype, info.shape);
  if (role.role == InputRole::Key && info.dtype == DType::I64) { // not through a double
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<int64_t>()[i] = static_cast<int64_t>(rng());
    return t;
  }
  Tensor v(DType::F64, info.shape);
  double *p = v.data<double>();
  std::uniform_real_distribution<double> unit;
  std::normal_distribution<double> normal;
  const auto pick = [&](const std::vector<int64_t> &from) {
    std::uniform_int_distribution<size_t> d(0, std::max<size_t>(from.size(), 1) - 1);
    return from.empty() ? 0.0 : static_cast<double>(from[d(rng)]);
  };
  for (int64_t k = 0; k < v.numel(); ++k) {
    switch (role.role) {
    case InputRole::Mask: p[k] = unit(rng) < 0.7 ? 1.0 : 0.0; break;
    case InputRole::ClassIndex:
      p[k] = std::floor(unit(rng) * static_cast<double>(std::max<int64_t>(role.classes, 1)));
      break;
    case InputRole::Target: p[k] = unit(rng); break;
    case InputRole::PositiveWeight: p[k] = 0.5 + 1.5 * unit(rng); break;
    case InputRole::Positive: p[k] = 0.1 + 2 * unit(rng); break;
    case InputRole::SecondMoment: p[k] = unit(rng); break;
    case InputRole::LearningRate: p[k] = 1e-3; break;
    case InputRole::Step: p[k] = std::floor(1 + 10 * unit(rng)); break;
    case InputRole::EmaDecay: p[k] = 0.99; break;
    case InputRole::Label: p[k] = pick(role.labels); break;
    case InputRole::Key: // a key that is not i64: any values
    case InputRole::Ties:
    case InputRole::Real: p[k] = normal(rng); break;
    }
  }
  if (isFloat(info.dtype))
    return v.to(info.dtype);
  auto put = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t k = 0; k < v.numel(); ++k)
      t.data<T>()[k] = static_cast<T>(p[k]);
  };
  switch (info.dtype) {
  case DType::I8: put(int8_t()); break;
  case DType::I16: put(int16_t()); break;
  case DType::I32: put(int32_t()); break;
  case DType::I64: put(int64_t()); break;
  case DType::U8:
  case DType::Bool: put(uint8_t()); break;
  default: throw Error(str("cannot draw a random ", dtypeName(info.dtype), " input"));
  }
  return t;
}

uint64_t inputSeed(uint64_t seed, const std::string &function, size_t argument) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (unsigned char c : function)
    h = (h ^ c) * 1099511628211ull;
  h ^= seed + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= (argument + 1) * 0xbf58476d1ce4e5b9ull;
  return h;
}

void randomInputs(const Function &fn, std::vector<Tensor> &inputs, uint64_t seed,
                  const RoleOptions &options) {
  if (inputs.empty())
    inputs.resize(fn.inputs.size());
  if (inputs.size() != fn.inputs.size())
    throw Error(str("function '", fn.name, "' takes ", fn.inputs.size(), " inputs, not ",
                    inputs.size()));
  const std::map<int, ArgumentRole> byValue = valueRoles(fn, options);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) // given: its role does not matter
      continue;
    std::mt19937_64 rng(inputSeed(seed, fn.name, i));
    inputs[i] = randomInput(fn.values.at(fn.inputs[i]), roleOfArgument(fn, i, byValue), rng);
  }
}

} // namespace medrun
