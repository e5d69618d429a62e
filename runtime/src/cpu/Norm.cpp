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

/// Per segment k of `segments` contiguous segments of `len` values starting at
/// base + k·len: the sums of d and d² for d = value − shift[k] (shift empty: 0), in a fixed
/// order: chunks of kReduceChunk in parallel (8 lanes each), partials combined in chunk
/// order.
template <typename A, typename T>
void segmentMoments(const T *base, int64_t segments, int64_t len, const std::vector<A> &shift,
                    std::vector<A> &sum, std::vector<A> &sumSq) {
  sum.assign(static_cast<size_t>(segments), A(0));
  sumSq.assign(static_cast<size_t>(segments), A(0));
  if (len <= 0 || segments <= 0)
    return;
  const int64_t per = numChunks(len, kReduceChunk);
  std::vector<A> part(static_cast<size_t>(2 * segments * per));
  parallelFor(segments * per, grainFor(std::min(len, kReduceChunk)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t seg = t / per, ch = t % per;
      int64_t b = ch * kReduceChunk, n = std::min(len, b + kReduceChunk) - b;
      const T *p = base + seg * len + b;
      const A sh = shift.empty() ? A(0) : shift[seg];
      A l1[8] = {}, l2[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) {
          A d = load(p[i + j]) - sh;
          l1[j] += d;
          l2[j] += d * d;
        }
      for (int j = 0; i < n; ++i, ++j) {
        A d = load(p[i]) - sh;
        l1[j] += d;
        l2[j] += d * d;
      }
      part[2 * t] = ((l1[0] + l1[1]) + (l1[2] + l1[3])) + ((l1[4] + l1[5]) + (l1[6] + l1[7]));
      part[2 * t + 1] = ((l2[0] + l2[1]) + (l2[2] + l2[3])) + ((l2[4] + l2[5]) + (l2[6] + l2[7]));
    }
  });
  for (int64_t seg = 0; seg < segments; ++seg)
    for (int64_t ch = 0; ch < per; ++ch) {
      sum[seg] += part[2 * (seg * per + ch)];
      sumSq[seg] += part[2 * (seg * per + ch) + 1];
    }
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

  // Two passes: the mean, then the deviations from it. The second pass also sums the
  // deviations themselves, which corrects the rounding error of the first mean (the
  // "corrected two-pass" algorithm): var = (Σd² − (Σd)²/m) / m, mean += Σd / m.
  std::vector<A> mean, unused, dev, devSq;
  segmentMoments<A>(xp, segs, m, {}, mean, unused);
  for (A &v : mean)
    v /= A(m);
  segmentMoments<A>(xp, segs, m, mean, dev, devSq);
  std::vector<A> rstd(static_cast<size_t>(segs));
  for (int64_t i = 0; i < segs; ++i) {
    A var = std::max(A(0), (devSq[i] - dev[i] * dev[i] / A(m)) / A(m));
    mean[i] += dev[i] / A(m);
    rstd[i] = A(1) / std::sqrt(var + A(eps));
  }

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
  std::vector<A> unused, nx;
  segmentMoments<A>(xp, d.n * d.c, d.s, {}, unused, nx);
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
