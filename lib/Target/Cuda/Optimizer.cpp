//===- Optimizer.cpp - AdamW, SGD and dynamic loss scaling ---------------------------===//
//
// Each optimizer has one scalar statement (optimizerStatement), used by its own kernel
// and by every fusion it is part of.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

/// The scalar statement of optimizer step `op` on one element: reads `x` (expressions of the
/// operands in scalarOperands order; the learning rate and step may be any float
/// expressions), assigns `y` (the new parameter and state, in result order). It may fail the
/// function through the status word (`status`, `code`), as AdamW does for a step below 1.
/// One definition for the optimizer's own kernel and every fusion it is part of.
std::string optimizerStatement(const std::string &kind, const Op &op,
                               const std::vector<std::string> &x,
                               const std::vector<std::string> &y) {
  auto num = [&](const char *name) { return op.floatAttr(name); };
  if (kind == "adamw") {
    const double b1 = num("beta1"), b2 = num("beta2");
    // The scalars in double from lr and step, as the CPU kernel forms them.
    return "  {\n"
           "    const double rate = " + x[4] + ", st = " + x[5] + ";\n"
           "    if (!(st >= 1.0)) { if (i == 0) medFail(status, code); return; }\n"
           "    const float decay = (float)(1.0 - rate * " + dbl(num("weight_decay")) + ");\n"
           // 1 - β in double, then rounded (as the CPU kernel and torch's scalar 1 - beta2).
           "    const float b2 = " + flt(b2) + ", c1 = " + flt(1 - b1) + ", c2 = " + flt(1 - b2) + ";\n"
           "    const float stepSize = (float)(rate / (1.0 - pow(" + dbl(b1) + ", st)));\n"
           "    const float correction2 = (float)sqrt(1.0 - pow(" + dbl(b2) + ", st));\n"
           "    const float gi = " + x[1] + ", mo = " + x[2] + ";\n"
           "    const float mi = mo + c1 * (gi - mo);\n"
           "    const float vi = b2 * " + x[3] + " + c2 * gi * gi;\n"
           "    const float denom = sqrtf(vi) / correction2 + " + flt(num("epsilon")) + ";\n"
           "    " + y[0] + " = " + x[0] + " * decay - stepSize * mi / denom;\n"
           "    " + y[1] + " = mi;\n    " + y[2] + " = vi;\n"
           "  }\n";
  }
  if (kind == "sgd") {
    const bool nesterov = op.boolAttr("nesterov");
    return "  {\n"
           "    const float r = (float)(double)" + x[3] + ";\n"
           "    const float wd = " + flt(num("weight_decay")) + ", mu = " +
           flt(num("momentum")) + ";\n"
           "    const float pi = " + x[0] + ";\n"
           "    float d = " + x[1] + " + wd * pi;\n"
           "    const float bi = mu * " + x[2] + " + d;\n" +
           (nesterov ? "    d = d + mu * bi;\n" : "    d = bi;\n") +
           "    " + y[0] + " = pi - r * d;\n    " + y[1] + " = bi;\n"
           "  }\n";
  }
  return "";
}

/// 1 if any element of any input is ±inf or NaN, else 0. Each input's kernel raises a
/// flag word (every writer writes the same 1: deterministic); the last turns it into f32.
void FunctionGen::anyNonFinite(const Op &op) {
  int y = result(op);
  requireFloat(y, "the result");
  int flag = scratch(4);
  elementwise(op, "flag_clear", {out("flag", "unsigned")}, {flag}, 1, "  flag[0] = 0u;\n");
  for (int x : op.operand("inputs")) {
    requireFloat(x, "an input");
    elementwise(op, "flag_non_finite", {out("flag", "unsigned"), in("x")}, {flag, x},
                type(x).numel(), "  if (!isfinite(x[i])) flag[0] = 1u;\n");
  }
  elementwise(op, "flag_to_float", {out("y"), in("flag", "unsigned")}, {y, flag}, 1,
              "  y[0] = flag[0] ? 1.0f : 0.0f;\n");
}

/// A whole operand chosen by a scalar condition (NaN counts as true, as != 0).
void FunctionGen::select(const Op &op) {
  int c = op.single("cond"), a = op.single("on_true"), b = op.single("on_false"), y = result(op);
  requireFloat(c, "the condition");
  std::string t = elemType(y);
  if (elemType(a) != t || elemType(b) != t || type(a).numel() != type(y).numel() ||
      type(b).numel() != type(y).numel())
    error("operands and result differ in type or size");
  elementwise(op, "select", {out("y", t), in("c"), in("a", t), in("b", t)}, {y, c, a, b},
              type(y).numel(), "  y[i] = " + scalarExpr("select", {"c[0]", "a[i]", "b[i]"}) + ";\n");
}

/// torch's GradScaler update (_amp_update_scale): float state, double factors.
void FunctionGen::updateLossScale(const Op &op) {
  int s = op.single("scale"), n = op.single("growth_tracker"), f = op.single("found_inf");
  int ns = result(op, 0), nn = result(op, 1);
  for (int id : {s, n, f, ns, nn})
    requireFloat(id, "an operand");
  std::string body =
      "  float sc = s[0];\n  double tr = n[0];\n"
      "  if (f[0] != 0.0f) {\n    sc = (float)(sc * " + dbl(op.floatAttr("backoff_factor")) +
      ");\n    tr = 0.0;\n"
      "  } else if (tr + 1.0 == " + dbl(static_cast<double>(op.intAttr("growth_interval"))) +
      ") {\n    const float grown = (float)(sc * " + dbl(op.floatAttr("growth_factor")) + ");\n"
      "    if (isfinite(grown)) sc = grown;\n    tr = 0.0;\n"
      "  } else {\n    tr = tr + 1.0;\n  }\n"
      "  ns[0] = sc;\n  nn[0] = (float)tr;\n";
  elementwise(op, "update_loss_scale",
              {out("ns"), out("nn"), in("s"), in("n"), in("f")}, {ns, nn, s, n, f}, 1, body);
}

void FunctionGen::adamw(const Op &op) {
  int p = op.single("param"), g = op.single("grad"), m = op.single("exp_avg"),
      v = op.single("exp_avg_sq"), lr = op.single("lr"), step = op.single("step");
  int np = result(op, 0), nm = result(op, 1), nv = result(op, 2);
  for (int id : {p, g, m, v, lr, step, np, nm, nv})
    requireFloat(id, "an operand");
  elementwise(op, "adamw",
              {out("np"), out("nm"), out("nv"), out("status", "unsigned"), in("p"), in("g"),
               in("m"), in("v"), in("lr"), in("step")},
              {np, nm, nv, status(), p, g, m, v, lr, step}, type(p).numel(),
              optimizerStatement("adamw", op,
                                 {"p[i]", "g[i]", "m[i]", "v[i]", "lr[0]", "step[0]"},
                                 {"np[i]", "nm[i]", "nv[i]"}));
}

void FunctionGen::sgd(const Op &op) {
  int p = op.single("param"), g = op.single("grad"), b = op.single("momentum_buffer"),
      lr = op.single("lr");
  int np = result(op, 0), nb = result(op, 1);
  for (int id : {p, g, b, lr, np, nb})
    requireFloat(id, "an operand");
  elementwise(op, "sgd", {out("np"), out("nb"), in("p"), in("g"), in("b"), in("lr")},
              {np, nb, p, g, b, lr}, type(p).numel(),
              optimizerStatement("sgd", op, {"p[i]", "g[i]", "b[i]", "lr[0]"},
                                 {"np[i]", "nb[i]"}));
}

void FunctionGen::registerOptimizer(Emitters &e) {
  e[OpKind::AnyNonFinite] = [](FunctionGen &g, const Op &op) { g.anyNonFinite(op); };
  e[OpKind::Select] = [](FunctionGen &g, const Op &op) { g.select(op); };
  e[OpKind::UpdateLossScale] = [](FunctionGen &g, const Op &op) { g.updateLossScale(op); };
  e[OpKind::AdamW] = [](FunctionGen &g, const Op &op) { g.adamw(op); };
  e[OpKind::SGD] = [](FunctionGen &g, const Op &op) { g.sgd(op); };
}

} // namespace mlir::med::cuda
