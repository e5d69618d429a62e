//===- Random.cpp - med.random ---------------------------------------------------------===//
//
// One thread per element: Philox of the element's counter (prelude.cuh's medRandomWords,
// the device side of medrun/Random.h), so that the numbers do not depend on the launch.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

void FunctionGen::random(const Op &op) {
  int key = op.single("key"), y = result(op);
  requireFloat(y, "the result");
  if (type(key).dtype != DType::I64 || type(key).numel() != 1)
    error("the key must be an i64 scalar");
  const int64_t n = type(y).numel(), samples = shape(y).at(0);
  const int64_t per = samples ? n / samples : 1, stream = op.intAttr("stream");
  if (stream < 0 || stream > int64_t(UINT32_MAX) || per > (int64_t(1) << 32))
    error("the stream and each sample's element count must fit a 32-bit counter word");
  const std::string &d = op.strAttr("distribution");
  const std::string draw = d == "normal"      ? "medRandomNormal(w)"
                           : d == "bernoulli" ? "(medRandomUniform(w) < " + dbl(op.floatAttr("probability")) + " ? 1.0f : 0.0f)"
                                              : "medRandomUniform(w)";
  std::string body = "  const PhiloxWords w = medRandomWords(key[0], (unsigned)" + num(stream) +
                     ", (unsigned)(i / " + num(per) + "), (unsigned)(i % " + num(per) + "));\n" +
                     "  y[i] = " + draw + ";\n";
  elementwise(op, "random", {out("y", elemType(y)), in("key", "i64")}, {y, key}, n, body);
}

void FunctionGen::registerRandom(Emitters &e) {
  e["random"] = [](FunctionGen &g, const Op &op) { g.random(op); };
}

} // namespace mlir::med::cuda
