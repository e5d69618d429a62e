//===- CommandArgs.cpp - the options commands share -----------------------------------===//
#include "CommandArgs.h"

#include "medrun/Checkpoint.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Npy.h"
#include "medrun/Parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace medrun {

uint64_t parseSeed(const Args &args) {
  std::string s = args.get("seed", "0");
  try {
    size_t used = 0;
    uint64_t v = std::stoull(s, &used);
    if (used == s.size())
      return v;
  } catch (...) {
  }
  throw Error(str("--seed: expected a non-negative integer, got '", s, "'"));
}

int64_t parseCount(const Args &args, const char *key, int64_t fallback, int64_t least) {
  std::string s = args.get(key, std::to_string(fallback));
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used == s.size() && v >= least)
      return v;
  } catch (...) {
  }
  throw Error(str("--", key, ": expected an integer of at least ", least, ", got '", s, "'"));
}

int parseProgress(const Args &args) {
  const std::string progress = args.get("progress", "auto");
  if (progress != "auto" && progress != "bar" && progress != "lines")
    throw Error(str("--progress: expected auto, bar or lines, got '", progress, "'"));
  return progress == "auto" ? 0 : progress == "bar" ? 1 : 2;
}

double parseOverlap(const Args &args) {
  const std::string overlap = args.get("overlap", "0.5");
  double v = -1;
  try {
    size_t used = 0;
    v = std::stod(overlap, &used);
    if (used != overlap.size())
      v = -1;
  } catch (...) {
  }
  if (!(v >= 0 && v < 1))
    throw Error(str("--overlap: expected a fraction in [0, 1), got '", overlap, "'"));
  return v;
}

std::string typeStr(const ValueInfo &v) { return shapeStr(v.shape) + " " + dtypeName(v.dtype); }

void setThreads(const Args &args) {
  if (!args.get("threads").empty()) {
    int n = std::atoi(args.get("threads").c_str());
    if (n < 1)
      throw Error(str("--threads: expected a positive integer, got '", args.get("threads"), "'"));
    setNumThreads(n);
  }
}

const Function &selectFunction(const Artifact &a, const Args &args) {
  std::string name = args.get("func");
  if (name.empty() && a.functions.size() > 1)
    throw Error(str(a.path, ": the artifact has several functions; choose one with --func"));
  return name.empty() ? a.functions.front() : a.function(name);
}

std::vector<Tensor> readInputs(const Function &fn, const Args &args, bool allowMissing) {
  std::vector<Tensor> inputs(fn.inputs.size());
  size_t next = 0;
  for (const std::string &spec : args.all("input")) {
    size_t index = next++;
    std::string path = spec;
    if (size_t eq = spec.find('='); eq != std::string::npos) {
      std::string arg = spec.substr(0, eq);
      path = spec.substr(eq + 1);
      auto named = std::find(fn.inputNames.begin(), fn.inputNames.end(), arg);
      if (named != fn.inputNames.end()) {
        index = named - fn.inputNames.begin();
      } else if (arg.rfind("arg", 0) == 0 && arg.size() > 3 &&
                 arg.find_first_not_of("0123456789", 3) == std::string::npos) {
        index = std::stoul(arg.substr(3));
      } else {
        std::string known;
        for (const std::string &n : fn.inputNames)
          known += (known.empty() ? "" : ", ") + n;
        throw Error(str("--input ", spec, ": function '", fn.name, "' has no input '", arg,
                        "' (inputs: ", known, "; or argN)"));
      }
    }
    if (index >= inputs.size())
      throw Error(str("--input ", spec, ": function '", fn.name, "' has ", inputs.size(),
                      " arguments (arg0..arg", inputs.size() - 1, ")"));
    const ValueInfo &info = fn.values[fn.inputs[index]];
    char *end = nullptr;
    if (info.shape.empty() && info.dtype == DType::I64 && !path.empty()) {
      // A 64-bit integer (a random key) read as one: a double would lose its low bits.
      errno = 0;
      const long long key = std::strtoll(path.c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0') {
        Tensor t(DType::I64, {});
        t.data<int64_t>()[0] = key;
        inputs[index] = t;
        continue;
      }
    }
    double number = std::strtod(path.c_str(), &end);
    if (info.shape.empty() && !path.empty() && end && *end == '\0') {
      Tensor t(DType::F64, {});
      t.data<double>()[0] = number;
      inputs[index] = t.to(info.dtype == DType::F64 ? DType::F64 : DType::F32);
    } else {
      inputs[index] = readNpy(path);
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined() && !allowMissing)
      throw Error(str("missing --input for arg", i,
                      fn.inputNames[i] == str("arg", i) ? "" : " '" + fn.inputNames[i] + "'",
                      " (", typeStr(fn.values[fn.inputs[i]]), ")"));
  return inputs;
}

/// The parameters `fn` runs with: --params (a safetensors file or a training checkpoint) or,
/// without it, initialized with --seed. --weights ema puts each EMA value (ema.<name>) in
/// place of its parameter.
TensorMap readParams(const Artifact &a, const Function &fn, const Args &args) {
  std::string path = args.get("params"), weights = args.get("weights", "model");
  if (weights != "model" && weights != "ema")
    throw Error(fmt::format("--weights: expected model or ema, got '{}'", weights));
  if (path.empty()) {
    if (weights == "ema")
      throw Error("--weights ema takes the EMA weights from --params (a checkpoint); none given");
    return initParameters(a, parseSeed(args));
  }
  TensorMap params = loadTensors(path);
  auto isState = [](const std::string &key) {
    return key.rfind("ema.", 0) == 0 || key.rfind("optimizer.", 0) == 0;
  };
  if (weights == "ema") {
    std::set<std::string> read;
    for (const OpInfo &op : fn.ops)
      if (op.kind == "param" && !isState(op.strAttr("name")))
        read.insert(op.strAttr("name"));
    for (const std::string &key : read) {
      auto ema = params.find("ema." + key);
      if (ema == params.end())
        throw Error(fmt::format("{}: --weights ema: no EMA weight 'ema.{}' for the parameter "
                                "'{}' that function '{}' reads (was the run trained with ema?)",
                                path, key, key, fn.name));
      params[key] = ema->second;
    }
  }
  // Training state the artifact does not declare (an inference artifact and a training
  // checkpoint) is no use to it, and no error.
  for (auto it = params.begin(); it != params.end();)
    it = isState(it->first) && !a.parameter(it->first) ? params.erase(it) : std::next(it);
  try {
    checkParameters(a, params, &fn);
  } catch (const Error &e) {
    throw Error(str(path, ": ", e.what()));
  }
  return params;
}

} // namespace medrun
