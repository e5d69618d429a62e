//===- RecipeCheck.cpp - checking an effective recipe (JSON) -------------------------===//
#include "medrun/RecipeCheck.h"

#include "medrun/Error.h"
#include "medrun/RecipeRules.h"

#include <climits>
#include <fstream>
#include <iterator>

namespace medrun {
namespace {

using json = nlohmann::json;

// A value of the effective recipe as the rule table reads it.
recipe::Value toValue(const json &v) {
  recipe::Value out;
  if (v.is_number_integer()) {
    out.kind = recipe::Value::Int;
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
      out.kind = recipe::Value::Real; // past int64: no key's integer
      out.d = v.get<double>();
      return out;
    }
    out.i = v.get<int64_t>();
    out.d = static_cast<double>(out.i);
  } else if (v.is_number_float()) {
    out.kind = recipe::Value::Real;
    out.d = v.get<double>();
  } else if (v.is_boolean()) {
    out.kind = recipe::Value::Bool;
    out.b = v.get<bool>();
  } else if (v.is_string()) {
    out.kind = recipe::Value::String;
    out.s = v.get<std::string>();
  } else if (v.is_array()) {
    out.kind = recipe::Value::List;
    for (const json &e : v)
      out.list.push_back(e.is_array() || e.is_object() ? recipe::Value{recipe::Value::Other, 0, 0,
                                                                       false, e.type_name(), {}}
                                                       : toValue(e));
  } else {
    out.kind = recipe::Value::Other;
    out.s = v.is_null() ? "null" : v.type_name(); // an object, cut to its kind
  }
  return out;
}

class JsonSource final : public recipe::Source {
public:
  explicit JsonSource(const json &config) : config_(config) {}
  recipe::Value get(const char *section, const char *key) const override {
    const json *s = &config_;
    if (*section) {
      auto it = config_.find(section);
      if (it == config_.end() || !it->is_object())
        return {};
      s = &*it;
    }
    auto it = s->find(key);
    return it == s->end() ? recipe::Value{} : toValue(*it);
  }

private:
  const json &config_;
};

// The parser's callback: refuses nesting past the recipe's limit before it is built.
struct DepthLimit {
  const std::string *file;
  bool operator()(int depth, json::parse_event_t, json &) const {
    if (depth > recipe::kMaxDepth)
      throw Error(str(*file, ": values nested more than ", recipe::kMaxDepth,
                      " deep (a recipe's sections hold values and lists of lists)"));
    return true;
  }
};

} // namespace

json readEffectiveRecipe(const std::string &file) {
  if (std::string why = recipe::checkFile(file); !why.empty())
    throw Error(str(file, ": ", why));
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw Error(str(file, ": cannot read the recipe"));
  if (text.size() > recipe::kMaxFileBytes) // grew since checkFile looked
    throw Error(str(file, ": over the limit of a recipe (", recipe::kMaxFileBytes, " bytes)"));
  json config = json::parse(text, DepthLimit{&file}, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object() || !config.contains("train"))
    throw Error(str(file, ": not an effective recipe (the JSON `medc recipe` prints)"));
  return config;
}

void checkEffectiveRecipe(const json &config, const std::string &file) {
  if (!config.is_object())
    throw Error(str(file, ": not an effective recipe (a JSON object, as `medc recipe` prints)"));
  if (std::string broken = recipe::check(JsonSource(config)); !broken.empty())
    throw Error(str(file, ": ", broken));
  const json *loss = config.contains("loss") && config["loss"].is_object() ? &config["loss"] : nullptr;
  if (const json *aff = loss && loss->contains("affinities") ? &(*loss)["affinities"] : nullptr) {
    // {offsets: [[d, h, w], ...]}
    const json *offsets = aff->is_object() && aff->contains("offsets") ? &(*aff)["offsets"] : nullptr;
    bool ok = offsets && offsets->is_array() && !offsets->empty();
    for (size_t k = 0; ok && k < offsets->size(); ++k) {
      const json &o = (*offsets)[k];
      ok = o.is_array() && o.size() == 3 && o[0].is_number_integer() && o[1].is_number_integer() &&
           o[2].is_number_integer() && (o[0] != 0 || o[1] != 0 || o[2] != 0);
    }
    if (!ok)
      throw Error(str(file, ": loss.affinities.offsets: expected a list of [d, h, w] offsets, "
                            "integers not all 0, got ", aff->dump().substr(0, 200)));
  }
}

} // namespace medrun
