//===- Norm.cpp - group_norm, batch_norm, channel_layer_norm, grn -------------------------------===//
//
// Statistics are computed in the accumulation type, with the same bits for any thread
// count. group_norm's are med.group_norm_stats' chunked merge (medrun/NormStats.h, shared
// with the CUDA code generator); the others take two passes (mean, then the sum of squared
// deviations), each a sum of fixed-size chunks (kReduceChunk elements, summed in 8 fixed
// lanes) whose partials are combined in chunk order.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"
#include "medrun/NormStats.h"

#include <cmath>
#include <type_traits>

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

/// Sums of `n` values d = f(p[i]) and d², in 8 fixed lanes combined in a fixed tree.
template <typename A, typename T, typename F>
void laneSums(const T *p, int64_t n, F f, A &sum, A &sumSq) {
  A l1[8] = {}, l2[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      A d = f(load(p[i + j]));
      l1[j] += d;
      l2[j] += d * d;
    }
  for (int j = 0; i < n; ++i, ++j) {
    A d = f(load(p[i]));
    l1[j] += d;
    l2[j] += d * d;
  }
  sum = ((l1[0] + l1[1]) + (l1[2] + l1[3])) + ((l1[4] + l1[5]) + (l1[6] + l1[7]));
  sumSq = ((l2[0] + l2[1]) + (l2[2] + l2[3])) + ((l2[4] + l2[5]) + (l2[6] + l2[7]));
}

// med.group_norm_stats (medrun/NormStats.h): the mean and 1/sqrt(var + eps) of each of
// `segments` groups of `cg` contiguous planes `p`. A chunk's mean and M2 come from two
// passes over its values: the mean (the chunk's pivot), then the deviations d from it,
// whose sum corrects the pivot (dev = Σd/n) and M2 = Σd² − (Σd)²/n; the chunks are merged
// in the fixed tree.
template <typename A, typename T>
void groupStatistics(const T *base, int64_t segments, int64_t cg, normstats::Box p, double eps,
                     std::vector<A> &mean, std::vector<A> &rstd) {
  namespace ns = normstats;
  mean.assign(static_cast<size_t>(segments), A(0));
  rstd.assign(static_cast<size_t>(segments), A(1) / std::sqrt(A(eps)));
  const int64_t s = p.volume();
  if (segments <= 0 || cg * s <= 0) // empty groups: mean 0 and variance 0
    return;
  const int64_t per = ns::chunksPerPlane(p), chunks = cg * per;
  std::vector<A> pivot(static_cast<size_t>(segments * chunks)), dev(pivot.size()),
      m2(pivot.size());
  parallelFor(segments * chunks, grainFor(std::min(s, ns::kChunk.volume())),
              [&](int64_t t0, int64_t t1) {
    std::vector<A> v(static_cast<size_t>(ns::kChunk.volume()));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t seg = t / chunks, c = t % chunks;
      const ns::ChunkAt at = ns::chunkAt(c % per, p);
      const T *x = base + (seg * cg + c / per) * s;
      int64_t n = 0; // the chunk's values, row by row
      for (int64_t d = at.d0; d < at.d0 + at.e.d; ++d)
        for (int64_t h = at.h0; h < at.h0 + at.e.h; ++h)
          for (int64_t w = at.w0; w < at.w0 + at.e.w; ++w)
            v[n++] = load(x[(d * p.h + h) * p.w + w]);
      A sum, unused, d1, d2;
      laneSums<A>(v.data(), n, [](A a) { return a; }, sum, unused);
      const A shift = sum / A(n);
      laneSums<A>(v.data(), n, [shift](A a) { return a - shift; }, d1, d2);
      pivot[t] = shift;
      dev[t] = d1 / A(n);
      m2[t] = std::max(A(0), d2 - d1 * d1 / A(n));
    }
  });
  parallelFor(segments, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t seg = s0; seg < s1; ++seg) {
      const int64_t at = seg * chunks;
      ns::mergeTree(&pivot[at], &dev[at], &m2[at], chunks, p, per);
      mean[seg] = pivot[at] + dev[at];
      rstd[seg] = A(1) / std::sqrt(m2[at] / A(cg * s) + A(eps));
    }
  });
}

// Over the `channels` planes (stride `plane`) at each of `len` positions of `x`: the mean
// and sqrt(biased variance + eps), two passes.
template <typename A, typename T>
void channelStatistics(const T *x, int64_t channels, int64_t plane, int64_t len, double eps,
                       A *mean, A *sd) {
  for (int64_t i = 0; i < len; ++i)
    mean[i] = sd[i] = A(0);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < len; ++i)
      mean[i] += load(x[c * plane + i]);
  for (int64_t i = 0; i < len; ++i)
    mean[i] /= A(channels);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < len; ++i) {
      A v = load(x[c * plane + i]) - mean[i];
      sd[i] += v * v;
    }
  for (int64_t i = 0; i < len; ++i)
    sd[i] = std::sqrt(sd[i] / A(channels) + A(eps));
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

/// The dtype of Acc<T>: where saved statistics live.
template <typename T> DType accDType() {
  return std::is_same_v<Acc<T>, double> ? DType::F64 : DType::F32;
}

/// Checks a saved statistic of group_norm: N×groups values of the accumulation type.
template <typename T>
void checkStatistic(const char *k, const char *what, const Tensor &t, int64_t n, int64_t groups) {
  requireDType(k, what, t, accDType<T>());
  if (t.numel() != n * groups)
    throw Error(str("med kernel ", k, ": ", what, " ", shapeStr(t.shape()), " needs ", n, "x",
                    groups, " values (one per sample and group)"));
}

/// group_norm's map: y = (x − mean)·rstd·gamma + beta with the statistics of the element's
/// (sample, group).
template <typename T>
void normalize(const Tensor &x, const Acc<T> *mean, const Acc<T> *rstd, const Acc<T> *gp,
               const Acc<T> *bp, int64_t groups, Tensor &y) {
  using A = Acc<T>;
  if (x.numel() == 0)
    return;
  NCS d = ncs("group_norm", x);
  const int64_t cg = d.c / groups;
  const T *xp = ptr<T>(x);
  T *yp = ptr<T>(y);
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

/// The operands group_norm and group_norm_apply share: gamma and beta in the accumulation
/// type, the result in x's, channels that split into `groups`.
template <typename T>
NCS checkAffine(const char *k, const Tensor &x, const Tensor &gamma, const Tensor &beta,
                int64_t groups, const Tensor &y) {
  requireDType(k, "gamma", gamma, accDType<T>());
  requireDType(k, "beta", beta, accDType<T>());
  requireDType(k, "result", y, x.dtype());
  NCS d = ncs(k, x);
  if (groups < 1 || d.c % groups != 0)
    throw Error(str("med kernel ", k, ": ", d.c, " channels do not split into ", groups,
                    " groups"));
  return d;
}

template <typename T>
void groupNormImpl(const Tensor &x, const Tensor &gamma, const Tensor &beta, int64_t groups,
                   double eps, Tensor &y, Tensor *meanOut, Tensor *rstdOut) {
  using A = Acc<T>;
  const char *k = "group_norm";
  NCS d = checkAffine<T>(k, x, gamma, beta, groups, y);
  if (!meanOut != !rstdOut)
    throw Error("med kernel group_norm: saves both statistics (mean and rstd) or neither");
  if (meanOut) {
    checkStatistic<T>(k, "mean", *meanOut, d.n, groups);
    checkStatistic<T>(k, "rstd", *rstdOut, d.n, groups);
  }
  const int64_t cg = d.c / groups, segs = d.n * groups;
  std::vector<A> mean, rstd;
  groupStatistics<A>(ptr<T>(x), segs, cg, normstats::planeOf(x.shape()), eps, mean, rstd);
  if (meanOut) {
    std::copy(mean.begin(), mean.end(), ptr<A>(*meanOut));
    std::copy(rstd.begin(), rstd.end(), ptr<A>(*rstdOut));
  }
  normalize<T>(x, mean.data(), rstd.data(), ptr<A>(gamma), ptr<A>(beta), groups, y);
}

template <typename T>
void groupNormApplyImpl(const Tensor &x, const Tensor &mean, const Tensor &rstd,
                        const Tensor &gamma, const Tensor &beta, int64_t groups, Tensor &y) {
  using A = Acc<T>;
  const char *k = "group_norm_apply";
  NCS d = checkAffine<T>(k, x, gamma, beta, groups, y);
  checkStatistic<T>(k, "mean", mean, d.n, groups);
  checkStatistic<T>(k, "rstd", rstd, d.n, groups);
  normalize<T>(x, ptr<A>(mean), ptr<A>(rstd), ptr<A>(gamma), ptr<A>(beta), groups, y);
}

template <typename T>
void groupNormStatsImpl(const Tensor &x, int64_t groups, double eps, Tensor &meanOut,
                        Tensor &rstdOut) {
  using A = Acc<T>;
  const char *k = "group_norm_stats";
  NCS d = ncs(k, x);
  if (groups < 1 || d.c % groups != 0)
    throw Error(str("med kernel group_norm_stats: ", d.c, " channels do not split into ",
                    groups, " groups"));
  checkStatistic<T>(k, "mean", meanOut, d.n, groups);
  checkStatistic<T>(k, "rstd", rstdOut, d.n, groups);
  std::vector<A> mean, rstd;
  groupStatistics<A>(ptr<T>(x), d.n * groups, d.c / groups, normstats::planeOf(x.shape()), eps,
                     mean, rstd);
  std::copy(mean.begin(), mean.end(), ptr<A>(meanOut));
  std::copy(rstd.begin(), rstd.end(), ptr<A>(rstdOut));
}

template <typename T>
void channelLayerNormImpl(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps,
                          Tensor &y) {
  using A = Acc<T>;
  const char *k = "channel_layer_norm";
  requireDType(k, "gamma", gamma, accDType<T>());
  requireDType(k, "beta", beta, accDType<T>());
  requireDType(k, "result", y, x.dtype());
  NCS d = ncs(k, x);
  if (x.numel() == 0)
    return;
  const T *xp = ptr<T>(x);
  const A *gp = ptr<A>(gamma), *bp = ptr<A>(beta);
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
      channelStatistics(xb, d.c, d.s, len, eps, mean, sq); // sq: the std. dev.
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
  requireDType(k, "gamma", gamma, accDType<T>());
  requireDType(k, "beta", beta, accDType<T>());
  requireDType(k, "result", y, x.dtype());
  NCS d = ncs(k, x);
  if (x.numel() == 0)
    return;
  const T *xp = ptr<T>(x);
  const A *gp = ptr<A>(gamma), *bp = ptr<A>(beta);
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

/// med.batch_norm. Training form: per channel over its N planes, the mean (Σ of the
/// segments' sums / n), then the sum of squared deviations from it, both by segmentMoments
/// (fixed order); the running statistics move by momentum towards the batch's (unbiased
/// variance). Eval form: the running statistics normalize and are passed through.
template <typename T>
void batchNormImpl(const Tensor &x, const Tensor &gamma, const Tensor &beta,
                   const Tensor &runningMean, const Tensor &runningVar, double eps,
                   double momentum, bool training, Tensor &y, Tensor &newMean, Tensor &newVar) {
  using A = Acc<T>;
  const char *k = "batch_norm";
  NCS d = ncs(k, x);
  requireDType(k, "result", y, x.dtype());
  for (auto [name, t] : {std::pair<const char *, const Tensor *>{"gamma", &gamma},
                         {"beta", &beta},
                         {"running_mean", &runningMean},
                         {"running_var", &runningVar},
                         {"new_running_mean", &newMean},
                         {"new_running_var", &newVar}}) {
    requireDType(k, name, *t, accDType<T>());
    if (t->numel() != d.c)
      throw Error(str("med kernel batch_norm: ", name, " ", shapeStr(t->shape()), " needs ", d.c,
                      " values (one per channel)"));
  }
  const A *rm = ptr<A>(runningMean), *rv = ptr<A>(runningVar);
  A *nm = ptr<A>(newMean), *nv = ptr<A>(newVar);
  std::vector<A> mean(static_cast<size_t>(d.c)), rstd(static_cast<size_t>(d.c));
  if (training) {
    const int64_t n = d.n * d.s;
    if (n < 2)
      throw Error(str("med kernel batch_norm: the training form needs more than one value per "
                      "channel, got ", shapeStr(x.shape())));
    const T *xp = ptr<T>(x);
    // Segment (b, c) is plane c of sample b: index b·C + c.
    std::vector<A> sum, sumSq, shift(static_cast<size_t>(d.n * d.c));
    segmentMoments<A>(xp, d.n * d.c, d.s, {}, sum, sumSq);
    for (int64_t c = 0; c < d.c; ++c) {
      A total = A(0);
      for (int64_t b = 0; b < d.n; ++b)
        total += sum[b * d.c + c];
      mean[c] = total / A(n);
      for (int64_t b = 0; b < d.n; ++b)
        shift[b * d.c + c] = mean[c];
    }
    segmentMoments<A>(xp, d.n * d.c, d.s, shift, sum, sumSq);
    const A m = A(momentum);
    for (int64_t c = 0; c < d.c; ++c) {
      A m2 = A(0);
      for (int64_t b = 0; b < d.n; ++b)
        m2 += sumSq[b * d.c + c];
      const A var = m2 / A(n);
      rstd[c] = A(1) / std::sqrt(var + A(eps));
      nm[c] = (A(1) - m) * rm[c] + m * mean[c];
      nv[c] = (A(1) - m) * rv[c] + m * (m2 / A(n - 1));
    }
  } else {
    for (int64_t c = 0; c < d.c; ++c) {
      mean[c] = rm[c];
      rstd[c] = A(1) / std::sqrt(rv[c] + A(eps));
      nm[c] = rm[c];
      nv[c] = rv[c];
    }
  }
  // normalize's statistics are per (sample, group): here each channel's, for every sample.
  std::vector<A> meanNC(static_cast<size_t>(d.n * d.c)), rstdNC(meanNC.size());
  for (int64_t b = 0; b < d.n; ++b)
    for (int64_t c = 0; c < d.c; ++c) {
      meanNC[b * d.c + c] = mean[c];
      rstdNC[b * d.c + c] = rstd[c];
    }
  normalize<T>(x, meanNC.data(), rstdNC.data(), ptr<A>(gamma), ptr<A>(beta), d.c, y);
}

// ---- gradients -----------------------------------------------------------------------------

/// Per row r of `rows` contiguous rows of `len` values: sumDy[r] = Σ dy and
/// sumDyX[r] = Σ dy·(x − shift[r / rowsPerShift]), in the order of segmentMoments (chunks
/// of kReduceChunk, 8 lanes each, partials combined in chunk order).
template <typename A, typename T>
void rowDots(const T *x, const T *dy, int64_t rows, int64_t len, const std::vector<A> &shift,
             int64_t rowsPerShift, std::vector<A> &sumDy, std::vector<A> &sumDyX) {
  sumDy.assign(static_cast<size_t>(rows), A(0));
  sumDyX.assign(static_cast<size_t>(rows), A(0));
  if (len <= 0 || rows <= 0)
    return;
  const int64_t per = numChunks(len, kReduceChunk);
  std::vector<A> part(static_cast<size_t>(2 * rows * per));
  parallelFor(rows * per, grainFor(std::min(len, kReduceChunk)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t row = t / per, ch = t % per;
      int64_t b = ch * kReduceChunk, n = std::min(len, b + kReduceChunk) - b;
      const T *xr = x + row * len + b, *gr = dy + row * len + b;
      const A sh = shift.empty() ? A(0) : shift[row / rowsPerShift];
      A l1[8] = {}, l2[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) {
          A g = load(gr[i + j]);
          l1[j] += g;
          l2[j] += g * (load(xr[i + j]) - sh);
        }
      for (int j = 0; i < n; ++i, ++j) {
        A g = load(gr[i]);
        l1[j] += g;
        l2[j] += g * (load(xr[i]) - sh);
      }
      part[2 * t] = ((l1[0] + l1[1]) + (l1[2] + l1[3])) + ((l1[4] + l1[5]) + (l1[6] + l1[7]));
      part[2 * t + 1] = ((l2[0] + l2[1]) + (l2[2] + l2[3])) + ((l2[4] + l2[5]) + (l2[6] + l2[7]));
    }
  });
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t ch = 0; ch < per; ++ch) {
      sumDy[row] += part[2 * (row * per + ch)];
      sumDyX[row] += part[2 * (row * per + ch) + 1];
    }
}

/// Checks the operands of a norm gradient; returns false (after zeroing dgamma and dbeta)
/// when x is empty.
template <typename T>
bool normGradOperands(const char *k, const Tensor &x, const Tensor &gamma, const Tensor &dy,
                      Tensor &dx, Tensor &dgamma, Tensor &dbeta, int64_t channels) {
  requireDType(k, "gamma", gamma, accDType<T>());
  requireDType(k, "output gradient", dy, x.dtype());
  requireDType(k, "input gradient", dx, x.dtype());
  requireDType(k, "gamma gradient", dgamma, accDType<T>());
  requireDType(k, "beta gradient", dbeta, accDType<T>());
  if (dy.numel() != x.numel() || dx.numel() != x.numel())
    throw Error(str("med kernel ", k, ": input ", shapeStr(x.shape()), ", output gradient ",
                    shapeStr(dy.shape()), " and input gradient ", shapeStr(dx.shape()),
                    " do not match"));
  if (gamma.numel() != channels || dgamma.numel() != channels || dbeta.numel() != channels)
    throw Error(str("med kernel ", k, ": gamma ", shapeStr(gamma.shape()), ", its gradient ",
                    shapeStr(dgamma.shape()), " and the beta gradient ", shapeStr(dbeta.shape()),
                    " need ", channels, " values"));
  if (x.numel() != 0)
    return true;
  std::fill(ptr<Acc<T>>(dgamma), ptr<Acc<T>>(dgamma) + channels, Acc<T>(0));
  std::fill(ptr<Acc<T>>(dbeta), ptr<Acc<T>>(dbeta) + channels, Acc<T>(0));
  return false;
}

// GroupNorm backward per (n, group) with x̂ = (x − μ)·rstd over the group's m elements and
// g = dy·γ_c: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)); dγ_c = Σ dy·x̂, dβ_c = Σ dy over
// samples and positions. The statistics are those the forward kernel saved, same bits.
template <typename T>
void groupNormGradImpl(const Tensor &x, const Tensor &gamma, const Tensor &meanT,
                       const Tensor &rstdT, const Tensor &dy, int64_t groups, Tensor &dx,
                       Tensor &dgamma, Tensor &dbeta) {
  using A = Acc<T>;
  const char *k = "group_norm_grad";
  NCS d = ncs(k, x);
  if (groups < 1 || d.c % groups != 0)
    throw Error(str("med kernel group_norm_grad: ", d.c, " channels do not split into ", groups,
                    " groups"));
  checkStatistic<T>(k, "mean", meanT, d.n, groups);
  checkStatistic<T>(k, "rstd", rstdT, d.n, groups);
  if (!normGradOperands<T>(k, x, gamma, dy, dx, dgamma, dbeta, d.c))
    return;
  const T *xp = ptr<T>(x), *dyp = ptr<T>(dy);
  const A *gp = ptr<A>(gamma);
  T *dxp = ptr<T>(dx);
  const int64_t cg = d.c / groups, m = cg * d.s, segs = d.n * groups;

  // The statistics the forward kernel normalized with (saved by groupNorm).
  const std::vector<A> mean(ptr<A>(meanT), ptr<A>(meanT) + segs),
      rstd(ptr<A>(rstdT), ptr<A>(rstdT) + segs);

  // Per (n, c): Σ dy and Σ dy·(x − μ).
  std::vector<A> sDy, sDyX;
  rowDots<A>(xp, dyp, d.n * d.c, d.s, mean, cg, sDy, sDyX);

  // Per (n, group): mean(g) and mean(g·x̂).
  std::vector<A> mg(static_cast<size_t>(segs)), mgx(static_cast<size_t>(segs));
  for (int64_t seg = 0; seg < segs; ++seg) {
    A a = A(0), b = A(0);
    for (int64_t j = 0; j < cg; ++j) {
      const int64_t row = seg * cg + j; // (n, c) with c = group·cg + j
      const A gm = load(gp[row % d.c]);
      a += gm * sDy[row];
      b += gm * sDyX[row];
    }
    mg[seg] = a / A(m);
    mgx[seg] = b * rstd[seg] / A(m);
  }
  A *dgp = ptr<A>(dgamma), *dbp = ptr<A>(dbeta);
  for (int64_t c = 0; c < d.c; ++c) {
    A a = A(0), b = A(0);
    for (int64_t n = 0; n < d.n; ++n) {
      a += sDyX[n * d.c + c] * rstd[n * groups + c / cg];
      b += sDy[n * d.c + c];
    }
    dgp[c] = a;
    dbp[c] = b;
  }

  forRows(d.n * d.c, d.s, [&](int64_t row, int64_t b, int64_t e) {
    const int64_t c = row % d.c, seg = (row / d.c) * groups + c / cg;
    const A mu = mean[seg], rs = rstd[seg], gm = load(gp[c]), a = mg[seg], bx = mgx[seg];
    const T *xr = xp + row * d.s, *gr = dyp + row * d.s;
    T *dr = dxp + row * d.s;
    for (int64_t i = b; i < e; ++i) {
      const A xh = (load(xr[i]) - mu) * rs;
      dr[i] = store<T>(rs * (gm * load(gr[i]) - a - xh * bx));
    }
  });
}

// The same per (n, position) over the C channels, with the statistics of
// channelLayerNormImpl (x̂ = (x − mean) / std). dγ and dβ are sums over samples and
// positions: a task handles a fixed piece of positions of one sample (blocks of 256) and
// keeps per-channel partials, combined in task order.
template <typename T>
void channelLayerNormGradImpl(const Tensor &x, const Tensor &gamma, const Tensor &dy, double eps,
                              Tensor &dx, Tensor &dgamma, Tensor &dbeta) {
  using A = Acc<T>;
  const char *k = "channel_layer_norm_grad";
  NCS d = ncs(k, x);
  if (!normGradOperands<T>(k, x, gamma, dy, dx, dgamma, dbeta, d.c))
    return;
  const T *xp = ptr<T>(x), *dyp = ptr<T>(dy);
  const A *gp = ptr<A>(gamma);
  T *dxp = ptr<T>(dx);
  constexpr int64_t block = 256, piece = 16 * block;
  const int64_t pieces = numChunks(d.s, piece), tasks = d.n * pieces;
  std::vector<A> part(static_cast<size_t>(tasks * 2 * d.c)); // [task][dγ C, dβ C]
  std::vector<A> gam(static_cast<size_t>(d.c));
  for (int64_t c = 0; c < d.c; ++c)
    gam[c] = load(gp[c]);
  parallelFor(tasks, 1, [&](int64_t t0, int64_t t1) {
    A mean[block], sd[block], a[block], bx[block];
    std::vector<A> xh(static_cast<size_t>(d.c * block));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / pieces, pb = (t % pieces) * piece, pe = std::min(d.s, pb + piece);
      A *dG = part.data() + t * 2 * d.c, *dB = dG + d.c;
      for (int64_t c = 0; c < 2 * d.c; ++c)
        dG[c] = A(0);
      for (int64_t s0 = pb; s0 < pe; s0 += block) {
        const int64_t len = std::min(block, pe - s0);
        const T *xb = xp + n * d.c * d.s + s0, *gb = dyp + n * d.c * d.s + s0;
        T *db = dxp + n * d.c * d.s + s0;
        // Statistics exactly as channelLayerNormImpl.
        for (int64_t i = 0; i < len; ++i)
          a[i] = bx[i] = A(0);
        channelStatistics(xb, d.c, d.s, len, eps, mean, sd);
        // x̂, Σ_c g, Σ_c g·x̂ per position and the per-channel sums.
        for (int64_t c = 0; c < d.c; ++c) {
          A *xr = xh.data() + c * block;
          const T *gr = gb + c * d.s;
          for (int64_t i = 0; i < len; ++i) {
            xr[i] = (load(xb[c * d.s + i]) - mean[i]) / sd[i];
            const A g = load(gr[i]) * gam[c];
            a[i] += g;
            bx[i] += g * xr[i];
          }
          dG[c] += laneSum<A>(len, [&](int64_t i) { return load(gr[i]) * xr[i]; });
          dB[c] += laneSum<A>(len, [&](int64_t i) { return load(gr[i]); });
        }
        for (int64_t i = 0; i < len; ++i) {
          a[i] /= A(d.c);
          bx[i] /= A(d.c);
        }
        for (int64_t c = 0; c < d.c; ++c) {
          const A *xr = xh.data() + c * block;
          const T *gr = gb + c * d.s;
          T *dr = db + c * d.s;
          for (int64_t i = 0; i < len; ++i)
            dr[i] = store<T>((load(gr[i]) * gam[c] - a[i] - xr[i] * bx[i]) / sd[i]);
        }
      }
    }
  });
  A *dgp = ptr<A>(dgamma), *dbp = ptr<A>(dbeta);
  for (int64_t c = 0; c < d.c; ++c) {
    A sg = A(0), sb = A(0);
    for (int64_t t = 0; t < tasks; ++t) {
      sg += part[t * 2 * d.c + c];
      sb += part[t * 2 * d.c + d.c + c];
    }
    dgp[c] = sg;
    dbp[c] = sb;
  }
}

// GRN: G_c = ‖x_c‖₂, D = mean_c G + eps, N_c = G_c / D, y = γ_c·x·N_c + β_c + x (per n).
// With a_c = γ_c·Σ_s dy·x (= ∂L/∂N_c):
//   ∂L/∂G_c = a_c / D − Σ_c' a_c'·G_c' / (C·D²)   (N_c' depends on G_c through D)
//   dx = dy·(1 + γ_c·N_c) + ∂L/∂G_c · x / G_c      (the last term 0 where G_c = 0, as torch's
//                                                   norm backward masks a zero norm)
//   dγ_c = Σ_n N_c·Σ_s dy·x,  dβ_c = Σ_{n,s} dy.
template <typename T>
void grnGradImpl(const Tensor &x, const Tensor &gamma, const Tensor &dy, double eps, Tensor &dx,
                 Tensor &dgamma, Tensor &dbeta) {
  using A = Acc<T>;
  const char *k = "grn_grad";
  NCS d = ncs(k, x);
  if (!normGradOperands<T>(k, x, gamma, dy, dx, dgamma, dbeta, d.c))
    return;
  const T *xp = ptr<T>(x), *dyp = ptr<T>(dy);
  const A *gp = ptr<A>(gamma);
  T *dxp = ptr<T>(dx);
  const int64_t rows = d.n * d.c;
  // G and N exactly as grnImpl.
  std::vector<A> unused, gx;
  segmentMoments<A>(xp, rows, d.s, {}, unused, gx);
  for (A &v : gx)
    v = std::sqrt(v);
  std::vector<A> nx(gx), denom(static_cast<size_t>(d.n));
  for (int64_t n = 0; n < d.n; ++n) {
    A s = A(0);
    for (int64_t c = 0; c < d.c; ++c)
      s += nx[n * d.c + c];
    denom[n] = s / A(d.c) + A(eps);
    for (int64_t c = 0; c < d.c; ++c)
      nx[n * d.c + c] /= denom[n];
  }
  std::vector<A> sDy, sDyX;
  rowDots<A>(xp, dyp, rows, d.s, {}, 1, sDy, sDyX);
  // Per (n, c): the coefficient of x in dx, ∂L/∂G_c / G_c.
  std::vector<A> coef(static_cast<size_t>(rows));
  for (int64_t n = 0; n < d.n; ++n) {
    A s = A(0);
    for (int64_t c = 0; c < d.c; ++c)
      s += load(gp[c]) * sDyX[n * d.c + c] * gx[n * d.c + c];
    const A D = denom[n], shared = s / (A(d.c) * D * D);
    for (int64_t c = 0; c < d.c; ++c) {
      const int64_t r = n * d.c + c;
      const A dG = load(gp[c]) * sDyX[r] / D - shared;
      coef[r] = gx[r] > A(0) ? dG / gx[r] : A(0);
    }
  }
  A *dgp = ptr<A>(dgamma), *dbp = ptr<A>(dbeta);
  for (int64_t c = 0; c < d.c; ++c) {
    A a = A(0), b = A(0);
    for (int64_t n = 0; n < d.n; ++n) {
      a += sDyX[n * d.c + c] * nx[n * d.c + c];
      b += sDy[n * d.c + c];
    }
    dgp[c] = a;
    dbp[c] = b;
  }
  forRows(rows, d.s, [&](int64_t row, int64_t b, int64_t e) {
    const A scale = A(1) + load(gp[row % d.c]) * nx[row], cf = coef[row];
    const T *xr = xp + row * d.s, *gr = dyp + row * d.s;
    T *dr = dxp + row * d.s;
    for (int64_t i = b; i < e; ++i)
      dr[i] = store<T>(load(gr[i]) * scale + cf * load(xr[i]));
  });
}

} // namespace

void groupNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta, int64_t groups,
               double eps, Tensor &y, Tensor *mean, Tensor *rstd) {
  dispatchFloat(x.dtype(), "group_norm", [&](auto tag) {
    groupNormImpl<decltype(tag)>(x, gamma, beta, groups, eps, y, mean, rstd);
  });
}

void batchNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta,
               const Tensor &runningMean, const Tensor &runningVar, double eps, double momentum,
               bool training, Tensor &y, Tensor &newMean, Tensor &newVar) {
  dispatchFloat(x.dtype(), "batch_norm", [&](auto tag) {
    batchNormImpl<decltype(tag)>(x, gamma, beta, runningMean, runningVar, eps, momentum,
                                 training, y, newMean, newVar);
  });
}

void groupNormStats(const Tensor &x, int64_t groups, double eps, Tensor &mean, Tensor &rstd) {
  dispatchFloat(x.dtype(), "group_norm_stats", [&](auto tag) {
    groupNormStatsImpl<decltype(tag)>(x, groups, eps, mean, rstd);
  });
}

void groupNormApply(const Tensor &x, const Tensor &mean, const Tensor &rstd, const Tensor &gamma,
                    const Tensor &beta, int64_t groups, Tensor &y) {
  dispatchFloat(x.dtype(), "group_norm_apply", [&](auto tag) {
    groupNormApplyImpl<decltype(tag)>(x, mean, rstd, gamma, beta, groups, y);
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

void groupNormGrad(const Tensor &x, const Tensor &gamma, const Tensor &mean, const Tensor &rstd,
                   const Tensor &dy, int64_t groups, Tensor &dx, Tensor &dgamma, Tensor &dbeta) {
  dispatchFloat(x.dtype(), "group_norm_grad", [&](auto tag) {
    groupNormGradImpl<decltype(tag)>(x, gamma, mean, rstd, dy, groups, dx, dgamma, dbeta);
  });
}

void channelLayerNormGrad(const Tensor &x, const Tensor &gamma, const Tensor &dy, double eps,
                          Tensor &dx, Tensor &dgamma, Tensor &dbeta) {
  dispatchFloat(x.dtype(), "channel_layer_norm_grad", [&](auto tag) {
    channelLayerNormGradImpl<decltype(tag)>(x, gamma, dy, eps, dx, dgamma, dbeta);
  });
}

void grnGrad(const Tensor &x, const Tensor &gamma, const Tensor &dy, double eps, Tensor &dx,
             Tensor &dgamma, Tensor &dbeta) {
  dispatchFloat(x.dtype(), "grn_grad", [&](auto tag) {
    grnGradImpl<decltype(tag)>(x, gamma, dy, eps, dx, dgamma, dbeta);
  });
}

} // namespace medrun::cpu
