//===- Fusion/Stencil.cpp - the `stencil` and `stencil_grad` templates ---------------===//
//
// A shift-sum, optionally with med.group_norm_stats of its result (med-form-stencil-fusions).
// The shift-sum runs the tiled stencil template (kernels/stencil.cuh's shiftSumTile, tiles
// chosen by Stencil.cpp); where its output tiles are chunks of the statistics
// (medrun/NormStats.h: the tile's extent along each axis is the chunk's, or both cover the
// axis), the template reduces each tile's f32 outputs in registers to the chunk's pivot and
// deviations, and the generated epilogue functor stores its (pivot, dev, M2); the merge
// kernel of Norm.cpp combines them in the fixed tree. Where they are not (a tile shrunk to
// fit shared memory), the statistics run their own kernels over the stored output.
//
// With a residual instead (the shift-sum's result plus another input, the input gradient of a
// residual block: med-form-stencil-fusions), the kernel (streamed or tiled) adds the addend
// in f32 as it stores each output.
//
// `stencil_grad`: a shift-sum's weight gradient and the sum of the same output gradient over
// N, D, H, W (its bias gradient). The streamed weight gradient sums dy as it loads it (one
// read of dy fewer, no reduction kernels); where it does not apply, the staged weight
// gradient and a split sum run one after the other.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"
#include "medrun/NormStats.h"

namespace mlir::med::cuda {

// The function's value of body value `id` of fusion `op`: one of its inputs or results.
int FunctionGen::fusionValue(const Op &op, const medrun::Function &body, int id) {
  const std::vector<int> &inputs = op.operand("inputs");
  if (body.inputs.size() != inputs.size() || body.outputs.size() != op.results.size())
    error("the fusion's body does not match its inputs and results");
  for (size_t j = 0; j < body.inputs.size(); ++j)
    if (body.inputs[j] == id)
      return inputs[j];
  for (size_t j = 0; j < body.outputs.size(); ++j)
    if (body.outputs[j] == id)
      return op.results[j];
  error("a body value the template needs is neither an input nor a result of the fusion");
}

void FunctionGen::stencilFusion(const Op &op, const medrun::Function &body) {
  const Op *stencil = body.role("stencil"), *statistics = body.role("statistics");
  const Op *residual = body.role("residual");
  if (!stencil || stencil->kind != "shift_sum")
    error("the stencil fusion's body is not a shift-sum with optional statistics or residual");
  auto outer = [&](int id) { return fusionValue(op, body, id); };
  const Op &sum = *stencil;
  std::optional<int> bias;
  if (std::optional<int> b = sum.optional("bias"))
    bias = outer(*b);
  const bool mirrored = sum.boolAttr("mirrored");
  const int x = outer(sum.single("input")), w = outer(sum.single("weight"));
  if (residual) {
    // The shift-sum plus the addend, added in f32 as each output is stored (the streamed or
    // the tiled kernel): the shift-sum alone is never rounded to the result's type.
    if (residual->kind != "add" || statistics)
      error("the stencil fusion's residual is not the add of its shift-sum and an input");
    const int terms[2] = {residual->single("lhs"), residual->single("rhs")};
    if ((terms[0] == sum.results.at(0)) == (terms[1] == sum.results.at(0)))
      error("the stencil fusion's residual is not the add of its shift-sum and an input");
    const int y = outer(residual->results.at(0));
    const int g = outer(terms[0] == sum.results.at(0) ? terms[1] : terms[0]);
    requireFloat(g, "the addend");
    if (shape(g) != shape(y))
      error("the residual's addend does not have the shift-sum's shape");
    if (shiftSumTile(op, mirrored, x, w, bias, y, -1, g) == TileEmitted::None)
      error("the shift-sum does not fit the stencil template");
    return;
  }
  const int y = outer(sum.results.at(0));
  if (!statistics) {
    if (shiftSumTile(op, mirrored, x, w, bias, y, -1) == TileEmitted::None)
      error("the shift-sum does not fit the stencil template");
    return;
  }
  const Op &stats = *statistics;
  if (stats.kind != "group_norm_stats" || stats.single("input") != sum.results.at(0))
    error("the stencil fusion's epilogue is not the statistics of its shift-sum");
  const int mean = outer(stats.results.at(0)), rstd = outer(stats.results.at(1));
  requireFloat(mean, "the mean");
  requireFloat(rstd, "the rstd");
  const int64_t groups = stats.intAttr("groups");
  const double eps = stats.floatAttr("epsilon");
  const NCS d = ncs(y);
  if (groups < 1 || d.c % groups)
    error("channels do not split into groups");
  const int64_t chunks = d.n * d.c * medrun::normstats::chunksPerPlane(
                                          medrun::normstats::planeOf(shape(y)));
  const int parts = scratch(std::max<int64_t>(chunks, 1) * 3 * 4);
  switch (shiftSumTile(op, mirrored, x, w, bias, y, parts)) {
  case TileEmitted::None:
    error("the shift-sum does not fit the stencil template");
  case TileEmitted::WithStatistics:
    mergeStats(op, parts, d.n * groups, d.c / groups, shape(y), eps, mean, rstd);
    return;
  case TileEmitted::Plain:
    groupStats(op, y, groups, eps, mean, rstd);
    return;
  }
}

void FunctionGen::stencilGradFusion(const Op &op, const medrun::Function &body) {
  const Op *gradWeight = body.role("grad_weight"), *biasGrad = body.role("bias_grad");
  if (op.results.size() != 2 || !gradWeight || gradWeight->kind != "shift_sum_grad_weight" ||
      !biasGrad || biasGrad->kind != "reduce" ||
      biasGrad->single("input") != gradWeight->single("grad_output"))
    error("the stencil_grad fusion's body is not a shift-sum's weight gradient and the sum of "
          "its output gradient");
  auto outer = [&](int id) { return fusionValue(op, body, id); };
  shiftSumGradWeight(op, outer(gradWeight->single("input")),
                     outer(gradWeight->single("grad_output")), outer(gradWeight->results.at(0)),
                     outer(biasGrad->results.at(0)));
}

void FunctionGen::registerStencilFusion(FusionTemplates &t) {
  t["stencil"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.stencilFusion(op, body);
  };
  t["stencil_grad"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.stencilGradFusion(op, body);
  };
}

} // namespace mlir::med::cuda
