//===- Random.cpp - med.random ---------------------------------------------------------===//
//
// One thread per element: Philox of the element's counter (prelude.cuh's medRandomWords,
// the device side of medrun/Random.h), so that the numbers do not depend on the launch. The
// fused kernels that draw them (the elementwise and resample templates) use the same code.
// med.dropout likewise: its own kernel and the fused ones apply dropoutApply.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

std::string FunctionGen::randomDraw(const Op &op, const std::vector<int64_t> &shape,
                                    const std::string &key, const std::string &element,
                                    const std::string &y) {
  const int64_t n = product(shape), samples = shape.empty() ? 1 : shape[0];
  const int64_t per = samples ? n / samples : 1, stream = op.intAttr("stream");
  if (stream < 0 || stream > int64_t(UINT32_MAX) || per > (int64_t(1) << 32))
    error("the stream and each sample's element count must fit a 32-bit counter word");
  const std::string &d = op.strAttr("distribution");
  const std::string draw = d == "normal"      ? "medRandomNormal(w)"
                           : d == "bernoulli" ? "(medRandomUniform(w) < " + dbl(op.floatAttr("probability")) + " ? 1.0f : 0.0f)"
                           : d == "uniform"   ? "medRandomUniform(w)"
                                              : "";
  if (draw.empty())
    error("unknown distribution '" + d + "'");
  return "  {\n    const PhiloxWords w = medRandomWords(" + key + ", (unsigned)" + num(stream) +
         ", (unsigned)(" + element + " / " + num(per) + "), (unsigned)(" + element + " % " +
         num(per) + "));\n    " + y + " = " + draw + ";\n  }\n";
}

void FunctionGen::random(const Op &op) {
  int key = op.single("key"), y = result(op);
  requireFloat(y, "the result");
  if (type(key).dtype != DType::I64 || type(key).numel() != 1)
    error("the key must be an i64 scalar");
  elementwise(op, "random", {out("y", elemType(y)), in("key", "i64")}, {y, key}, type(y).numel(),
              randomDraw(op, shape(y), "key[0]", "i", "y[i]"));
}

std::string FunctionGen::dropoutApply(const Op &op, const std::vector<int64_t> &shape,
                                      const std::string &key, const std::string &element,
                                      const std::string &x, const std::string &y) {
  const int64_t n = product(shape), samples = shape.empty() ? 1 : shape[0];
  const int64_t per = samples ? n / samples : 1, stream = op.intAttr("stream");
  if (stream < 0 || stream > int64_t(UINT32_MAX) || per > (int64_t(1) << 32))
    error("the stream and each sample's element count must fit a 32-bit counter word");
  const double p = op.floatAttr("p");
  if (!(p >= 0 && p < 1))
    error("dropout: p must be in [0, 1)");
  // medrun/Random.h's dropoutScale: 1/(1 - p) rounded to f32 once; the product rounded
  // (never contracted into a following add), as the CPU kernel's.
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  return "  " + y + " = medDropoutKeeps(" + key + ", (unsigned)" + num(stream) + ", (unsigned)(" +
         element + " / " + num(per) + "), (unsigned)(" + element + " % " + num(per) + "), " +
         dbl(p) + ") ? __fmul_rn(" + x + ", " + flt(scale) + ") : 0.0f;\n";
}

void FunctionGen::dropout(const Op &op) {
  int x = op.single("input"), key = op.single("key"), y = result(op);
  requireFloat(x, "the input");
  requireFloat(y, "the result");
  if (type(key).dtype != DType::I64 || type(key).numel() != 1)
    error("the key must be an i64 scalar");
  if (shape(x) != shape(y))
    error("result and input shapes differ");
  const int64_t n = type(y).numel();
  vectorized(op, "dropout", {out("y"), in("x"), in("key", "i64")}, {y, x, key}, n,
             lanesFor({y, x}), indexFor(n), {{"x"}}, {"y"}, "",
             "  const float v = x_v[k];\n  float t;\n" +
                 dropoutApply(op, shape(y), "key[0]", "i", "v", "t") + "  y_v[k] = t;\n");
}

void FunctionGen::registerRandom(Emitters &e) {
  e[OpKind::Random] = [](FunctionGen &g, const Op &op) { g.random(op); };
  e[OpKind::Dropout] = [](FunctionGen &g, const Op &op) { g.dropout(op); };
}

} // namespace mlir::med::cuda
