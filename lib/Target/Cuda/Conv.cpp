//===- Conv.cpp - direct convolutions and their weight gradients ---------------------===//
//
// One thread per output element; each sums its terms in the CPU kernels' order (input
// channel, then kd, kh, kw). The weight gradient is a split sum per weight element; the
// depthwise one a split reduction over spatial parts (depthwiseGradWeight: the template of
// kernels/depthwise.cuh).
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"
#include "medrun/ConvView.h"

namespace mlir::med::cuda {

// A three-entry attribute of the convolution `v` (ConvView: a shift-sum's are derived).
static std::array<int64_t, 3> three(const medrun::Shape &v, const char *name) {
  if (v.size() != 3)
    throw CodegenError{std::string("'") + name + "' needs 3 entries"};
  return {v[0], v[1], v[2]};
}

// conv3d, conv3d_transpose, and a shift_sum whose kernel is too large for Stencil.cpp's
// tiles (the depthwise convolution of medrun/ConvView.h: the same kernel as that conv3d or,
// mirrored, conv3d_transpose).
void FunctionGen::conv(const Op &op) {
  const medrun::ConvView view = *medrun::convView(fn, op);
  const bool transposed = view.kind == "conv3d_transpose";
  if (transposed && transposedParity(op))
    return; // a strided depthwise one: its parity classes' stencils (Stencil.cpp)
  int x = op.single("input"), w = op.single("weight"), y = result(op);
  std::optional<int> b = op.optional("bias");
  requireFloat(x, "the input");
  requireFloat(w, "the weight");
  requireFloat(y, "the result");
  if (b)
    requireFloat(*b, "the bias");
  const auto &xs = shape(x), &ws = shape(w), &ys = shape(y);
  if (xs.size() != 5 || ws.size() != 5 || ys.size() != 5)
    error("expected rank-5 input, weight and result");
  auto s = three(view.stride, "stride"), p = three(view.padding, "padding"),
       d = three(view.dilation, "dilation");
  int64_t groups = view.groups;
  if (groups < 1 || xs[1] % groups || ys[1] % groups)
    error("channels do not split into " + std::to_string(groups) + " groups");
  for (int a = 0; a < 3; ++a)
    if (s[a] < 1 || d[a] < 1)
      error("stride and dilation must be positive");
  const int64_t cin = xs[1], cout = ys[1], cinG = cin / groups, coutG = cout / groups;
  const int64_t D = xs[2], H = xs[3], W = xs[4];
  const int64_t kD = ws[2], kH = ws[3], kW = ws[4], kVol = kD * kH * kW;
  // 32-bit index arithmetic where every index fits (it is most of these kernels' work).
  const Index ix = indexFor(std::max(type(x).numel(), type(y).numel()));
  const std::string I = ix.type();
  auto n = [&](int64_t v) { return ix.lit(v); };
  std::string body = "  const " + I + " e = (" + I + ")i;\n" + decompose("e", ys, "o", ix);
  body += "  const " + I + " gr = o1 / " + n(coutG) + ";\n";
  if (transposed)
    body += "  const " + I + " col = o1 % " + n(coutG) + ";\n";
  body += "  float acc = 0.0f;\n"
          "  for (" + I + " cl = 0; cl < " + n(cinG) + "; ++cl) {\n"
          "    const " + I + " ci = gr * " + n(cinG) + " + cl;\n"
          "    const auto* xc = x + (o0 * " + n(cin) + " + ci) * " + n(D * H * W) + ";\n";
  if (!transposed) {
    body += "    const auto* wc = w + (o1 * " + n(cinG) + " + cl) * " + n(kVol) + ";\n"
            "    for (" + I + " kd = 0; kd < " + n(kD) + "; ++kd) {\n"
            "      const " + I + " id = o2 * " + n(s[0]) + " - " + n(p[0]) + " + kd * " + n(d[0]) + ";\n"
            "      if (id < 0 || id >= " + n(D) + ") continue;\n"
            "      for (" + I + " kh = 0; kh < " + n(kH) + "; ++kh) {\n"
            "        const " + I + " ih = o3 * " + n(s[1]) + " - " + n(p[1]) + " + kh * " + n(d[1]) + ";\n"
            "        if (ih < 0 || ih >= " + n(H) + ") continue;\n"
            "        for (" + I + " kw = 0; kw < " + n(kW) + "; ++kw) {\n"
            "          const " + I + " iw = o4 * " + n(s[2]) + " - " + n(p[2]) + " + kw * " + n(d[2]) + ";\n"
            "          if (iw < 0 || iw >= " + n(W) + ") continue;\n"
            "          acc += wc[(kd * " + n(kH) + " + kh) * " + n(kW) + " + kw] * xc[(id * " + n(H) + " + ih) * " + n(W) + " + iw];\n"
            "        }\n      }\n    }\n  }\n";
  } else {
    // Output position o reads input position (o + p - k·d) / s where that divides. Without
    // dilation (and padding >= 0) only every s-th tap does: the loops start at the first such tap and step by
    // s (the same taps in the same ascending order as testing each).
    auto axis = [&](const std::string &tap, const std::string &t, const std::string &in,
                    const std::string &o, int a, int64_t k, int64_t size,
                    const std::string &indent) {
      const std::string to = "(" + o + " + " + n(p[a]) + ")";
      if (d[a] == 1 && p[a] >= 0)
        return indent + "for (" + I + " " + tap + " = " + to + " % " + n(s[a]) + "; " + tap +
               " < " + n(k) + "; " + tap + " += " + n(s[a]) + ") {\n" + indent + "  const " +
               I + " " + t + " = " + to + " - " + tap + ";\n" + indent + "  if (" + t +
               " < 0 || " + t + " / " + n(s[a]) + " >= " + n(size) + ") continue;\n" + indent +
               "  const " + I + " " + in + " = " + t + " / " + n(s[a]) + ";\n";
      return indent + "for (" + I + " " + tap + " = 0; " + tap + " < " + n(k) + "; ++" + tap +
             ") {\n" + indent + "  const " + I + " " + t + " = " + to + " - " + tap + " * " +
             n(d[a]) + ";\n" + indent + "  if (" + t + " < 0 || " + t + " % " + n(s[a]) +
             " != 0 || " + t + " / " + n(s[a]) + " >= " + n(size) + ") continue;\n" + indent +
             "  const " + I + " " + in + " = " + t + " / " + n(s[a]) + ";\n";
    };
    body += "    const auto* wc = w + (ci * " + n(coutG) + " + col) * " + n(kVol) + ";\n" +
            axis("kd", "td", "id", "o2", 0, kD, D, "    ") +
            axis("kh", "th", "ih", "o3", 1, kH, H, "      ") +
            axis("kw", "tw", "iw", "o4", 2, kW, W, "        ") +
            "          acc += wc[(kd * " + n(kH) + " + kh) * " + n(kW) + " + kw] * xc[(id * " + n(H) + " + ih) * " + n(W) + " + iw];\n"
            "        }\n      }\n    }\n  }\n";
  }
  body += b ? "  y[i] = acc + bias[o1];\n" : "  y[i] = acc;\n";
  std::vector<std::string> params{out("y"), in("x"), in("w")};
  std::vector<int> args{y, x, w};
  if (b) {
    params.push_back(in("bias"));
    args.push_back(*b);
  }
  elementwise(op, transposed ? "conv3d_transpose" : "conv3d", params, args, type(y).numel(),
              body);
}

// The depthwise weight gradient (groups = C, one input channel per group) as a split
// reduction over two kernels: kernels/depthwise.cuh's depthwiseGradWeightParts (which says
// how), then each weight's partials summed by the generic split sum.
void FunctionGen::depthwiseGradWeight(const Op &op, int x, int dy, int dw,
                                      const std::array<int64_t, 3> &s,
                                      const std::array<int64_t, 3> &p,
                                      const std::array<int64_t, 3> &d) {
  const auto &xs = shape(x), &gs = shape(dy), &ws = shape(dw);
  const int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4];
  const int64_t OD = gs[2], OH = gs[3], OW = gs[4], ODHW = OD * OH * OW;
  const int64_t kD = ws[2], kH = ws[3], kW = ws[4], kHW = kH * kW;
  // Parts per (sample, channel): about 64 positions per thread, at least one part.
  const int64_t S = std::max<int64_t>(1, ODHW / (int64_t{kBlock} * 64));
  const int64_t parts = N * S;
  const int buf = scratch(C * kD * kHW * parts * 4);
  std::string shape = "DepthwiseGradWeightShape<" +
                      indexFor(N * C * std::max(D * H * W, ODHW)).type();
  for (int64_t v : {N, C, D, H, W, OD, OH, OW, kD, kH, kW, s[0], s[1], s[2], p[0], p[1], p[2],
                    d[0], d[1], d[2], S})
    shape += ", " + num(v);
  shape += ">";
  const std::string body = "  depthwiseGradWeightParts<" + shape + ", " +
                           std::to_string(kBlock) + ">(parts, x, dy);\n";
  launch(op, src.kernel("dwconv_grad_weight_parts", typed({out("parts"), in("x"), in("dy")}, {buf, x, dy}), body, kBlock,
                        kernelLibrary("depthwise.cuh")),
         C * kD * N * S, kBlock, {buf, x, dy});
  sumParts(op, "dwconv_grad_weight_sum", "dw", dw, buf, 0, type(dw).numel(), parts);
}

// conv3d_grad_weight, and shift_sum_grad_weight where Stencil.cpp falls back (that of the
// depthwise convolution).
void FunctionGen::convGradWeight(const Op &op) {
  const medrun::ConvView view = *medrun::convView(fn, op);
  int x = op.single("input"), dy = op.single("grad_output"), dw = result(op);
  requireFloat(x, "the input");
  requireFloat(dy, "the output gradient");
  requireFloat(dw, "the result");
  const auto &xs = shape(x), &gs = shape(dy), &ws = shape(dw);
  if (xs.size() != 5 || gs.size() != 5 || ws.size() != 5)
    error("expected rank-5 input, output gradient and weight");
  auto s = three(view.stride, "stride"), p = three(view.padding, "padding"),
       d = three(view.dilation, "dilation");
  int64_t groups = view.groups;
  const int64_t cin = xs[1], cout = gs[1];
  if (groups < 1 || cin % groups || cout % groups || ws[0] != cout || ws[1] != cin / groups ||
      gs[0] != xs[0])
    error("input, output gradient and weight do not match for " + std::to_string(groups) +
          " groups");
  const int64_t cinG = cin / groups, coutG = cout / groups;
  if (cinG == 1 && coutG == 1)
    return depthwiseGradWeight(op, x, dy, dw, s, p, d);
  const int64_t D = xs[2], H = xs[3], W = xs[4], OD = gs[2], OH = gs[3], OW = gs[4];
  const int64_t terms = xs[0] * OD * OH * OW;
  const int block = blockFor(terms);
  // One block per weight; threads stride over the (n, od, oh, ow) terms.
  std::string body = decompose("o", ws, "w");
  body += "  const i64 ci = (w0 / " + num(coutG) + ") * " + num(cinG) + " + w1;\n"
          "  __shared__ float sh[" + std::to_string(block) + "];\n"
          "  float acc = 0.0f;\n"
          "  for (i64 r = t; r < " + num(terms) + "; r += " + std::to_string(block) + ") {\n" +
          decompose("r", {xs[0], OD, OH, OW}, "q") +
          "    const i64 id = q1 * " + num(s[0]) + " - " + num(p[0]) + " + w2 * " + num(d[0]) + ";\n"
          "    const i64 ih = q2 * " + num(s[1]) + " - " + num(p[1]) + " + w3 * " + num(d[1]) + ";\n"
          "    const i64 iw = q3 * " + num(s[2]) + " - " + num(p[2]) + " + w4 * " + num(d[2]) + ";\n"
          "    if (id < 0 || id >= " + num(D) + " || ih < 0 || ih >= " + num(H) + " || iw < 0 || iw >= " + num(W) + ") continue;\n"
          "    acc += dy[((q0 * " + num(cout) + " + w0) * " + num(OD) + " + q1) * " + num(OH * OW) + " + q2 * " + num(OW) + " + q3]"
          " * x[((q0 * " + num(cin) + " + ci) * " + num(D) + " + id) * " + num(H * W) + " + ih * " + num(W) + " + iw];\n"
          "  }\n"
          "  acc = blockSum(acc, sh);\n"
          "  if (t == 0) dw[o] = acc;\n";
  perBlock(op, "conv3d_grad_weight", {out("dw"), in("x"), in("dy")}, {dw, x, dy},
           type(dw).numel(), block, body);
}

void FunctionGen::registerConv(Emitters &e) {
  // shift_sum and shift_sum_grad_weight: Stencil.cpp (which falls back to these kernels).
  for (OpKind k : {OpKind::Conv3d, OpKind::Conv3dTranspose})
    e[k] = [](FunctionGen &g, const Op &op) { g.conv(op); };
  e[OpKind::Conv3dGradWeight] = [](FunctionGen &g, const Op &op) { g.convGradWeight(op); };
}

} // namespace mlir::med::cuda
