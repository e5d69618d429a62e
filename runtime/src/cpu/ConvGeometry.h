//===- ConvGeometry.h - sizes, checks and row bounds of the CPU conv kernels ------===//
//
// Internal to runtime/src/cpu. conv3d and conv3d_transpose (Conv.cpp) and
// conv3d_grad_weight (ConvGrad.cpp) read their sizes, check their parameters, map 1×1×1
// voxels and bound their rows here, so the forward and gradient kernels cannot drift apart.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SRC_CPU_CONVGEOMETRY_H
#define MEDRUN_SRC_CPU_CONVGEOMETRY_H

#include "medrun/Error.h"
#include "medrun/Kernels.h"
#include "medrun/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace medrun::cpu::detail {

/// ceil(a / b) for b > 0.
inline int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
/// floor(a / b) for b > 0.
inline int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// Batch and input channels from the input, output channels and `out` from the output
/// (the output gradient for conv3d_grad_weight), `k` from the weight.
struct ConvGeometry {
  int64_t n, cin, cout, groups, cinG, coutG;
  int64_t in[3], out[3], k[3];
  bool transposed;
};

/// Checks that x, w and y are rank 5 (the error calls y `yName`) and that groups, stride
/// and dilation are positive, then reads the sizes. Channel counts are the caller's to check.
inline ConvGeometry convGeometry(const char *kernel, const Tensor &x, const Tensor &w,
                                 const Tensor &y, const char *yName, const ConvParams &p,
                                 bool transposed) {
  if (x.rank() != 5 || w.rank() != 5 || y.rank() != 5)
    throw Error(str("med kernel ", kernel, ": expected rank-5 input, weight and ", yName,
                    ", got ", shapeStr(x.shape()), ", ", shapeStr(w.shape()), ", ",
                    shapeStr(y.shape())));
  if (p.groups < 1)
    throw Error(str("med kernel ", kernel, ": groups must be positive, got ", p.groups));
  for (int a = 0; a < 3; ++a)
    if (p.stride[a] < 1 || p.dilation[a] < 1)
      throw Error(str("med kernel ", kernel, ": stride and dilation must be positive"));
  ConvGeometry g;
  g.transposed = transposed;
  g.n = x.dim(0);
  g.cin = x.dim(1);
  g.cout = y.dim(1);
  g.groups = p.groups;
  g.cinG = g.cin / g.groups;
  g.coutG = g.cout / g.groups;
  for (int a = 0; a < 3; ++a) {
    g.in[a] = x.dim(2 + a);
    g.out[a] = y.dim(2 + a);
    g.k[a] = w.dim(2 + a);
  }
  return g;
}

/// Input voxel read by each output voxel of a 1×1×1 conv (transposed or not; −1: outside,
/// the term is zero), or an empty vector for the identity.
inline std::vector<int64_t> voxelMap(const ConvGeometry &g, const ConvParams &p) {
  bool identity = true;
  for (int a = 0; a < 3; ++a)
    identity = identity && p.stride[a] == 1 && p.padding[a] == 0 && g.in[a] == g.out[a];
  if (identity)
    return {};
  // Per axis: the input index of each output index, or −1.
  std::vector<int64_t> axis[3];
  for (int a = 0; a < 3; ++a) {
    axis[a].resize(g.out[a]);
    for (int64_t o = 0; o < g.out[a]; ++o) {
      int64_t i = -1;
      if (!g.transposed) {
        int64_t t = o * p.stride[a] - p.padding[a];
        if (t >= 0 && t < g.in[a])
          i = t;
      } else {
        int64_t t = o + p.padding[a];
        if (t >= 0 && t % p.stride[a] == 0 && t / p.stride[a] < g.in[a])
          i = t / p.stride[a];
      }
      axis[a][o] = i;
    }
  }
  std::vector<int64_t> map(static_cast<size_t>(g.out[0] * g.out[1] * g.out[2]));
  int64_t v = 0;
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh)
      for (int64_t ow = 0; ow < g.out[2]; ++ow, ++v) {
        int64_t id = axis[0][od], ih = axis[1][oh], iw = axis[2][ow];
        map[v] = (id < 0 || ih < 0 || iw < 0) ? -1 : (id * g.in[1] + ih) * g.in[2] + iw;
      }
  return map;
}

/// What the direct (row by row) kernels' loops read: input D×H×W, output OD×OH×OW, kernel
/// kD×kH×kW, stride s*, padding p*, dilation d*; and per kernel column kw the columns
/// [lo, hi) of the walked row whose partner column j·sw + off[kw] lies inside the other
/// row. The walked row is the output's (conv3d, conv3d_grad_weight: the partner is an
/// input column) or, transposed, the input's (the partner is an output column).
struct DirectLoops {
  int64_t D, H, W, OD, OH, OW, kD, kH, kW;
  int64_t sd, sh, sw, pd, ph, pw, dd, dh, dw;
  int64_t kVol;
  std::vector<int64_t> lo, hi, off;
};

inline DirectLoops directLoops(const ConvGeometry &g, const ConvParams &p) {
  DirectLoops c;
  c.D = g.in[0], c.H = g.in[1], c.W = g.in[2];
  c.OD = g.out[0], c.OH = g.out[1], c.OW = g.out[2];
  c.kD = g.k[0], c.kH = g.k[1], c.kW = g.k[2];
  c.sd = p.stride[0], c.sh = p.stride[1], c.sw = p.stride[2];
  c.pd = p.padding[0], c.ph = p.padding[1], c.pw = p.padding[2];
  c.dd = p.dilation[0], c.dh = p.dilation[1], c.dw = p.dilation[2];
  c.kVol = c.kD * c.kH * c.kW;
  const int64_t walked = g.transposed ? c.W : c.OW, other = g.transposed ? c.OW : c.W;
  c.lo.resize(c.kW);
  c.hi.resize(c.kW);
  c.off.resize(c.kW);
  for (int64_t kw = 0; kw < c.kW; ++kw) {
    c.off[kw] = kw * c.dw - c.pw;
    c.lo[kw] = std::max<int64_t>(0, ceilDiv(-c.off[kw], c.sw));
    c.hi[kw] = std::min<int64_t>(walked, floorDiv(other - 1 - c.off[kw], c.sw) + 1);
  }
  return c;
}

} // namespace medrun::cpu::detail

#endif // MEDRUN_SRC_CPU_CONVGEOMETRY_H
