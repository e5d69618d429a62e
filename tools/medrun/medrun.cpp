//===- medrun.cpp - the med runtime driver ---------------------------------------===//
//
//   medrun train RECIPE.yaml [--set key=value]... [--steps N] [--out DIR] [--resume [CKPT]]
//   medrun info X.medc
//   medrun init X.medc -o params.safetensors [--seed S]
//   medrun run X.medc --func NAME [--input [NAME=]FILE.npy]... [--params FILE.safetensors]
//              [--out DIR] [--precision f32|f64|bf16] [--seed S] [--threads N]
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Artifact.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Npy.h"
#include "medrun/Parallel.h"
#include "medrun/Safetensors.h"
#include "TrainCommand.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace medrun;

namespace {

const char *kUsage = R"(medrun: runs artifacts compiled by medc

Usage:
  medrun train RECIPE.yaml [--set key=value]... [--steps N] [--out DIR] [--resume [CKPT]]
               [--overwrite] [--device cpu|cuda|auto] [--nan stop|skip] [--threads N] [--progress P]
      Trains the recipe (configs/*.yaml) on the embedded synthetic data: compiles it with
      medc unless the compiled step is cached, then runs the training loop with logs
      (metrics.jsonl, tensorboard/) and checkpoints (checkpoints/step_N/) in DIR
      (default: runs/<recipe name>). Ctrl-C finishes the step, saves and exits; a second
      Ctrl-C quits at once.
  medrun info X.medc
      Lists the artifact's functions (inputs, outputs) and parameters.
  medrun init X.medc -o PARAMS.safetensors [--seed S]
      Writes parameters initialized as PyTorch initializes each layer (state_dict keys).
  medrun run X.medc [--func NAME] [--input [NAME=]FILE.npy]... [--params FILE.safetensors]
             [--out DIR] [--precision f32|f64|bf16] [--seed S] [--threads N] [--profile]
             [--save-params FILE]
      Runs a function on the CPU backend and writes each output as DIR/NAME.npy (out0, ...,
      and grad.<parameter> for gradient functions).

Options:
  --func NAME        function to run (default: the only one in the artifact)
  --input [NAME=]F   a .npy file for the input NAME (`image`, `target`, `lr`, ... as
                     `medrun info` lists them, or argN; without NAME=, inputs in order), or a
                     number for a scalar argument (learning rate, step, ...)
  --params F         parameters from a safetensors checkpoint (default: initialized with --seed)
  --out DIR          where outputs go (default: current directory)
  --precision P      f32 (default), f64, or bf16 (activations stored in bfloat16)
  --seed S           seed for initialized parameters (default 0)
  --threads N        CPU threads (default: all cores, or MEDRUN_THREADS)
  --profile          print the time spent in each op kind
  --save-params F    write all parameters and state after the function's updates (training
                     steps assign new values) to safetensors file F
  -o FILE            output file of `init`

Options of `train` (each one a shorthand for a --set):
  --set K=V          override a recipe key, e.g. --set data.batch=1 --set data.patch=32,32,32
                     (`medc recipe RECIPE` prints every key with its value)
  --steps N          train.steps: steps of the whole run (a resumed run continues to N)
  --out DIR          train.out: where logs, checkpoints and config.json go
  --resume [CKPT]    continue from the latest checkpoint in DIR/checkpoints, or from CKPT (a
                     step directory, a checkpoints directory or its latest/best pointer);
                     the continuation is bit-identical to an uninterrupted run
  --overwrite        start over in a DIR that holds a run (its checkpoints and logs go)
  --device D         train.device: cpu, cuda or auto (default; the CPU until the CUDA
                     backend exists)
  --nan P            train.nan: stop (default) at a non-finite loss, or skip such steps
  --threads N        train.threads: CPU threads (default: all cores)
  --progress P       auto (a bar on a terminal, plain lines otherwise), bar or lines
  Environment: MEDC (the medc executable; default: beside medrun, then PATH),
  MEDRUN_CACHE (compiled recipes; default ~/.cache/medrun)
  --help             this text
)";

struct Args {
  std::string command, artifact;
  std::map<std::string, std::vector<std::string>> options;

  std::string get(const std::string &key, const std::string &fallback = "") const {
    auto it = options.find(key);
    return it == options.end() ? fallback : it->second.back();
  }
  std::vector<std::string> all(const std::string &key) const {
    auto it = options.find(key);
    return it == options.end() ? std::vector<std::string>{} : it->second;
  }
};

Args parseArgs(int argc, char **argv) {
  static const std::map<std::string, std::vector<std::string>> allowed = {
      {"train", {"set", "steps", "out", "resume", "overwrite", "device", "nan", "threads", "progress"}},
      {"info", {}},
      {"init", {"o", "seed"}},
      {"run", {"func", "input", "params", "out", "precision", "seed", "threads", "profile",
               "save-params"}}};
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 1 && a[0] == '-') {
      std::string key = a.substr(a[1] == '-' ? 2 : 1), value;
      if (size_t eq = key.find('='); eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else if (key == "resume" && (i + 1 >= argc || argv[i + 1][0] == '-')) {
        // --resume alone: the run's own latest checkpoint
      } else if (key != "help" && key != "profile" && key != "overwrite") {
        if (i + 1 >= argc)
          throw Error(str("option --", key, " needs a value"));
        value = argv[++i];
      }
      args.options[key].push_back(value);
    } else {
      positional.push_back(a);
    }
  }
  if (args.options.count("help"))
    return args;
  if (positional.size() != 2)
    throw Error("expected a command and its file, e.g. `medrun train configs/quickstart.yaml` or "
                "`medrun run model.medc` (see --help)");
  args.command = positional[0];
  args.artifact = positional[1];
  auto cmd = allowed.find(args.command);
  if (cmd == allowed.end())
    throw Error(str("unknown command '", args.command, "' (expected train, info, init or run)"));
  for (auto &[key, values] : args.options)
    if (std::find(cmd->second.begin(), cmd->second.end(), key) == cmd->second.end())
      throw Error(str("`medrun ", args.command, "` has no option --", key, " (see --help)"));
  return args;
}

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

std::string typeStr(const ValueInfo &v) { return shapeStr(v.shape) + " " + dtypeName(v.dtype); }

int info(const Artifact &a) {
  std::cout << a.path << ": " << a.compiler << ", from " << a.source << "\n";
  for (const Function &f : a.functions) {
    std::cout << "function " << f.name << " (" << f.ops.size() << " ops)\n";
    for (size_t i = 0; i < f.inputs.size(); ++i) {
      std::string arg = "arg" + std::to_string(i);
      std::cout << "  " << arg << "  " << (f.inputNames[i] == arg ? "" : f.inputNames[i] + "  ")
                << typeStr(f.values[f.inputs[i]]) << "\n";
    }
    for (size_t i = 0; i < f.outputs.size(); ++i)
      std::cout << "  " << f.outputNames[i] << "  " << typeStr(f.values[f.outputs[i]]) << "\n";
  }
  int64_t count = 0;
  for (const ParameterInfo &p : a.parameters)
    count += numElements(p.shape);
  std::cout << a.parameters.size() << " parameters, " << count << " elements\n";
  return 0;
}

int init(const Artifact &a, const Args &args) {
  std::string out = args.get("o");
  if (out.empty())
    throw Error("`medrun init` needs -o PARAMS.safetensors");
  TensorMap params = initParameters(a, parseSeed(args));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParameterInfo &p : a.parameters)
    tensors.emplace_back(p.name, params.at(p.name));
  writeSafetensors(out, tensors, {{"source", a.source}, {"seed", args.get("seed", "0")}});
  std::cout << "wrote " << tensors.size() << " parameters to " << out << "\n";
  return 0;
}

int run(const Artifact &a, const Args &args) {
  if (!args.get("threads").empty()) {
    int n = std::atoi(args.get("threads").c_str());
    if (n < 1)
      throw Error(str("--threads: expected a positive integer, got '", args.get("threads"), "'"));
    setNumThreads(n);
  }
  std::string name = args.get("func");
  if (name.empty() && a.functions.size() > 1)
    throw Error(str(a.path, ": the artifact has several functions; choose one with --func"));
  const Function &fn = name.empty() ? a.functions.front() : a.function(name);

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
    if (!inputs[i].defined())
      throw Error(str("missing --input for arg", i,
                      fn.inputNames[i] == str("arg", i) ? "" : " '" + fn.inputNames[i] + "'",
                      " (", typeStr(fn.values[fn.inputs[i]]), ")"));

  TensorMap params;
  if (std::string path = args.get("params"); !path.empty()) {
    for (auto &[key, t] : readSafetensors(path).tensors)
      params.emplace(key, std::move(t));
    try {
      checkParameters(a, params);
    } catch (const Error &e) {
      throw Error(str(path, ": ", e.what()));
    }
  } else {
    params = initParameters(a, parseSeed(args));
  }

  Precision precision = parsePrecision(args.get("precision", "f32"));
  auto start = std::chrono::steady_clock::now();
  std::map<std::string, double> profile;
  TensorMap updates;
  std::vector<Tensor> outputs = runCpu(a, fn, inputs, params, precision,
                                       args.options.count("profile") ? &profile : nullptr,
                                       &updates);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::filesystem::path dir = args.get("out", ".");
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor t = outputs[i].dtype() == DType::BF16 ? outputs[i].to(DType::F32) : outputs[i];
    std::filesystem::path file = dir / (fn.outputNames[i] + ".npy");
    writeNpy(file.string(), t);
    std::cout << fn.outputNames[i] << "  " << shapeStr(t.shape()) << "  -> " << file.string()
              << "\n";
  }
  if (std::string path = args.get("save-params"); !path.empty()) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const ParameterInfo &p : a.parameters) {
      auto u = updates.find(p.name);
      const Tensor &t = u != updates.end() ? u->second : params.at(p.name);
      tensors.emplace_back(p.name, t.dtype() == p.dtype ? t : t.to(p.dtype));
    }
    writeSafetensors(path, tensors, {{"source", a.source}});
    std::cout << "wrote " << tensors.size() << " parameters (" << updates.size()
              << " updated) to " << path << "\n";
  } else if (!updates.empty()) {
    std::cout << "note: " << fn.name << " updated " << updates.size()
              << " parameters; --save-params FILE keeps them\n";
  }
  std::fprintf(stdout, "%s: %.3f s on %d threads\n", fn.name.c_str(), seconds, numThreads());
  for (auto &[kind, t] : profile)
    std::fprintf(stdout, "  %-20s %8.3f s  %5.1f%%\n", kind.c_str(), t, 100 * t / seconds);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Args args = parseArgs(argc, argv);
    if (args.options.count("help")) {
      std::cout << kUsage;
      return 0;
    }
    if (args.command == "train") {
      std::vector<std::string> overrides = args.all("set");
      for (const char *key : {"steps", "out", "device", "nan", "threads"})
        for (const std::string &v : args.all(key))
          overrides.push_back(str("train.", key, "=", v));
      std::optional<std::string> resume;
      if (args.options.count("resume"))
        resume = args.get("resume");
      std::string progress = args.get("progress", "auto");
      if (progress != "auto" && progress != "bar" && progress != "lines")
        throw Error(str("--progress: expected auto, bar or lines, got '", progress, "'"));
      return trainCommand(args.artifact, overrides, resume, args.options.count("overwrite") > 0,
                          progress == "auto" ? 0 : progress == "bar" ? 1 : 2);
    }
    Artifact a = Artifact::load(args.artifact);
    if (args.command == "info")
      return info(a);
    if (args.command == "init")
      return init(a, args);
    return run(a, args);
  } catch (const Error &e) {
    std::cerr << "medrun: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "medrun: " << e.what() << "\n";
    return 1;
  }
}
