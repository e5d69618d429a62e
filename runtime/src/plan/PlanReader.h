//===- PlanReader.h - reading a plan's JSON -------------------------------------===//
//
// Internal to the runtime: the reader behind readPlan (medrun/Plan.h), which Artifact::load
// also uses for the rest of the document.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SRC_PLAN_PLANREADER_H
#define MEDRUN_SRC_PLAN_PLANREADER_H

#include "medrun/Error.h"
#include "medrun/Plan.h"

#include <nlohmann/json.hpp>

namespace medrun {

/// Reads fields of the JSON plan, reporting where a malformed one sits:
/// "FILE: malformed artifact: WHERE: WHAT".
struct PlanReader {
  explicit PlanReader(std::string file) : file(std::move(file)) {}

  std::string file;
  std::vector<std::shared_ptr<const Function>> fusions; ///< bodies read so far

  [[noreturn]] void fail(const std::string &where, const std::string &msg) const {
    throw Error(str(file, ": malformed artifact: ", where, ": ", msg));
  }
  const nlohmann::json &field(const nlohmann::json &obj, const char *key,
                              const std::string &where) const {
    if (!obj.is_object() || !obj.contains(key))
      fail(where, str("missing '", key, "'"));
    return obj.at(key);
  }
  std::string string(const nlohmann::json &obj, const char *key, const std::string &where) const {
    const nlohmann::json &v = field(obj, key, where);
    if (!v.is_string())
      fail(where, str("'", key, "' must be a string"));
    return v.get<std::string>();
  }
  std::vector<int64_t> ints(const nlohmann::json &v, const std::string &where) const {
    if (!v.is_array())
      fail(where, "expected a list of integers");
    std::vector<int64_t> out;
    for (const nlohmann::json &e : v) {
      if (!e.is_number_integer())
        fail(where, "expected a list of integers");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  Shape shape(const nlohmann::json &obj, const std::string &where) const {
    Shape s = ints(field(obj, "shape", where), where + ".shape");
    for (int64_t d : s)
      if (d < 0)
        fail(where, "negative size in shape");
    return s;
  }

  AttrValue attr(const nlohmann::json &v, const std::string &where) const;
  /// A function, or a fusion body (the caller names it); `index` names it in messages
  /// until its name is read.
  Function function(const nlohmann::json &j, size_t index) const;
  /// The body a `fusion` op refers to, checked against the op's inputs and results.
  std::shared_ptr<const Function> fusionBodyOf(const OpInfo &op, const Function &f,
                                               const std::string &w) const;
  CudaPlan cudaPlan(const nlohmann::json &j, const Function &f, const std::string &where,
                    bool needMemory = true) const;
  /// The fusion bodies ("fusions", optional) and then the functions ("functions", a
  /// non-empty list) of a plan document.
  Plan plan(const nlohmann::json &doc);
};

} // namespace medrun

#endif // MEDRUN_SRC_PLAN_PLANREADER_H
