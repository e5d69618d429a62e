//===- medcheck.cpp - checks medrun's CPU backend against LibTorch --------------------===//
//
//   medcheck X.medc [--func NAME]... [--seed S] [--tolerance T] [--precision f32|f64]
//            [--threads N]
//
// For each selected function of the artifact: initializes the parameters (initParameters),
// draws random inputs by the role of each argument, runs the function with runCpu and
// with the LibTorch reference of TorchReference.cpp, and compares every output.
//
//===----------------------------------------------------------------------------------===//
#include "TorchReference.h"

#include "medrun/Artifact.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/Parallel.h"
#include "medrun/Tensor.h"

#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using medrun::Error;
using medrun::str;

namespace {

const char *kUsage =
    "usage: medcheck ARTIFACT.medc [options]\n"
    "\n"
    "Runs functions of a medc artifact on medrun's CPU backend and, op by op, with\n"
    "LibTorch, and compares every output.\n"
    "\n"
    "For each function, parameters come from medrun::initParameters(seed) and inputs are\n"
    "random, drawn by the role of each argument: a `mask` operand gets {0,1} values, the\n"
    "`targets` of med.dice_ce class indices in [0, C), the `target` of\n"
    "med.bce_with_logits U(0,1) values, anything else standard normal values.\n"
    "\n"
    "Each output prints one line: function, output, shape, the largest absolute error,\n"
    "the relative error norm ||ours - torch||_2 / ||torch||_2 (the absolute norm when\n"
    "||torch|| is 0; NaNs at the same places count as equal) and ok or FAIL. Each\n"
    "function then prints the wall time of our run and of torch's; a last line counts\n"
    "the outputs checked and failed.\n"
    "\n"
    "options:\n"
    "  --func NAME        check function NAME (repeatable; default: every function)\n"
    "  --seed S           seed of the parameters and inputs (default 0)\n"
    "  --tolerance T      largest relative error norm that passes\n"
    "                     (default 1e-4 for f32, 1e-10 for f64)\n"
    "  --precision P      f32 or f64: storage type of our run and the type torch\n"
    "                     computes in (default f32)\n"
    "  --threads N        threads of medrun and of torch, which always get the same\n"
    "                     number (default: medrun's, MEDRUN_THREADS or the hardware\n"
    "                     concurrency)\n"
    "  --help             print this help\n"
    "\n"
    "exit status: 0 all outputs within the tolerance, 1 a failed comparison or an error,\n"
    "2 a usage error\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string artifact;
  std::vector<std::string> funcs;
  uint64_t seed = 0;
  double tolerance = -1; // < 0: the precision's default
  medrun::Precision precision = medrun::Precision::F32;
  int threads = 0;
  bool help = false;
};

uint64_t parseUnsigned(const std::string &opt, const std::string &s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(str(opt, " expects a non-negative integer, got '", s, "'"));
  errno = 0;
  char *end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno == ERANGE)
    throw UsageError(str(opt, " value '", s, "' is out of range"));
  return v;
}

double parsePositive(const std::string &opt, const std::string &s) {
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
    throw UsageError(str(opt, " expects a positive number, got '", s, "'"));
  return v;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    bool hasInline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      hasInline = true;
    }
    auto next = [&]() -> std::string {
      if (hasInline)
        return value;
      if (i + 1 >= argc)
        throw UsageError(str(a, " needs a value"));
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--func") {
      o.funcs.push_back(next());
    } else if (a == "--seed") {
      o.seed = parseUnsigned(a, next());
    } else if (a == "--tolerance") {
      o.tolerance = parsePositive(a, next());
    } else if (a == "--precision") {
      std::string p = next();
      if (p == "f32")
        o.precision = medrun::Precision::F32;
      else if (p == "f64")
        o.precision = medrun::Precision::F64;
      else
        throw UsageError(str("--precision must be f32 or f64, got '", p, "'"));
    } else if (a == "--threads") {
      uint64_t n = parseUnsigned(a, next());
      if (n < 1 || n > 4096)
        throw UsageError(str("--threads expects 1 to 4096, got '", n, "'"));
      o.threads = static_cast<int>(n);
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError(str("unknown option '", a, "'"));
    } else if (o.artifact.empty()) {
      o.artifact = a;
    } else {
      throw UsageError(str("more than one artifact given: '", o.artifact, "' and '", a, "'"));
    }
  }
  if (!o.help && o.artifact.empty())
    throw UsageError("no artifact given");
  return o;
}

// ---- inputs ---------------------------------------------------------------------------

/// How an argument is used, which decides its random values.
struct Role {
  enum Kind { Normal, Mask, ClassIndex, Probability } kind = Normal;
  int64_t classes = 0; ///< ClassIndex: the C of the matching logits
};

std::vector<Role> argumentRoles(const medrun::Function &fn) {
  std::map<int, Role> byValue;
  for (const medrun::OpInfo &op : fn.ops) {
    for (const auto &[name, ids] : op.operands) {
      for (size_t j = 0; j < ids.size(); ++j) {
        Role r;
        if (name == "mask") {
          r.kind = Role::Mask;
        } else if (op.kind == "dice_ce" && name == "targets") {
          r.kind = Role::ClassIndex;
          const std::vector<int> &logits = op.operand("logits");
          if (j < logits.size() && fn.values.at(logits[j]).shape.size() >= 2)
            r.classes = fn.values.at(logits[j]).shape[1];
        } else if (op.kind == "bce_with_logits" && name == "target") {
          r.kind = Role::Probability;
        } else {
          continue;
        }
        auto it = byValue.find(ids[j]);
        if (it == byValue.end())
          byValue[ids[j]] = r;
        else if (r.kind == Role::ClassIndex && it->second.kind == Role::ClassIndex)
          it->second.classes = std::min(it->second.classes, r.classes);
      }
    }
  }
  std::vector<Role> roles;
  for (int id : fn.inputs) {
    auto it = byValue.find(id);
    roles.push_back(it == byValue.end() ? Role() : it->second);
  }
  return roles;
}

template <typename T> void fill(medrun::Tensor &t, const std::vector<double> &v) {
  T *p = t.data<T>();
  for (size_t i = 0; i < v.size(); ++i)
    p[i] = static_cast<T>(v[i]);
}

medrun::Tensor randomInput(const medrun::ValueInfo &info, const Role &role, std::mt19937_64 &rng) {
  medrun::Tensor t(info.dtype, info.shape);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  switch (role.kind) {
  case Role::Mask: {
    std::bernoulli_distribution d(0.5);
    for (double &x : v)
      x = d(rng) ? 1.0 : 0.0;
    break;
  }
  case Role::ClassIndex: {
    std::uniform_int_distribution<int64_t> d(0, std::max<int64_t>(role.classes, 1) - 1);
    for (double &x : v)
      x = static_cast<double>(d(rng));
    break;
  }
  case Role::Probability: {
    std::uniform_real_distribution<double> d(0.0, 1.0);
    for (double &x : v)
      x = d(rng);
    break;
  }
  case Role::Normal: {
    std::normal_distribution<double> d(0.0, 1.0);
    for (double &x : v)
      x = d(rng);
    break;
  }
  }
  switch (info.dtype) {
  case medrun::DType::F32: fill<float>(t, v); break;
  case medrun::DType::F64: fill<double>(t, v); break;
  case medrun::DType::BF16: fill<medrun::bf16>(t, v); break;
  case medrun::DType::I8: fill<int8_t>(t, v); break;
  case medrun::DType::I16: fill<int16_t>(t, v); break;
  case medrun::DType::I32: fill<int32_t>(t, v); break;
  case medrun::DType::I64: fill<int64_t>(t, v); break;
  case medrun::DType::U8: fill<uint8_t>(t, v); break;
  default:
    throw Error(str("medcheck cannot make random inputs of type ", medrun::dtypeName(info.dtype)));
  }
  return t;
}

/// A seed per (seed, function, argument), so that selecting functions changes nothing.
uint64_t mixSeed(uint64_t seed, const std::string &fn, size_t arg) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (unsigned char c : fn)
    h = (h ^ c) * 1099511628211ull;
  h ^= seed + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= (arg + 1) * 0xbf58476d1ce4e5b9ull;
  return h;
}

// ---- comparison -----------------------------------------------------------------------

struct Comparison {
  double maxAbs = 0, rel = 0;
  std::string problem; ///< non-empty: a mismatch other than the values
};

Comparison compare(const medrun::Tensor &oursT, const torch::Tensor &ref) {
  Comparison c;
  torch::Tensor ours = medcheck::toTorch(oursT).to(torch::kDouble);
  torch::Tensor theirs = ref.to(torch::kDouble).contiguous();
  if (ours.sizes() != theirs.sizes()) {
    c.problem = str("shape ", medrun::shapeStr(oursT.shape()), " vs torch ",
                    medrun::shapeStr(medrun::Shape(ref.sizes().begin(), ref.sizes().end())));
    c.maxAbs = c.rel = NAN;
    return c;
  }
  if (ours.numel() == 0)
    return c;
  // Equal where both are NaN or both hold the same value (infinities included).
  torch::Tensor same = (ours.isnan() & theirs.isnan()) | ours.eq(theirs);
  torch::Tensor diff = torch::where(same, torch::zeros_like(ours), ours - theirs);
  c.maxAbs = diff.abs().max().item<double>();
  double diffNorm = diff.norm().item<double>();
  torch::Tensor finite = torch::where(theirs.isfinite(), theirs, torch::zeros_like(theirs));
  double refNorm = finite.norm().item<double>();
  c.rel = refNorm > 0 ? diffNorm / refNorm : diffNorm;
  if (std::isnan(c.maxAbs) || std::isnan(diffNorm))
    c.maxAbs = c.rel = NAN;
  return c;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

std::string seconds(double s) {
  char buf[32];
  if (s < 1)
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

int run(const Options &o) {
  medrun::Artifact artifact = medrun::Artifact::load(o.artifact);
  std::vector<const medrun::Function *> fns;
  if (o.funcs.empty()) {
    for (const medrun::Function &f : artifact.functions)
      fns.push_back(&f);
  } else {
    std::set<std::string> seen;
    for (const std::string &name : o.funcs)
      if (seen.insert(name).second)
        fns.push_back(&artifact.function(name)); // throws, listing the functions there are
  }
  if (fns.empty())
    throw Error(str(o.artifact, ": the artifact has no functions"));

  double tolerance = o.tolerance > 0 ? o.tolerance
                     : o.precision == medrun::Precision::F64 ? 1e-10
                                                             : 1e-4;
  torch::ScalarType floatType =
      o.precision == medrun::Precision::F64 ? torch::kDouble : torch::kFloat;

  medrun::TensorMap params = medrun::initParameters(artifact, o.seed);
  std::map<std::string, torch::Tensor> torchParams;
  for (const auto &[name, t] : params)
    torchParams[name] = medcheck::toTorch(t);

  size_t checked = 0, failed = 0;
  for (const medrun::Function *fn : fns) {
    std::vector<Role> roles = argumentRoles(*fn);
    std::vector<medrun::Tensor> inputs;
    std::vector<torch::Tensor> torchInputs;
    for (size_t i = 0; i < fn->inputs.size(); ++i) {
      std::mt19937_64 rng(mixSeed(o.seed, fn->name, i));
      inputs.push_back(randomInput(fn->values.at(fn->inputs[i]), roles[i], rng));
      torchInputs.push_back(medcheck::toTorch(inputs.back()));
    }

    double t0 = now();
    std::vector<medrun::Tensor> ours = medrun::runCpu(artifact, *fn, inputs, params, o.precision);
    double t1 = now();
    std::vector<torch::Tensor> ref =
        medcheck::runTorch(artifact, *fn, torchInputs, torchParams, floatType);
    double t2 = now();

    if (ours.size() != ref.size())
      throw Error(str(fn->name, ": medrun returned ", ours.size(), " outputs, torch ",
                      ref.size()));
    for (size_t i = 0; i < ours.size(); ++i) {
      Comparison c = compare(ours[i], ref[i]);
      bool ok = c.problem.empty() && c.rel <= tolerance;
      ++checked;
      failed += ok ? 0 : 1;
      std::cout << fn->name << "  out" << i << "  " << medrun::shapeStr(ours[i].shape())
                << "  max_abs " << sci(c.maxAbs) << "  rel " << sci(c.rel) << "  "
                << (ok ? "ok" : "FAIL");
      if (!c.problem.empty())
        std::cout << " (" << c.problem << ")";
      std::cout << "\n";
    }
    std::cout << fn->name << "  time  ours " << seconds(t1 - t0) << " (" << medrun::numThreads()
              << " threads)  torch " << seconds(t2 - t1) << " (" << torch::get_num_threads()
              << " threads)\n"
              << std::flush;
  }
  std::cout << checked << " outputs checked, " << failed << " failed (tolerance "
            << sci(tolerance) << ", precision "
            << (o.precision == medrun::Precision::F64 ? "f64" : "f32") << ")\n";
  return failed ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  try {
    o = parseArgs(argc, argv);
  } catch (const UsageError &e) {
    std::cerr << "medcheck: " << e.what() << "\n(medcheck --help lists the options)\n";
    return 2;
  }
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  try {
    // Both sides get the same number of threads, so that the times compare.
    if (o.threads > 0)
      medrun::setNumThreads(o.threads);
    torch::set_num_threads(medrun::numThreads());
    return run(o);
  } catch (const medrun::Error &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
  } catch (const c10::Error &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: torch: " << e.what_without_backtrace() << "\n";
  } catch (const std::exception &e) {
    std::cout << std::flush;
    std::cerr << "medcheck: " << e.what() << "\n";
  }
  return 1;
}
