//===- CommandArgs.h - medrun's command table and the options commands share ----------===//
//
// The command table's entries (medrun.cpp holds the table, --help and the parser), the parsed
// arguments, and what `run` and `cuda-check` both read from them: the function, its inputs,
// its parameters, the seed and the thread count.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_TOOL_COMMANDARGS_H
#define MEDRUN_TOOL_COMMANDARGS_H

#include "medrun/Artifact.h"
#include "medrun/Safetensors.h"
#include "medrun/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace medrun {

/// One option of a command: its name, its value's name ("" for a flag, "[CKPT]" for a value
/// that may be left out) and its help, lines separated by '\n'.
struct Option {
  const char *name, *value, *help;
};

/// One command: its usage lines, what it does and its options. --help and the argument
/// parser both read this table, so a command's help lists exactly the options it accepts.
struct Command {
  const char *name, *usage, *summary;
  std::vector<Option> options;
  bool environment; ///< the environment variables matter (recipes, the CUDA backend)
};

/// A command line, parsed by the command's table.
struct Args {
  const Command *command = nullptr;
  std::string artifact;
  std::map<std::string, std::vector<std::string>> options;

  std::string get(const std::string &key, const std::string &fallback = "") const {
    auto it = options.find(key);
    return it == options.end() ? fallback : it->second.back();
  }
  std::vector<std::string> all(const std::string &key) const {
    auto it = options.find(key);
    return it == options.end() ? std::vector<std::string>{} : it->second;
  }
  bool has(const std::string &key) const { return options.count(key) > 0; }
  bool is(const char *name) const { return command && command->name == std::string(name); }
};

uint64_t parseSeed(const Args &args);
/// An integer option of at least `least`.
int64_t parseCount(const Args &args, const char *key, int64_t fallback, int64_t least);
/// --progress auto|bar|lines as 0, 1, 2.
int parseProgress(const Args &args);
/// --overlap: a fraction in [0, 1) (default 0.5).
double parseOverlap(const Args &args);
/// "2x3x4 f32".
std::string typeStr(const ValueInfo &v);
/// --threads.
void setThreads(const Args &args);
/// --func, or the artifact's only function.
const Function &selectFunction(const Artifact &a, const Args &args);
/// --input [NAME=]F for each of the function's inputs (missing ones undefined when allowed).
std::vector<Tensor> readInputs(const Function &fn, const Args &args, bool allowMissing = false);
/// The parameters `fn` runs with: --params (a safetensors file or a training checkpoint) or,
/// without it, initialized with --seed; --weights ema puts each EMA value in place.
TensorMap readParams(const Artifact &a, const Function &fn, const Args &args);

} // namespace medrun

#endif // MEDRUN_TOOL_COMMANDARGS_H
