//===- Random.cpp - med.random: counter-based random numbers ----------------------===//
//
// Each element is a pure function of (key, stream, sample, index) (medrun/Random.h), so
// the threads may split the work any way and the CUDA kernel draws the same numbers.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"
#include "medrun/Random.h"

#include "Dispatch.h"

#include <type_traits>

namespace medrun::cpu {
using namespace detail;

void random(const Tensor &key, int64_t stream, Distribution distribution, double probability,
            Tensor &y) {
  requireDType("random", "key", key, DType::I64);
  if (key.numel() != 1 || y.shape().empty())
    throw Error(str("med kernel random: expected a scalar key and a result of at least one "
                    "dimension, got ",
                    shapeStr(key.shape()), " and ", shapeStr(y.shape())));
  if (stream < 0 || stream > int64_t(UINT32_MAX))
    throw Error(str("med kernel random: stream ", stream, " is not a 32-bit counter word"));
  const int64_t k = ptr<int64_t>(key)[0];
  const int64_t samples = y.shape()[0], per = samples ? y.numel() / samples : 0;
  if (per > (int64_t(1) << 32))
    throw Error(str("med kernel random: ", per, " elements per sample; at most 2^32"));
  dispatchFloat(y.dtype(), "random", [&](auto tag) {
    using T = decltype(tag);
    T *out = ptr<T>(y);
    parallelFor(y.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        const PhiloxCounter w = randomWords(k, static_cast<uint32_t>(stream),
                                            static_cast<uint32_t>(j / per),
                                            static_cast<uint32_t>(j % per));
        const float v = distribution == Distribution::Normal  ? randomNormal(w)
                        : distribution == Distribution::Uniform ? randomUniform(w)
                        : randomUniform(w) < probability       ? 1.0f
                                                                : 0.0f;
        out[j] = store<T>(static_cast<Acc<T>>(v));
      }
    });
  });
}

void dropout(const Tensor &x, const Tensor &key, int64_t stream, double p, Tensor &y) {
  requireDType("dropout", "key", key, DType::I64);
  requireDType("dropout", "result", y, x.dtype());
  if (key.numel() != 1 || x.shape().empty() || y.shape() != x.shape())
    throw Error(str("med kernel dropout: expected a scalar key and a result shaped as the input "
                    "(of at least one dimension), got ",
                    shapeStr(key.shape()), ", ", shapeStr(x.shape()), " and ",
                    shapeStr(y.shape())));
  if (stream < 0 || stream > int64_t(UINT32_MAX))
    throw Error(str("med kernel dropout: stream ", stream, " is not a 32-bit counter word"));
  if (!(p >= 0 && p < 1))
    throw Error(str("med kernel dropout: p ", p, " is not in [0, 1)"));
  const int64_t k = ptr<int64_t>(key)[0];
  const int64_t samples = x.shape()[0], per = samples ? x.numel() / samples : 0;
  if (per > (int64_t(1) << 32))
    throw Error(str("med kernel dropout: ", per, " elements per sample; at most 2^32"));
  dispatchFloat(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const Acc<T> s = std::is_same_v<T, double> ? Acc<T>(1.0 / (1.0 - p))
                                               : Acc<T>(dropoutScale(p));
    const T *in = ptr<T>(x);
    T *out = ptr<T>(y);
    parallelFor(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        const PhiloxCounter w = dropoutWords(k, static_cast<uint32_t>(stream),
                                             static_cast<uint32_t>(j / per),
                                             static_cast<uint32_t>(j % per));
        out[j] = store<T>(dropoutKeeps(w, p) ? load(in[j]) * s : Acc<T>(0));
      }
    });
  });
}

} // namespace medrun::cpu
