//===- Norm.cpp - group norm, channel layer norm, GRN and their gradients ------------===//
//
// Statistics run one block per segment or row (a fixed tree over thread indices); the
// normalizing maps are vectorized elementwise kernels. Statistics pass between the
// kernels of one op through scratch buffers.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

/// Kernel writing mean and rstd (interleaved) of `segs` contiguous runs of `len` values,
/// as the CPU kernel's corrected two-pass groupStatistics.
void FunctionGen::segmentStats(const Op &op, int x, int64_t segs, int64_t len, double eps, int stats) {
  const int block = blockFor(len);
  std::string body =
      "  __shared__ float sh[" + std::to_string(block) + "];\n"
      "  const auto* p = x + o * " + num(len) + ";\n"
      "  float s = 0.0f;\n"
      "  for (i64 j = t; j < " + num(len) + "; j += " + std::to_string(block) + ") s += p[j];\n"
      "  const float mean = blockSum(s, sh) / (float)" + num(len) + ";\n"
      "  float d1 = 0.0f, d2 = 0.0f;\n"
      "  for (i64 j = t; j < " + num(len) + "; j += " + std::to_string(block) + ") {\n"
      "    const float d = p[j] - mean;\n    d1 += d;\n    d2 += d * d;\n  }\n"
      "  d1 = blockSum(d1, sh);\n  d2 = blockSum(d2, sh);\n"
      "  if (t == 0) {\n"
      "    const float m = (float)" + num(len) + ";\n"
      "    const float var = fmaxf(0.0f, (d2 - d1 * d1 / m) / m);\n"
      "    stats[2 * o] = mean + d1 / m;\n"
      "    stats[2 * o + 1] = 1.0f / sqrtf(var + " + flt(eps) + ");\n"
      "  }\n";
  perBlock(op, "norm_stats", {out("stats"), in("x")}, {stats, x}, segs, block, body);
}

/// The per-element prologue of the group-norm passes: the (n, c) row of element `i` (of
/// a thread's first element `i0` where the planes are whole vectors), its channel `c` and
/// its (n, group) segment `seg`.
std::string FunctionGen::groupOf(const Index &ix, bool perThread, const NCS &d, int64_t groups,
                                 int64_t cg) {
  const std::string I = ix.type();
  return "  const " + I + " row = " + (perThread ? "i0" : "i") + " / " + ix.lit(d.s) + ";\n"
         "  const " + I + " c = row % " + ix.lit(d.c) + ";\n"
         "  const " + I + " seg = (row / " + ix.lit(d.c) + ") * " + ix.lit(groups) +
         " + c / " + ix.lit(cg) + ";\n";
}

void FunctionGen::groupNorm(const Op &op) {
  int x = op.single("input"), g = op.single("gamma"), b = op.single("beta"), y = result(op);
  for (int id : {x, g, b, y})
    requireFloat(id, "an operand");
  NCS d = ncs(x);
  int64_t groups = op.intAttr("groups");
  if (groups < 1 || d.c % groups)
    error("channels do not split into groups");
  const int64_t cg = d.c / groups, segs = d.n * groups;
  if (type(x).numel() == 0)
    return;
  int stats = scratch(segs * 2 * 4);
  segmentStats(op, x, segs, cg * d.s, op.floatAttr("epsilon"), stats);
  const int64_t n = type(y).numel();
  const int lanes = lanesFor({y, x});
  const Index ix = indexFor(std::max(n, 2 * segs));
  // A thread's elements share their channel where the planes are whole vectors.
  const bool perThread = d.s % lanes == 0;
  std::string channel = groupOf(ix, perThread, d, groups, cg) +
      "  const float mu = stats[2 * seg], scale = stats[2 * seg + 1] * gamma[c];\n";
  std::string body = "  y_v[k] = (x_v[k] - mu) * scale + beta[c];\n";
  vectorized(op, "group_norm", {out("y"), in("x"), in("stats"), in("gamma"), in("beta")},
             {y, x, stats, g, b}, n, lanes, ix, {{"x"}}, {"y"}, perThread ? channel : "",
             perThread ? body : channel + body);
  if (op.results.size() == 3) { // save_statistics: mean and rstd for group_norm_grad
    int mean = result(op, 1), rstd = result(op, 2);
    requireFloat(mean, "the saved mean");
    requireFloat(rstd, "the saved rstd");
    elementwise(op, "group_norm_save", {out("mean"), out("rstd"), in("stats")},
                {mean, rstd, stats}, segs,
                "  mean[i] = stats[2 * i];\n  rstd[i] = stats[2 * i + 1];\n");
  }
}

void FunctionGen::channelLayerNorm(const Op &op) {
  int x = op.single("input"), g = op.single("gamma"), b = op.single("beta"), y = result(op);
  for (int id : {x, g, b, y})
    requireFloat(id, "an operand");
  NCS d = ncs(x);
  // One thread per (n, position); channels summed in increasing order, as the CPU.
  std::string body =
      "  const i64 n = i / " + num(d.s) + ", s = i % " + num(d.s) + ";\n"
      "  const auto* xp = x + n * " + num(d.c * d.s) + " + s;\n"
      "  auto* yp = y + n * " + num(d.c * d.s) + " + s;\n"
      "  float mean = 0.0f, sd = 0.0f;\n"
      "  for (i64 c = 0; c < " + num(d.c) + "; ++c) mean += xp[c * " + num(d.s) + "];\n"
      "  mean /= (float)" + num(d.c) + ";\n"
      "  for (i64 c = 0; c < " + num(d.c) + "; ++c) {\n"
      "    const float v = xp[c * " + num(d.s) + "] - mean;\n    sd += v * v;\n  }\n"
      "  sd = sqrtf(sd / (float)" + num(d.c) + " + " + flt(op.floatAttr("epsilon")) + ");\n"
      "  for (i64 c = 0; c < " + num(d.c) + "; ++c)\n"
      "    yp[c * " + num(d.s) + "] = (xp[c * " + num(d.s) + "] - mean) / sd * gamma[c] + beta[c];\n";
  elementwise(op, "channel_layer_norm", {out("y"), in("x"), in("gamma"), in("beta")},
              {y, x, g, b}, d.n * d.s, body);
}

/// Per row of `len` values: Σ x² (into out[row * stride + 0]) and, with dy, Σ dy and
/// Σ dy·x (into + 1, + 2).
void FunctionGen::rowSums(const Op &op, int x, std::optional<int> dy, int64_t rows, int64_t len, int outBuf) {
  const int block = blockFor(len);
  const int64_t stride = dy ? 3 : 1;
  std::string body =
      "  __shared__ float sh[" + std::to_string(block) + "];\n"
      "  const auto* p = x + o * " + num(len) + ";\n";
  if (dy)
    body += "  const auto* g = dy + o * " + num(len) + ";\n";
  body += "  float s2 = 0.0f, sg = 0.0f, sgx = 0.0f;\n"
          "  for (i64 j = t; j < " + num(len) + "; j += " + std::to_string(block) + ") {\n"
          "    const float v = p[j];\n    s2 += v * v;\n";
  if (dy)
    body += "    sg += g[j];\n    sgx += g[j] * v;\n";
  body += "  }\n  s2 = blockSum(s2, sh);\n";
  if (dy)
    body += "  sg = blockSum(sg, sh);\n  sgx = blockSum(sgx, sh);\n";
  body += "  if (t == 0) {\n    sums[o * " + num(stride) + "] = s2;\n";
  if (dy)
    body += "    sums[o * 3 + 1] = sg;\n    sums[o * 3 + 2] = sgx;\n";
  body += "  }\n  (void)sg; (void)sgx;\n";
  std::vector<std::string> params{out("sums"), in("x")};
  std::vector<int> args{outBuf, x};
  if (dy) {
    params.push_back(in("dy"));
    args.push_back(*dy);
  }
  perBlock(op, dy ? "grn_grad_sums" : "grn_sums", params, args, rows, block, body);
}

void FunctionGen::grn(const Op &op) {
  int x = op.single("input"), g = op.single("gamma"), b = op.single("beta"), y = result(op);
  for (int id : {x, g, b, y})
    requireFloat(id, "an operand");
  NCS d = ncs(x);
  if (type(x).numel() == 0)
    return;
  int sums = scratch(d.n * d.c * 4), nx = scratch(d.n * d.c * 4);
  rowSums(op, x, std::nullopt, d.n * d.c, d.s, sums);
  // N_c = G_c / (mean_c G + eps), per sample, channels in order.
  std::string norm =
      "  for (i64 n = t; n < " + num(d.n) + "; n += blockDim.x) {\n"
      "    float s = 0.0f;\n"
      "    for (i64 c = 0; c < " + num(d.c) + "; ++c) s += sqrtf(sums[n * " + num(d.c) + " + c]);\n"
      "    const float denom = s / (float)" + num(d.c) + " + " + flt(op.floatAttr("epsilon")) + ";\n"
      "    for (i64 c = 0; c < " + num(d.c) + "; ++c) nx[n * " + num(d.c) + " + c] = sqrtf(sums[n * " + num(d.c) + " + c]) / denom;\n"
      "  }\n";
  perBlock(op, "grn_norm", {out("nx"), in("sums")}, {nx, sums}, 1, kBlock, norm);
  std::string body =
      "  const i64 row = i / " + num(d.s) + ", c = row % " + num(d.c) + ";\n"
      "  const float v = x[i];\n"
      "  y[i] = gamma[c] * (v * nx[row]) + beta[c] + v;\n";
  elementwise(op, "grn", {out("y"), in("x"), in("nx"), in("gamma"), in("beta")},
              {y, x, nx, g, b}, type(y).numel(), body);
}

FunctionGen::NormGradArgs FunctionGen::normGradArgs(const Op &op) const {
  NormGradArgs a{op.single("input"),  op.single("gamma"), op.single("grad_output"),
                 result(op, 0),     result(op, 1),    result(op, 2), {}};
  for (int id : {a.x, a.g, a.dy, a.dx, a.dg, a.db})
    requireFloat(id, "an operand");
  a.d = ncs(a.x);
  return a;
}

/// An empty input: dgamma and dbeta are zero and nothing else runs.
bool FunctionGen::zeroIfEmpty(const Op &op, const NormGradArgs &a) {
  if (type(a.x).numel() != 0)
    return false;
  elementwise(op, "zero2", {out("a"), out("b")}, {a.dg, a.db}, a.d.c,
              "  a[i] = 0.0f;\n  b[i] = 0.0f;\n");
  return true;
}

void FunctionGen::groupNormGrad(const Op &op) {
  const NormGradArgs a = normGradArgs(op);
  const int x = a.x, g = a.g, dy = a.dy, dx = a.dx, dg = a.dg, db = a.db;
  const NCS d = a.d;
  int mean = op.single("mean"), rstd = op.single("rstd");
  requireFloat(mean, "the saved mean");
  requireFloat(rstd, "the saved rstd");
  int64_t groups = op.intAttr("groups");
  if (groups < 1 || d.c % groups)
    error("channels do not split into groups");
  const int64_t cg = d.c / groups, segs = d.n * groups, m = cg * d.s, rows = d.n * d.c;
  if (zeroIfEmpty(op, a))
    return;
  if (type(mean).numel() != segs || type(rstd).numel() != segs)
    error("mean and rstd need one entry per sample and group");
  // The statistics the forward kernel normalized with (group_norm with save_statistics).
  int rs = scratch(rows * 2 * 4), mg = scratch(segs * 2 * 4);
  // Per (n, c): Σ dy and Σ dy·(x − μ).
  const int block = blockFor(d.s);
  std::string sums =
      "  __shared__ float sh[" + std::to_string(block) + "];\n"
      "  const i64 seg = o / " + num(cg) + ";\n"
      "  const float mu = mean[seg];\n"
      "  const auto* p = x + o * " + num(d.s) + ";\n"
      "  const auto* q = dy + o * " + num(d.s) + ";\n"
      "  float a = 0.0f, b = 0.0f;\n"
      "  for (i64 j = t; j < " + num(d.s) + "; j += " + std::to_string(block) + ") {\n"
      "    const float gv = q[j];\n    a += gv;\n    b += gv * (p[j] - mu);\n  }\n"
      "  a = blockSum(a, sh);\n  b = blockSum(b, sh);\n"
      "  if (t == 0) { rs[2 * o] = a; rs[2 * o + 1] = b; }\n";
  perBlock(op, "group_norm_grad_rows", {out("rs"), in("x"), in("dy"), in("mean")},
           {rs, x, dy, mean}, rows, block, sums);
  // Per (n, group): mean(g), mean(g·x̂); per channel: dγ, dβ.
  std::string mix =
      "  for (i64 seg = t; seg < " + num(segs) + "; seg += blockDim.x) {\n"
      "    float a = 0.0f, b = 0.0f;\n"
      "    for (i64 j = 0; j < " + num(cg) + "; ++j) {\n"
      "      const i64 row = seg * " + num(cg) + " + j;\n"
      "      const float gm = gamma[row % " + num(d.c) + "];\n"
      "      a += gm * rs[2 * row];\n      b += gm * rs[2 * row + 1];\n    }\n"
      "    mg[2 * seg] = a / (float)" + num(m) + ";\n"
      "    mg[2 * seg + 1] = b * rstd[seg] / (float)" + num(m) + ";\n  }\n"
      "  for (i64 c = t; c < " + num(d.c) + "; c += blockDim.x) {\n"
      "    float a = 0.0f, b = 0.0f;\n"
      "    for (i64 n = 0; n < " + num(d.n) + "; ++n) {\n"
      "      a += rs[2 * (n * " + num(d.c) + " + c) + 1] * rstd[n * " + num(groups) + " + c / " + num(cg) + "];\n"
      "      b += rs[2 * (n * " + num(d.c) + " + c)];\n    }\n"
      "    dg[c] = a;\n    db[c] = b;\n  }\n";
  perBlock(op, "group_norm_grad_mix",
           {out("mg"), out("dg"), out("db"), in("rs"), in("rstd"), in("gamma")},
           {mg, dg, db, rs, rstd, g}, 1, kBlock, mix);
  const int64_t n = type(x).numel();
  const int lanes = lanesFor({dx, x, dy});
  const Index ix = indexFor(std::max(n, 2 * segs));
  // A thread's elements share their channel where the planes are whole vectors.
  const bool perThread = d.s % lanes == 0;
  std::string channel = groupOf(ix, perThread, d, groups, cg) +
      "  const float mu = mean[seg], r = rstd[seg];\n";
  std::string body =
      "  const float xh = (x_v[k] - mu) * r;\n"
      "  dx_v[k] = r * (gamma[c] * dy_v[k] - mg[2 * seg] - xh * mg[2 * seg + 1]);\n";
  vectorized(op, "group_norm_grad",
             {out("dx"), in("x"), in("dy"), in("gamma"), in("mean"), in("rstd"), in("mg")},
             {dx, x, dy, g, mean, rstd, mg}, n, lanes, ix, {{"x"}, {"dy"}}, {"dx"},
             perThread ? channel : "", perThread ? body : channel + body);
}

void FunctionGen::channelLayerNormGrad(const Op &op) {
  const NormGradArgs a = normGradArgs(op);
  const int x = a.x, g = a.g, dy = a.dy, dx = a.dx, dg = a.dg, db = a.db;
  const NCS d = a.d;
  if (zeroIfEmpty(op, a))
    return;
  const std::string C = num(d.c), S = num(d.s);
  int st = scratch(d.n * d.s * 2 * 4);
  // One thread per (n, position): statistics as the forward kernel, then dx.
  std::string body =
      "  const i64 n = i / " + S + ", s = i % " + S + ";\n"
      "  const auto* xp = x + n * " + num(d.c * d.s) + " + s;\n"
      "  const auto* gp = dy + n * " + num(d.c * d.s) + " + s;\n"
      "  auto* dp = dx + n * " + num(d.c * d.s) + " + s;\n"
      "  float mean = 0.0f, sd = 0.0f;\n"
      "  for (i64 c = 0; c < " + C + "; ++c) mean += xp[c * " + S + "];\n"
      "  mean /= (float)" + C + ";\n"
      "  for (i64 c = 0; c < " + C + "; ++c) { const float v = xp[c * " + S + "] - mean; sd += v * v; }\n"
      "  sd = sqrtf(sd / (float)" + C + " + " + flt(op.floatAttr("epsilon")) + ");\n"
      "  float a = 0.0f, bx = 0.0f;\n"
      "  for (i64 c = 0; c < " + C + "; ++c) {\n"
      "    const float xh = (xp[c * " + S + "] - mean) / sd;\n"
      "    const float gv = gp[c * " + S + "] * gamma[c];\n"
      "    a += gv;\n    bx += gv * xh;\n  }\n"
      "  a /= (float)" + C + ";\n  bx /= (float)" + C + ";\n"
      "  for (i64 c = 0; c < " + C + "; ++c) {\n"
      "    const float xh = (xp[c * " + S + "] - mean) / sd;\n"
      "    dp[c * " + S + "] = (gp[c * " + S + "] * gamma[c] - a - xh * bx) / sd;\n  }\n"
      "  st[2 * i] = mean;\n  st[2 * i + 1] = sd;\n";
  elementwise(op, "channel_layer_norm_grad",
              {out("dx"), out("st"), in("x"), in("dy"), in("gamma")}, {dx, st, x, dy, g},
              d.n * d.s, body);
  const int64_t terms = d.n * d.s;
  const int block = blockFor(terms);
  std::string red =
      "  __shared__ float sh[" + std::to_string(block) + "];\n"
      "  float a = 0.0f, b = 0.0f;\n"
      "  for (i64 j = t; j < " + num(terms) + "; j += " + std::to_string(block) + ") {\n"
      "    const i64 n = j / " + S + ", s = j % " + S + ";\n"
      "    const i64 e = (n * " + C + " + o) * " + S + " + s;\n"
      "    const float xh = (x[e] - st[2 * j]) / st[2 * j + 1];\n"
      "    a += dy[e] * xh;\n    b += dy[e];\n  }\n"
      "  a = blockSum(a, sh);\n  b = blockSum(b, sh);\n"
      "  if (t == 0) { dg[o] = a; db[o] = b; }\n";
  perBlock(op, "channel_layer_norm_grad_params",
           {out("dg"), out("db"), in("x"), in("dy"), in("st")}, {dg, db, x, dy, st}, d.c, block,
           red);
}

void FunctionGen::grnGrad(const Op &op) {
  const NormGradArgs a = normGradArgs(op);
  const int x = a.x, g = a.g, dy = a.dy, dx = a.dx, dg = a.dg, db = a.db;
  const NCS d = a.d;
  if (zeroIfEmpty(op, a))
    return;
  const int64_t rows = d.n * d.c;
  const std::string C = num(d.c);
  int sums = scratch(rows * 3 * 4), nc = scratch(rows * 2 * 4);
  rowSums(op, x, dy, rows, d.s, sums);
  // Per sample: N_c and the coefficient of x in dx; then dγ, dβ per channel.
  std::string mix =
      "  for (i64 n = t; n < " + num(d.n) + "; n += blockDim.x) {\n"
      "    float s = 0.0f;\n"
      "    for (i64 c = 0; c < " + C + "; ++c) s += sqrtf(sums[3 * (n * " + C + " + c)]);\n"
      "    const float D = s / (float)" + C + " + " + flt(op.floatAttr("epsilon")) + ";\n"
      "    float s2 = 0.0f;\n"
      "    for (i64 c = 0; c < " + C + "; ++c) {\n"
      "      const i64 r = n * " + C + " + c;\n"
      "      s2 += gamma[c] * sums[3 * r + 2] * sqrtf(sums[3 * r]);\n    }\n"
      "    const float shared = s2 / ((float)" + C + " * D * D);\n"
      "    for (i64 c = 0; c < " + C + "; ++c) {\n"
      "      const i64 r = n * " + C + " + c;\n"
      "      const float gx = sqrtf(sums[3 * r]);\n"
      "      const float dG = gamma[c] * sums[3 * r + 2] / D - shared;\n"
      "      nc[2 * r] = gx / D;\n"
      "      nc[2 * r + 1] = gx > 0.0f ? dG / gx : 0.0f;\n    }\n  }\n"
      "  __syncthreads();\n"
      "  for (i64 c = t; c < " + C + "; c += blockDim.x) {\n"
      "    float a = 0.0f, b = 0.0f;\n"
      "    for (i64 n = 0; n < " + num(d.n) + "; ++n) {\n"
      "      const i64 r = n * " + C + " + c;\n"
      "      a += sums[3 * r + 2] * nc[2 * r];\n      b += sums[3 * r + 1];\n    }\n"
      "    dg[c] = a;\n    db[c] = b;\n  }\n";
  perBlock(op, "grn_grad_mix", {out("nc"), out("dg"), out("db"), in("sums"), in("gamma")},
           {nc, dg, db, sums, g}, 1, kBlock, mix);
  std::string body =
      "  const i64 row = i / " + num(d.s) + ", c = row % " + C + ";\n"
      "  const float scale = 1.0f + gamma[c] * nc[2 * row];\n"
      "  dx[i] = dy[i] * scale + nc[2 * row + 1] * x[i];\n";
  elementwise(op, "grn_grad", {out("dx"), in("x"), in("dy"), in("gamma"), in("nc")},
              {dx, x, dy, g, nc}, type(x).numel(), body);
}

void FunctionGen::registerNorm(Emitters &e) {
  e["group_norm"] = [](FunctionGen &g, const Op &op) { g.groupNorm(op); };
  e["channel_layer_norm"] = [](FunctionGen &g, const Op &op) { g.channelLayerNorm(op); };
  e["grn"] = [](FunctionGen &g, const Op &op) { g.grn(op); };
  e["group_norm_grad"] = [](FunctionGen &g, const Op &op) { g.groupNormGrad(op); };
  e["channel_layer_norm_grad"] = [](FunctionGen &g, const Op &op) { g.channelLayerNormGrad(op); };
  e["grn_grad"] = [](FunctionGen &g, const Op &op) { g.grnGrad(op); };
}

} // namespace mlir::med::cuda
