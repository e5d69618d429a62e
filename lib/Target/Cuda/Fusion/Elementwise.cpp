//===- Elementwise.cpp - the `elementwise` fusion template ---------------------------===//
//
// A fusion of elementwise ops (and optimizer steps) runs as one vectorized kernel; each
// op's part is its scalar form from Elementwise.cpp or Optimizer.cpp.
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
  for (int id : inputs)
    requireFloat(id, "an input");
  for (int id : op.results)
    requireFloat(id, "a result");
  const std::vector<int64_t> &ys = shape(op.results.at(0));
  for (int id : op.results)
    if (shape(id) != ys)
      error("results of different shapes");
  // Expressions of the body's values: inputs as read, then one register per op result.
  std::vector<int> ids = op.results;
  ids.insert(ids.end(), inputs.begin(), inputs.end());
  const int64_t n = product(ys);
  const int lanes = lanesFor(ids);
  const Index ix = indexFor(n);
  OperandReads r{ys, lanes, ix};
  std::map<int, std::string> expr;
  std::vector<std::string> params;
  for (size_t j = 0; j < op.results.size(); ++j)
    params.push_back(out("y" + std::to_string(j)));
  for (size_t j = 0; j < inputs.size(); ++j) {
    params.push_back(in("x" + std::to_string(j)));
    expr[bodyInputs[j]] = read(r, inputs[j], "x" + std::to_string(j));
  }
  bool usesStatus = false;
  for (const Op &o : body.ops) {
    const std::string &kind = o.kind;
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
    const std::string e = ys.size() == 1 ? scalarExpr(kind, xs) : "";
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
