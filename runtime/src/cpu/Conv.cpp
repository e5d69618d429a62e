//===- Conv.cpp - conv3d and conv3d_transpose on the CPU --------------------------===//
//
// Two paths, both bit-identical for any thread count (every output element is summed by
// one thread in an order fixed by the shapes):
//
//  * 1×1×1 kernels (any stride, padding, groups; plain and transposed) are a GEMM per
//    group: y[co, v] = Σ_ci w[co, ci] · x[ci, map(v)]. A task packs the input voxels it
//    needs (gathered through map: strided, padded or transposed-strided) into a panel of
//    the accumulation type and runs a register-blocked MR×NR micro kernel over input
//    channels in increasing order.
//  * Everything else (depthwise k3/k5 with stride 1 or 2, its transposed stride-2 form,
//    and any stride, padding, dilation, groups, output_padding) runs row by row: for an
//    output row (n, co, od, oh) the terms are added into a row accumulator in the order
//    (ci, kd, kh, kw), each term an axpy over the output row whose bounds are computed
//    once, so the inner loop has no division, modulo or bounds test.
//
// The bias is added last.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "ConvGeometry.h"
#include "Dispatch.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace medrun::cpu {
namespace {
using namespace detail;

// ---- 1×1×1: packed GEMM ------------------------------------------------------------------

/// A 16-byte SIMD vector of the accumulation type (GCC/Clang vector extension; baseline
/// x86-64 SSE2). Each lane is an independent output element, so vectorizing changes no
/// summation order.
template <typename A> struct Vec;
template <> struct Vec<float> { typedef float type __attribute__((vector_size(16))); };
template <> struct Vec<double> { typedef double type __attribute__((vector_size(16))); };

template <typename A> struct MicroShape {
  static constexpr int MR = 6;                                // output channels per tile
  static constexpr int L = static_cast<int>(16 / sizeof(A));  // lanes per vector
  static constexpr int NR = 2 * L;                            // voxels per tile
};

/// out[i·NR + j] = Σ_k wb[k·MR + i] · xp[k·ld + j], k increasing. wb holds each weight
/// broadcast to a full vector, so the loop is loads, multiplies and adds only.
template <typename A>
inline void microKernel(const A *__restrict xp, int64_t ld,
                        const typename Vec<A>::type *__restrict wb, int64_t K, A *__restrict out) {
  using V = typename Vec<A>::type;
  constexpr int MR = MicroShape<A>::MR, L = MicroShape<A>::L;
  V c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i)
    c0[i] = c1[i] = V{};
  for (int64_t k = 0; k < K; ++k) {
    V x0, x1;
    std::memcpy(&x0, xp + k * ld, sizeof(V));
    std::memcpy(&x1, xp + k * ld + L, sizeof(V));
    const V *w = wb + k * MR;
    for (int i = 0; i < MR; ++i) {
      c0[i] += w[i] * x0;
      c1[i] += w[i] * x1;
    }
  }
  for (int i = 0; i < MR; ++i) {
    std::memcpy(out + i * 2 * L, &c0[i], sizeof(V));
    std::memcpy(out + i * 2 * L + L, &c1[i], sizeof(V));
  }
}

/// wmat[(g·coutG + co)·cinG + ci] is the weight from input channel ci to output channel co
/// of group g; map[v] is the input voxel read by output voxel v (−1: none, the term is
/// zero), or empty when output voxel v reads input voxel v.
template <typename T>
void gemm1x1(const ConvGeometry &g, const T *x, const std::vector<Acc<T>> &wmat, const T *bias,
             const std::vector<int64_t> &map, T *y) {
  using A = Acc<T>;
  constexpr int MR = MicroShape<A>::MR, NR = MicroShape<A>::NR;
  const int64_t inVox = g.in[0] * g.in[1] * g.in[2];
  const int64_t outVox = g.out[0] * g.out[1] * g.out[2];
  const int64_t K = g.cinG;
  const int64_t coBlocks = (g.coutG + MR - 1) / MR;

  using V = typename Vec<A>::type;

  // Packed weights, each broadcast to a vector: [group][co block][k][MR], zero rows past
  // coutG.
  std::vector<V> wp(static_cast<size_t>(g.groups * coBlocks * K * MR), V{});
  for (int64_t gr = 0; gr < g.groups; ++gr)
    for (int64_t co = 0; co < g.coutG; ++co)
      for (int64_t k = 0; k < K; ++k) {
        V &v = wp[((gr * coBlocks + co / MR) * K + k) * MR + co % MR];
        for (int l = 0; l < MicroShape<A>::L; ++l)
          v[l] = wmat[(gr * g.coutG + co) * K + k];
      }

  // Voxel block: a panel of K × VB values of about 64 KiB (float), a multiple of NR.
  int64_t vb = (16384 / std::max<int64_t>(K, 1)) / NR * NR;
  vb = std::clamp<int64_t>(vb, NR, 512);
  vb = std::min<int64_t>(vb, (outVox + NR - 1) / NR * NR);
  const int64_t vBlocks = (outVox + vb - 1) / vb;
  // Output channels per task (a multiple of MR), so small images still give many tasks.
  const int64_t coPerTask = 16 * MR;
  const int64_t coTasks = (g.coutG + coPerTask - 1) / coPerTask;
  const int64_t tasks = g.n * g.groups * coTasks * vBlocks;

  parallelFor(tasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<A> panel(static_cast<size_t>(std::max<int64_t>(K, 1) * vb));
    alignas(64) A tile[MR * NR];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t vBlock = t % vBlocks, rest = t / vBlocks;
      int64_t coTask = rest % coTasks;
      rest /= coTasks;
      int64_t gr = rest % g.groups, n = rest / g.groups;
      int64_t v0 = vBlock * vb, nv = std::min(vb, outVox - v0);
      int64_t nvPad = (nv + NR - 1) / NR * NR;

      // Pack the panel: rows are input channels, columns this block's output voxels.
      for (int64_t k = 0; k < K; ++k) {
        const T *src = x + ((n * g.cin + gr * K + k) * inVox);
        A *dst = panel.data() + k * vb;
        if (map.empty()) {
          for (int64_t j = 0; j < nv; ++j)
            dst[j] = load(src[v0 + j]);
        } else {
          const int64_t *m = map.data() + v0;
          for (int64_t j = 0; j < nv; ++j)
            dst[j] = m[j] >= 0 ? load(src[m[j]]) : A(0);
        }
        for (int64_t j = nv; j < nvPad; ++j)
          dst[j] = A(0);
      }

      int64_t coBegin = coTask * coPerTask, coEnd = std::min(g.coutG, coBegin + coPerTask);
      for (int64_t co0 = coBegin; co0 < coEnd; co0 += MR) {
        const V *w = wp.data() + (gr * coBlocks + co0 / MR) * K * MR;
        int64_t rows = std::min<int64_t>(MR, coEnd - co0);
        for (int64_t j0 = 0; j0 < nv; j0 += NR) {
          microKernel<A>(panel.data() + j0, vb, w, K, tile);
          int64_t cols = std::min<int64_t>(NR, nv - j0);
          for (int64_t i = 0; i < rows; ++i) {
            int64_t co = gr * g.coutG + co0 + i;
            A b = bias ? load(bias[co]) : A(0);
            T *yr = y + (n * g.cout + co) * outVox + v0 + j0;
            const A *tr = tile + i * NR;
            if (bias)
              for (int64_t j = 0; j < cols; ++j)
                yr[j] = store<T>(tr[j] + b);
            else
              for (int64_t j = 0; j < cols; ++j)
                yr[j] = store<T>(tr[j]);
          }
        }
      }
    }
  });
}

// ---- direct row kernels ------------------------------------------------------------------

template <typename T>
void directConv(const ConvGeometry &g, const ConvParams &p, const T *x, const T *w,
                const T *bias, T *y) {
  using A = Acc<T>;
  // Per kw: the output columns [lo, hi) whose input column ow·sw + off lies inside [0, W).
  const DirectLoops c = directLoops(g, p);
  const int64_t rows = g.n * g.cout * c.OD * c.OH;
  parallelFor(rows, grainFor(c.OW * g.cinG * c.kVol + c.OW), [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(c.OW));
    for (int64_t r = r0; r < r1; ++r) {
      int64_t oh = r % c.OH, t = r / c.OH;
      int64_t od = t % c.OD;
      t /= c.OD;
      int64_t co = t % g.cout, n = t / g.cout;
      int64_t gr = co / g.coutG;
      std::fill(acc.begin(), acc.end(), A(0));
      A *ac = acc.data();
      for (int64_t cl = 0; cl < g.cinG; ++cl) {
        int64_t ci = gr * g.cinG + cl;
        const T *xc = x + (n * g.cin + ci) * c.D * c.H * c.W;
        const T *wc = w + (co * g.cinG + cl) * c.kVol;
        for (int64_t kd = 0; kd < c.kD; ++kd) {
          int64_t id = od * c.sd - c.pd + kd * c.dd;
          if (id < 0 || id >= c.D)
            continue;
          for (int64_t kh = 0; kh < c.kH; ++kh) {
            int64_t ih = oh * c.sh - c.ph + kh * c.dh;
            if (ih < 0 || ih >= c.H)
              continue;
            const T *xr = xc + (id * c.H + ih) * c.W;
            const T *wr = wc + (kd * c.kH + kh) * c.kW;
            for (int64_t kw = 0; kw < c.kW; ++kw) {
              const A wv = load(wr[kw]);
              const int64_t b = c.lo[kw], e = c.hi[kw];
              if (c.sw == 1) {
                const T *xs = xr + c.off[kw];
                for (int64_t ow = b; ow < e; ++ow)
                  ac[ow] += wv * load(xs[ow]);
              } else {
                const T *xs = xr + c.off[kw];
                for (int64_t ow = b; ow < e; ++ow)
                  ac[ow] += wv * load(xs[ow * c.sw]);
              }
            }
          }
        }
      }
      T *yr = y + r * c.OW;
      A bv = bias ? load(bias[co]) : A(0);
      for (int64_t ow = 0; ow < c.OW; ++ow)
        yr[ow] = store<T>(bias ? ac[ow] + bv : ac[ow]);
    }
  });
}

template <typename T>
void directConvTranspose(const ConvGeometry &g, const ConvParams &p, const T *x, const T *w,
                         const T *bias, T *y) {
  using A = Acc<T>;
  // Output column ow = iw·sw + off[kw] for input column iw in [lo, hi).
  const DirectLoops c = directLoops(g, p);
  const int64_t rows = g.n * g.cout * c.OD * c.OH;
  int64_t perRow = (c.W * g.cinG * c.kVol) / std::max<int64_t>(1, c.sd * c.sh) + c.OW;
  parallelFor(rows, grainFor(perRow), [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(c.OW));
    for (int64_t r = r0; r < r1; ++r) {
      int64_t oh = r % c.OH, t = r / c.OH;
      int64_t od = t % c.OD;
      t /= c.OD;
      int64_t co = t % g.cout, n = t / g.cout;
      int64_t gr = co / g.coutG, col = co % g.coutG;
      std::fill(acc.begin(), acc.end(), A(0));
      A *ac = acc.data();
      for (int64_t cl = 0; cl < g.cinG; ++cl) {
        int64_t ci = gr * g.cinG + cl;
        const T *xc = x + (n * g.cin + ci) * c.D * c.H * c.W;
        const T *wc = w + (ci * g.coutG + col) * c.kVol;
        for (int64_t kd = 0; kd < c.kD; ++kd) {
          int64_t td = od + c.pd - kd * c.dd; // = id · sd
          if (td < 0 || td % c.sd != 0 || td / c.sd >= c.D)
            continue;
          int64_t id = td / c.sd;
          for (int64_t kh = 0; kh < c.kH; ++kh) {
            int64_t th = oh + c.ph - kh * c.dh;
            if (th < 0 || th % c.sh != 0 || th / c.sh >= c.H)
              continue;
            int64_t ih = th / c.sh;
            const T *xr = xc + (id * c.H + ih) * c.W;
            const T *wr = wc + (kd * c.kH + kh) * c.kW;
            for (int64_t kw = 0; kw < c.kW; ++kw) {
              const A wv = load(wr[kw]);
              const int64_t b = c.lo[kw], e = c.hi[kw];
              A *as = ac + c.off[kw];
              if (c.sw == 1) {
                for (int64_t iw = b; iw < e; ++iw)
                  as[iw] += wv * load(xr[iw]);
              } else {
                for (int64_t iw = b; iw < e; ++iw)
                  as[iw * c.sw] += wv * load(xr[iw]);
              }
            }
          }
        }
      }
      T *yr = y + r * c.OW;
      A bv = bias ? load(bias[co]) : A(0);
      for (int64_t ow = 0; ow < c.OW; ++ow)
        yr[ow] = store<T>(bias ? ac[ow] + bv : ac[ow]);
    }
  });
}

template <typename T>
void convImpl(const char *kernel, bool transposed, const Tensor &x, const Tensor &w,
              const Tensor *bias, const ConvParams &p, Tensor &y) {
  requireDType(kernel, "weight", w, x.dtype());
  requireDType(kernel, "result", y, x.dtype());
  if (bias)
    requireDType(kernel, "bias", *bias, x.dtype());
  ConvGeometry g = convGeometry(kernel, x, w, y, "result", p, transposed);
  if (y.numel() == 0)
    return;
  const T *xp = ptr<T>(x), *wp = ptr<T>(w), *bp = bias ? ptr<T>(*bias) : nullptr;
  T *yp = ptr<T>(y);
  if (g.k[0] == 1 && g.k[1] == 1 && g.k[2] == 1) {
    using A = Acc<T>;
    std::vector<A> wmat(static_cast<size_t>(g.cout * g.cinG));
    for (int64_t gr = 0; gr < g.groups; ++gr)
      for (int64_t co = 0; co < g.coutG; ++co)
        for (int64_t ci = 0; ci < g.cinG; ++ci)
          wmat[(gr * g.coutG + co) * g.cinG + ci] =
              transposed ? load(wp[(gr * g.cinG + ci) * g.coutG + co])
                         : load(wp[(gr * g.coutG + co) * g.cinG + ci]);
    gemm1x1<T>(g, xp, wmat, bp, voxelMap(g, p), yp);
  } else if (transposed) {
    directConvTranspose<T>(g, p, xp, wp, bp, yp);
  } else {
    directConv<T>(g, p, xp, wp, bp, yp);
  }
}

} // namespace

void conv3d(const Tensor &x, const Tensor &w, const Tensor *bias, const ConvParams &p, Tensor &y) {
  dispatchFloat(x.dtype(), "conv3d", [&](auto tag) {
    convImpl<decltype(tag)>("conv3d", false, x, w, bias, p, y);
  });
}

void conv3dTranspose(const Tensor &x, const Tensor &w, const Tensor *bias, const ConvParams &p,
                     Tensor &y) {
  dispatchFloat(x.dtype(), "conv3d_transpose", [&](auto tag) {
    convImpl<decltype(tag)>("conv3d_transpose", true, x, w, bias, p, y);
  });
}

} // namespace medrun::cpu
