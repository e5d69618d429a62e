//===- Elementwise.cpp - unary and broadcasting binary kernels -------------------===//
//
// Every output element is computed alone from its inputs, so any split over threads gives
// the same bits. Math happens in the accumulation type (float for f32/bf16, double for f64).
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace medrun::cpu {
namespace {
using namespace detail;

constexpr int64_t kElementGrain = 16384;

template <typename T, typename F> void mapUnary(const Tensor &x, Tensor &y, F f) {
  const T *xp = ptr<T>(x);
  T *yp = ptr<T>(y);
  parallelFor(x.numel(), kElementGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      yp[i] = store<T>(f(load(xp[i])));
  });
}

template <typename T> void unaryImpl(Unary op, const Tensor &x, Tensor &y) {
  using A = Acc<T>;
  requireDType("unary", "result", y, x.dtype());
  if (y.numel() != x.numel())
    throw Error(str("med kernel unary: result shape ", shapeStr(y.shape()),
                    " does not match input shape ", shapeStr(x.shape())));
  switch (op) {
  case Unary::Gelu:
    // torch.nn.GELU(): x · 0.5 · (1 + erf(x / √2)).
    return mapUnary<T>(x, y, [](A v) {
      return v * A(0.5) * (A(1) + std::erf(v * A(0.70710678118654752440)));
    });
  case Unary::Sigmoid:
    return mapUnary<T>(x, y, [](A v) { return A(1) / (A(1) + std::exp(-v)); });
  case Unary::Neg: return mapUnary<T>(x, y, [](A v) { return -v; });
  case Unary::Exp: return mapUnary<T>(x, y, [](A v) { return std::exp(v); });
  case Unary::Log: return mapUnary<T>(x, y, [](A v) { return std::log(v); });
  case Unary::Sqrt: return mapUnary<T>(x, y, [](A v) { return std::sqrt(v); });
  // torch's relu (clamp_min): a NaN stays NaN.
  case Unary::Relu: return mapUnary<T>(x, y, [](A v) { return v < A(0) ? A(0) : v; });
  }
  throw Error("med kernel unary: unknown operation");
}

/// torch.maximum / torch.minimum: a NaN in either operand gives NaN.
template <typename A> inline A maxNaN(A a, A b) {
  if (a != a)
    return a;
  if (b != b)
    return b;
  return a < b ? b : a;
}
template <typename A> inline A minNaN(A a, A b) {
  if (a != a)
    return a;
  if (b != b)
    return b;
  return b < a ? b : a;
}

/// The broadcast iteration space after dropping size-1 axes and merging axes that are
/// contiguous for the result and both operands alike.
struct BroadcastPlan {
  std::vector<int64_t> size, strideA, strideB; // outermost first; the last is the row

  /// Calls row(r, oa, ob) for every row r of the result (`rows` of `len` elements), in
  /// parallel: oa and ob are the offsets of the row's first element in a and b.
  template <typename F> void forEachRow(int64_t rows, int64_t len, F row) const {
    const int64_t dims = static_cast<int64_t>(size.size());
    parallelFor(rows, grainFor(len, kElementGrain), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t oa = 0, ob = 0, rest = r;
        for (int64_t d = dims - 2; d >= 0; --d) {
          int64_t i = rest % size[d];
          rest /= size[d];
          oa += i * strideA[d];
          ob += i * strideB[d];
        }
        row(r, oa, ob);
      }
    });
  }
};

BroadcastPlan planBroadcast(const Shape &a, const Shape &b, const Shape &y,
                            const char *kernel = "binary") {
  const int64_t r = static_cast<int64_t>(y.size());
  auto stridesFor = [&](const Shape &s) {
    if (static_cast<int64_t>(s.size()) > r)
      throw Error(str("med kernel ", kernel, ": operand shape ", shapeStr(s),
                      " has more axes than the result ", shapeStr(y)));
    std::vector<int64_t> st(r, 0);
    int64_t off = r - static_cast<int64_t>(s.size()), acc = 1;
    for (int64_t i = r - 1; i >= off; --i) {
      int64_t d = s[i - off];
      if (d != y[i] && d != 1)
        throw Error(str("med kernel ", kernel, ": operand shape ", shapeStr(s),
                        " does not broadcast to ", shapeStr(y)));
      st[i] = d == 1 ? 0 : acc;
      acc *= d;
    }
    return st;
  };
  std::vector<int64_t> sa = stridesFor(a), sb = stridesFor(b);
  BroadcastPlan p;
  for (int64_t i = 0; i < r; ++i) {
    if (y[i] == 1)
      continue;
    if (!p.size.empty() && p.strideA.back() == sa[i] * y[i] && p.strideB.back() == sb[i] * y[i]) {
      p.size.back() *= y[i];
      p.strideA.back() = sa[i];
      p.strideB.back() = sb[i];
      continue;
    }
    p.size.push_back(y[i]);
    p.strideA.push_back(sa[i]);
    p.strideB.push_back(sb[i]);
  }
  if (p.size.empty()) { // a scalar result
    p.size.push_back(1);
    p.strideA.push_back(0);
    p.strideB.push_back(0);
  }
  return p;
}

template <typename T, typename F>
void mapBinary(const Tensor &a, const Tensor &b, Tensor &y, F f) {
  using A = Acc<T>;
  const T *ap = ptr<T>(a), *bp = ptr<T>(b);
  T *yp = ptr<T>(y);
  BroadcastPlan p = planBroadcast(a.shape(), b.shape(), y.shape());
  const int64_t len = p.size.back(), sa = p.strideA.back(), sb = p.strideB.back();
  p.forEachRow(y.numel() / len, len, [&](int64_t r, int64_t oa, int64_t ob) {
    const T *ar = ap + oa, *br = bp + ob;
    T *yr = yp + r * len;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < len; ++i)
        yr[i] = store<T>(f(load(ar[i]), load(br[i])));
    } else if (sa == 1 && sb == 0) {
      const A bv = load(br[0]);
      for (int64_t i = 0; i < len; ++i)
        yr[i] = store<T>(f(load(ar[i]), bv));
    } else if (sa == 0 && sb == 1) {
      const A av = load(ar[0]);
      for (int64_t i = 0; i < len; ++i)
        yr[i] = store<T>(f(av, load(br[i])));
    } else {
      for (int64_t i = 0; i < len; ++i)
        yr[i] = store<T>(f(load(ar[i * sa]), load(br[i * sb])));
    }
  });
}

template <typename T> void binaryImpl(Binary op, const Tensor &a, const Tensor &b, Tensor &y) {
  using A = Acc<T>;
  requireDType("binary", "rhs", b, a.dtype());
  requireDType("binary", "result", y, a.dtype());
  if (y.numel() == 0)
    return;
  switch (op) {
  case Binary::Add: return mapBinary<T>(a, b, y, [](A u, A v) { return u + v; });
  case Binary::Sub: return mapBinary<T>(a, b, y, [](A u, A v) { return u - v; });
  case Binary::Mul: return mapBinary<T>(a, b, y, [](A u, A v) { return u * v; });
  case Binary::Div: return mapBinary<T>(a, b, y, [](A u, A v) { return u / v; });
  case Binary::Max: return mapBinary<T>(a, b, y, [](A u, A v) { return maxNaN(u, v); });
  case Binary::Min: return mapBinary<T>(a, b, y, [](A u, A v) { return minNaN(u, v); });
  case Binary::Pow: return mapBinary<T>(a, b, y, [](A u, A v) { return std::pow(u, v); });
  case Binary::PRelu: return mapBinary<T>(a, b, y, [](A u, A v) { return u > A(0) ? u : v * u; });
  }
  throw Error("med kernel binary: unknown operation");
}

// ---- gradients -----------------------------------------------------------------------------

// torch's GELU backward (approximate = 'none'): dy · (Φ(x) + x·φ(x)).
template <typename T> void geluGradImpl(const Tensor &x, const Tensor &dy, Tensor &dx) {
  using A = Acc<T>;
  requireDType("gelu_grad", "output gradient", dy, x.dtype());
  requireDType("gelu_grad", "result", dx, x.dtype());
  if (dy.numel() != x.numel() || dx.numel() != x.numel())
    throw Error(str("med kernel gelu_grad: input ", shapeStr(x.shape()), ", output gradient ",
                    shapeStr(dy.shape()), " and result ", shapeStr(dx.shape()), " do not match"));
  const T *xp = ptr<T>(x), *gp = ptr<T>(dy);
  T *dp = ptr<T>(dx);
  parallelFor(x.numel(), kElementGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const A v = load(xp[i]);
      const A cdf = A(0.5) * (A(1) + std::erf(v * A(0.70710678118654752440)));
      const A pdf = A(0.39894228040143267794) * std::exp(A(-0.5) * v * v); // 1/√(2π)
      dp[i] = store<T>(load(gp[i]) * (cdf + v * pdf));
    }
  });
}

// torch's prelu / leaky_relu / relu backward: dy where x > 0, else slope·dy.
template <typename T>
void preluGradImpl(const Tensor &x, const Tensor &slope, const Tensor &dy, Tensor &dx) {
  using A = Acc<T>;
  const char *k = "prelu_grad";
  requireDType(k, "slope", slope, x.dtype());
  requireDType(k, "output gradient", dy, x.dtype());
  requireDType(k, "result", dx, x.dtype());
  if (dy.shape() != x.shape() || dx.shape() != x.shape())
    throw Error(str("med kernel prelu_grad: input ", shapeStr(x.shape()), ", output gradient ",
                    shapeStr(dy.shape()), " and result ", shapeStr(dx.shape()), " do not match"));
  BroadcastPlan p = planBroadcast(x.shape(), slope.shape(), x.shape(), k);
  if (x.numel() == 0)
    return;
  const T *xp = ptr<T>(x), *sp = ptr<T>(slope), *gp = ptr<T>(dy);
  T *dp = ptr<T>(dx);
  const int64_t len = p.size.back(), ss = p.strideB.back();
  p.forEachRow(x.numel() / len, len, [&](int64_t r, int64_t, int64_t os) {
    for (int64_t i = r * len, j = 0; j < len; ++i, ++j) {
      const A g = load(gp[i]);
      dp[i] = store<T>(load(xp[i]) > A(0) ? g : load(sp[os + j * ss]) * g);
    }
  });
}

// Each (outer, inner) line along the axis alone: its max, the sum of exp(x − max) in
// order, then the quotients.
template <typename T> void softmaxImpl(const Tensor &x, int64_t axis, Tensor &y) {
  using A = Acc<T>;
  requireDType("softmax", "result", y, x.dtype());
  const Shape &s = x.shape();
  if (y.shape() != s)
    throw Error(str("med kernel softmax: result shape ", shapeStr(y.shape()),
                    " does not match input shape ", shapeStr(s)));
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()))
    throw Error(str("med kernel softmax: axis ", axis, " of a rank-", s.size(), " input"));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= s[i];
  for (size_t i = axis + 1; i < s.size(); ++i)
    inner *= s[i];
  const int64_t n = s[axis];
  const T *xp = ptr<T>(x);
  T *yp = ptr<T>(y);
  parallelFor(outer * inner, grainFor(n, kElementGrain), [&](int64_t b, int64_t e) {
    for (int64_t line = b; line < e; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      A m = load(xp[base]);
      for (int64_t c = 1; c < n; ++c)
        m = std::max(m, load(xp[base + c * inner]));
      A sum = 0;
      for (int64_t c = 0; c < n; ++c)
        sum += std::exp(load(xp[base + c * inner]) - m);
      for (int64_t c = 0; c < n; ++c)
        yp[base + c * inner] = store<T>(std::exp(load(xp[base + c * inner]) - m) / sum);
    }
  });
}

template <typename T> void leakyReluImpl(const Tensor &x, double slope, Tensor &y) {
  using A = Acc<T>;
  requireDType("leaky_relu", "result", y, x.dtype());
  if (y.numel() != x.numel())
    throw Error(str("med kernel leaky_relu: result shape ", shapeStr(y.shape()),
                    " does not match input shape ", shapeStr(x.shape())));
  const A a = static_cast<A>(slope);
  mapUnary<T>(x, y, [a](A v) { return v > A(0) ? v : a * v; });
}

// torch.maximum's backward: where(a == b, dy/2, dy), zeroed where a < b (for b: a > b);
// torch.minimum's with the comparisons swapped. A NaN compares false: dy to both sides.
template <typename T>
void extremumGradImpl(Extremum op, const Tensor &a, const Tensor &b, const Tensor &dy,
                      Tensor &da, Tensor &db) {
  using A = Acc<T>;
  const char *k = "extremum_grad";
  requireDType(k, "rhs", b, a.dtype());
  requireDType(k, "output gradient", dy, a.dtype());
  requireDType(k, "lhs gradient", da, a.dtype());
  requireDType(k, "rhs gradient", db, a.dtype());
  if (da.shape() != dy.shape() || db.shape() != dy.shape())
    throw Error(str("med kernel extremum_grad: gradients ", shapeStr(da.shape()), " and ",
                    shapeStr(db.shape()), " must have the output gradient's shape ",
                    shapeStr(dy.shape())));
  BroadcastPlan p = planBroadcast(a.shape(), b.shape(), dy.shape(), k);
  if (dy.numel() == 0)
    return;
  const bool isMax = op == Extremum::Max;
  const T *ap = ptr<T>(a), *bp = ptr<T>(b), *gp = ptr<T>(dy);
  T *dap = ptr<T>(da), *dbp = ptr<T>(db);
  const int64_t len = p.size.back(), sa = p.strideA.back(), sb = p.strideB.back();
  p.forEachRow(dy.numel() / len, len, [&](int64_t r, int64_t oa, int64_t ob) {
    for (int64_t i = 0; i < len; ++i) {
      const A u = load(ap[oa + i * sa]), v = load(bp[ob + i * sb]), g = load(gp[r * len + i]);
      const A shared = u == v ? g / A(2) : g;
      const bool uLoses = isMax ? u < v : u > v, vLoses = isMax ? u > v : u < v;
      dap[r * len + i] = store<T>(uLoses ? A(0) : shared);
      dbp[r * len + i] = store<T>(vLoses ? A(0) : shared);
    }
  });
}

/// Copies x broadcast to y's shape, element by element as bytes (any dtype).
void broadcastImpl(const Tensor &x, Tensor &y) {
  if (y.dtype() != x.dtype())
    throw Error(str("med kernel broadcast: result has element type ", dtypeName(y.dtype()),
                    ", expected ", dtypeName(x.dtype())));
  BroadcastPlan p = planBroadcast(x.shape(), x.shape(), y.shape(), "broadcast");
  if (y.numel() == 0)
    return;
  const size_t es = dtypeSize(x.dtype());
  const std::byte *xp = static_cast<const std::byte *>(x.raw());
  std::byte *yp = static_cast<std::byte *>(y.raw());
  const int64_t len = p.size.back(), sx = p.strideA.back();
  p.forEachRow(y.numel() / len, len, [&](int64_t r, int64_t ox, int64_t) {
    const std::byte *xr = xp + ox * es;
    std::byte *yr = yp + r * len * es;
    if (sx == 1) {
      std::memcpy(yr, xr, len * es);
    } else if (sx == 0) {
      for (int64_t i = 0; i < len; ++i)
        std::memcpy(yr + i * es, xr, es);
    } else {
      for (int64_t i = 0; i < len; ++i)
        std::memcpy(yr + i * es, xr + i * sx * es, es);
    }
  });
}

} // namespace

void unary(Unary op, const Tensor &x, Tensor &y) {
  dispatchFloat(x.dtype(), "unary", [&](auto tag) { unaryImpl<decltype(tag)>(op, x, y); });
}

void binary(Binary op, const Tensor &a, const Tensor &b, Tensor &y) {
  dispatchFloat(a.dtype(), "binary", [&](auto tag) { binaryImpl<decltype(tag)>(op, a, b, y); });
}

void extremumGrad(Extremum op, const Tensor &a, const Tensor &b, const Tensor &dy, Tensor &da,
                  Tensor &db) {
  dispatchFloat(a.dtype(), "extremum_grad", [&](auto tag) {
    extremumGradImpl<decltype(tag)>(op, a, b, dy, da, db);
  });
}

void geluGrad(const Tensor &x, const Tensor &dy, Tensor &dx) {
  dispatchFloat(x.dtype(), "gelu_grad", [&](auto tag) { geluGradImpl<decltype(tag)>(x, dy, dx); });
}

void softmax(const Tensor &x, int64_t axis, Tensor &y) {
  dispatchFloat(x.dtype(), "softmax", [&](auto tag) { softmaxImpl<decltype(tag)>(x, axis, y); });
}

void leakyRelu(const Tensor &x, double slope, Tensor &y) {
  dispatchFloat(x.dtype(), "leaky_relu", [&](auto tag) { leakyReluImpl<decltype(tag)>(x, slope, y); });
}

void preluGrad(const Tensor &x, const Tensor &slope, const Tensor &dy, Tensor &dx) {
  dispatchFloat(x.dtype(), "prelu_grad",
                [&](auto tag) { preluGradImpl<decltype(tag)>(x, slope, dy, dx); });
}

void broadcast(const Tensor &x, Tensor &y) { broadcastImpl(x, y); }

} // namespace medrun::cpu
