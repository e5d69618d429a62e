//===- Loss.cpp - BCE with logits, Dice + CE, and their gradients --------------------===//
//
// Loss sums run as split sums; a target that is no class index fails the function
// through the status word.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

/// N, C, S as the CPU loss kernels see a value (rank 0: 1×1×1, rank 1: 1×1×S).
FunctionGen::NCS FunctionGen::lossLayout(int id) const {
  const auto &s = shape(id);
  if (s.empty())
    return {1, 1, 1};
  if (s.size() == 1)
    return {1, 1, s[0]};
  return {s[0], s[1], product(s, 2)};
}

void FunctionGen::bce(const Op &op, bool grad) {
  int x = op.single("logits"), tg = op.single("target"), y = result(op);
  std::optional<int> mask = op.optional("mask"), posw = op.optional("pos_weight");
  for (int id : {x, tg, y})
    requireFloat(id, "an operand");
  if (mask)
    requireFloat(*mask, "the mask");
  if (posw)
    requireFloat(*posw, "pos_weight");
  const NCS L = lossLayout(x);
  const int64_t n = type(x).numel();
  if (type(tg).numel() != n || (mask && type(*mask).numel() != n))
    error("target/mask shapes do not match the logits");
  std::string red = op.strAttr("reduction");
  if (red != "mean" && red != "sum" && red != "none" && red != "per_channel")
    error("unknown loss reduction '" + red + "'");
  const bool autoPw = op.boolAttr("auto_pos_weight");
  const double maxPw = op.floatAttr("max_pos_weight");
  if (posw && !autoPw && type(*posw).numel() != L.c && type(*posw).numel() != 1)
    error("pos_weight needs one value per channel or one value");
  // Per-channel sums: split sums whose rows are the channel's spatial extent per sample.
  auto channelSum = [&]() {
    SplitSum s;
    s.outs = L.c;
    s.count = L.n * L.s;
    s.cols = L.s;
    s.base = "  const i64 ob = out * " + num(L.s) + ";\n";
    s.row = "    const i64 ro = q * " + num(L.c * L.s) + ";\n";
    return s;
  };
  const std::string counted = mask ? "(m[e] != 0.0f)" : "true";

  // Positive weights: a scratch of C values, or read from the operand, or 1.
  int pw = -1;
  if (autoPw) {
    pw = scratch(L.c * 4);
    SplitSum s = channelSum();
    s.term = "        if (!" + counted + ") continue;\n"
             "        const float v = tg[e];\n"
             "        a_ps[u] += v;\n        a_ng[u] += 1.0f - v;\n";
    s.accs = {{"ps", "float", "float", "0.0f", "Add()"}, {"ng", "float", "float", "0.0f", "Add()"}};
    std::vector<std::string> params{in("tg")};
    std::vector<int> args{tg};
    if (mask) {
      params.push_back(in("m"));
      args.push_back(*mask);
    }
    splitSum(op, "bce_pos_weight", s, params, args, {out("pw")}, {pw},
             "    pw[o] = ps == 0.0f ? " + flt(maxPw) + " : fminf(ng / ps, " + flt(maxPw) + ");\n");
  }
  auto pwExpr = [&](const std::string &c) -> std::string {
    if (autoPw)
      return "pw[" + c + "]";
    if (posw)
      return type(*posw).numel() == 1 ? "pwv[0]" : "pwv[" + c + "]";
    return "1.0f";
  };
  auto pwParams = [&](std::vector<std::string> &params, std::vector<int> &args) {
    if (autoPw) {
      params.push_back(in("pw"));
      args.push_back(pw);
    } else if (posw) {
      params.push_back(in("pwv"));
      args.push_back(*posw);
    }
    if (mask) {
      params.push_back(in("m"));
      args.push_back(*mask);
    }
  };
  const std::string lossAt =
      "    const float xv = x[e], yv = tg[e];\n"
      "    const float sp = log1pf(expf(-fabsf(xv))) + fmaxf(-xv, 0.0f);\n"
      "    const float l = (1.0f - yv) * xv + (1.0f + (pc - 1.0f) * yv) * sp;\n";

  if (!grad) {
    if (red == "none") {
      std::string body = "  const i64 e = i;\n  const i64 c = (i / " + num(L.s) + ") % " +
                         num(L.c) + ";\n  const float pc = " + pwExpr("c") + ";\n" + lossAt +
                         "  y[i] = " + counted + " ? l : 0.0f;\n";
      std::vector<std::string> params{out("y"), in("x"), in("tg")};
      std::vector<int> args{y, x, tg};
      pwParams(params, args);
      elementwise(op, "bce_none", params, args, n, body);
      return;
    }
    // Per channel: Σ loss and the count of counted elements.
    int sums = scratch(L.c * 4), counts = scratch(L.c * 8);
    SplitSum s = channelSum();
    s.base += "  const float pc = " + pwExpr("out") + ";\n";
    s.term = "        if (!" + counted + ") continue;\n" + lossAt +
             "        a_s[u] += l;\n        ++a_cnt[u];\n";
    s.accs = {{"s", "float", "float", "0.0f", "Add()"}, {"cnt", "unsigned", "u64", "0", "Add()"}};
    std::vector<std::string> params{in("x"), in("tg")};
    std::vector<int> args{x, tg};
    pwParams(params, args);
    splitSum(op, "bce_sums", s, params, args, {out("sums"), out("counts", "u64")},
             {sums, counts}, "    sums[o] = s;\n    counts[o] = cnt;\n");
    // The scalar, in double as the CPU kernel forms it.
    std::string fin;
    if (red == "per_channel")
      fin = "  double total = 0.0;\n"
            "  for (i64 c = 0; c < " + num(L.c) + "; ++c)\n"
            "    total += counts[c] ? (double)sums[c] / (double)counts[c] : 0.0;\n"
            "  y[0] = (float)total;\n";
    else
      fin = "  float s = 0.0f;\n  u64 cnt = 0;\n"
            "  for (i64 c = 0; c < " + num(L.c) + "; ++c) { s += sums[c]; cnt += counts[c]; }\n" +
            (red == "sum" ? "  y[0] = (float)(double)s;\n"
                          : "  y[0] = (float)(cnt ? (double)s / (double)cnt : 0.0);\n");
    perBlock(op, "bce_" + red, {out("y"), in("sums"), in("counts", "u64")}, {y, sums, counts},
             1, 32, "  if (t != 0) return;\n" + fin);
    return;
  }

  // Gradient: σ(x)·(1 + (p − 1)·y) − p·y, scaled per channel.
  int dl = op.single("grad_loss");
  requireFloat(dl, "the upstream gradient");
  const bool none = red == "none";
  if (none ? type(dl).numel() != n : type(dl).numel() != 1)
    error("the upstream gradient does not match the reduction");
  int counts = -1;
  if (mask && (red == "mean" || red == "per_channel")) {
    counts = scratch(L.c * 8);
    SplitSum s = channelSum();
    s.term = "        a_cnt[u] += m[e] != 0.0f;\n";
    s.accs = {{"cnt", "unsigned", "u64", "0", "Add()"}};
    splitSum(op, "bce_counts", s, {in("m")}, {*mask}, {out("counts", "u64")}, {counts},
             "    counts[o] = cnt;\n");
  }
  std::string body = "  const i64 e = i;\n  const i64 c = (i / " + num(L.s) + ") % " + num(L.c) +
                     ";\n  const float pc = " + pwExpr("c") + ";\n";
  if (none) {
    body += "  const float sc = 1.0f, up = dl[i];\n";
  } else {
    body += "  const double g = dl[0];\n  const float up = 1.0f;\n";
    if (red == "sum") {
      body += "  const float sc = (float)g;\n";
    } else {
      std::string cntC = counts >= 0 ? "(i64)counts[c]" : num(L.n * L.s);
      if (red == "per_channel") {
        body += "  const i64 cn = " + cntC + ";\n";
      } else if (counts >= 0) {
        body += "  i64 cn = 0;\n  for (i64 k = 0; k < " + num(L.c) +
                "; ++k) cn += (i64)counts[k];\n";
      } else {
        body += "  const i64 cn = " + num(L.n * L.c * L.s) + ";\n";
      }
      body += "  const float sc = cn > 0 ? (float)(g / (double)cn) : 0.0f;\n";
    }
  }
  body += "  const float xv = x[e], yv = tg[e];\n"
          "  float sig;\n"
          "  if (xv >= 0.0f) sig = 1.0f / (1.0f + expf(-xv));\n"
          "  else { const float ex = expf(xv); sig = ex / (1.0f + ex); }\n"
          "  const float gr = sig * (1.0f + (pc - 1.0f) * yv) - pc * yv;\n"
          "  y[i] = " + counted + " ? gr * (sc * up) : 0.0f;\n";
  std::vector<std::string> params{out("y"), in("x"), in("tg"), in("dl")};
  std::vector<int> args{y, x, tg, dl};
  pwParams(params, args);
  if (counts >= 0) {
    params.push_back(in("counts", "u64"));
    args.push_back(counts);
  }
  elementwise(op, "bce_grad", params, args, n, body);
}

namespace {

/// dice_ce's ignore label (nnU-Net's `ignore`), if the op has one.
std::optional<int64_t> ignoreLabel(const Op &op) {
  if (!op.attrs.count("ignore_index"))
    return std::nullopt;
  return op.intAttr("ignore_index");
}

/// Code after readClass that leaves a voxel of the ignore label out (`then`: what to do).
std::string skipIgnored(const std::optional<int64_t> &ignore, const std::string &then) {
  if (!ignore)
    return "";
  return "    if (tv == " + std::to_string(*ignore) + ".0) " + then + "\n";
}

} // namespace

/// Code reading the class of voxel e of a dice target as `cls` (−1: not a class).
std::string FunctionGen::readClass(int target, int64_t classes) const {
  const DType d = type(target).dtype;
  if (ctype(d).empty())
    error(std::string("dice_ce targets of element type ") + medrun::dtypeName(d) +
          " are not supported on CUDA");
  // Class indices stored in bf16/f16 (targets computed in the step under mixed precision)
  // are exact up to 256 and 2048: beyond, two classes could share a value.
  const int64_t exact = d == DType::BF16 ? 256 : d == DType::F16 ? 2048 : 0;
  if (exact && classes > exact)
    error("dice_ce over " + std::to_string(classes) + " classes with " +
          medrun::dtypeName(d) + " targets: class indices above " + std::to_string(exact) +
          " are not exact in that type");
  return "    const double tv = (double)tgt[e];\n"
         "    const i64 cls = (tv >= 0.0 && tv < " + dbl(static_cast<double>(classes)) +
         ") ? (i64)tv : -1;\n";
}

/// Softmax of the C logits at voxel (n, s): mx, se as the CPU kernel computes them.
std::string FunctionGen::softmaxHead(int64_t C, int64_t S) {
  return "    const auto* xb = x + n * " + num(C * S) + " + s;\n"
         "    float mx = xb[0];\n"
         "    for (i64 c = 1; c < " + num(C) + "; ++c) { const float v = xb[c * " + num(S) +
         "]; mx = v > mx || v != v ? v : mx; }\n"
         "    float se = 0.0f;\n"
         "    for (i64 c = 0; c < " + num(C) + "; ++c) se += expf(xb[c * " + num(S) + "] - mx);\n";
}

/// Per level: a scratch of [N][1 + 3C] sums (ce, tp[C], sp[C], sy[C]). Up to 16 classes,
/// a split sum per sample whose threads compute each voxel's softmax once for every class;
/// beyond, one block per (n, c), the block of c = 0 also summing the cross-entropy.
int FunctionGen::diceSums(const Op &op, int x, int tgt, const NCS &L) {
  const int64_t C = L.c, S = L.s, stride = 1 + 3 * C;
  int sums = scratch(L.n * stride * 4);
  std::string tt = ctype(type(tgt).dtype);
  if (C <= 16) {
    SplitSum s;
    s.outs = L.n;
    s.count = s.cols = S;
    s.unroll = C <= 4 ? 2 : 1; // the C logits of a voxel are loads in flight already
    s.base = "  const i64 n = out, ob = n * " + num(S) + ";\n";
    s.row = "    const i64 ro = 0;\n";
    s.term = "        const i64 s = e - ob;\n" + readClass(tgt, C) +
             skipIgnored(ignoreLabel(op), "continue;") +
             "        if (cls < 0) { medFail(status, " + code(op) + "); continue; }\n" +
             softmaxHead(C, S) +
             "        a_ce[u] += logf(se) - (xb[cls * " + num(S) + "] - mx);\n";
    std::string finish = "    auto* q = sums + o * " + num(stride) + ";\n    q[0] = ce;\n";
    s.accs.push_back({"ce", "float", "float", "0.0f", "Add()"});
    for (int64_t k = 0; k < C; ++k) {
      const std::string K = std::to_string(k);
      s.term += "        {\n          const float sm = expf(xb[" + num(k * S) + "] - mx) / se;\n"
                "          a_sp" + K + "[u] += sm;\n"
                "          if (cls == " + K + ") { a_tp" + K + "[u] += sm; a_sy" + K +
                "[u] += 1.0f; }\n        }\n";
      for (const char *name : {"tp", "sp", "sy"})
        s.accs.push_back({name + K, "float", "float", "0.0f", "Add()"});
      finish += "    q[" + num(1 + k) + "] = tp" + K + ";\n    q[" + num(1 + C + k) + "] = sp" + K +
                ";\n    q[" + num(1 + 2 * C + k) + "] = sy" + K + ";\n";
    }
    splitSum(op, "dice_sums", s, {out("status", "unsigned"), in("x"), in("tgt", tt)},
             {status(), x, tgt}, {out("sums")}, {sums}, finish);
    return sums;
  }
  const int block = blockFor(S);
  std::string body =
      "  __shared__ float sh[" + std::to_string(block) + "];\n"
      "  const i64 n = o / " + num(C) + ", c0 = o % " + num(C) + ";\n"
      "  float ce = 0.0f, tp = 0.0f, sp = 0.0f, sy = 0.0f;\n"
      "  for (i64 s = t; s < " + num(S) + "; s += " + std::to_string(block) + ") {\n"
      "    const i64 e = n * " + num(S) + " + s;\n" + readClass(tgt, C) +
      skipIgnored(ignoreLabel(op), "continue;") +
      "    if (cls < 0) { if (c0 == 0) medFail(status, " + code(op) + "); continue; }\n" +
      softmaxHead(C, S) +
      "    const float sm = expf(xb[c0 * " + num(S) + "] - mx) / se;\n"
      "    sp += sm;\n"
      "    if (cls == c0) { tp += sm; sy += 1.0f; }\n"
      "    if (c0 == 0) ce += logf(se) - (xb[cls * " + num(S) + "] - mx);\n"
      "  }\n"
      "  ce = blockSum(ce, sh);\n  tp = blockSum(tp, sh);\n"
      "  sp = blockSum(sp, sh);\n  sy = blockSum(sy, sh);\n"
      "  if (t == 0) {\n"
      "    auto* q = sums + n * " + num(stride) + ";\n"
      "    if (c0 == 0) q[0] = ce;\n"
      "    q[1 + c0] = tp;\n    q[1 + " + num(C) + " + c0] = sp;\n    q[1 + " + num(2 * C) + " + c0] = sy;\n"
      "  }\n";
  perBlock(op, "dice_sums", {out("sums"), out("status", "unsigned"), in("x"), in("tgt", tt)},
           {sums, status(), x, tgt}, L.n * C, block, body);
  return sums;
}

void FunctionGen::diceCE(const Op &op, bool grad) {
  const std::vector<int> &logits = op.operand("logits"), &targets = op.operand("targets");
  std::vector<double> weights = op.floatsAttr("weights");
  if (logits.size() != targets.size() || logits.size() != weights.size())
    error("needs as many logits, targets and weights");
  const double smooth = op.floatAttr("smooth"), ceW = op.floatAttr("ce_weight"),
               diceW = op.floatAttr("dice_weight");
  const bool batchDice = op.boolAttr("batch_dice"), bg = op.boolAttr("include_background");
  const std::optional<int64_t> ignore = ignoreLabel(op);
  const int64_t c0 = bg ? 0 : 1;
  // CE's divisor: every voxel, or with an ignore label the counted ones (Σ one-hot over all
  // classes and samples; 0 of them: no CE, as nnU-Net).
  auto counted = [&](const NCS &L, const std::string &q) {
    return "  float cnt = 0.0f;\n"
           "  for (i64 n = 0; n < " + num(L.n) + "; ++n)\n"
           "    for (i64 c = 0; c < " + num(L.c) + "; ++c) cnt += " + q + "[n * " +
           num(1 + 3 * L.c) + " + 1 + " + num(2 * L.c) + " + c];\n";
  };
  std::vector<NCS> layouts;
  std::vector<int> sums;
  for (size_t l = 0; l < logits.size(); ++l) {
    requireFloat(logits[l], "the logits");
    NCS L = lossLayout(logits[l]);
    if (shape(logits[l]).size() < 2 || type(targets[l]).numel() != L.n * L.s)
      error("level " + std::to_string(l) + ": logits and target do not match");
    layouts.push_back(L);
    sums.push_back(type(logits[l]).numel() ? diceSums(op, logits[l], targets[l], L) : -1);
  }
  if (!grad) {
    int y = result(op);
    requireFloat(y, "the result");
    // The scalar, level by level, in the CPU kernel's arithmetic (float sums, double
    // means).
    std::string fin = "  if (t != 0) return;\n  double total = 0.0;\n";
    std::vector<std::string> params{out("y")};
    std::vector<int> args{y};
    for (size_t l = 0; l < logits.size(); ++l) {
      const NCS &L = layouts[l];
      const int64_t C = L.c, stride = 1 + 3 * C;
      std::string q = "s" + std::to_string(l);
      params.push_back(in(q));
      args.push_back(sums[l] >= 0 ? sums[l] : status()); // unread when empty
      fin += "  {\n    const auto* q = " + q + ";\n"
             "    float ce = 0.0f;\n"
             "    for (i64 n = 0; n < " + num(L.n) + "; ++n) ce += q[n * " + num(stride) + "];\n";
      if (ignore)
        fin += counted(L, "q") +
               "    const double ceMean = cnt > 0.0f ? (double)ce / (double)cnt : 0.0;\n";
      else
        fin += "    const double ceMean = (double)ce / (double)" + num(L.n * L.s) + ";\n";
      fin +=
             "    double diceSum = 0.0;\n    i64 kept = 0;\n";
      std::string dc = "(double)((2.0f * tpv + " + flt(smooth) + ") / fmaxf(spv + syv + " +
                       flt(smooth) + ", 1e-8f))";
      if (batchDice)
        fin += "    for (i64 c = " + num(c0) + "; c < " + num(C) + "; ++c) {\n"
               "      float tpv = 0.0f, spv = 0.0f, syv = 0.0f;\n"
               "      for (i64 n = 0; n < " + num(L.n) + "; ++n) {\n"
               "        tpv += q[n * " + num(stride) + " + 1 + c];\n"
               "        spv += q[n * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
               "        syv += q[n * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n"
               "      }\n      diceSum += " + dc + ";\n      ++kept;\n    }\n";
      else
        fin += "    for (i64 n = 0; n < " + num(L.n) + "; ++n)\n"
               "      for (i64 c = " + num(c0) + "; c < " + num(C) + "; ++c) {\n"
               "        const float tpv = q[n * " + num(stride) + " + 1 + c];\n"
               "        const float spv = q[n * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
               "        const float syv = q[n * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n"
               "        diceSum += " + dc + ";\n        ++kept;\n      }\n";
      fin += "    const double dice = kept ? diceSum / (double)kept : " + dbl(NAN) + ";\n"
             "    total += " + dbl(weights[l]) + " * (" + dbl(ceW) + " * ceMean - " + dbl(diceW) +
             " * dice);\n  }\n";
    }
    fin += "  y[0] = (float)total;\n";
    perBlock(op, "dice_ce", params, args, 1, 32, fin);
    return;
  }

  int dl = op.single("grad_loss");
  requireFloat(dl, "the upstream gradient");
  if (type(dl).numel() != 1)
    error("the upstream gradient must be a scalar");
  for (size_t l = 0; l < logits.size(); ++l) {
    const NCS &L = layouts[l];
    const int64_t C = L.c, S = L.s, stride = 1 + 3 * C;
    int x = logits[l], tgt = targets[l], dx = result(op, l);
    requireFloat(dx, "the result");
    if (type(x).numel() == 0)
      continue;
    const int64_t kept = std::max<int64_t>(0, C - c0) * (batchDice ? 1 : L.n);
    // α, β per (n, c) and the CE coefficient (at [2·N·C]).
    int coef = scratch((2 * L.n * C + 1) * 4);
    std::string body =
        "  if (t != 0) return;\n"
        "  const auto* q = sums;\n"
        "  const double w = " + dbl(weights[l]) + " * (double)dl[0];\n"
        "  auto* al = coef;\n  auto* be = coef + " + num(L.n * C) + ";\n"
        "  for (i64 k = 0; k < " + num(2 * L.n * C) + "; ++k) coef[k] = 0.0f;\n";
    if (kept > 0) {
      body +=
          "  const double f = w * " + dbl(diceW) + " / (double)" + num(kept) + ";\n"
          "  for (i64 c = " + num(c0) + "; c < " + num(C) + "; ++c)\n"
          "    for (i64 n = 0; n < " + num(L.n) + "; ++n) {\n"
          "      float tpv = 0.0f, spv = 0.0f, syv = 0.0f;\n";
      if (batchDice)
        body += "      for (i64 m = 0; m < " + num(L.n) + "; ++m) {\n"
                "        tpv += q[m * " + num(stride) + " + 1 + c];\n"
                "        spv += q[m * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
                "        syv += q[m * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n"
                "      }\n";
      else
        body += "      tpv = q[n * " + num(stride) + " + 1 + c];\n"
                "      spv = q[n * " + num(stride) + " + 1 + " + num(C) + " + c];\n"
                "      syv = q[n * " + num(stride) + " + 1 + " + num(2 * C) + " + c];\n";
      body += "      const float raw = spv + syv + " + flt(smooth) + ";\n"
              "      const double den = (double)fmaxf(raw, 1e-8f);\n"
              "      const double num = (double)(2.0f * tpv + " + flt(smooth) + ");\n"
              "      al[n * " + num(C) + " + c] = (float)(-f * 2.0 / den);\n"
              "      be[n * " + num(C) + " + c] = raw >= 1e-8f ? (float)(f * num / (den * den)) : 0.0f;\n"
              "    }\n";
    }
    if (ignore)
      body += counted(L, "q") + "  coef[" + num(2 * L.n * C) + "] = cnt > 0.0f ? (float)(w * " +
              dbl(ceW) + " / (double)cnt) : 0.0f;\n";
    else
      body += "  coef[" + num(2 * L.n * C) + "] = (float)(w * " + dbl(ceW) + " / (double)" +
              num(L.n * S) + ");\n";
    perBlock(op, "dice_ce_grad_coef", {out("coef"), in("sums"), in("dl")}, {coef, sums[l], dl},
             1, 32, body);
    // One thread per voxel (n, s): the softmax, then every class's gradient.
    std::string tt = ctype(type(tgt).dtype);
    std::string g =
        "  const i64 n = i / " + num(S) + ", s = i % " + num(S) + ";\n"
        "  const i64 e = i;\n" + readClass(tgt, C) +
        "  auto* db = dx + n * " + num(C * S) + " + s;\n" +
        skipIgnored(ignore, "{\n    for (i64 c = 0; c < " + num(C) + "; ++c) db[c * " + num(S) +
                                "] = 0.0f;\n    return;\n  }") +
        "  if (cls < 0) {\n    medFail(status, " + code(op) + ");\n"
        "    for (i64 c = 0; c < " + num(C) + "; ++c) db[c * " + num(S) + "] = 0.0f;\n    return;\n  }\n" +
        softmaxHead(C, S) +
        "  float pr[" + std::to_string(C) + "];\n"
        "  for (i64 c = 0; c < " + num(C) + "; ++c) pr[c] = expf(xb[c * " + num(S) + "] - mx);\n"
        "  for (i64 c = 0; c < " + num(C) + "; ++c) pr[c] /= se;\n"
        "  const auto* al = coef + n * " + num(C) + ";\n"
        "  const auto* be = coef + " + num(L.n * C) + " + n * " + num(C) + ";\n"
        "  const float ceCoef = coef[" + num(2 * L.n * C) + "];\n"
        "  float sg = al[cls] * pr[cls];\n"
        "  for (i64 c = 0; c < " + num(C) + "; ++c) sg += be[c] * pr[c];\n"
        "  for (i64 c = 0; c < " + num(C) + "; ++c) {\n"
        "    const bool hit = cls == c;\n"
        "    const float gc = (hit ? al[c] : 0.0f) + be[c];\n"
        "    db[c * " + num(S) + "] = pr[c] * (gc - sg) + ceCoef * (hit ? pr[c] - 1.0f : pr[c]);\n"
        "  }\n";
    elementwise(op, "dice_ce_grad",
                {out("dx"), out("status", "unsigned"), in("x"), in("tgt", tt), in("coef")},
                {dx, status(), x, tgt, coef}, L.n * S, g);
  }
}

void FunctionGen::registerLoss(Emitters &e) {
  e[OpKind::BCEWithLogits] = [](FunctionGen &g, const Op &op) { g.bce(op, false); };
  e[OpKind::BCEWithLogitsGrad] = [](FunctionGen &g, const Op &op) { g.bce(op, true); };
  e[OpKind::DiceCE] = [](FunctionGen &g, const Op &op) { g.diceCE(op, false); };
  e[OpKind::DiceCEGrad] = [](FunctionGen &g, const Op &op) { g.diceCE(op, true); };
}

} // namespace mlir::med::cuda
