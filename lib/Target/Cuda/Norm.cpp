//===- Norm.cpp - group norm, batch norm, channel layer norm, GRN and their gradients------------===//
//
// Group-norm statistics are med.group_norm_stats' chunked merge (medrun/NormStats.h): one
// block per chunk, then a fixed tree per group; the other statistics run one block per
// segment or row (a fixed tree over thread indices). The normalizing maps are vectorized
// elementwise kernels. Statistics pass between the
// kernels of one op through scratch buffers.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"
#include "medrun/NormStats.h"

namespace mlir::med::cuda {

namespace {
std::string S(int64_t v) { return std::to_string(v); }
/// min(chunk, n - at) as code: a chunk's extent clipped to its axis.
std::string clip(int64_t chunk, int64_t n, const std::string &at) {
  return "(" + S(n) + " - " + at + " < " + S(chunk) + " ? " + S(n) + " - " + at + " : " +
         S(chunk) + ")";
}
} // namespace

/// med.group_norm_stats (medrun/NormStats.h, the CPU kernel's definition) of the N×C×…
/// value `x` into `mean` and `rstd` (N × groups): one block per chunk of a plane writes the
/// chunk's pivot, dev and M2 (two passes over the values it holds in registers), then
/// mergeStats.
void FunctionGen::groupStats(const Op &op, int x, int64_t groups, double eps, int mean, int rstd) {
  namespace ns = medrun::normstats;
  const NCS d = ncs(x);
  const int64_t cg = d.c / groups, segs = d.n * groups;
  const ns::Box p = ns::planeOf(shape(x));
  if (segs == 0)
    return;
  if (cg * d.s == 0) { // empty groups: mean 0 and variance 0
    elementwise(op, "group_norm_stats_empty", {out("mean"), out("rstd")}, {mean, rstd}, segs,
                "  mean[i] = 0.0f;\n  rstd[i] = 1.0f / sqrtf(" + flt(eps) + ");\n");
    return;
  }
  const int64_t per = ns::chunksPerPlane(p), chunks = cg * per;
  // A thread's values sit at fixed slots of the chunk's box (the chunk clipped to the plane:
  // bd × bh × bw, compile-time sizes, so a slot's position is shifts and multiplies, not
  // divisions by the clipped extents); slots outside a clipped chunk hold nothing.
  const ns::Box k = ns::kChunk;
  const int64_t bd = std::min(k.d, p.d), bh = std::min(k.h, p.h), bw = std::min(k.w, p.w);
  const int64_t len = bd * bh * bw;
  const int block = blockFor(len);
  const std::string B = std::to_string(block), R = std::to_string((len + block - 1) / block);
  const int parts = scratch(segs * chunks * 3 * 4);
  const int64_t nH = ns::ceilDiv(p.h, k.h), nW = ns::ceilDiv(p.w, k.w);
  std::string chunk =
      "  __shared__ float sh[" + B + "];\n"
      "  const i64 c = o % " + num(chunks) + ", b = c % " + num(per) + ";\n"
      "  // The chunk's origin and clipped extents in its plane.\n"
      "  const int d0 = (int)(b / " + num(nH * nW) + ") * " + S(k.d) + ", h0 = (int)(b / " +
      num(nW) + " % " + num(nH) + ") * " + S(k.h) + ", w0 = (int)(b % " + num(nW) + ") * " +
      S(k.w) + ";\n"
      "  const int ed = " + clip(k.d, p.d, "d0") + ", eh = " + clip(k.h, p.h, "h0") +
      ", ew = " + clip(k.w, p.w, "w0") + ";\n"
      "  const int n = ed * eh * ew;\n"
      "  const auto* p = x + ((o / " + num(chunks) + ") * " + num(cg) + " + c / " + num(per) +
      ") * " + num(d.s) + " + ((i64)d0 * " + S(p.h) + " + h0) * " + S(p.w) + " + w0;\n"
      "  float v[" + R + "], sum = 0.0f;\n"
      "  bool in[" + R + "];\n"
      "  for (int r = 0; r < " + R + "; ++r) {\n"
      "    const int j = t + r * " + B + ", dd = j / " + S(bh * bw) + ", hh = j / " + S(bw) +
      " % " + S(bh) + ", ww = j % " + S(bw) + ";\n"
      "    in[r] = j < " + S(len) + " && dd < ed && hh < eh && ww < ew;\n"
      "    v[r] = in[r] ? (float)p[((i64)dd * " + S(p.h) + " + hh) * " + S(p.w) + " + ww] : 0.0f;\n"
      "    sum += v[r];\n  }\n"
      "  const float shift = blockSum(sum, sh) / (float)n; // the chunk's first mean\n"
      "  float d1 = 0.0f, d2 = 0.0f;\n"
      "  for (int r = 0; r < " + R + "; ++r)\n"
      "    if (in[r]) {\n"
      "      const float dv = v[r] - shift;\n      d1 += dv;\n      d2 += dv * dv;\n    }\n"
      "  d1 = blockSum(d1, sh);\n  d2 = blockSum(d2, sh);\n"
      "  if (t == 0) {\n"
      "    parts[3 * o] = shift;\n"
      "    parts[3 * o + 1] = d1 / (float)n;\n"
      "    parts[3 * o + 2] = fmaxf(0.0f, d2 - d1 * d1 / (float)n);\n  }\n";
  perBlock(op, "group_norm_chunks", {out("parts"), in("x")}, {parts, x}, segs * chunks, block,
           chunk);
  mergeStats(op, parts, segs, cg, shape(x), eps, mean, rstd);
}

/// One block per group: merges the group's chunk partials `parts` (pivot, dev, M2 per
/// chunk, groups of `cg` planes of the N×C×… shape `xs`) in the fixed tree, in place, and
/// writes the group's mean and rstd.
void FunctionGen::mergeStats(const Op &op, int parts, int64_t segs, int64_t cg,
                             const std::vector<int64_t> &xs, double eps, int mean, int rstd) {
  namespace ns = medrun::normstats;
  const ns::Box p = ns::planeOf(xs), k = ns::kChunk;
  const int64_t per = ns::chunksPerPlane(p), chunks = cg * per;
  const int tb = blockFor((chunks + 1) / 2);
  const std::string before = ", " + num(per) + ", " + num(p.d) + ", " + num(p.h) + ", " +
                             num(p.w) + ", " + num(k.d) + ", " + num(k.h) + ", " + num(k.w) + ")";
  std::string tree =
      "  float* q = parts + o * " + num(3 * chunks) + ";\n"
      "  for (i64 w = 1; w < " + num(chunks) + "; w *= 2) {\n"
      "    for (i64 i = 2 * w * t; i + w < " + num(chunks) + "; i += 2 * w * " +
      std::to_string(tb) + ") {\n"
      "      const i64 e = i + 2 * w < " + num(chunks) + " ? i + 2 * w : " + num(chunks) + ";\n"
      "      const i64 a = chunkValuesBefore(i" + before + ";\n"
      "      const i64 m = chunkValuesBefore(i + w" + before + ";\n"
      "      float* qa = q + 3 * i;\n"
      "      const float* qb = q + 3 * (i + w);\n"
      "      chanMerge(qa[0], qa[1], qa[2], qb[0], qb[1], qb[2], m - a,\n"
      "                chunkValuesBefore(e" + before + " - m);\n"
      "    }\n"
      "    __syncthreads();\n"
      "  }\n"
      "  if (t == 0) {\n"
      "    mean[o] = q[0] + q[1];\n"
      "    rstd[o] = 1.0f / sqrtf(q[2] / (float)" + num(cg * p.volume()) + " + " + flt(eps) +
      ");\n"
      "  }\n";
  perBlock(op, "group_norm_merge", {out("mean"), out("rstd"), out("parts")}, {mean, rstd, parts},
           segs, tb, tree);
}

void FunctionGen::groupNormStats(const Op &op) {
  const int x = op.single("input"), mean = result(op, 0), rstd = result(op, 1);
  requireFloat(x, "the input");
  requireFloat(mean, "the mean");
  requireFloat(rstd, "the rstd");
  const int64_t groups = op.intAttr("groups");
  if (groups < 1 || ncs(x).c % groups)
    error("channels do not split into groups");
  groupStats(op, x, groups, op.floatAttr("epsilon"), mean, rstd);
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
  const int64_t segs = d.n * groups;
  // The statistics are med.group_norm_stats', into the saved results where it saves them.
  const bool saved = op.results.size() == 3;
  const int mean = saved ? result(op, 1) : scratch(segs * 4);
  const int rstd = saved ? result(op, 2) : scratch(segs * 4);
  if (saved) {
    requireFloat(mean, "the saved mean");
    requireFloat(rstd, "the saved rstd");
  }
  groupStats(op, x, groups, op.floatAttr("epsilon"), mean, rstd);
  normalizeGroups(op, x, mean, rstd, g, b, y, groups);
}

void FunctionGen::groupNormApply(const Op &op) {
  const int x = op.single("input"), mean = op.single("mean"), rstd = op.single("rstd"),
            g = op.single("gamma"), b = op.single("beta"), y = result(op);
  for (int id : {x, mean, rstd, g, b, y})
    requireFloat(id, "an operand");
  const int64_t groups = op.intAttr("groups");
  const NCS d = ncs(x);
  if (groups < 1 || d.c % groups)
    error("channels do not split into groups");
  if (type(mean).numel() != d.n * groups || type(rstd).numel() != d.n * groups)
    error("mean and rstd need one entry per sample and group");
  normalizeGroups(op, x, mean, rstd, g, b, y, groups);
}

/// group_norm's map, y = (x − mean)·rstd·gamma + beta with the statistics of the element's
/// (sample, group): a vectorized elementwise kernel.
void FunctionGen::normalizeGroups(const Op &op, int x, int mean, int rstd, int g, int b, int y,
                                  int64_t groups) {
  if (type(x).numel() == 0)
    return;
  const NCS d = ncs(x);
  const int64_t cg = d.c / groups, segs = d.n * groups;
  const int64_t n = type(y).numel();
  const int lanes = lanesFor({y, x});
  const Index ix = indexFor(std::max(n, 2 * segs));
  // A thread's elements share their channel where the planes are whole vectors.
  const bool perThread = d.s % lanes == 0;
  std::string channel = groupOf(ix, perThread, d, groups, cg) +
      "  const float mu = mean[seg], scale = rstd[seg] * gamma[c];\n";
  std::string body = "  y_v[k] = (x_v[k] - mu) * scale + beta[c];\n";
  vectorized(op, "group_norm",
             {out("y"), in("x"), in("mean"), in("rstd"), in("gamma"), in("beta")},
             {y, x, mean, rstd, g, b}, n, lanes, ix, {{"x"}}, {"y"}, perThread ? channel : "",
             perThread ? body : channel + body);
}

/// med.batch_norm: the per-channel statistics (one block per channel; training: the mean,
/// then the squared deviations from it, each a fixed tree over the thread index; eval: the
/// running ones) and the new running statistics, then the normalizing map, elementwise.
void FunctionGen::batchNorm(const Op &op) {
  const int x = op.single("input"), g = op.single("gamma"), b = op.single("beta"),
            rm = op.single("running_mean"), rv = op.single("running_var"), y = result(op),
            nm = result(op, 1), nv = result(op, 2);
  for (int id : {x, g, b, rm, rv, y, nm, nv})
    requireFloat(id, "an operand");
  const NCS d = ncs(x);
  if (d.c == 0)
    return;
  const double eps = op.floatAttr("epsilon"), m = op.floatAttr("momentum");
  const int stats = scratch(d.c * 2 * 4); // mean and rstd per channel
  const int64_t n = d.n * d.s;
  if (op.boolAttr("training")) {
    if (n < 2)
      error("the training form needs more than one value per channel");
    const int block = blockFor(d.s);
    const std::string B = std::to_string(block);
    auto sweep = [&](const std::string &acc, const std::string &term) {
      return "  for (i64 b = 0; b < " + num(d.n) + "; ++b) {\n"
             "    const auto* p = x + (b * " + num(d.c) + " + o) * " + num(d.s) + ";\n"
             "    for (i64 j = t; j < " + num(d.s) + "; j += " + B + ") " + acc + " += " + term +
             ";\n  }\n";
    };
    std::string body =
        "  __shared__ float sh[" + B + "];\n"
        "  float s1 = 0.0f, s2 = 0.0f;\n" + sweep("s1", "(float)p[j]") +
        "  const float mean = blockSum(s1, sh) / (float)" + num(n) + ";\n" +
        sweep("s2", "((float)p[j] - mean) * ((float)p[j] - mean)") +
        "  const float m2 = blockSum(s2, sh);\n"
        "  if (t == 0) {\n"
        "    stats[2 * o] = mean;\n"
        "    stats[2 * o + 1] = 1.0f / sqrtf(m2 / (float)" + num(n) + " + " + flt(eps) + ");\n"
        "    nm[o] = " + flt(1 - m) + " * rm[o] + " + flt(m) + " * mean;\n"
        "    nv[o] = " + flt(1 - m) + " * rv[o] + " + flt(m) + " * (m2 / (float)" + num(n - 1) +
        ");\n  }\n";
    perBlock(op, "batch_norm_stats",
             {out("stats"), out("nm"), out("nv"), in("x"), in("rm"), in("rv")},
             {stats, nm, nv, x, rm, rv}, d.c, block, body);
  } else {
    elementwise(op, "batch_norm_running", {out("stats"), out("nm"), out("nv"), in("rm"), in("rv")},
                {stats, nm, nv, rm, rv}, d.c,
                "  stats[2 * i] = rm[i];\n"
                "  stats[2 * i + 1] = 1.0f / sqrtf(rv[i] + " + flt(eps) + ");\n"
                "  nm[i] = rm[i];\n  nv[i] = rv[i];\n");
  }
  if (type(x).numel() == 0)
    return;
  elementwise(op, "batch_norm", {out("y"), in("x"), in("stats"), in("gamma"), in("beta")},
              {y, x, stats, g, b}, type(y).numel(),
              "  const i64 c = i / " + num(d.s) + " % " + num(d.c) + ";\n"
              "  y[i] = ((float)x[i] - stats[2 * c]) * stats[2 * c + 1] * gamma[c] + beta[c];\n");
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
  // Per (n, c): Σ dy and Σ dy·(x − μ), a split sum over the plane (parts of it in blocks
  // of their own: N·C planes alone would leave most of the GPU idle), read a 16-byte vector
  // of each per term where the plane is whole vectors.
  const std::string tx = elemType(x);
  const int64_t sumLanes = lanesFor({x, dy});
  const int64_t vec = tx == elemType(dy) && d.s % sumLanes == 0 ? sumLanes : 1;
  SplitSum s;
  s.outs = rows;
  s.cols = s.count = d.s / vec;
  s.base = "  const i64 ob = out * " + num(d.s / vec) + ";\n"
           "  const float mu = mean[out / " + num(cg) + "];\n";
  s.row = "    const i64 ro = 0;\n";
  const std::string term = "a_a[u] += gv; a_b[u] += gv * (xv - mu); }\n";
  if (vec > 1) {
    const std::string V = std::to_string(vec);
    s.term = "        const Vec<" + tx + ", " + V + "> xs = vload<" + V + ">(x + e * " + V + "), gs = vload<" + V + ">(dy + e * " + V + ");\n"
             "        #pragma unroll\n"
             "        for (int k = 0; k < " + V + "; ++k) { const float gv = gs[k], xv = xs[k]; " + term;
  } else {
    s.term = "        { const float gv = dy[e], xv = x[e]; " + term;
  }
  s.accs = {{"a", "float", "float", "0.0f", "Add()"}, {"b", "float", "float", "0.0f", "Add()"}};
  splitSum(op, "group_norm_grad_rows", s, {in("x"), in("dy"), in("mean")}, {x, dy, mean},
           {out("rs")}, {rs}, "    rs[2 * o] = a;\n    rs[2 * o + 1] = b;\n");
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
  e[OpKind::GroupNorm] = [](FunctionGen &g, const Op &op) { g.groupNorm(op); };
  e[OpKind::GroupNormStats] = [](FunctionGen &g, const Op &op) { g.groupNormStats(op); };
  e[OpKind::GroupNormApply] = [](FunctionGen &g, const Op &op) { g.groupNormApply(op); };
  e[OpKind::BatchNorm] = [](FunctionGen &g, const Op &op) { g.batchNorm(op); };
  e[OpKind::ChannelLayerNorm] = [](FunctionGen &g, const Op &op) { g.channelLayerNorm(op); };
  e[OpKind::GRN] = [](FunctionGen &g, const Op &op) { g.grn(op); };
  e[OpKind::GroupNormGrad] = [](FunctionGen &g, const Op &op) { g.groupNormGrad(op); };
  e[OpKind::ChannelLayerNormGrad] = [](FunctionGen &g, const Op &op) { g.channelLayerNormGrad(op); };
  e[OpKind::GRNGrad] = [](FunctionGen &g, const Op &op) { g.grnGrad(op); };
}

} // namespace mlir::med::cuda
