//===- Spatial.cpp - med.spatial_transform ----------------------------------------===//
//
// One output voxel per item, all channels of it together. The arithmetic is the CUDA
// lowering's (lib/Target/Cuda/Spatial.cpp), operation for operation: every product that
// meets a sum is an explicit fma, so neither side's compiler can contract it differently,
// and CPU and GPU give the same bits (labels and nearest samples exactly). Neighbours are
// weighted as torch's grid_sample weights them (x weight · y weight · z weight, the 8
// corners summed in its order), which keeps the LibTorch check tight.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"
#include "medrun/Resize.h"

#include <cmath>

namespace medrun::cpu {
namespace {
using namespace detail;

/// grid_sample's reflection (align_corners=False) of position p on an axis of n voxels:
/// reflected about −0.5 and n − 0.5, then clamped to [0, n − 1].
template <typename A> A reflect(A p, int64_t n) {
  p = std::fmin(std::fmax(p, A(-16777216)), A(16777216)); // NaN and far positions: finite
  const A span = static_cast<A>(n), lo = A(-0.5);
  const A d = std::fabs(p - lo);
  const A extra = std::fmod(d, span);
  const int64_t flips = static_cast<int64_t>(std::floor(d / span));
  const A r = flips % 2 == 0 ? extra + lo : span - extra + lo;
  return std::min(static_cast<A>(n - 1), std::max(r, A(0)));
}

template <typename T, typename A>
void transform(const Tensor &xt, const std::vector<A> &m, const SpatialParams &p, Tensor &yt) {
  const Shape &xs = xt.shape(), &ys = yt.shape();
  const int64_t B = xs[0], C = xs[1], in[3] = {xs[2], xs[3], xs[4]};
  const int64_t out[3] = {ys[2], ys[3], ys[4]};
  const int64_t inPlane = in[0] * in[1] * in[2], outPlane = out[0] * out[1] * out[2];
  const T *x = ptr<T>(xt);
  T *y = ptr<T>(yt);
  A cIn[3], cOut[3];
  for (int a = 0; a < 3; ++a) {
    cIn[a] = static_cast<A>(in[a] - 1) / A(2);
    cOut[a] = static_cast<A>(out[a] - 1) / A(2);
  }
  const A value = static_cast<A>(p.value);
  auto toT = [](A v) -> T {
    if constexpr (std::is_same_v<T, bf16>)
      return bf16(static_cast<float>(v));
    else
      return static_cast<T>(v);
  };
  parallelFor(B * outPlane, grainFor(8 * C), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / outPlane, o = i % outPlane;
      const int64_t od = o / (out[1] * out[2]), oh = o / out[2] % out[1], ow = o % out[2];
      const A d[3] = {static_cast<A>(od) - cOut[0], static_cast<A>(oh) - cOut[1],
                      static_cast<A>(ow) - cOut[2]};
      const A *mb = m.data() + 12 * b;
      A pos[3];
      for (int a = 0; a < 3; ++a) // M·d + t + c_in, the products as fmas
        pos[a] = std::fma(mb[4 * a], d[0],
                          std::fma(mb[4 * a + 1], d[1],
                                   std::fma(mb[4 * a + 2], d[2], mb[4 * a + 3] + cIn[a])));
      const T *xb = x + b * C * inPlane;
      T *yb = y + b * C * outPlane + o;
      if (p.mode == SpatialMode::Nearest) {
        int64_t idx[3];
        bool inside = true;
        for (int a = 0; a < 3; ++a) {
          const A q = p.border == SpatialBorder::Reflection ? reflect(pos[a], in[a]) : pos[a];
          const A r = std::nearbyint(q); // half to even, as grid_sample
          inside = inside && r >= 0 && r <= static_cast<A>(in[a] - 1);
          idx[a] = inside ? static_cast<int64_t>(r) : 0;
        }
        const int64_t at = (idx[0] * in[1] + idx[1]) * in[2] + idx[2];
        const T outside = toT(p.border == SpatialBorder::Constant ? value : A(0));
        for (int64_t c = 0; c < C; ++c)
          yb[c * outPlane] = inside ? xb[c * inPlane + at] : outside;
        continue;
      }
      // The 8 neighbours, in grid_sample's order (z, then y, then x; low before high).
      if (p.mode == SpatialMode::LinearArgmax) {
        bool inside = true;
        for (int a = 0; a < 3; ++a)
          inside = inside && pos[a] >= 0 && pos[a] <= static_cast<A>(in[a] - 1);
        if (!inside) {
          for (int64_t c = 0; c < C; ++c)
            yb[c * outPlane] = toT(value);
          continue;
        }
      } else {
        // Reflected into the input, or clamped to where no neighbour is inside any more
        // (the same samples; NaN ends up outside).
        for (int a = 0; a < 3; ++a)
          pos[a] = p.border == SpatialBorder::Reflection
                       ? reflect(pos[a], in[a])
                       : std::fmin(std::fmax(pos[a], A(-2)), static_cast<A>(in[a] + 1));
      }
      int64_t lo[3];
      A w[3][2];
      for (int a = 0; a < 3; ++a) {
        const A f = std::floor(pos[a]);
        lo[a] = static_cast<int64_t>(f);
        w[a][0] = (f + A(1)) - pos[a];
        w[a][1] = pos[a] - f;
      }
      int64_t at[8];
      A wt[8];
      bool ok[8];
      for (int k = 0; k < 8; ++k) {
        const int64_t z = lo[0] + (k >> 2), yy = lo[1] + (k >> 1 & 1), xx = lo[2] + (k & 1);
        ok[k] = z >= 0 && z < in[0] && yy >= 0 && yy < in[1] && xx >= 0 && xx < in[2];
        at[k] = ok[k] ? (z * in[1] + yy) * in[2] + xx : 0;
        wt[k] = (w[2][k & 1] * w[1][k >> 1 & 1]) * w[0][k >> 2];
      }
      for (int64_t c = 0; c < C; ++c) {
        const T *xc = xb + c * inPlane;
        if (p.mode == SpatialMode::LinearArgmax) {
          A best = 0;
          int64_t label = 0;
          for (size_t l = 0; l < p.labels.size(); ++l) {
            const A want = static_cast<A>(p.labels[l]);
            A s = 0;
            for (int k = 0; k < 8; ++k)
              if (ok[k] && static_cast<A>(load(xc[at[k]])) == want)
                s += wt[k];
            if (l == 0 || s > best) // strict: the lowest label wins a tie
              best = s, label = p.labels[l];
          }
          yb[c * outPlane] = toT(static_cast<A>(label));
          continue;
        }
        A acc = 0;
        for (int k = 0; k < 8; ++k) {
          const A v = ok[k] ? static_cast<A>(load(xc[at[k]]))
                            : p.border == SpatialBorder::Constant ? value : A(0);
          acc = std::fma(v, wt[k], acc);
        }
        if constexpr (std::is_integral_v<T>)
          yb[c * outPlane] = static_cast<T>(acc); // not reached: linear takes floats
        else
          yb[c * outPlane] = store<T>(acc);
      }
    }
  });
}

} // namespace

void spatialTransform(const Tensor &x, const Tensor &matrix, const SpatialParams &p, Tensor &y) {
  const Shape &xs = x.shape();
  if (xs.size() != 5 || y.shape().size() != 5 || matrix.shape() != Shape{xs[0], 3, 4} ||
      y.shape()[0] != xs[0] || y.shape()[1] != xs[1])
    throw Error(str("med kernel spatial_transform: input ", shapeStr(xs), ", matrix ",
                    shapeStr(matrix.shape()), " and result ", shapeStr(y.shape()),
                    " do not fit (N x C x D x H x W, N x 3 x 4, N x C x D' x H' x W')"));
  if (y.dtype() != x.dtype())
    throw Error(str("med kernel spatial_transform: result has element type ",
                    dtypeName(y.dtype()), ", input ", dtypeName(x.dtype())));
  if (p.mode == SpatialMode::LinearArgmax && p.labels.empty())
    throw Error("med kernel spatial_transform: linear_argmax needs at least one label");
  auto run = [&](auto math) {
    using A = decltype(math);
    std::vector<A> m(static_cast<size_t>(matrix.numel()));
    for (size_t i = 0; i < m.size(); ++i)
      m[i] = static_cast<A>(matrix.dtype() == DType::F64 ? ptr<double>(matrix)[i]
                                                         : ptr<float>(matrix)[i]);
    if (x.dtype() == DType::I32) {
      if (p.mode == SpatialMode::Linear)
        throw Error("med kernel spatial_transform: mode linear needs a float input, got i32");
      return transform<int32_t, A>(x, m, p, y);
    }
    dispatchFloat(x.dtype(), "spatial_transform", [&](auto tag) {
      transform<decltype(tag), A>(x, m, p, y);
    });
  };
  if (matrix.dtype() == DType::F64)
    run(double());
  else if (matrix.dtype() == DType::F32)
    run(float());
  else
    throw Error(str("med kernel spatial_transform: matrix has element type ",
                    dtypeName(matrix.dtype()), ", expected f32"));
}

// ---- med.resize and its adjoint ------------------------------------------------------------
// One (n, c) plane per item. Forward: each output mixes its taps along W, then H, then D
// (torch's order of the trilinear sum). Adjoint: each input element gathers, in the same
// nesting, the output gradients of the outputs that read it (Resize.h's transposed tables).
namespace {

void requireResizeShapes(const char *kernel, const Tensor &small, const Tensor &large) {
  const Shape &a = small.shape(), &b = large.shape();
  if (a.size() != 5 || b.size() != 5 || a[0] != b[0] || a[1] != b[1])
    throw Error(str("med kernel ", kernel, ": shapes ", shapeStr(a), " and ", shapeStr(b),
                    " are not N x C x D x H x W of one N and C"));
}

/// One axis of a separable gather: destination index o reads source indices index[e] with
/// weights weight[e] for e in [begin[o], begin[o + 1]), in that order.
template <typename A> struct GatherAxis {
  const int64_t *begin, *index;
  const A *weight;
};

/// Each (n, c) plane of dst from src's: dst[d, h, w] = Σ wa·(Σ wb·(Σ wc·src[i, j, k])) over
/// the axes' entries. resize and its adjoint differ only in the tables they pass.
template <typename T, typename A>
void separableGather(const T *src, const Shape &ss, T *dst, const Shape &ds,
                     const GatherAxis<A> (&ax)[3], int64_t grain) {
  const int64_t srcPlane = ss[2] * ss[3] * ss[4], dstPlane = ds[2] * ds[3] * ds[4];
  parallelFor(ds[0] * ds[1], grainFor(grain), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const T *sp = src + nc * srcPlane;
      T *dp = dst + nc * dstPlane;
      for (int64_t d = 0; d < ds[2]; ++d)
        for (int64_t h = 0; h < ds[3]; ++h)
          for (int64_t w = 0; w < ds[4]; ++w) {
            A acc = 0;
            for (int64_t a = ax[0].begin[d]; a < ax[0].begin[d + 1]; ++a) {
              A sa = 0;
              for (int64_t bb = ax[1].begin[h]; bb < ax[1].begin[h + 1]; ++bb) {
                A sb = 0;
                for (int64_t c = ax[2].begin[w]; c < ax[2].begin[w + 1]; ++c)
                  sb += ax[2].weight[c] *
                        load(sp[(ax[0].index[a] * ss[3] + ax[1].index[bb]) * ss[4] +
                                ax[2].index[c]]);
                sa += ax[1].weight[bb] * sb;
              }
              acc += ax[0].weight[a] * sa;
            }
            dp[(d * ds[3] + h) * ds[4] + w] = store<T>(acc);
          }
    }
  });
}

/// resize (y from x, each output reading its taps) or, `adjoint`, resize_grad (dx from dy,
/// each input gathering through the transposed tables).
template <typename T>
void resizeImpl(const char *kernel, const Tensor &src, bool linear, bool alignCorners,
                bool adjoint, Tensor &dst) {
  using A = Acc<T>;
  requireDType(kernel, "result", dst, src.dtype());
  const Tensor &xt = adjoint ? dst : src, &yt = adjoint ? src : dst; // the forward's x and y
  requireResizeShapes(kernel, xt, yt);
  const Shape &xs = xt.shape(), &ys = yt.shape();
  ResizeAxis<A> ax[3];
  std::vector<int64_t> tapBegin[3]; // the forward's entries: o·taps on
  GatherAxis<A> g[3];
  for (int d = 0; d < 3; ++d) {
    ResizeAxis<A> &t = ax[d];
    t = resizeAxis<A>(xs[2 + d], ys[2 + d], linear, alignCorners);
    if (adjoint) {
      g[d] = {t.begin.data(), t.output.data(), t.readWeight.data()};
    } else {
      for (int64_t o = 0; o <= ys[2 + d]; ++o)
        tapBegin[d].push_back(o * t.taps);
      g[d] = {tapBegin[d].data(), t.index.data(), t.weight.data()};
    }
  }
  separableGather<T, A>(ptr<T>(src), src.shape(), ptr<T>(dst), dst.shape(), g,
                        ys[2] * ys[3] * ys[4]);
}

} // namespace

// ---- med.avg_pool and its gradient ---------------------------------------------------------
// One (n, c) plane per item; the window summed W inside H inside D in the math type, then
// divided by its volume (torch's avg_pool3d divides the sum too).
namespace {

void requirePoolShapes(const char *kernel, const Tensor &x, const Tensor &y,
                       const std::vector<int64_t> &k) {
  const Shape &a = x.shape(), &b = y.shape();
  bool ok = a.size() == 5 && b.size() == 5 && a[0] == b[0] && a[1] == b[1] && k.size() == 3;
  for (int d = 0; ok && d < 3; ++d)
    ok = k[d] >= 1 && a[2 + d] / k[d] == b[2 + d];
  if (!ok)
    throw Error(str("med kernel ", kernel, ": shapes ", shapeStr(a), " and ", shapeStr(b),
                    " are not an N x C x D x H x W input and its pooling by ", k.size() == 3 ? str(k[0], "x", k[1], "x", k[2]) : std::string("a 3-entry window")));
}

template <typename T>
void avgPoolImpl(const Tensor &xt, const std::vector<int64_t> &k, Tensor &yt) {
  using A = Acc<T>;
  requireDType("avg_pool", "result", yt, xt.dtype());
  requirePoolShapes("avg_pool", xt, yt, k);
  const Shape &xs = xt.shape(), &ys = yt.shape();
  const int64_t inPlane = xs[2] * xs[3] * xs[4], outPlane = ys[2] * ys[3] * ys[4];
  const A volume = A(k[0] * k[1] * k[2]);
  const T *x = ptr<T>(xt);
  T *y = ptr<T>(yt);
  parallelFor(xs[0] * xs[1], grainFor(outPlane * k[0] * k[1] * k[2]), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const T *xp = x + nc * inPlane;
      T *yp = y + nc * outPlane;
      for (int64_t od = 0; od < ys[2]; ++od)
        for (int64_t oh = 0; oh < ys[3]; ++oh)
          for (int64_t ow = 0; ow < ys[4]; ++ow) {
            A acc = 0;
            for (int64_t a = 0; a < k[0]; ++a)
              for (int64_t bb = 0; bb < k[1]; ++bb)
                for (int64_t c = 0; c < k[2]; ++c)
                  acc += load(xp[((od * k[0] + a) * xs[3] + oh * k[1] + bb) * xs[4] + ow * k[2] + c]);
            yp[(od * ys[3] + oh) * ys[4] + ow] = store<T>(acc / volume);
          }
    }
  });
}

template <typename T>
void avgPoolGradImpl(const Tensor &dyt, const std::vector<int64_t> &k, Tensor &dxt) {
  using A = Acc<T>;
  requireDType("avg_pool_grad", "result", dxt, dyt.dtype());
  requirePoolShapes("avg_pool_grad", dxt, dyt, k);
  const Shape &xs = dxt.shape(), &ys = dyt.shape();
  const int64_t inPlane = xs[2] * xs[3] * xs[4], outPlane = ys[2] * ys[3] * ys[4];
  const A volume = A(k[0] * k[1] * k[2]);
  const T *dy = ptr<T>(dyt);
  T *dx = ptr<T>(dxt);
  parallelFor(xs[0] * xs[1], grainFor(inPlane), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const T *gp = dy + nc * outPlane;
      T *dp = dx + nc * inPlane;
      for (int64_t id = 0; id < xs[2]; ++id)
        for (int64_t ih = 0; ih < xs[3]; ++ih)
          for (int64_t iw = 0; iw < xs[4]; ++iw) {
            const int64_t od = id / k[0], oh = ih / k[1], ow = iw / k[2];
            const bool inside = od < ys[2] && oh < ys[3] && ow < ys[4];
            dp[(id * xs[3] + ih) * xs[4] + iw] = store<T>(
                inside ? load(gp[(od * ys[3] + oh) * ys[4] + ow]) / volume : A(0));
          }
    }
  });
}

} // namespace

void avgPool(const Tensor &x, const std::vector<int64_t> &kernel, Tensor &y) {
  dispatchFloat(x.dtype(), "avg_pool", [&](auto tag) { avgPoolImpl<decltype(tag)>(x, kernel, y); });
}

void avgPoolGrad(const Tensor &dy, const std::vector<int64_t> &kernel, Tensor &dx) {
  dispatchFloat(dy.dtype(), "avg_pool_grad",
                [&](auto tag) { avgPoolGradImpl<decltype(tag)>(dy, kernel, dx); });
}

// ---- med.max_pool and its gradient ---------------------------------------------------------
// The window scanned D, H, W; a larger value or a NaN takes the place (torch's CPU rule), so
// the first maximum (first NaN) is the window's index. The gradient goes to that element.
namespace {

template <typename T> struct WindowMax {
  Acc<T> value;
  int64_t at; // offset in the plane
};

template <typename T>
WindowMax<T> windowMax(const T *xp, const Shape &xs, const std::vector<int64_t> &k, int64_t od,
                       int64_t oh, int64_t ow) {
  WindowMax<T> m{Acc<T>(0), -1};
  for (int64_t a = 0; a < k[0]; ++a)
    for (int64_t bb = 0; bb < k[1]; ++bb)
      for (int64_t c = 0; c < k[2]; ++c) {
        const int64_t at = ((od * k[0] + a) * xs[3] + oh * k[1] + bb) * xs[4] + ow * k[2] + c;
        const Acc<T> v = load(xp[at]);
        if (m.at < 0 || v > m.value || std::isnan(v))
          if (m.at < 0 || !std::isnan(m.value))
            m = {v, at};
      }
  return m;
}

template <typename T>
void maxPoolImpl(const Tensor &xt, const std::vector<int64_t> &k, Tensor &yt) {
  requireDType("max_pool", "result", yt, xt.dtype());
  requirePoolShapes("max_pool", xt, yt, k);
  const Shape &xs = xt.shape(), &ys = yt.shape();
  const int64_t inPlane = xs[2] * xs[3] * xs[4], outPlane = ys[2] * ys[3] * ys[4];
  const T *x = ptr<T>(xt);
  T *y = ptr<T>(yt);
  parallelFor(xs[0] * xs[1], grainFor(outPlane * k[0] * k[1] * k[2]), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc)
      for (int64_t od = 0; od < ys[2]; ++od)
        for (int64_t oh = 0; oh < ys[3]; ++oh)
          for (int64_t ow = 0; ow < ys[4]; ++ow)
            y[nc * outPlane + (od * ys[3] + oh) * ys[4] + ow] =
                store<T>(windowMax(x + nc * inPlane, xs, k, od, oh, ow).value);
  });
}

template <typename T>
void maxPoolGradImpl(const Tensor &xt, const Tensor &dyt, const std::vector<int64_t> &k,
                     Tensor &dxt) {
  requireDType("max_pool_grad", "result", dxt, xt.dtype());
  requireDType("max_pool_grad", "grad_output", dyt, xt.dtype());
  requirePoolShapes("max_pool_grad", xt, dyt, k);
  const Shape &xs = xt.shape(), &ys = dyt.shape();
  if (dxt.shape() != xs)
    throw Error("med kernel max_pool_grad: the result's shape is not the input's");
  const int64_t inPlane = xs[2] * xs[3] * xs[4], outPlane = ys[2] * ys[3] * ys[4];
  const T *x = ptr<T>(xt), *dy = ptr<T>(dyt);
  T *dx = ptr<T>(dxt);
  parallelFor(xs[0] * xs[1], grainFor(inPlane * k[0] * k[1] * k[2]), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc)
      for (int64_t id = 0; id < xs[2]; ++id)
        for (int64_t ih = 0; ih < xs[3]; ++ih)
          for (int64_t iw = 0; iw < xs[4]; ++iw) {
            const int64_t od = id / k[0], oh = ih / k[1], ow = iw / k[2];
            const int64_t at = (id * xs[3] + ih) * xs[4] + iw;
            const bool chosen = od < ys[2] && oh < ys[3] && ow < ys[4] &&
                                windowMax(x + nc * inPlane, xs, k, od, oh, ow).at == at;
            dx[nc * inPlane + at] =
                chosen ? dy[nc * outPlane + (od * ys[3] + oh) * ys[4] + ow] : store<T>(Acc<T>(0));
          }
  });
}

} // namespace

void maxPool(const Tensor &x, const std::vector<int64_t> &kernel, Tensor &y) {
  dispatchFloat(x.dtype(), "max_pool", [&](auto tag) { maxPoolImpl<decltype(tag)>(x, kernel, y); });
}

void maxPoolGrad(const Tensor &x, const Tensor &dy, const std::vector<int64_t> &kernel, Tensor &dx) {
  dispatchFloat(x.dtype(), "max_pool_grad",
                [&](auto tag) { maxPoolGradImpl<decltype(tag)>(x, dy, kernel, dx); });
}

void resize(const Tensor &x, bool linear, bool alignCorners, Tensor &y) {
  dispatchFloat(x.dtype(), "resize", [&](auto tag) {
    resizeImpl<decltype(tag)>("resize", x, linear, alignCorners, false, y);
  });
}

void resizeGrad(const Tensor &dy, bool linear, bool alignCorners, Tensor &dx) {
  dispatchFloat(dy.dtype(), "resize_grad", [&](auto tag) {
    resizeImpl<decltype(tag)>("resize_grad", dy, linear, alignCorners, true, dx);
  });
}

} // namespace medrun::cpu
