//===- Fusion/Reduce.cpp - the `reduce` template: sibling reductions in one pass ------===//
//
// Reductions of one value over the same innermost axes (med-form-reduce-fusions: a volume's
// mean, minimum and maximum for a contrast or gamma transform) run as one split sum
// (KernelBuilder.cpp's splitReduce: kernels/reduce.cuh's splitSumTerms with a generated term
// functor that updates an accumulator each): the value is read once, and each result has
// the bits its own reduce kernel gives.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

void FunctionGen::reduceFusion(const Op &op, const medrun::Function &body) {
  const std::vector<int> &inputs = op.operand("inputs");
  if (inputs.size() != 1 || body.inputs.size() != 1 || body.ops.size() < 2 ||
      body.outputs.size() != op.results.size())
    error("the reduce fusion's body is not reductions of one input");
  const int x = inputs[0];
  requireFloat(x, "the input");
  const std::vector<int64_t> axes = body.ops[0].intsAttr("axes");
  std::vector<Reduction> rs;
  for (const Op &r : body.ops) {
    if (r.kind != "reduce" || r.single("input") != body.inputs[0] || r.intsAttr("axes") != axes)
      error("the reduce fusion's body is not reductions of its input over the same axes");
    auto at = std::find(body.outputs.begin(), body.outputs.end(), r.results.at(0));
    if (at == body.outputs.end())
      error("a reduction of the fusion is not one of its results");
    const int y = op.results[at - body.outputs.begin()];
    requireFloat(y, "a result");
    rs.push_back({r.strAttr("kind"), y});
  }
  if (type(x).numel() == 0 || !splitReduce(op, x, axes, rs))
    error("the reductions do not reduce the input's innermost axes");
}

void FunctionGen::registerReduceFusion(FusionTemplates &t) {
  t["reduce"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.reduceFusion(op, body);
  };
}

} // namespace mlir::med::cuda
