//===- Norm.cpp - group_norm, channel_layer_norm, grn -------------------------------===//
//
// Statistics are computed in the accumulation type with two passes (mean, then the sum of
// squared deviations), each a sum of fixed-size chunks (kReduceChunk elements, summed in
// 8 fixed lanes) whose partials are combined in chunk order: the same bits for any thread
// count.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <cmath>

namespace medrun::cpu {
namespace {
using namespace detail;

/// N, C and the number of trailing elements S of an N×C×… tensor.
struct NCS {
  int64_t n, c, s;
};
NCS ncs(const char *kernel, const Tensor &x) {
  if (x.rank() < 2)
    throw Error(str("med kernel ", kernel, ": expected an N×C×… input, got ", shapeStr(x.shape())));
  NCS r{x.dim(0), x.dim(1), 1};
  for (int64_t i = 2; i < x.rank(); ++i)
    r.s *= x.dim(i);
  return r;
}

/// For each of `segments` contiguous segments of `len` values starting at base + k·len,
/// the sum of f(k, value) in a fixed order: chunks of kReduceChunk in parallel, partials
/// combined in chunk order.
template <typename A, typename T, typename F>
std::vector<A> segmentSums(const T *base, int64_t segments, int64_t len, F f) {
  std::vector<A> out(static_cast<size_t>(segments), A(0));
  if (len <= 0 || segments <= 0)
    return out;
  const int64_t per = numChunks(len, kReduceChunk);
  std::vector<A> part(static_cast<size_t>(segments * per));
  parallelFor(segments * per, grainFor(std::min(len, kReduceChunk)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t seg = t / per, ch = t % per;
      int64_t b = ch * kReduceChunk, e = std::min(len, b + kReduceChunk);
      const T *p = base + seg * len + b;
      part[t] = laneSum<A>(e - b, [&](int64_t i) { return f(seg, load(p[i])); });
    }
  });
  for (int64_t seg = 0; seg < segments; ++seg) {
    A s = A(0);
    for (int64_t ch = 0; ch < per; ++ch)
      s += part[seg * per + ch];
    out[seg] = s;
  }
  return out;
}

/// Calls fn(row, begin, end) over [0, len) of each of `rows` rows, split into fixed
/// pieces; for elementwise passes.
template <typename F> void forRows(int64_t rows, int64_t len, F fn) {
  if (rows <= 0 || len <= 0)
    return;
  const int64_t per = numChunks(len, kReduceChunk);
  parallelFor(rows * per, grainFor(std::min(len, kReduceChunk)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t row = t / per, b = (t % per) * kReduceChunk;
      fn(row, b, std::min(len, b + kReduceChunk));
    }
  });
}

template <typename T>
void groupNormImpl(const Tensor &x, const Tensor &gamma, const Tensor &beta, int64_t groups,
                   double eps, Tensor &y) {
  using A = Acc<T>;
  const char *k = "group_norm";
  requireDType(k, "gamma", gamma, x.dtype());
  requireDType(k, "beta", beta, x.dtype());
  requireDType(k, "result", y, x.dtype());
  NCS d = ncs(k, x);
  if (groups < 1 || d.c % groups != 0)
    throw Error(str("med kernel group_norm: ", d.c, " channels do not split into ", groups,
                    " groups"));
  if (x.numel() == 0)
    return;
  const T *xp = ptr<T>(x), *gp = ptr<T>(gamma), *bp = ptr<T>(beta);
  T *yp = ptr<T>(y);
  const int64_t cg = d.c / groups, m = cg * d.s, segs = d.n * groups;

  std::vector<A> mean = segmentSums<A>(xp, segs, m, [](int64_t, A v) { return v; });
  for (A &v : mean)
    v /= A(m);
  std::vector<A> var =
      segmentSums<A>(xp, segs, m, [&](int64_t seg, A v) { return (v - mean[seg]) * (v - mean[seg]); });
  std::vector<A> rstd(static_cast<size_t>(segs));
  for (int64_t i = 0; i < segs; ++i)
    rstd[i] = A(1) / std::sqrt(var[i] / A(m) + A(eps));

  // Rows are (n, c) planes of S values.
  forRows(d.n * d.c, d.s, [&](int64_t row, int64_t b, int64_t e) {
    int64_t c = row % d.c, seg = (row / d.c) * groups + c / cg;
    const A mu = mean[seg], scale = rstd[seg] * load(gp[c]), shift = load(bp[c]);
    const T *xr = xp + row * d.s;
    T *yr = yp + row * d.s;
    for (int64_t i = b; i < e; ++i)
      yr[i] = store<T>((load(xr[i]) - mu) * scale + shift);
  });
}

template <typename T>
void channelLayerNormImpl(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps,
                          Tensor &y) {
  using A = Acc<T>;
  const char *k = "channel_layer_norm";
  requireDType(k, "gamma", gamma, x.dtype());
  requireDType(k, "beta", beta, x.dtype());
  requireDType(k, "result", y, x.dtype());
  NCS d = ncs(k, x);
  if (x.numel() == 0)
    return;
  const T *xp = ptr<T>(x), *gp = ptr<T>(gamma), *bp = ptr<T>(beta);
  T *yp = ptr<T>(y);
  // A task normalizes a block of positions of one sample, looping channels outside and
  // positions inside (contiguous); each position sums its channels in increasing order.
  const int64_t block = 256, blocks = numChunks(d.s, block);
  parallelFor(d.n * blocks, grainFor(block * d.c * 3), [&](int64_t t0, int64_t t1) {
    A mean[block], sq[block];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / blocks, s0 = (t % blocks) * block, len = std::min(block, d.s - s0);
      const T *xb = xp + n * d.c * d.s + s0;
      T *yb = yp + n * d.c * d.s + s0;
      for (int64_t i = 0; i < len; ++i)
        mean[i] = sq[i] = A(0);
      for (int64_t c = 0; c < d.c; ++c)
        for (int64_t i = 0; i < len; ++i)
          mean[i] += load(xb[c * d.s + i]);
      for (int64_t i = 0; i < len; ++i)
        mean[i] /= A(d.c);
      for (int64_t c = 0; c < d.c; ++c)
        for (int64_t i = 0; i < len; ++i) {
          A v = load(xb[c * d.s + i]) - mean[i];
          sq[i] += v * v;
        }
      for (int64_t i = 0; i < len; ++i)
        sq[i] = std::sqrt(sq[i] / A(d.c) + A(eps)); // now the standard deviation
      for (int64_t c = 0; c < d.c; ++c) {
        const A g = load(gp[c]), b = load(bp[c]);
        for (int64_t i = 0; i < len; ++i)
          yb[c * d.s + i] = store<T>((load(xb[c * d.s + i]) - mean[i]) / sq[i] * g + b);
      }
    }
  });
}

template <typename T>
void grnImpl(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps, Tensor &y) {
  using A = Acc<T>;
  const char *k = "grn";
  requireDType(k, "gamma", gamma, x.dtype());
  requireDType(k, "beta", beta, x.dtype());
  requireDType(k, "result", y, x.dtype());
  NCS d = ncs(k, x);
  if (x.numel() == 0)
    return;
  const T *xp = ptr<T>(x), *gp = ptr<T>(gamma), *bp = ptr<T>(beta);
  T *yp = ptr<T>(y);
  std::vector<A> nx = segmentSums<A>(xp, d.n * d.c, d.s, [](int64_t, A v) { return v * v; });
  for (A &v : nx)
    v = std::sqrt(v); // gx = ‖x‖₂ per (n, c)
  for (int64_t n = 0; n < d.n; ++n) {
    A s = A(0);
    for (int64_t c = 0; c < d.c; ++c)
      s += nx[n * d.c + c];
    const A denom = s / A(d.c) + A(eps);
    for (int64_t c = 0; c < d.c; ++c)
      nx[n * d.c + c] /= denom;
  }
  forRows(d.n * d.c, d.s, [&](int64_t row, int64_t b, int64_t e) {
    int64_t c = row % d.c;
    const A g = load(gp[c]), bt = load(bp[c]), nv = nx[row];
    const T *xr = xp + row * d.s;
    T *yr = yp + row * d.s;
    for (int64_t i = b; i < e; ++i) {
      A v = load(xr[i]);
      yr[i] = store<T>(g * (v * nv) + bt + v);
    }
  });
}

} // namespace

void groupNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta, int64_t groups,
               double eps, Tensor &y) {
  dispatchFloat(x.dtype(), "group_norm", [&](auto tag) {
    groupNormImpl<decltype(tag)>(x, gamma, beta, groups, eps, y);
  });
}

void channelLayerNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps,
                      Tensor &y) {
  dispatchFloat(x.dtype(), "channel_layer_norm", [&](auto tag) {
    channelLayerNormImpl<decltype(tag)>(x, gamma, beta, eps, y);
  });
}

void grn(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps, Tensor &y) {
  dispatchFloat(x.dtype(), "grn", [&](auto tag) { grnImpl<decltype(tag)>(x, gamma, beta, eps, y); });
}

} // namespace medrun::cpu
