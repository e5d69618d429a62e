//===- Reduce.cpp - reduce and the gradient of a max/min reduction -------------------===//
//
// Sums and extrema over axes run as split sums (KernelBuilder.cpp) or one block per output.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

FunctionGen::ReduceAxes FunctionGen::reduceAxes(const Op &op, const std::vector<int64_t> &xs) const {
  const int64_t r = static_cast<int64_t>(xs.size());
  std::vector<bool> reduced(r, false);
  for (int64_t a : op.intsAttr("axes")) {
    int64_t axis = a < 0 ? a + r : a;
    if (axis < 0 || axis >= r)
      error("axis out of range");
    reduced[axis] = true;
  }
  ReduceAxes out;
  std::vector<int64_t> st = contiguousStrides(xs);
  for (int64_t i = 0; i < r; ++i) {
    (reduced[i] ? out.redSize : out.keptSize).push_back(xs[i]);
    (reduced[i] ? out.redStride : out.keptStride).push_back(st[i]);
  }
  return out;
}

void FunctionGen::reduce(const Op &op) {
  int x = op.single("input"), y = result(op);
  requireFloat(x, "the input");
  requireFloat(y, "the result");
  const auto &xs = shape(x);
  std::string kind = op.strAttr("kind");
  const ReduceAxes ax = reduceAxes(op, xs);
  const auto &keptSize = ax.keptSize, &keptStride = ax.keptStride, &redSize = ax.redSize,
             &redStride = ax.redStride;
  const int64_t outs = product(keptSize), count = product(redSize);
  if (type(y).numel() != outs)
    error("the result does not match the input reduced over the axes");
  if (outs == 0)
    return;
  if (count == 0) { // torch: sum 0, mean NaN; max/min: NaN
    elementwise(op, "reduce_empty", {out("y")}, {y}, outs,
                "  y[i] = " + flt(kind == "sum" ? 0.0 : NAN) + ";\n");
    return;
  }
  const int block = blockFor(count);
  std::string init = kind == "max" ? flt(-INFINITY) : kind == "min" ? flt(INFINITY) : "0.0f";
  std::string comb = kind == "max" ? "maxNaN(acc, v)" : kind == "min" ? "minNaN(acc, v)" : "acc + v";
  std::string fn = kind == "max" ? "Max()" : kind == "min" ? "Min()" : "Add()";
  if (kind != "sum" && kind != "mean" && kind != "max" && kind != "min")
    error("unknown reduction kind '" + kind + "'");
  if (splitReduce(op, x, op.intsAttr("axes"), {{kind, y}}))
    return;
  // Many outputs of a few terms each (a sum over a handful of channels): one thread per
  // output, its terms in order, rather than a block per output that leaves most lanes idle.
  if (count <= 32 && outs >= 4096) {
    std::string rows = decompose("i", keptSize, "k") +
                       "  const auto* base = x + " + offsetExpr("k", keptStride) + ";\n"
                       "  float acc = " + init + ";\n"
                       "  for (i64 j = 0; j < " + num(count) + "; ++j) {\n" +
                       decompose("j", redSize, "r") +
                       "    const float v = base[" + offsetExpr("r", redStride) + "];\n"
                       "    acc = " + comb + ";\n  }\n";
    rows += kind == "mean" ? "  y[i] = acc / (float)" + num(count) + ";\n" : "  y[i] = acc;\n";
    elementwise(op, "reduce_" + kind + "_rows", {out("y"), in("x")}, {y, x}, outs, rows);
    return;
  }
  // Few outputs over many terms (bias gradients: a channel over N·D·H·W voxels) would leave
  // most of the GPU idle with one block per output: each output's terms are then split in
  // `parts` fixed chunks, one block each, whose partials a second kernel combines in a
  // fixed tree. Either way the order of the sum is fixed: the same bits on every run.
  const int64_t parts = outs < 512 && count >= (1 << 16)
                            ? std::min<int64_t>(count / 8192, std::max<int64_t>(1, 2048 / outs))
                            : 1;
  const int64_t chunk = (count + parts - 1) / parts;
  std::string body = "  __shared__ float sh[" + std::to_string(block) + "];\n";
  if (parts > 1)
    body += "  const i64 part = o % " + num(parts) + ";\n"
            "  const i64 q = o / " + num(parts) + ";\n" + decompose("q", keptSize, "k") +
            "  const i64 begin = part * " + num(chunk) + ";\n"
            "  const i64 end = begin + " + num(chunk) + " < " + num(count) + " ? begin + " +
            num(chunk) + " : " + num(count) + ";\n";
  else
    body += decompose("o", keptSize, "k") + "  const i64 begin = 0, end = " + num(count) + ";\n";
  // Reduced axes that are one contiguous run (a whole volume per channel) index it
  // directly: no 64-bit divisions per element.
  const bool run = contiguousStrides(redSize) == redStride;
  body += "  const auto* base = x + " + offsetExpr("k", keptStride) + ";\n"
          "  float acc = " + init + ";\n"
          "  for (i64 j = begin + t; j < end; j += " + std::to_string(block) + ") {\n" +
          (run ? "    const float v = base[j];\n"
               : decompose("j", redSize, "r") +
                     "    const float v = base[" + offsetExpr("r", redStride) + "];\n") +
          "    acc = " + comb + ";\n  }\n"
          "  acc = blockReduce(acc, sh, " + fn + ");\n";
  std::string finish = kind == "mean" ? "  if (t == 0) y[o] = acc / (float)" + num(count) + ";\n"
                                      : "  if (t == 0) y[o] = acc;\n";
  if (parts == 1) {
    perBlock(op, "reduce_" + kind, {out("y"), in("x")}, {y, x}, outs, block, body + finish);
    return;
  }
  int partial = scratch(outs * parts * 4);
  perBlock(op, "reduce_" + kind + "_parts", {out("p"), in("x")}, {partial, x}, outs * parts,
           block, body + "  if (t == 0) p[o] = acc;\n");
  const int block2 = blockFor(parts);
  std::string combine = "  __shared__ float sh[" + std::to_string(block2) + "];\n"
                        "  float acc = " + init + ";\n"
                        "  for (i64 j = t; j < " + num(parts) + "; j += " + std::to_string(block2) +
                        ") {\n    const float v = p[o * " + num(parts) + " + j];\n"
                        "    acc = " + comb + ";\n  }\n"
                        "  acc = blockReduce(acc, sh, " + fn + ");\n";
  perBlock(op, "reduce_" + kind + "_combine", {out("y"), in("p")}, {y, partial}, outs, block2,
           combine + finish);
}

/// torch.amax/amin backward: the gradient shared evenly among the elements equal to the
/// extremum. One block per output: count the ties, then write every element.
void FunctionGen::reduceExtremumGrad(const Op &op) {
  int x = op.single("input"), m = op.single("extremum"), dy = op.single("grad_output");
  int dx = result(op);
  for (int id : {x, m, dy, dx})
    requireFloat(id, "an operand");
  const auto &xs = shape(x);
  const ReduceAxes ax = reduceAxes(op, xs);
  const auto &keptSize = ax.keptSize, &keptStride = ax.keptStride, &redSize = ax.redSize,
             &redStride = ax.redStride;
  const int64_t outs = product(keptSize), count = product(redSize);
  if (type(m).numel() != outs || type(dy).numel() != outs || shape(dx) != xs)
    error("extremum, output gradient and result do not fit the input");
  if (type(x).numel() == 0)
    return;
  const int block = blockFor(count);
  std::string body = "  __shared__ float sh[" + std::to_string(block) + "];\n";
  body += decompose("o", keptSize, "k");
  body += "  const i64 base = " + offsetExpr("k", keptStride) + ";\n"
          "  const float mx = m[o];\n"
          "  float ties = 0.0f;\n"
          "  for (i64 j = t; j < " + num(count) + "; j += " + std::to_string(block) + ") {\n" +
          decompose("j", redSize, "r") +
          "    ties += x[base + " + offsetExpr("r", redStride) + "] == mx ? 1.0f : 0.0f;\n  }\n"
          "  ties = blockSum(ties, sh);\n"
          "  const float share = dy[o] / ties;\n"
          "  for (i64 j = t; j < " + num(count) + "; j += " + std::to_string(block) + ") {\n" +
          decompose("j", redSize, "r") +
          "    const i64 i = base + " + offsetExpr("r", redStride) + ";\n"
          "    dx[i] = share * (x[i] == mx ? 1.0f : 0.0f);\n  }\n";
  perBlock(op, "reduce_extremum_grad", {out("dx"), in("x"), in("m"), in("dy")},
           {dx, x, m, dy}, outs, block, body);
}

/// Σ x² over every operand: each operand in fixed chunks, one block per chunk, into
/// partials; one block sums them in a fixed tree and adds the operand's sum to the result
/// (the operands in order). The same bits every run; kernels depend on sizes only, so
/// operands of one size share theirs.
void FunctionGen::sumSquares(const Op &op) {
  int y = result(op);
  requireFloat(y, "the result");
  constexpr int64_t kChunk = 16384;
  bool first = true;
  for (int x : op.operand("inputs")) {
    requireFloat(x, "an input");
    const int64_t n = type(x).numel(), chunks = std::max<int64_t>(1, (n + kChunk - 1) / kChunk);
    int partial = scratch(chunks * 4);
    std::string body = "  __shared__ float sh[" + std::to_string(kBlock) + "];\n"
                       "  const i64 begin = o * " + num(kChunk) + ";\n"
                       "  const i64 end = begin + " + num(kChunk) + " < " + num(n) + " ? begin + " +
                       num(kChunk) + " : " + num(n) + ";\n"
                       "  float acc = 0.0f;\n"
                       "  for (i64 j = begin + t; j < end; j += " + std::to_string(kBlock) + ") {\n"
                       "    const float v = (float)x[j];\n    acc += v * v;\n  }\n"
                       "  acc = blockReduce(acc, sh, Add());\n"
                       "  if (t == 0) p[o] = acc;\n";
    perBlock(op, "sum_squares_parts", {out("p"), in("x", elemType(x))}, {partial, x}, chunks,
             kBlock, body);
    const int block = blockFor(chunks);
    std::string combine = "  __shared__ float sh[" + std::to_string(block) + "];\n"
                          "  float acc = 0.0f;\n"
                          "  for (i64 j = t; j < " + num(chunks) + "; j += " +
                          std::to_string(block) + ") acc += p[j];\n"
                          "  acc = blockReduce(acc, sh, Add());\n" +
                          (first ? "  if (t == 0) y[0] = acc;\n" : "  if (t == 0) y[0] += acc;\n");
    perBlock(op, first ? "sum_squares_first" : "sum_squares_add", {out("y"), in("p")},
             {y, partial}, 1, block, combine);
    first = false;
  }
}

void FunctionGen::registerReduce(Emitters &e) {
  e["sum_squares"] = [](FunctionGen &g, const Op &op) { g.sumSquares(op); };
  e["reduce"] = [](FunctionGen &g, const Op &op) { g.reduce(op); };
  e["reduce_extremum_grad"] = [](FunctionGen &g, const Op &op) { g.reduceExtremumGrad(op); };
}

} // namespace mlir::med::cuda
