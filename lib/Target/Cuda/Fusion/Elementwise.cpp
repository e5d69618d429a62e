//===- Elementwise.cpp - the `elementwise` fusion template ---------------------------===//
//
// A fusion of elementwise ops (and optimizer steps, random numbers, dropout) runs as one
// vectorized kernel; each op's part is its scalar form from Elementwise.cpp or Optimizer.cpp,
// or its draw from Random.cpp.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

/// The `elementwise` template: one vectorized kernel over the results' shape computing the
/// body's scalar expressions in f32 registers; inputs read as read() reads them, each
/// result stored once in its storage type.
void FunctionGen::elementwiseFusion(const Op &op, const medrun::Function &body) {
  const std::vector<int> &inputs = op.operand("inputs");
  const std::vector<int> &bodyInputs = body.inputs, &bodyOutputs = body.outputs;
  if (bodyInputs.size() != inputs.size() || bodyOutputs.size() != op.results.size())
    error("the fusion's inputs or results do not match its body");
  // What each input is to the body: elements to read, or only a generator's key or shape.
  std::vector<bool> readInput(inputs.size(), false), keyInput(inputs.size(), false);
  for (const Op &o : body.ops)
    for (const auto &[name, ids] : o.operands)
      for (int id : ids)
        for (size_t j = 0; j < bodyInputs.size(); ++j)
          if (bodyInputs[j] == id) {
            if ((o.kind == "random" || o.kind == "dropout") && name == "key")
              keyInput[j] = true;
            else if (o.kind != "random")
              readInput[j] = true;
          }
  for (size_t j = 0; j < inputs.size(); ++j)
    if (readInput[j])
      requireFloat(inputs[j], "an input");
    else if (keyInput[j] && (type(inputs[j]).dtype != DType::I64 || type(inputs[j]).numel() != 1))
      error("a random key must be an i64 scalar");
  for (int id : op.results)
    requireFloat(id, "a result");
  const std::vector<int64_t> &ys = shape(op.results.at(0));
  for (int id : op.results)
    if (shape(id) != ys)
      error("results of different shapes");
  // Expressions of the body's values: inputs as read, then one register per op result.
  std::vector<int> ids = op.results;
  for (size_t j = 0; j < inputs.size(); ++j)
    if (readInput[j] || keyInput[j])
      ids.push_back(inputs[j]);
  const int64_t n = product(ys);
  const int lanes = lanesFor(ids);
  const Index ix = indexFor(n);
  OperandReads r{ys, lanes, ix};
  std::map<int, std::string> expr;
  std::vector<std::string> params;
  for (size_t j = 0; j < op.results.size(); ++j)
    params.push_back(out("y" + std::to_string(j)));
  for (size_t j = 0; j < inputs.size(); ++j) {
    const std::string name = "x" + std::to_string(j);
    if (readInput[j]) {
      params.push_back(in(name));
      expr[bodyInputs[j]] = read(r, inputs[j], name);
    } else if (keyInput[j]) {
      params.push_back(in(name, "i64"));
      expr[bodyInputs[j]] = name + "[0]";
    }
  }
  bool usesStatus = false;
  for (const Op &o : body.ops) {
    const std::string &kind = o.kind;
    if (kind == "constant") { // a scalar literal (med-form-fusions copies them in)
      const std::vector<double> v = o.floatsAttr("value");
      if (v.size() != 1 || !body.values.at(o.results.at(0)).shape.empty())
        error("a constant in a fusion body must be a scalar");
      expr[o.results[0]] = flt(v[0]);
      continue;
    }
    if (kind == "random") { // drawn by the element's own counter: the kernel's index i
      const std::string t = "t" + std::to_string(o.results.at(0));
      r.perElement += "  float " + t + ";\n" +
                      randomDraw(o, ys, expr.at(o.single("key")), "i", t);
      expr[o.results[0]] = t;
      continue;
    }
    if (kind == "dropout") { // masked by the element's own counter, as random's draws
      const std::string t = "t" + std::to_string(o.results.at(0));
      r.perElement += "  float " + t + ";\n" +
                      dropoutApply(o, ys, expr.at(o.single("key")), "i",
                                   expr.at(o.single("input")), t);
      expr[o.results[0]] = t;
      continue;
    }
    std::vector<std::string> xs;
    for (const char *name : scalarOperands(kind))
      xs.push_back(expr.at(o.single(name)));
    std::vector<std::string> ys;
    for (int id : o.results) {
      ys.push_back("t" + std::to_string(id));
      expr[id] = ys.back();
    }
    const std::string statement = optimizerStatement(kind, o, xs, ys);
    if (!statement.empty()) {
      r.perElement += "  float " + llvm::join(ys, ", ") + ";\n" + statement;
      usesStatus = usesStatus || usesIdentifier(statement, "status");
      continue;
    }
    const std::string e = ys.size() == 1 ? scalarExpr(kind, xs, &o) : "";
    if (e.empty())
      error("'med." + kind + "' in a fusion body has no scalar form");
    r.perElement += "  const float " + ys[0] + " = " + e + ";\n";
  }
  // Writing into the resident state: nothing once an earlier op of the step has failed.
  const bool guarded = std::any_of(op.results.begin(), op.results.end(),
                                   [&](int id) { return inPlace.count(id) != 0; });
  if (guarded) {
    r.perThread = "  if (status[0] != 0u) return;\n" + r.perThread;
    usesStatus = true;
  }
  if (usesStatus) { // after the results and inputs: the vectors index params by name
    params.push_back(out("status", "unsigned"));
    ids.push_back(status());
  }
  std::vector<std::string> stores;
  for (size_t j = 0; j < op.results.size(); ++j) {
    stores.push_back("y" + std::to_string(j));
    r.perElement += "  y" + std::to_string(j) + "_v[k] = " + expr.at(bodyOutputs[j]) + ";\n";
  }
  vectorized(op, "fusion", params, ids, n, lanes, ix, r.loads, stores, r.perThread,
             r.perElement);
}

void FunctionGen::registerElementwiseFusion(FusionTemplates &t) {
  t["elementwise"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.elementwiseFusion(op, body);
  };
}

} // namespace mlir::med::cuda
