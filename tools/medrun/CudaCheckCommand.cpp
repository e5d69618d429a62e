//===- CudaCheckCommand.cpp - `medrun cuda-check` --------------------------------------===//
//
// The CUDA backend against the CPU backend on the same inputs (drawn by how the function uses
// them where not given) and parameters: every output and every updated parameter within a
// relative error norm, optionally kernel times per op kind.
//
//===----------------------------------------------------------------------------------===//
#include "CudaCheckCommand.h"

#include "medrun/AdamDrift.h"
#include "medrun/Cuda.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"
#include "medrun/InputRoles.h"
#include "medrun/Parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace medrun {
namespace {

bool anyNumber(const Tensor &t) {
  Tensor x = t.to(DType::F64);
  const double *p = x.data<double>();
  return std::any_of(p, p + x.numel(), [](double v) { return !std::isnan(v); });
}

// ‖a − b‖₂ / ‖b‖₂ in double over the finite elements (0 when both are 0). Elements that are
// NaN in both, or the same infinity in both, agree; any other non-finite element gives NaN
// (a failure). So does a reference `b` that is NaN everywhere: two such results agree on
// nothing, and the comparison would check nothing (infinities are compared, signs included).
double relativeError(const Tensor &a, const Tensor &b) {
  Tensor x = a.to(DType::F64), y = b.to(DType::F64);
  const double *p = x.data<double>(), *q = y.data<double>();
  double diff = 0, norm = 0;
  int64_t numbers = 0; // elements of b that are not NaN
  for (int64_t i = 0; i < x.numel(); ++i) {
    numbers += !std::isnan(q[i]);
    if (!std::isfinite(p[i]) || !std::isfinite(q[i])) {
      bool same = (std::isnan(p[i]) && std::isnan(q[i])) || p[i] == q[i];
      if (!same)
        return NAN;
      continue;
    }
    diff += (p[i] - q[i]) * (p[i] - q[i]);
    norm += q[i] * q[i];
  }
  if (numbers == 0 && x.numel() > 0)
    return NAN;
  if (diff == 0)
    return 0;
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

int checkFunction(const Artifact &a, const Function &fn, const Args &args, CudaSession &session);

} // namespace

int cudaCheck(const Artifact &a, const Args &args) {
  setThreads(args);
  // CudaSession's own message suggests --device cpu, an option of run and train only.
  if (std::string why; !cudaAvailable(&why))
    throw Error(fmt::format("cuda-check compares the CUDA backend with the CPU backend and needs "
                            "a CUDA driver and GPU: none found ({})", why));
  CudaSession session(a);
  if (!args.has("fusions"))
    return checkFunction(a, selectFunction(a, args), args, session);
  if (args.has("func"))
    throw Error("--fusions checks every fusion_check_<k> function; give it or --func, not both");
  int failed = 0, checked = 0;
  for (const Function &fn : a.functions)
    if (fn.name.rfind("fusion_check_", 0) == 0) {
      ++checked;
      failed += checkFunction(a, fn, args, session) != 0;
    }
  if (checked == 0)
    throw Error(str(a.path, ": no fusion_check_<k> functions; compile with `medc compile "
                            "--target cuda --fusion-checks`"));
  std::printf("%s fusions: %d fused kernels checked, %d failed\n", failed ? "FAIL" : "PASS",
              checked, failed);
  return failed ? 1 : 0;
}

namespace {

int checkFunction(const Artifact &a, const Function &fn, const Args &args, CudaSession &session) {
  std::vector<Tensor> inputs = readInputs(fn, args, /*allowMissing=*/true);
  // The inputs not given, by how the function uses them (InputRoles.h). linear_argmax reads
  // values that match no label: every voxel a tie, which its tie rule must break as the CPU
  // backend does.
  RoleOptions roles;
  roles.labelTies = true;
  randomInputs(fn, inputs, parseSeed(args) + 1, roles);
  TensorMap cpuParams = readParams(a, fn, args), gpuParams = cpuParams;
  const int repeat = std::atoi(args.get("repeat", "1").c_str());
  if (repeat < 1)
    throw Error(str("--repeat: expected a positive integer, got '", args.get("repeat"), "'"));
  const double tolerance = std::atof(args.get("tolerance", "1e-4").c_str());
  if (!(tolerance > 0))
    throw Error(str("--tolerance: expected a positive number, got '", args.get("tolerance"), "'"));
  auto stepInput = std::find(fn.inputNames.begin(), fn.inputNames.end(), "step");
  // The device stores the activations of mixed-precision steps as the CPU backend does.
  const Precision cpuPrecision = precisionOf(fn);
  std::cout << "cuda-check " << a.path << " function " << fn.name << " on "
            << session.deviceName() << (session.loadedFromPtx() ? " (kernels from PTX)" : "")
            << ", " << repeat << " run(s), tolerance " << tolerance << "\n"
            << "convolutions: " << session.convolutions() << "\n";
  for (DType low : {DType::BF16, DType::F16}) {
    const auto stored = std::count_if(fn.values.begin(), fn.values.end(),
                                      [&](const ValueInfo &v) { return v.storage == low; });
    if (stored)
      std::cout << fn.precision << ": " << stored << " of " << fn.values.size()
                << " values stored in " << dtypeName(low) << " on the device\n";
  }
  int failures = 0, checked = 0, noisy = 0;
  double worst = 0, cpuSeconds = 0, gpuSeconds = 0;
  std::string worstName;
  std::map<std::string, double> profile;

  // Training steps: a parameter whose gradient vanishes (zero mathematically, as a conv bias
  // right before an instance norm) holds rounding noise on both backends, which AdamW
  // normalizes into updates of up to lr per step of either sign. Such a parameter is found by
  // running <loss>_grad on the CPU (norm <= 1e-2 * tolerance * the largest gradient norm, as
  // medcheck's `vanishing` rule); it and its EMA pass when |gpu - cpu| <= 2 * sum_s lr * B_s
  // (medcheck's bound on |m_hat / (sqrt(v_hat) + eps)|), its moments when both are finite.
  // Every other parameter and its EMA are compared after each element's difference is
  // reduced by how far AdamW can amplify gradients that differ within the tolerance
  // (AdamDrift.h: where an element's gradients are small or cancel over the steps, a
  // difference far below the tolerance moves its update by up to 2·lr·B_s).
  const Function *lossGrad = nullptr;
  const OpInfo *adamw = nullptr;
  if (fn.name == "train_step") {
    for (const Function &f : a.functions)
      if (f.name.size() > 5 && f.name.compare(f.name.size() - 5, 5, "_grad") == 0)
        lossGrad = &f;
    for (const OpInfo &op : fn.ops) {
      if (op.kind == "adamw" && !adamw)
        adamw = &op;
      if (op.kind == "fusion" && op.body) // AdamW fused with its parameter's update
        for (const OpInfo &inner : op.body->ops)
          if (inner.kind == "adamw" && !adamw)
            adamw = &inner;
    }
  }
  // The GPU side keeps its state resident, as `medrun train` does: uploaded once, updated
  // on the device by commit() after each run.
  session.setState(gpuParams);
  std::set<std::string> noiseDriven;
  double noiseBound = 0; // 2 * sum over the steps so far of lr * B_s
  std::optional<AdamDriftBound> drift;
  if (adamw)
    drift.emplace(adamw->floatAttr("beta1"), adamw->floatAttr("beta2"), adamw->floatAttr("epsilon"));
  int amplified = 0; // tensors that needed the drift bound to pass
  const std::string secondMoment = "optimizer.exp_avg_sq.";
  auto inputValue = [&](const std::vector<Tensor> &in, const char *name, double fallback) {
    auto it = std::find(fn.inputNames.begin(), fn.inputNames.end(), name);
    return it == fn.inputNames.end() ? fallback
                                     : in[it - fn.inputNames.begin()].to(DType::F64).data<double>()[0];
  };
  auto baseName = [](std::string name, bool *moment) {
    *moment = false;
    for (const char *prefix : {"optimizer.exp_avg_sq.", "optimizer.exp_avg.",
                               "optimizer.momentum_buffer.", "ema."})
      if (name.rfind(prefix, 0) == 0) {
        *moment = std::string(prefix).rfind("optimizer.", 0) == 0;
        return name.substr(std::strlen(prefix));
      }
    return name;
  };
  for (int r = 0; r < repeat; ++r) {
    std::vector<Tensor> in = inputs;
    if (stepInput != fn.inputNames.end() && r > 0) {
      Tensor &st = in[stepInput - fn.inputNames.begin()];
      Tensor v = st.to(DType::F64);
      v.data<double>()[0] += r;
      st = v.to(st.dtype());
    }
    if (lossGrad && adamw) {
      std::vector<Tensor> batch(in.begin(), in.begin() + lossGrad->inputs.size());
      std::vector<Tensor> grads = runCpu(a, *lossGrad, batch, cpuParams);
      std::vector<std::pair<std::string, double>> norms;
      double largest = 0;
      for (size_t i = 0; i < grads.size(); ++i) {
        const std::string &n = lossGrad->outputNames[i];
        if (n.rfind("grad.", 0) != 0 || n.rfind("grad.arg", 0) == 0)
          continue;
        Tensor g = grads[i].to(DType::F64);
        double sq = 0;
        for (int64_t k = 0; k < g.numel(); ++k)
          sq += g.data<double>()[k] * g.data<double>()[k];
        norms.emplace_back(n.substr(5), std::sqrt(sq));
        largest = std::max(largest, std::sqrt(sq));
      }
      for (auto &[n, norm] : norms)
        if (norm <= 1e-2 * tolerance * largest)
          noiseDriven.insert(n);
      const double t = inputValue(in, "step", r + 1.0), lr = inputValue(in, "lr", 0.0);
      noiseBound += 2 * lr * drift->ratioBound(t);
    }
    TensorMap cpuUpdates, gpuUpdates;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> cpuOut = runCpu(a, fn, in, cpuParams, cpuPrecision, nullptr, &cpuUpdates);
    auto t1 = std::chrono::steady_clock::now();
    std::vector<Tensor> gpuOut = session.run(fn, in, {}, nullptr, &gpuUpdates);
    session.commit();
    auto t2 = std::chrono::steady_clock::now();
    cpuSeconds += std::chrono::duration<double>(t1 - t0).count();
    gpuSeconds += std::chrono::duration<double>(t2 - t1).count();
    // `error`: the error to judge, when a rule other than the relative error applies.
    auto compare = [&](const std::string &what, const Tensor &gpu, const Tensor &cpu,
                       std::optional<double> error = std::nullopt) {
      double e = error ? *error : relativeError(gpu, cpu);
      bool ok = e <= tolerance; // false for NaN
      ++checked;
      if (!ok)
        ++failures;
      if (!(e <= worst)) {
        worst = e;
        worstName = what;
      }
      if (!ok)
        std::printf("FAIL run %d %-48s rel.err %.3e%s\n", r + 1, what.c_str(), e,
                    cpu.numel() > 0 && !anyNumber(cpu)
                        ? " (the CPU result is NaN everywhere: nothing to compare)"
                        : "");
    };
    for (size_t i = 0; i < cpuOut.size(); ++i)
      compare("output " + fn.outputNames[i], gpuOut[i], cpuOut[i]);
    if (cpuUpdates.size() != gpuUpdates.size())
      throw Error(str("the backends assigned ", cpuUpdates.size(), " and ", gpuUpdates.size(),
                      " parameters"));
    if (drift) // the CPU's moments before (still in cpuParams) and after this step
      for (auto &[name, v] : cpuUpdates)
        if (name.rfind(secondMoment, 0) == 0) {
          auto before = cpuParams.find(name);
          const std::string param = name.substr(secondMoment.size());
          drift->step(param, before == cpuParams.end() ? Tensor() : before->second, v,
                      inputValue(in, "step", r + 1.0), inputValue(in, "lr", 0.0), tolerance);
          drift->emaStep(param, inputValue(in, "ema_decay", 0.0));
        }
    for (auto &[name, t] : cpuUpdates) {
      bool moment = false;
      const std::string base = baseName(name, &moment);
      const bool ema = name.rfind("ema.", 0) == 0;
      if (!noiseDriven.count(base) && !moment && drift && drift->slack(base, ema)) {
        const Tensor &gpu = gpuUpdates.at(name);
        const double excess = drift->excessError(base, gpu, t, ema);
        amplified += relativeError(gpu, t) > tolerance && excess <= tolerance;
        compare("param " + name, gpu, t, excess);
        continue;
      }
      if (!noiseDriven.count(base)) {
        compare("param " + name, gpuUpdates.at(name), t);
        continue;
      }
      Tensor x = gpuUpdates.at(name).to(DType::F64), y = t.to(DType::F64);
      double maxAbs = 0;
      bool finite = true;
      for (int64_t k = 0; k < x.numel(); ++k) {
        double u = x.data<double>()[k], v = y.data<double>()[k];
        finite = finite && std::isfinite(u) && std::isfinite(v);
        maxAbs = std::max(maxAbs, std::abs(u - v));
      }
      bool ok = finite && (moment || maxAbs <= noiseBound);
      ++checked;
      ++noisy;
      if (!ok) {
        ++failures;
        std::printf("FAIL run %d %-48s noise-driven: max_abs %.3e > bound %.3e\n", r + 1,
                    ("param " + name).c_str(), maxAbs, noiseBound);
      }
    }
    std::printf("run %d: %zu outputs, %zu updated parameters compared; CPU %.3f s, CUDA %.3f s\n",
                r + 1, cpuOut.size(), cpuUpdates.size(),
                std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count());
    for (auto &[name, t] : cpuUpdates)
      cpuParams[name] = t.to(DType::F32);
    for (auto &[name, t] : gpuUpdates)
      gpuParams[name] = t;
  }
  std::printf("launches: %s\n", session.graphs(fn).c_str());
  std::printf("convolutions of %s: %s\n", fn.name.c_str(), session.convolutions(fn).c_str());
  // What commit() left on the device is what the runs returned, bit for bit.
  for (auto &[name, t] : session.state())
    if (std::memcmp(t.raw(), gpuParams.at(name).raw(), t.nbytes()) != 0) {
      ++failures;
      std::printf("FAIL resident %s differs from the update the last run returned\n", name.c_str());
    }
  if (args.has("profile")) {
    TensorMap unused;
    session.run(fn, inputs, {}, &profile, &unused);
    double total = 0;
    for (auto &[k, t] : profile)
      total += t;
    std::printf("CUDA kernel time by op kind (one more run, events around each launch):\n");
    std::vector<std::pair<double, std::string>> rows;
    for (auto &[k, t] : profile)
      rows.emplace_back(t, k);
    std::sort(rows.rbegin(), rows.rend());
    for (auto &[t, k] : rows)
      std::printf("  %-26s %9.3f ms  %5.1f%%\n", k.c_str(), t * 1e3, 100 * t / total);
    std::printf("  %-26s %9.3f ms\n", "total", total * 1e3);
  }
  std::printf("%s %s: %d values compared over %d run(s), %d above %.1e; worst %.3e (%s); "
              "CPU %.2f s, CUDA %.2f s%s\n",
              failures ? "FAIL" : "PASS", fn.name.c_str(), checked, repeat, failures, tolerance,
              worst, worstName.c_str(), cpuSeconds, gpuSeconds,
              (str(noisy ? str("; ", noisy, " noise-driven (zero gradient) within the AdamW noise bound")
                         : "",
                   amplified ? str("; ", amplified, " within AdamW's amplification of gradient noise")
                             : ""))
                  .c_str());
  return failures ? 1 : 0;
}

} // namespace

} // namespace medrun
