//===- GradCheck.cpp - --grad (torch autograd) and --fd (finite differences) -------===//
#include "Check.h"

#include "medrun/InputRoles.h"
#include "medrun/Parallel.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <set>

namespace medcheck {
namespace {

/// Values through which out0 depends on something differentiably: walking back from out0,
/// every operand but the data operands of the losses (the target, mask and pos_weight of
/// med.bce_with_logits, the targets of med.dice_ce), as docs/dialect.md defines them and
/// med-autodiff follows. Gradient ops and constants pass nothing on.
std::vector<bool> differentiablePaths(const medrun::Function &fn) {
  std::vector<bool> useful(fn.values.size(), false);
  if (fn.outputs.empty())
    return useful;
  useful.at(fn.outputs[0]) = true;
  for (auto op = fn.ops.rbegin(); op != fn.ops.rend(); ++op) {
    bool any = false;
    for (int r : op->results)
      any |= useful.at(r);
    const std::string &k = op->kind;
    bool gradOp = k == "conv3d_grad_weight" || k == "shift_sum_grad_weight" ||
                  (k.size() > 5 && k.compare(k.size() - 5, 5, "_grad") == 0);
    if (!any || gradOp || k == "constant")
      continue;
    for (const auto &[name, ids] : op->operands) {
      bool data = (k == "bce_with_logits" &&
                   (name == "target" || name == "mask" || name == "pos_weight")) ||
                  (k == "dice_ce" && name == "targets");
      if (data)
        continue;
      for (int id : ids)
        if (medrun::isFloat(fn.values.at(id).dtype))
          useful.at(id) = true;
    }
  }
  return useful;
}

/// What a gradient output of g is the gradient of.
struct GradTarget {
  enum Kind { Output, Param, Arg } kind = Output;
  std::string param; ///< Param: its name
  size_t index = 0;  ///< Output: out<index>; Arg: arg<index>
  std::string label; ///< the output name without "grad."
};

GradTarget gradTarget(const GradPair &p, size_t i) {
  std::string name = outputName(*p.g, i);
  GradTarget t;
  auto number = [&](const std::string &digits) -> std::optional<size_t> {
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return static_cast<size_t>(std::stoull(digits));
  };
  if (name.rfind("grad.", 0) != 0) {
    auto k = name.rfind("out", 0) == 0 ? number(name.substr(3)) : std::nullopt;
    if (!k || *k >= p.f->outputs.size())
      throw Error(str(p.g->name, ": output ", i, " is named '", name, "', which names no ",
                      "result of ", p.f->name));
    t.kind = GradTarget::Output;
    t.index = *k;
    t.label = name;
    return t;
  }
  t.label = name.substr(5);
  if (t.label.rfind("arg", 0) == 0) {
    if (auto k = number(t.label.substr(3))) {
      if (*k >= p.f->inputs.size())
        throw Error(str(p.g->name, ": output '", name, "', but ", p.f->name, " has ",
                        p.f->inputs.size(), " arguments"));
      t.kind = GradTarget::Arg;
      t.index = *k;
      return t;
    }
  }
  t.kind = GradTarget::Param;
  t.param = t.label;
  return t;
}

/// N distinct flat indices of [0, numel), or all of them when there are no more than N.
std::vector<int64_t> sampleIndices(int64_t numel, int64_t n, uint64_t seed) {
  std::vector<int64_t> out;
  if (numel <= n) {
    for (int64_t i = 0; i < numel; ++i)
      out.push_back(i);
    return out;
  }
  std::mt19937_64 rng(seed);
  std::set<int64_t> seen;
  std::uniform_int_distribution<int64_t> d(0, numel - 1);
  while (static_cast<int64_t>(out.size()) < n) {
    int64_t i = d(rng);
    if (seen.insert(i).second)
      out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

medrun::Tensor toF64(const medrun::Tensor &t) {
  if (!medrun::isFloat(t.dtype()))
    return t;
  return t.dtype() == medrun::DType::F64 ? t.clone() : t.to(medrun::DType::F64);
}

/// Whether --fd-params (if any) selects the gradient output `i` of `p`.
bool fdSelected(const Options &o, const GradPair &p, size_t i) {
  GradTarget t = gradTarget(p, i);
  if (t.kind == GradTarget::Output)
    return false;
  return !o.hasFdParams || std::regex_search(t.label, o.fdRegex);
}

} // namespace

bool fdSelectsAny(const Options &o, const GradPair &p) {
  for (size_t i = 0; i < p.g->outputs.size(); ++i)
    if (fdSelected(o, p, i))
      return true;
  return false;
}

Counts checkGrad(const Options &o, const Sides &sides, const std::vector<GradPair> &pairs,
                 const medrun::TensorMap &params,
                 const std::map<std::string, torch::Tensor> &torchParams, double tolerance,
                 torch::ScalarType floatType) {
  Counts n;
  for (const GradPair &p : pairs) {
    // The inputs of f, so that out<i> of f_grad and f agree.
    std::vector<medrun::Tensor> inputs = drawInputs(*p.f, o.seed);
    std::vector<torch::Tensor> torchInputs;
    for (const medrun::Tensor &t : inputs)
      torchInputs.push_back(sides.toTorch(t));
    std::vector<bool> paths = differentiablePaths(*p.f);

    sides.beforeOurs();
    double t0 = now();
    std::vector<medrun::Tensor> ours = sides.ours(*p.g, inputs, params);
    double t1 = now();
    sides.beforeTorch();
    medcheck::TorchGradients ref =
        medcheck::gradTorch(sides.artifact, *p.f, torchInputs, torchParams, floatType, {},
                            std::nullopt, sides.recomputeNow());
    if (!ref.recompute.empty())
      std::cout << "torch recompute  " << ref.recompute << "\n";
    sides.afterTorch(str("autograd of ", p.f->name));
    double t2 = now();

    std::vector<Comparison> cs;
    std::vector<std::string> notes;
    std::vector<bool> isGrad;
    for (size_t i = 0; i < ours.size(); ++i) {
      GradTarget t = gradTarget(p, i);
      torch::Tensor expected;
      std::string note;
      switch (t.kind) {
      case GradTarget::Output:
        expected = ref.outputs.at(t.index);
        break;
      case GradTarget::Param: {
        auto it = ref.params.find(t.param);
        if (it == ref.params.end())
          throw Error(str(p.g->name, ": returns '", outputName(*p.g, i), "', but ", p.f->name,
                          " reads no float parameter '", t.param, "'"));
        expected = it->second;
        if (!ref.paramReached.at(t.param))
          note = "loss does not depend on it, zero";
        break;
      }
      case GradTarget::Arg:
        expected = ref.inputs.at(t.index);
        if (!expected.defined())
          throw Error(str(p.g->name, ": returns '", outputName(*p.g, i), "' for an argument ",
                          "that is not a float tensor"));
        if (!paths.at(p.f->inputs.at(t.index)))
          note = "data, zero";
        break;
      }
      cs.push_back(compare(ours[i], expected));
      notes.push_back(note);
      isGrad.push_back(t.kind != GradTarget::Output);
    }
    std::vector<bool> ok = judge(cs, isGrad, tolerance, notes);
    for (size_t i = 0; i < ours.size(); ++i) {
      ++n.checked;
      n.failed += ok[i] ? 0 : 1;
      printLine(p.g->name, outputName(*p.g, i), ours[i].shape(), cs[i], ok[i], notes[i]);
    }
    std::cout << p.g->name << "  time  ours " << seconds(t1 - t0) << " (" << sides.oursWhere()
              << ")  torch autograd " << seconds(t2 - t1) << " (" << sides.torchWhere() << ")\n"
              << std::flush;
  }
  return n;
}

/// Bound on the rounding error of the two losses of a central difference, in ulps of |L|.
constexpr double kFdNoiseUlps = 64;

Counts checkFd(const Options &o, const medrun::Artifact &artifact,
               const std::vector<GradPair> &pairs, const medrun::TensorMap &params,
               double tolerance, size_t &elements) {
  Counts n;
  const medrun::Precision f64 = medrun::Precision::F64;
  medrun::TensorMap params64;
  for (const auto &[name, t] : params)
    params64[name] = toF64(t);
  for (const GradPair &p : pairs) {
    if (!fdSelectsAny(o, p))
      continue;
    std::vector<medrun::Tensor> inputs = drawInputs(*p.f, o.seed);
    for (medrun::Tensor &t : inputs)
      t = toF64(t);
    std::vector<bool> paths = differentiablePaths(*p.f);

    double t0 = now();
    std::vector<medrun::Tensor> ours = medrun::runCpu(artifact, *p.g, inputs, params64, f64);
    double loss0 = ours.at(0).at(0);
    size_t forwards = 0;
    auto loss = [&]() {
      ++forwards;
      return medrun::runCpu(artifact, *p.f, inputs, params64, f64).at(0).at(0);
    };

    for (size_t i = 0; i < ours.size(); ++i) {
      if (!fdSelected(o, p, i))
        continue;
      GradTarget t = gradTarget(p, i);
      const std::string name = outputName(*p.g, i);
      const medrun::Tensor &g = ours[i];
      medrun::Tensor *target = nullptr;
      if (t.kind == GradTarget::Param) {
        auto it = params64.find(t.param);
        if (it == params64.end())
          throw Error(str(p.g->name, ": returns '", name, "' for an unknown parameter"));
        target = &it->second;
      } else {
        target = &inputs.at(t.index);
      }
      if (target->shape() != g.shape() || target->dtype() != medrun::DType::F64)
        throw Error(str(p.g->name, ": '", name, "' is ", medrun::shapeStr(g.shape()),
                        ", the float tensor it differentiates ",
                        medrun::shapeStr(target->shape()), " ",
                        medrun::dtypeName(target->dtype())));

      if (t.kind == GradTarget::Arg && !paths.at(p.f->inputs.at(t.index))) {
        // Data (target, mask, pos_weight): no gradient by definition; ours must be zero.
        double maxAbs = 0;
        for (int64_t k = 0; k < g.numel(); ++k)
          maxAbs = std::max(maxAbs, std::abs(g.at(k)));
        bool ok = maxAbs == 0;
        ++n.checked;
        n.failed += ok ? 0 : 1;
        std::cout << p.g->name << "  " << name << "  " << medrun::shapeStr(g.shape())
                  << "  data, not perturbed  max_abs " << sci(maxAbs) << "  "
                  << (ok ? "ok" : "FAIL") << "\n"
                  << std::flush;
        continue;
      }

      std::vector<int64_t> idx =
          sampleIndices(target->numel(), o.fd, medrun::inputSeed(o.seed, p.f->name + "/" + name, 0));
      double maxAbs = 0, maxErr = 0, maxNoise = 0;
      bool finite = true;
      double *data = target->data<double>();
      for (int64_t k : idx) {
        double v = data[k];
        double h = 1e-6 * std::max(1.0, std::abs(v));
        double up = v + h, down = v - h;
        data[k] = up;
        double lUp = loss();
        data[k] = down;
        double lDown = loss();
        data[k] = v;
        double step = up - down;
        double fd = (lUp - lDown) / step;
        double analytic = g.at(k);
        double diff = std::abs(fd - analytic);
        // Rounding noise of the difference quotient: L(v±h) are each off by a few ulps of
        // |L|, divided by 2h. kFdNoiseUlps is generous: we see up to ~15 on the op tests,
        // 8 on MedNeXt-S.
        double noise = kFdNoiseUlps * std::numeric_limits<double>::epsilon() *
                       std::max({1.0, std::abs(loss0), std::abs(lUp), std::abs(lDown)}) / step;
        double scale = std::max(std::abs(fd), std::abs(analytic));
        double beyond = std::max(0.0, diff - noise);
        double err = beyond == 0 ? 0 : scale > 0 ? beyond / scale : INFINITY;
        if (!std::isfinite(fd) || !std::isfinite(analytic))
          finite = false;
        maxAbs = std::max(maxAbs, diff);
        maxNoise = std::max(maxNoise, noise);
        maxErr = std::max(maxErr, err);
      }
      elements += idx.size();
      bool ok = finite && maxErr <= tolerance;
      ++n.checked;
      n.failed += ok ? 0 : 1;
      std::cout << p.g->name << "  " << name << "  " << medrun::shapeStr(g.shape()) << "  fd "
                << idx.size() << " of " << target->numel() << "  max_abs "
                << (finite ? sci(maxAbs) : "nan") << "  noise " << sci(maxNoise) << "  rel "
                << (finite ? sci(maxErr) : "nan") << "  " << (ok ? "ok" : "FAIL") << "\n"
                << std::flush;
    }
    std::cout << p.g->name << "  time  fd " << seconds(now() - t0) << " (" << forwards
              << " forward runs of " << p.f->name << ", " << medrun::numThreads()
              << " threads)\n"
              << std::flush;
  }
  return n;
}

} // namespace medcheck
