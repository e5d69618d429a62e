//===- ForwardCheck.cpp - each function's outputs against torch; --fusions ---------===//
#include "Check.h"

#include "medrun/InputRoles.h"

#include <iostream>

namespace medcheck {

std::vector<medrun::Tensor> drawInputs(const medrun::Function &fn, uint64_t seed) {
  std::vector<medrun::Tensor> inputs;
  medrun::randomInputs(fn, inputs, seed);
  return inputs;
}

Counts checkForward(const Options &o, const Sides &sides,
                    const std::vector<const medrun::Function *> &fns,
                    const medrun::TensorMap &params,
                    const std::map<std::string, torch::Tensor> &torchParams, double tolerance,
                    torch::ScalarType floatType) {
  Counts n;
  for (const medrun::Function *fn : fns) {
    std::vector<medrun::Tensor> inputs = drawInputs(*fn, o.seed);
    std::vector<torch::Tensor> torchInputs;
    for (const medrun::Tensor &t : inputs)
      torchInputs.push_back(sides.toTorch(t));

    sides.beforeOurs();
    double t0 = now();
    medrun::TensorMap updates;
    std::vector<medrun::Tensor> ours = sides.ours(*fn, inputs, params, &updates);
    double t1 = now();
    sides.beforeTorch();
    // State a forward pass sets (BatchNorm's running statistics) is compared as an output
    // (state.<name>); a training step's updates only by --train-steps, against torch::optim.
    // --against-f64: the reference in f64, then the low run in f32 (floatType).
    std::map<std::string, torch::Tensor> assigned, assignedLow;
    std::vector<torch::Tensor> ref =
        medcheck::runTorch(sides.artifact, *fn, torchInputs, torchParams,
                           o.againstF64 ? torch::kDouble : floatType,
                           fn->name == "train_step" ? nullptr : &assigned);
    sides.afterTorch(o.againstF64 ? fn->name + " in f64" : fn->name);
    double t2 = now();
    std::vector<torch::Tensor> low;
    if (o.againstF64) {
      sides.beforeTorch();
      low = medcheck::runTorch(sides.artifact, *fn, torchInputs, torchParams, floatType,
                               fn->name == "train_step" ? nullptr : &assignedLow);
      sides.afterTorch(fn->name);
      for (const auto &[name, x] : assignedLow)
        low.push_back(x);
    }
    double t3 = now();

    if (ours.size() != ref.size())
      throw Error(str(fn->name, ": medrun returned ", ours.size(), " outputs, torch ",
                      ref.size()));
    std::vector<std::string> names;
    for (size_t i = 0; i < ours.size(); ++i)
      names.push_back(outputName(*fn, i));
    for (const auto &[name, x] : assigned) {
      auto it = updates.find(name);
      if (it == updates.end())
        throw Error(str(fn->name, ": torch's mapping assigns '", name, "', medrun does not"));
      ours.push_back(it->second);
      ref.push_back(x);
      names.push_back("state." + name);
    }
    std::vector<Comparison> cs, lowCs;
    std::vector<bool> isGrad;
    for (size_t i = 0; i < ours.size(); ++i) {
      cs.push_back(compare(ours[i], ref[i]));
      if (o.againstF64)
        lowCs.push_back(compareTorch(low.at(i), ref[i]));
      isGrad.push_back(names[i].rfind("grad.", 0) == 0);
    }
    std::vector<std::string> notes(ours.size());
    std::vector<bool> ok =
        o.againstF64 ? judgeByRatio(cs, lowCs, isGrad, tolerance, o.f64Ratio, notes)
                     : judge(cs, isGrad, tolerance, notes);
    for (size_t i = 0; i < ours.size(); ++i) {
      ++n.checked;
      n.failed += ok[i] ? 0 : 1;
      printLine(fn->name, names[i], ours[i].shape(), cs[i], ok[i], notes[i]);
    }
    std::cout << fn->name << "  time  ours " << seconds(t1 - t0) << " (" << sides.oursWhere()
              << ")  torch " << seconds(t2 - t1);
    if (o.againstF64)
      std::cout << " (f64), " << seconds(t3 - t2) << " (f32)";
    std::cout << " (" << sides.torchWhere() << ")\n" << std::flush;
  }
  return n;
}

int checkFusions(const Options &o, const medrun::Artifact &artifact, torch::Device device) {
  const bool f64 = o.precision == medrun::Precision::F64;
  const double tolerance = o.tolerance > 0 ? o.tolerance : f64 ? 1e-10 : 1e-5;
  if (artifact.fusions.empty()) {
    std::cout << artifact.path << ": no fusion bodies to check (compiled with "
              << "--disable-pass=med-form-fusions and med-form-stencil-fusions, or nothing to "
                 "fuse)\n";
    return 1;
  }
  size_t checked = 0, failed = 0;
  for (size_t k = 0; k < artifact.fusions.size(); ++k) {
    const medrun::Function &body = *artifact.fusions[k];
    std::vector<medrun::Tensor> inputs = drawInputs(body, o.seed + k);
    std::vector<medrun::Tensor> ours =
        medrun::runCpu(artifact, body, inputs, {}, f64 ? medrun::Precision::F64 : medrun::Precision::F32);
    std::vector<torch::Tensor> torchInputs;
    for (const medrun::Tensor &t : inputs)
      torchInputs.push_back(medcheck::toTorch(t).to(device));
    std::vector<torch::Tensor> ref = medcheck::runTorch(artifact, body, torchInputs, {},
                                                        f64 ? torch::kDouble : torch::kFloat);
    for (size_t i = 0; i < ours.size(); ++i) {
      Comparison c = compare(ours[i], ref.at(i));
      const bool ok = c.problem.empty() && c.rel <= tolerance;
      ++checked;
      failed += !ok;
      printLine(str("fusion ", k, "  ", body.fusionTemplate, "  ", body.ops.size(), " ops"),
                str("out", i), body.values.at(body.outputs[i]).shape, c, ok, "");
    }
  }
  std::cout << artifact.fusions.size() << " fusion bodies, " << checked << " outputs checked, "
            << failed << " failed (tolerance " << sci(tolerance) << ", precision "
            << (f64 ? "f64" : "f32") << ")\n";
  return failed ? 1 : 0;
}

} // namespace medcheck
