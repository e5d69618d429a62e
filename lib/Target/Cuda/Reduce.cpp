//===- Reduce.cpp - reduce and the gradient of a max/min reduction -------------------===//
//
// Sums and extrema over axes run as split sums (KernelBuilder.cpp), one thread per output or
// one block per output: the templates of kernels/reduce.cuh. This file chooses the mapping
// and the template's parameters (the kind, block and part sizes, and the shape struct of the
// kept and reduced axes) and emits the kernels that instantiate it.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

namespace {
// The reduction kernels (kernels/reduce.cuh), globals of each (guarded).
const std::string kReduceLibrary = kernelLibrary("reduce.cuh");

/// reduce.cuh's ReduceKind of a reduction kind (sum, mean, max, min).
std::string reduceKind(const std::string &kind) {
  return kind == "max" ? "ReduceKind::Max" : kind == "min" ? "ReduceKind::Min"
                         : kind == "mean"                  ? "ReduceKind::Mean"
                                                           : "ReduceKind::Sum";
}
} // namespace

/// The shape struct `name` of a reduction over `ax` (reduce.cuh): its outputs and terms, and
/// the offsets of an output's first term and of each term from it.
std::string FunctionGen::reduceShape(const std::string &name, const ReduceAxes &ax) {
  return "struct " + name + " {\n  static constexpr i64 outs = " + num(product(ax.keptSize)) +
         ", count = " + num(product(ax.redSize)) + ";\n  static constexpr bool run = " +
         (contiguousStrides(ax.redSize) == ax.redStride ? "true" : "false") +
         ";\n  static i64 kept(const i64 o) {\n" + decompose("o", ax.keptSize, "k") +
         "    return " + offsetExpr("k", ax.keptStride) + ";\n  }\n  static i64 term(const i64 j) {\n" +
         decompose("j", ax.redSize, "r") + "    return " + offsetExpr("r", ax.redStride) +
         ";\n  }\n};\n";
}

FunctionGen::ReduceAxes FunctionGen::reduceAxes(const std::vector<int64_t> &axes,
                                                const std::vector<int64_t> &xs) const {
  const int64_t r = static_cast<int64_t>(xs.size());
  std::vector<bool> reduced(r, false);
  for (int64_t a : axes) {
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
  reduce(op, op.single("input"), result(op), op.strAttr("kind"), op.intsAttr("axes"));
}

void FunctionGen::reduce(const Op &op, int x, int y, const std::string &kind,
                         const std::vector<int64_t> &axes) {
  requireFloat(x, "the input");
  requireFloat(y, "the result");
  const auto &xs = shape(x);
  const ReduceAxes ax = reduceAxes(axes, xs);
  const int64_t outs = product(ax.keptSize), count = product(ax.redSize);
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
  if (kind != "sum" && kind != "mean" && kind != "max" && kind != "min")
    error("unknown reduction kind '" + kind + "'");
  if (splitReduce(op, x, axes, {{kind, y}}))
    return;
  const std::string K = reduceKind(kind), B = std::to_string(block);
  // Many outputs of a few terms each (a sum over a handful of channels): one thread per
  // output, its terms in order, rather than a block per output that leaves most lanes idle.
  if (count <= 32 && outs >= 4096) {
    elementwise(op, "reduce_" + kind + "_rows", {out("y"), in("x")}, {y, x}, outs,
                "  reduceRows<KNAME_shape, " + K + ">(i, y, x);\n",
                kReduceLibrary + reduceShape("KNAME_shape", ax));
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
  const std::string globals = kReduceLibrary + reduceShape("KNAME_shape", ax);
  if (parts == 1) {
    perBlock(op, "reduce_" + kind, {out("y"), in("x")}, {y, x}, outs, block,
             "  reduceBlock<KNAME_shape, " + K + ", " + B + ", 1ll, " + num(count) +
                 ">(o, t, y, x);\n",
             globals);
    return;
  }
  int partial = scratch(outs * parts * 4);
  perBlock(op, "reduce_" + kind + "_parts", {out("p"), in("x")}, {partial, x}, outs * parts,
           block,
           "  reduceBlock<KNAME_shape, " + K + ", " + B + ", " + num(parts) + ", " + num(chunk) +
               ">(o, t, p, x);\n",
           globals);
  perBlock(op, "reduce_" + kind + "_combine", {out("y"), in("p")}, {y, partial}, outs,
           blockFor(parts),
           "  reduceCombine<" + K + ", " + std::to_string(blockFor(parts)) + ", " + num(parts) +
               ", " + num(count) + ">(o, t, y, p);\n",
           kReduceLibrary);
}

/// torch.amax/amin backward: the gradient shared evenly among the elements equal to the
/// extremum. One block per output: count the ties, then write every element.
void FunctionGen::reduceExtremumGrad(const Op &op) {
  int x = op.single("input"), m = op.single("extremum"), dy = op.single("grad_output");
  int dx = result(op);
  for (int id : {x, m, dy, dx})
    requireFloat(id, "an operand");
  const auto &xs = shape(x);
  const ReduceAxes ax = reduceAxes(op.intsAttr("axes"), xs);
  const int64_t outs = product(ax.keptSize), count = product(ax.redSize);
  if (type(m).numel() != outs || type(dy).numel() != outs || shape(dx) != xs)
    error("extremum, output gradient and result do not fit the input");
  if (type(x).numel() == 0)
    return;
  const int block = blockFor(count);
  perBlock(op, "reduce_extremum_grad", {out("dx"), in("x"), in("m"), in("dy")},
           {dx, x, m, dy}, outs, block,
           "  reduceExtremumGrad<KNAME_shape, " + std::to_string(block) +
               ">(o, t, dx, x, m, dy);\n",
           kReduceLibrary + reduceShape("KNAME_shape", ax));
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
    perBlock(op, "sum_squares_parts", {out("p"), in("x", elemType(x))}, {partial, x}, chunks,
             kBlock,
             "  sumSquaresPart<" + num(n) + ", " + num(kChunk) + ", " + std::to_string(kBlock) +
                 ">(o, t, p, x);\n",
             kReduceLibrary);
    const int block = blockFor(chunks);
    perBlock(op, first ? "sum_squares_first" : "sum_squares_add", {out("y"), in("p")},
             {y, partial}, 1, block,
             "  sumSquaresTotal<" + num(chunks) + ", " + std::to_string(block) + ", " +
                 (first ? "true" : "false") + ">(t, y, p);\n",
             kReduceLibrary);
    first = false;
  }
}

void FunctionGen::registerReduce(Emitters &e) {
  e[OpKind::SumSquares] = [](FunctionGen &g, const Op &op) { g.sumSquares(op); };
  e[OpKind::Reduce] = [](FunctionGen &g, const Op &op) { g.reduce(op); };
  e[OpKind::ReduceExtremumGrad] = [](FunctionGen &g, const Op &op) { g.reduceExtremumGrad(op); };
}

} // namespace mlir::med::cuda
