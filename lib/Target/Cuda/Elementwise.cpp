//===- Elementwise.cpp - the scalar table and the elementwise op kernels -------------===//
//
// Each elementwise op has one scalar expression (scalarExpr), used by its own vectorized
// kernel and by every fused kernel it is part of (Fusion/Elementwise.cpp).
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

#include <cstdio>
#include <cstring>

namespace mlir::med::cuda {

/// The scalar expression of an elementwise op: the f32 result from its operands' f32
/// expressions, in operand order. One definition serves the op's own kernel and every
/// fused kernel it is part of. Empty for ops without one.
std::string scalarExpr(const std::string &kind, const std::vector<std::string> &x,
                       const Op *op) {
  if (x.size() == 1) {
    const std::string &v = x[0];
    // The rectifiers keep a NaN (torch's relu is clamp_min; NaN > 0 is false).
    if (kind == "relu")
      return "(" + v + " < 0.0f ? 0.0f : " + v + ")";
    if (kind == "leaky_relu")
      return op ? "(" + v + " > 0.0f ? " + v + " : __fmul_rn(" +
                      flt(op->floatAttr("negative_slope")) + ", " + v + "))"
                : "";
    if (kind == "gelu")
      return "gelu(" + v + ")";
    if (kind == "sigmoid")
      return "1.0f / (1.0f + expf(-" + v + "))";
    if (kind == "neg")
      return "-" + v;
    if (kind == "exp")
      return "expf(" + v + ")";
    if (kind == "log")
      return "logf(" + v + ")";
    if (kind == "sqrt")
      return "sqrtf(" + v + ")";
  } else if (x.size() == 2) {
    const std::string &u = x[0], &v = x[1];
    // Rounded one by one (never contracted into an fma by --fmad), as the CPU backend
    // rounds them: a sampled parameter such as u·(hi − lo) + lo then has the CPU's bits,
    // and so do the positions and nearest labels it decides (test/cuda, gpu-check augment).
    if (kind == "add")
      return "__fadd_rn(" + u + ", " + v + ")";
    if (kind == "sub")
      return "__fsub_rn(" + u + ", " + v + ")";
    if (kind == "mul")
      return "__fmul_rn(" + u + ", " + v + ")";
    if (kind == "div")
      return u + " / " + v;
    if (kind == "max")
      return "maxNaN(" + u + ", " + v + ")";
    if (kind == "min")
      return "minNaN(" + u + ", " + v + ")";
    if (kind == "pow")
      return "powf(" + u + ", " + v + ")";
    if (kind == "gelu_grad") // x, dy
      return v + " * geluGradFactor(" + u + ")";
    if (kind == "prelu") // x, slope
      return "(" + u + " > 0.0f ? " + u + " : __fmul_rn(" + v + ", " + u + "))";
  } else if (x.size() == 3) {
    if (kind == "prelu_grad") // x, slope, dy
      return "(" + x[0] + " > 0.0f ? " + x[2] + " : __fmul_rn(" + x[1] + ", " + x[2] + "))";
    if (kind == "select") // cond, on_true, on_false; NaN counts as true, as != 0 does
      return "(" + x[0] + " != 0.0f ? " + x[1] + " : " + x[2] + ")";
  }
  return "";
}

/// The operands of an op with a scalar form, in the order its scalar form takes them.
const std::vector<const char *> &scalarOperands(const std::string &kind) {
  static const std::vector<const char *> unary{"input"}, binary{"lhs", "rhs"},
      geluGrad{"input", "grad_output"}, prelu{"input", "slope"},
      preluGrad{"input", "slope", "grad_output"},
      adamw{"param", "grad", "exp_avg", "exp_avg_sq", "lr", "step"},
      sgd{"param", "grad", "momentum_buffer", "lr"}, select{"cond", "on_true", "on_false"}, none;
  if (kind == "gelu_grad")
    return geluGrad;
  if (kind == "prelu")
    return prelu;
  if (kind == "prelu_grad")
    return preluGrad;
  if (kind == "leaky_relu")
    return unary;
  if (kind == "adamw")
    return adamw;
  if (kind == "sgd")
    return sgd;
  if (kind == "select")
    return select;
  if (!scalarExpr(kind, {"v"}).empty())
    return unary;
  if (!scalarExpr(kind, {"u", "v"}).empty())
    return binary;
  return none;
}

void FunctionGen::constant(const Op &op) {
  int y = result(op);
  requireFloat(y, "the constant");
  std::vector<double> v = op.floatsAttr("value");
  int64_t n = type(y).numel();
  if (static_cast<int64_t>(v.size()) != n && v.size() != 1)
    error("constant has " + std::to_string(v.size()) + " values for " + std::to_string(n) +
          " elements");
  if (v.size() == 1) {
    elementwise(op, "constant", {out("y")}, {y}, n, "  y[i] = " + flt(v[0]) + ";\n");
    return;
  }
  // The values' bits: a device table's initializer must be constant, and ±inf or NaN
  // spelled as floats is not (__int_as_float is a function).
  std::string data = "__device__ const unsigned KNAME_data[" + std::to_string(n) + "] = {";
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08xu", bits);
    data += (i ? ", " : "") + std::string(hex);
  }
  data += "};\n";
  elementwise(op, "constant", {out("y")}, {y}, n, "  y[i] = __uint_as_float(KNAME_data[i]);\n",
              data);
}

void FunctionGen::unary(const Op &op) {
  int x = op.single("input"), y = result(op);
  requireFloat(x, "the input");
  requireFloat(y, "the result");
  if (type(x).numel() != type(y).numel())
    error("result and input sizes differ");
  const int64_t n = type(y).numel();
  vectorized(op, op.kind, {out("y"), in("x")}, {y, x}, n, lanesFor({y, x}), indexFor(n),
             {{"x"}}, {"y"}, "",
             "  const float v = x_v[k];\n  y_v[k] = " + scalarExpr(op.kind, {"v"}, &op) + ";\n");
}

/// An op whose operands broadcast to its result, by its scalar form (prelu, prelu_grad):
/// each operand read as read() reads it, in scalarOperands order.
void FunctionGen::broadcastMap(const Op &op) {
  int y = result(op);
  requireFloat(y, "the result");
  const auto &ys = shape(y);
  const int64_t n = type(y).numel();
  std::vector<int> ids{y};
  for (const char *name : scalarOperands(op.kind)) {
    ids.push_back(op.single(name));
    requireFloat(ids.back(), std::string("the operand '") + name + "'");
  }
  const int lanes = lanesFor(ids);
  const Index ix = indexFor(n);
  OperandReads r{ys, lanes, ix};
  std::vector<std::string> params{out("y")}, xs;
  for (size_t j = 1; j < ids.size(); ++j) {
    const std::string name = "x" + std::to_string(j - 1);
    params.push_back(in(name));
    xs.push_back(read(r, ids[j], name));
  }
  r.perElement += "  y_v[k] = " + scalarExpr(op.kind, xs, &op) + ";\n";
  vectorized(op, op.kind, params, ids, n, lanes, ix, r.loads, {"y"}, r.perThread, r.perElement);
}

void FunctionGen::binary(const Op &op) {
  int a = op.single("lhs"), b = op.single("rhs"), y = result(op);
  for (int id : {a, b, y})
    requireFloat(id, "an operand");
  const auto &ys = shape(y);
  const int64_t n = type(y).numel();
  const int lanes = lanesFor({y, a, b});
  const Index ix = indexFor(n);
  OperandReads r{ys, lanes, ix};
  const std::string u = read(r, a, "a"), v = read(r, b, "b");
  r.perElement += "  const float u = " + u + ", v = " + v + ";\n  y_v[k] = " +
                  scalarExpr(op.kind, {"u", "v"}) + ";\n";
  vectorized(op, op.kind, {out("y"), in("a"), in("b")}, {y, a, b}, n, lanes, ix, r.loads, {"y"},
             r.perThread, r.perElement);
}

void FunctionGen::geluGrad(const Op &op) {
  int x = op.single("input"), dy = op.single("grad_output"), dx = result(op);
  for (int id : {x, dy, dx})
    requireFloat(id, "an operand");
  std::string body = "  dx_v[k] = " + scalarExpr("gelu_grad", {"x_v[k]", "dy_v[k]"}) + ";\n";
  const int64_t n = type(x).numel();
  vectorized(op, "gelu_grad", {out("dx"), in("x"), in("dy")}, {dx, x, dy}, n,
             lanesFor({dx, x, dy}), indexFor(n), {{"x"}, {"dy"}}, {"dx"}, "", body);
}

/// One thread per line along the axis, as the CPU kernel: the max, the sum of
/// exp(x − max) in order (f32), then the quotients. Consecutive threads take consecutive
/// inner positions, so every pass over the axis reads and writes coalesced.
void FunctionGen::softmax(const Op &op) {
  int x = op.single("input"), y = result(op);
  requireFloat(x, "the input");
  requireFloat(y, "the result");
  const auto &s = shape(x);
  const int64_t axis = op.intAttr("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()) || shape(y) != s)
    error("softmax: axis or result shape does not fit the input");
  const int64_t outer = product(std::vector<int64_t>(s.begin(), s.begin() + axis)),
                inner = product(s, axis + 1), n = s[axis];
  const std::string N = num(n), I = num(inner);
  std::string body = "  const i64 base = (i / " + I + ") * " + num(n * inner) + " + i % " + I +
                     ";\n"
                     "  float m = (float)x[base];\n"
                     "  for (i64 c = 1; c < " + N + "; ++c) m = fmaxf(m, (float)x[base + c * " + I + "]);\n"
                     "  float sum = 0.0f;\n"
                     "  for (i64 c = 0; c < " + N + "; ++c) sum += expf((float)x[base + c * " + I + "] - m);\n"
                     "  for (i64 c = 0; c < " + N + "; ++c) y[base + c * " + I + "] = expf((float)x[base + c * " + I + "] - m) / sum;\n";
  elementwise(op, "softmax", {out("y"), in("x")}, {y, x}, outer * inner, body);
}

/// torch.maximum/minimum backward: the winner takes the gradient, a tie gives each half,
/// a NaN operand passes it to both (no comparison holds).
void FunctionGen::extremumGrad(const Op &op) {
  int a = op.single("lhs"), b = op.single("rhs"), dy = op.single("grad_output");
  int da = result(op, 0), db = result(op, 1);
  for (int id : {a, b, dy, da, db})
    requireFloat(id, "an operand");
  const auto &ys = shape(dy);
  if (shape(da) != ys || shape(db) != ys)
    error("the gradients must have the output gradient's shape");
  const bool isMax = op.strAttr("kind") == "max";
  std::string body, ia = "i", ib = "i";
  if (shape(a) != ys || shape(b) != ys) {
    body += decompose("i", ys, "o");
    ia = offsetExpr("o", broadcastStrides(shape(a), ys));
    ib = offsetExpr("o", broadcastStrides(shape(b), ys));
  }
  body += "  const float u = a[" + ia + "], v = b[" + ib + "], g = dy[i];\n"
          "  const float shared = u == v ? g / 2.0f : g;\n";
  body += isMax ? "  da[i] = u < v ? 0.0f : shared;\n  db[i] = u > v ? 0.0f : shared;\n"
                : "  da[i] = u > v ? 0.0f : shared;\n  db[i] = u < v ? 0.0f : shared;\n";
  elementwise(op, isMax ? "max_grad" : "min_grad",
              {out("da"), out("db"), in("a"), in("b"), in("dy")}, {da, db, a, b, dy},
              type(dy).numel(), body);
}

void FunctionGen::registerElementwise(Emitters &e) {
  e[OpKind::Constant] = [](FunctionGen &g, const Op &op) { g.constant(op); };
  e[OpKind::Gelu] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::Sigmoid] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::Neg] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::Exp] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::Log] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::Sqrt] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::Softmax] = [](FunctionGen &g, const Op &op) { g.softmax(op); };
  e[OpKind::Relu] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::LeakyRelu] = [](FunctionGen &g, const Op &op) { g.unary(op); };
  e[OpKind::PRelu] = [](FunctionGen &g, const Op &op) { g.broadcastMap(op); };
  e[OpKind::PReluGrad] = [](FunctionGen &g, const Op &op) { g.broadcastMap(op); };
  e[OpKind::Add] = [](FunctionGen &g, const Op &op) { g.binary(op); };
  e[OpKind::Sub] = [](FunctionGen &g, const Op &op) { g.binary(op); };
  e[OpKind::Mul] = [](FunctionGen &g, const Op &op) { g.binary(op); };
  e[OpKind::Div] = [](FunctionGen &g, const Op &op) { g.binary(op); };
  e[OpKind::Pow] = [](FunctionGen &g, const Op &op) { g.binary(op); };
  e[OpKind::Max] = [](FunctionGen &g, const Op &op) { g.binary(op); };
  e[OpKind::Min] = [](FunctionGen &g, const Op &op) { g.binary(op); };
  e[OpKind::GeluGrad] = [](FunctionGen &g, const Op &op) { g.geluGrad(op); };
  e[OpKind::ExtremumGrad] = [](FunctionGen &g, const Op &op) { g.extremumGrad(op); };
}

} // namespace mlir::med::cuda
