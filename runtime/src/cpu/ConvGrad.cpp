//===- ConvGrad.cpp - conv3d_grad_weight on the CPU -------------------------------===//
//
// dw[co, ci, tap] = Σ_{n, output voxel v} dy[n, co, v] · x[n, g·cinG + ci, pos(v, tap)] is
// a reduction over N·D'·H'·W' for every weight. Both paths split that reduction into fixed
// pieces whose size depends on the shapes alone, sum each piece in a fixed order and add
// the per-piece partial weights in piece order: the same bits for any thread count.
//
//  * 1×1×1 kernels (any stride, padding, groups) are a GEMM per group with the voxels as
//    the reduction axis: dw[co, ci] = Σ_v dy[co, v] · x[ci, map(v)]. A task takes one
//    sample, one group and a fixed chunk of voxels; it packs blocks of dy and (gathered
//    through map) x rows into panels of the accumulation type and runs a register-blocked
//    MR×NR dot-product kernel over them, SIMD lanes along the voxels.
//  * Everything else (depthwise k3/k5, any stride, padding, dilation, groups) runs per
//    (co, ci) pair over a fixed chunk of output rows (n, od, oh): every tap (kd, kh, kw)
//    adds the dot product of the dy row with the shifted x row into 8 lanes of its own
//    (bounds computed once per kw, so the inner loop has no tests); the lanes are combined
//    pairwise at the end of the chunk.
//
// The caller may use the kernel for the weight gradient of conv3d_transpose with x and dy
// swapped (x the transposed conv's output gradient, dy its input): the loops run over dy's
// spatial extent and bounds-check every position in x, so D' need not follow from D.
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

/// The sizes (ConvGeometry.h), after checking that the channels fit the groups.
ConvGeometry gradGeometry(const Tensor &x, const Tensor &dy, const ConvParams &p,
                          const Tensor &dw) {
  const char *k = "conv3d_grad_weight";
  ConvGeometry g = convGeometry(k, x, dw, dy, "output gradient", p, false);
  if (dy.dim(0) != g.n || g.cin % g.groups != 0 || g.cout % g.groups != 0 ||
      dw.dim(0) != g.cout || dw.dim(1) != g.cinG)
    throw Error(str("med kernel ", k, ": input ", shapeStr(x.shape()), ", output gradient ",
                    shapeStr(dy.shape()), " and weight ", shapeStr(dw.shape()),
                    " do not match for ", g.groups, " groups"));
  return g;
}

/// Upper bound on the number of partial values (pieces × weights) kept at once.
constexpr int64_t kMaxPartials = int64_t(1) << 23;

// ---- 1×1×1: voxel-reduction GEMM -----------------------------------------------------------

/// A 16-byte SIMD vector of the accumulation type (GCC/Clang vector extension, baseline
/// SSE2). Lane j of a vector sums the voxels j, j + L, j + 2L, ... of a block.
template <typename A> struct GradVec;
template <> struct GradVec<float> { typedef float type __attribute__((vector_size(16))); };
template <> struct GradVec<double> { typedef double type __attribute__((vector_size(16))); };

/// Sum of the lanes of a vector in a fixed order.
template <typename A> inline A lanesOf(typename GradVec<A>::type v) {
  constexpr int L = static_cast<int>(16 / sizeof(A));
  A l[L];
  std::memcpy(l, &v, sizeof(v));
  if constexpr (L == 4)
    return (l[0] + l[1]) + (l[2] + l[3]);
  else
    return l[0] + l[1];
}

template <typename T>
void gradWeight1x1(const ConvGeometry &g, const ConvParams &p, const T *x, const T *dy, T *dw) {
  using A = Acc<T>;
  using V = typename GradVec<A>::type;
  constexpr int L = static_cast<int>(16 / sizeof(A));
  constexpr int MR = 4, NR = 3; // output × input channels per register tile
  const int64_t inVox = g.in[0] * g.in[1] * g.in[2];
  const int64_t outVox = g.out[0] * g.out[1] * g.out[2];
  const std::vector<int64_t> map = voxelMap(g, p);
  const int64_t coutP = (g.coutG + MR - 1) / MR * MR, cinP = (g.cinG + NR - 1) / NR * NR;
  const int64_t partSize = coutP * cinP;

  // Voxel block packed at once: panels of (coutP + cinP) × vb values, about 64 KiB (float).
  int64_t vb = (16384 / (coutP + cinP)) / 8 * 8;
  vb = std::clamp<int64_t>(vb, 8, 1024);
  // Voxel chunk per task (a multiple of vb): about 2^20 multiply-adds, but few enough
  // chunks that the partials stay bounded.
  int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, partSize));
  const int64_t maxPieces = std::max<int64_t>(1, kMaxPartials / (g.groups * partSize));
  chunk = std::max(chunk, ceilDiv(g.n * outVox, maxPieces));
  chunk = std::max<int64_t>(vb, (chunk + vb - 1) / vb * vb);
  const int64_t perSample = ceilDiv(outVox, chunk);
  const int64_t tasks = g.n * g.groups * perSample; // order: (n, group, chunk)
  std::vector<A> part(static_cast<size_t>(tasks * partSize));

  parallelFor(tasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<A> dyPanel(static_cast<size_t>(coutP * vb)), xPanel(static_cast<size_t>(cinP * vb));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ch = t % perSample, gr = (t / perSample) % g.groups,
                    n = t / (perSample * g.groups);
      A *acc = part.data() + t * partSize;
      std::fill(acc, acc + partSize, A(0));
      const int64_t cb = ch * chunk, ce = std::min(outVox, cb + chunk);
      for (int64_t v0 = cb; v0 < ce; v0 += vb) {
        const int64_t nv = std::min(vb, ce - v0), nvPad = (nv + L - 1) / L * L;
        // Pack: rows past coutG / cinG and columns past nv are zero.
        for (int64_t co = 0; co < coutP; ++co) {
          A *dst = dyPanel.data() + co * vb;
          int64_t j = 0;
          if (co < g.coutG) {
            const T *src = dy + (n * g.cout + gr * g.coutG + co) * outVox + v0;
            for (; j < nv; ++j)
              dst[j] = load(src[j]);
          }
          for (; j < nvPad; ++j)
            dst[j] = A(0);
        }
        for (int64_t ci = 0; ci < cinP; ++ci) {
          A *dst = xPanel.data() + ci * vb;
          int64_t j = 0;
          if (ci < g.cinG) {
            const T *src = x + (n * g.cin + gr * g.cinG + ci) * inVox;
            if (map.empty()) {
              for (; j < nv; ++j)
                dst[j] = load(src[v0 + j]);
            } else {
              const int64_t *m = map.data() + v0;
              for (; j < nv; ++j)
                dst[j] = m[j] >= 0 ? load(src[m[j]]) : A(0);
            }
          }
          for (; j < nvPad; ++j)
            dst[j] = A(0);
        }
        // MR×NR tiles of dot products over the block.
        for (int64_t co0 = 0; co0 < coutP; co0 += MR)
          for (int64_t ci0 = 0; ci0 < cinP; ci0 += NR) {
            V c[MR][NR];
            for (int i = 0; i < MR; ++i)
              for (int k = 0; k < NR; ++k)
                c[i][k] = V{};
            const A *dp = dyPanel.data() + co0 * vb, *xq = xPanel.data() + ci0 * vb;
            for (int64_t j = 0; j < nvPad; j += L) {
              V d[MR];
              for (int i = 0; i < MR; ++i)
                std::memcpy(&d[i], dp + i * vb + j, sizeof(V));
              for (int k = 0; k < NR; ++k) {
                V xv;
                std::memcpy(&xv, xq + k * vb + j, sizeof(V));
                for (int i = 0; i < MR; ++i)
                  c[i][k] += d[i] * xv;
              }
            }
            for (int i = 0; i < MR; ++i)
              for (int k = 0; k < NR; ++k)
                acc[(co0 + i) * cinP + ci0 + k] += lanesOf<A>(c[i][k]);
          }
      }
    }
  });

  // dw = Σ over samples and chunks, in order.
  parallelFor(g.cout, grainFor(g.cinG * g.n * perSample), [&](int64_t r0, int64_t r1) {
    for (int64_t co = r0; co < r1; ++co) {
      const int64_t gr = co / g.coutG, cl = co % g.coutG;
      for (int64_t ci = 0; ci < g.cinG; ++ci) {
        A s = A(0);
        for (int64_t n = 0; n < g.n; ++n)
          for (int64_t ch = 0; ch < perSample; ++ch)
            s += part[((n * g.groups + gr) * perSample + ch) * partSize + cl * cinP + ci];
        dw[co * g.cinG + ci] = store<T>(s);
      }
    }
  });
}

// ---- direct: per (co, ci) over chunks of output rows -------------------------------------

/// l[j] += Σ a[i]·b[i] for i ≡ j (mod 8) relative to `begin`, i in [begin, end); b is
/// read with stride `sb`.
template <typename T, typename A>
inline void dotLanes(const T *__restrict a, const T *__restrict b, int64_t sb, int64_t begin,
                     int64_t end, A *__restrict l) {
  A r[8];
  for (int j = 0; j < 8; ++j)
    r[j] = l[j];
  int64_t i = begin;
  if (sb == 1) {
    for (; i + 8 <= end; i += 8)
      for (int j = 0; j < 8; ++j)
        r[j] += load(a[i + j]) * load(b[i + j]);
  } else {
    for (; i + 8 <= end; i += 8)
      for (int j = 0; j < 8; ++j)
        r[j] += load(a[i + j]) * load(b[(i + j) * sb]);
  }
  for (int j = 0; i < end; ++i, ++j)
    r[j] += load(a[i]) * load(b[i * sb]);
  for (int j = 0; j < 8; ++j)
    l[j] = r[j];
}

template <typename T>
void gradWeightDirect(const ConvGeometry &g, const ConvParams &p, const T *x, const T *dy,
                      T *dw) {
  using A = Acc<T>;
  // Per kw: the dy columns [lo, hi) whose x column ow·sw + off lies inside [0, W).
  const DirectLoops c = directLoops(g, p);
  // Rows (n, od, oh) in fixed chunks: about 2^16 multiply-adds each, with the partials
  // (pairs × chunks × kVol) bounded.
  const int64_t rows = g.n * c.OD * c.OH, pairs = g.cout * g.cinG;
  int64_t rowChunk = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, c.OW * c.kVol));
  rowChunk =
      std::max(rowChunk, ceilDiv(rows, std::max<int64_t>(1, kMaxPartials / (pairs * c.kVol))));
  const int64_t chunks = ceilDiv(rows, rowChunk);
  std::vector<A> part(static_cast<size_t>(pairs * chunks * c.kVol));

  parallelFor(pairs * chunks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<A> lanes(static_cast<size_t>(c.kVol * 8));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ch = t % chunks, pair = t / chunks;
      const int64_t co = pair / g.cinG, cl = pair % g.cinG;
      const int64_t ci = (co / g.coutG) * g.cinG + cl;
      std::fill(lanes.begin(), lanes.end(), A(0));
      const int64_t r0 = ch * rowChunk, r1 = std::min(rows, r0 + rowChunk);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oh = r % c.OH, od = (r / c.OH) % c.OD, n = r / (c.OH * c.OD);
        const T *dyr = dy + ((n * g.cout + co) * c.OD + od) * c.OH * c.OW + oh * c.OW;
        const T *xc = x + (n * g.cin + ci) * c.D * c.H * c.W;
        for (int64_t kd = 0; kd < c.kD; ++kd) {
          const int64_t id = od * c.sd - c.pd + kd * c.dd;
          if (id < 0 || id >= c.D)
            continue;
          for (int64_t kh = 0; kh < c.kH; ++kh) {
            const int64_t ih = oh * c.sh - c.ph + kh * c.dh;
            if (ih < 0 || ih >= c.H)
              continue;
            const T *xr = xc + (id * c.H + ih) * c.W;
            A *lt = lanes.data() + (kd * c.kH + kh) * c.kW * 8;
            for (int64_t kw = 0; kw < c.kW; ++kw)
              if (c.lo[kw] < c.hi[kw])
                dotLanes(dyr, xr + c.off[kw], c.sw, c.lo[kw], c.hi[kw], lt + kw * 8);
          }
        }
      }
      A *out = part.data() + t * c.kVol;
      for (int64_t tap = 0; tap < c.kVol; ++tap) {
        const A *l = lanes.data() + tap * 8;
        out[tap] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
      }
    }
  });

  parallelFor(pairs, grainFor(c.kVol * chunks), [&](int64_t q0, int64_t q1) {
    for (int64_t pair = q0; pair < q1; ++pair)
      for (int64_t tap = 0; tap < c.kVol; ++tap) {
        A s = A(0);
        for (int64_t ch = 0; ch < chunks; ++ch)
          s += part[(pair * chunks + ch) * c.kVol + tap];
        dw[pair * c.kVol + tap] = store<T>(s);
      }
  });
}

template <typename T>
void gradWeightImpl(const Tensor &x, const Tensor &dy, const ConvParams &p, Tensor &dw) {
  const char *k = "conv3d_grad_weight";
  requireDType(k, "output gradient", dy, x.dtype());
  requireDType(k, "result", dw, x.dtype());
  ConvGeometry g = gradGeometry(x, dy, p, dw);
  if (dw.numel() == 0)
    return;
  T *dwp = ptr<T>(dw);
  if (dy.numel() == 0 || x.numel() == 0) { // no terms
    std::fill(dwp, dwp + dw.numel(), store<T>(Acc<T>(0)));
    return;
  }
  if (g.k[0] == 1 && g.k[1] == 1 && g.k[2] == 1)
    gradWeight1x1<T>(g, p, ptr<T>(x), ptr<T>(dy), dwp);
  else
    gradWeightDirect<T>(g, p, ptr<T>(x), ptr<T>(dy), dwp);
}

} // namespace

void conv3dGradWeight(const Tensor &x, const Tensor &dy, const ConvParams &p, Tensor &dw) {
  dispatchFloat(x.dtype(), "conv3d_grad_weight",
                [&](auto tag) { gradWeightImpl<decltype(tag)>(x, dy, p, dw); });
}

} // namespace medrun::cpu
