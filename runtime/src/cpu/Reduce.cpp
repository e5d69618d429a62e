//===- Reduce.cpp - sum / mean / max / min over a set of axes ---------------------===//
//
// Output elements are the kept axes in order; each reduces the R elements of the reduced
// axes in row-major order, split into fixed chunks of kReduceChunk elements whose partials
// are combined in chunk order (the same bits for any thread count).
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <cmath>
#include <limits>

namespace medrun::cpu {
namespace {
using namespace detail;

struct Axes {
  std::vector<int64_t> size, stride; // outermost first
  int64_t count() const {
    int64_t n = 1;
    for (int64_t s : size)
      n *= s;
    return n;
  }
};

/// Appends an axis, merging it into the previous one when contiguous with it.
void pushAxis(Axes &a, int64_t size, int64_t stride) {
  if (size == 1)
    return;
  if (!a.size.empty() && a.stride.back() == stride * size) {
    a.size.back() *= size;
    a.stride.back() = stride;
    return;
  }
  a.size.push_back(size);
  a.stride.push_back(stride);
}

/// Offset of flat index `i` of the axes.
int64_t offsetOf(const Axes &a, int64_t i) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(a.size.size()) - 1; d >= 0; --d) {
    off += (i % a.size[d]) * a.stride[d];
    i /= a.size[d];
  }
  return off;
}

enum class Combine { Sum, Max, Min };

template <typename A> inline A combine(Combine k, A m, A v) {
  if (k == Combine::Sum)
    return m + v;
  if (m != m)
    return m;
  if (v != v)
    return v;
  return k == Combine::Max ? (m < v ? v : m) : (v < m ? v : m);
}

/// Reduces elements [b, e) (row-major over `red`) starting at `base`.
template <typename T>
Acc<T> reduceRange(Combine k, const T *base, const Axes &red, int64_t b, int64_t e) {
  using A = Acc<T>;
  const int64_t dims = static_cast<int64_t>(red.size.size());
  if (dims == 0) // a single element
    return load(base[0]);
  // Odometer over the reduced axes; the innermost axis is walked in runs.
  std::vector<int64_t> idx(dims);
  int64_t off = 0;
  {
    int64_t i = b;
    for (int64_t d = dims - 1; d >= 0; --d) {
      idx[d] = i % red.size[d];
      i /= red.size[d];
      off += idx[d] * red.stride[d];
    }
  }
  const int64_t inner = red.size[dims - 1], st = red.stride[dims - 1];
  A acc = k == Combine::Sum ? A(0)
          : k == Combine::Max ? -std::numeric_limits<A>::infinity()
                              : std::numeric_limits<A>::infinity();
  bool first = true;
  for (int64_t pos = b; pos < e;) {
    int64_t run = std::min(inner - idx[dims - 1], e - pos);
    const T *p = base + off;
    if (k == Combine::Sum) {
      A s = st == 1 ? laneSum<A>(run, [&](int64_t i) { return load(p[i]); })
                    : laneSum<A>(run, [&](int64_t i) { return load(p[i * st]); });
      acc = first ? s : acc + s;
    } else {
      for (int64_t i = 0; i < run; ++i)
        acc = combine(k, acc, load(p[i * st]));
    }
    first = false;
    pos += run;
    // Advance the odometer by `run` (to the start of the next innermost run).
    off += run * st;
    idx[dims - 1] += run;
    for (int64_t d = dims - 1; d > 0 && idx[d] == red.size[d]; --d) {
      off -= idx[d] * red.stride[d];
      idx[d] = 0;
      ++idx[d - 1];
      off += red.stride[d - 1];
    }
  }
  return acc;
}

/// Splits the axes of `x` into the kept ones (output elements) and the reduced ones.
void splitAxes(const char *kernel, const Tensor &x, const std::vector<int64_t> &axes, Axes &kept,
               Axes &red) {
  const int64_t r = x.rank();
  std::vector<bool> reduced(r, false);
  for (int64_t a : axes) {
    int64_t ax = a < 0 ? a + r : a;
    if (ax < 0 || ax >= r)
      throw Error(str("med kernel ", kernel, ": axis ", a, " out of range for shape ",
                      shapeStr(x.shape())));
    reduced[ax] = true;
  }
  std::vector<int64_t> stride(r);
  int64_t s = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    stride[i] = s;
    s *= x.dim(i);
  }
  for (int64_t i = 0; i < r; ++i)
    pushAxis(reduced[i] ? red : kept, x.dim(i), stride[i]);
}

template <typename T>
void reduceImpl(Reduce op, const Tensor &x, const std::vector<int64_t> &axes, Tensor &y) {
  using A = Acc<T>;
  requireDType("reduce", "result", y, x.dtype());
  Axes kept, red;
  splitAxes("reduce", x, axes, kept, red);
  const int64_t outs = kept.count(), count = red.count();
  if (y.numel() != outs)
    throw Error(str("med kernel reduce: result shape ", shapeStr(y.shape()), " does not match ",
                    shapeStr(x.shape()), " reduced over the given axes"));
  if (outs == 0)
    return;
  const T *xp = ptr<T>(x);
  T *yp = ptr<T>(y);
  const Combine k = op == Reduce::Max   ? Combine::Max
                    : op == Reduce::Min ? Combine::Min
                                        : Combine::Sum;
  if (x.numel() == 0) { // empty reduction: torch gives 0 (sum), NaN (mean); max/min: NaN
    A v = op == Reduce::Sum ? A(0) : std::numeric_limits<A>::quiet_NaN();
    for (int64_t o = 0; o < outs; ++o)
      yp[o] = store<T>(v);
    return;
  }
  const int64_t per = numChunks(count, kReduceChunk);
  std::vector<A> part(static_cast<size_t>(outs * per));
  parallelFor(outs * per, grainFor(std::min(count, kReduceChunk)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t o = t / per, b = (t % per) * kReduceChunk;
      part[t] = reduceRange<T>(k, xp + offsetOf(kept, o), red, b, std::min(count, b + kReduceChunk));
    }
  });
  for (int64_t o = 0; o < outs; ++o) {
    A acc = part[o * per];
    for (int64_t c = 1; c < per; ++c)
      acc = combine(k, acc, part[o * per + c]);
    if (op == Reduce::Mean)
      acc /= A(count);
    yp[o] = store<T>(acc);
  }
}

// torch.amax / amin's backward: dx = (dy / count) · (x == y) per reduced set, count its
// elements equal to y. Each output element's set is handled by one task: no shared writes.
template <typename T>
void reduceExtremumGradImpl(const Tensor &x, const Tensor &y, const Tensor &dy,
                            const std::vector<int64_t> &axes, Tensor &dx) {
  using A = Acc<T>;
  const char *k = "reduce_extremum_grad";
  requireDType(k, "extremum", y, x.dtype());
  requireDType(k, "output gradient", dy, x.dtype());
  requireDType(k, "result", dx, x.dtype());
  Axes kept, red;
  splitAxes(k, x, axes, kept, red);
  const int64_t outs = kept.count(), count = red.count();
  if (y.numel() != outs || dy.numel() != outs || dx.shape() != x.shape())
    throw Error(str("med kernel reduce_extremum_grad: input ", shapeStr(x.shape()),
                    " reduced over the given axes has ", outs, " elements; extremum ",
                    shapeStr(y.shape()), ", output gradient ", shapeStr(dy.shape()),
                    " and result ", shapeStr(dx.shape()), " do not fit"));
  if (x.numel() == 0)
    return;
  const T *xp = ptr<T>(x), *yp = ptr<T>(y), *gp = ptr<T>(dy);
  T *dp = ptr<T>(dx);
  parallelFor(outs, grainFor(2 * count), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const int64_t base = offsetOf(kept, o);
      const A m = load(yp[o]);
      int64_t ties = 0;
      for (int64_t j = 0; j < count; ++j)
        ties += load(xp[base + offsetOf(red, j)]) == m;
      const A share = load(gp[o]) / A(ties); // NaN or inf without ties, as torch
      for (int64_t j = 0; j < count; ++j) {
        const int64_t i = base + offsetOf(red, j);
        dp[i] = store<T>(share * A(load(xp[i]) == m ? 1 : 0));
      }
    }
  });
}

} // namespace

void reduceExtremumGrad(const Tensor &x, const Tensor &y, const Tensor &dy,
                        const std::vector<int64_t> &axes, Tensor &dx) {
  dispatchFloat(x.dtype(), "reduce_extremum_grad", [&](auto tag) {
    reduceExtremumGradImpl<decltype(tag)>(x, y, dy, axes, dx);
  });
}

void sumSquares(const std::vector<const Tensor *> &inputs, Tensor &y) {
  if (y.numel() != 1)
    throw Error(str("med kernel sum_squares: the result must be a scalar, got ", shapeStr(y.shape())));
  double total = 0;
  for (const Tensor *x : inputs)
    dispatchFloat(x->dtype(), "sum_squares", [&](auto tag) {
      using T = decltype(tag);
      const T *p = ptr<T>(*x);
      const int64_t n = x->numel(), per = numChunks(n, kReduceChunk);
      std::vector<double> part(static_cast<size_t>(per));
      parallelFor(per, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          double acc = 0;
          for (int64_t i = c * kReduceChunk, e = std::min(n, i + kReduceChunk); i < e; ++i)
            acc += double(load(p[i])) * double(load(p[i]));
          part[c] = acc;
        }
      });
      for (double v : part)
        total += v;
    });
  dispatchFloat(y.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    ptr<T>(y)[0] = store<T>(static_cast<Acc<T>>(total));
  });
}

void reduce(Reduce op, const Tensor &x, const std::vector<int64_t> &axes, Tensor &y) {
  dispatchFloat(x.dtype(), "reduce", [&](auto tag) { reduceImpl<decltype(tag)>(op, x, axes, y); });
}

} // namespace medrun::cpu
