//===- Dispatch.h - dtype dispatch and shared helpers of the CPU kernels -------===//
//
// Internal to runtime/src/cpu. Kernels are templates over the storage type T (float,
// double, bf16); Acc<T> is the type math and accumulation happen in (double for double,
// float otherwise). dispatchFloat calls a generic lambda with a value of the storage type
// so the lambda can recover it with decltype.
//
// Determinism: every helper here sums in an order fixed by the sizes alone (fixed-size
// chunks, fixed lanes), never by the thread count.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SRC_CPU_DISPATCH_H
#define MEDRUN_SRC_CPU_DISPATCH_H

#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace medrun::cpu::detail {

template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <typename T> using Acc = typename AccOf<T>::type;

/// Storage -> accumulation type.
template <typename T> inline Acc<T> load(T v) { return static_cast<Acc<T>>(v); }
inline float load(bf16 v) { return static_cast<float>(v); }

/// Accumulation -> storage type (bf16 rounds to nearest even).
template <typename T> inline T store(Acc<T> v) { return static_cast<T>(v); }
template <> inline bf16 store<bf16>(float v) { return bf16(v); }

/// Calls f(T{}) for the float storage type of `t`; throws Error naming `kernel` otherwise.
template <typename F> decltype(auto) dispatchFloat(DType t, const char *kernel, F &&f) {
  switch (t) {
  case DType::F32: return f(float());
  case DType::F64: return f(double());
  case DType::BF16: return f(bf16());
  default:
    throw Error(str("med kernel ", kernel, ": unsupported element type ", dtypeName(t),
                    " (expected f32, f64 or bf16)"));
  }
}

/// Throws Error unless `t` has dtype `want` (the executor checks this already; the check
/// turns a caller bug into a message instead of reading memory as the wrong type).
inline void requireDType(const char *kernel, const char *what, const Tensor &t, DType want) {
  if (t.dtype() != want)
    throw Error(str("med kernel ", kernel, ": ", what, " has element type ", dtypeName(t.dtype()),
                    ", expected ", dtypeName(want)));
}

template <typename T> inline const T *ptr(const Tensor &t) {
  return static_cast<const T *>(t.raw());
}
template <typename T> inline T *ptr(Tensor &t) { return static_cast<T *>(t.raw()); }

/// Writes a scalar into element `i` of a float tensor of any float storage type.
inline void storeAny(Tensor &t, int64_t i, double v) {
  switch (t.dtype()) {
  case DType::F32: ptr<float>(t)[i] = static_cast<float>(v); return;
  case DType::F64: ptr<double>(t)[i] = v; return;
  case DType::BF16: ptr<bf16>(t)[i] = bf16(static_cast<float>(v)); return;
  default:
    throw Error(str("med kernel: cannot write a result of element type ", dtypeName(t.dtype()),
                    " (expected f32, f64 or bf16)"));
  }
}

/// Size of the fixed chunks big reductions are split into. Partials of chunks are combined
/// in chunk order, so the result is independent of the thread count.
constexpr int64_t kReduceChunk = 8192;

/// Sum of f(i) for i in [0, n), in a fixed order: 8 interleaved lanes (lets the compiler
/// vectorize without reassociating), combined pairwise at the end.
template <typename A, typename F> inline A laneSum(int64_t n, F &&f) {
  A l[8] = {A(0), A(0), A(0), A(0), A(0), A(0), A(0), A(0)};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      l[j] += f(i + j);
  for (int j = 0; i < n; ++i, ++j)
    l[j] += f(i);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/// Grain (items per parallelFor chunk) so that one chunk holds about `target` units of
/// work when each item costs `perItem` units.
inline int64_t grainFor(int64_t perItem, int64_t target = 32768) {
  return std::max<int64_t>(1, target / std::max<int64_t>(1, perItem));
}

} // namespace medrun::cpu::detail

#endif // MEDRUN_SRC_CPU_DISPATCH_H
