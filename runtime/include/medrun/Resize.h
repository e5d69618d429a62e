//===- Resize.h - the per-axis taps of med.resize, for every executor -------------------===//
//
// med.resize is separable: along each spatial axis, output index o reads one (nearest) or two
// (linear) input indices with weights. These tables are computed once by the rules below, as
// torch computes them (UpSample.h: area_pixel_compute_scale / _source_index, nearest_idx), in
// the math type A (float for f32, bf16 and f16 storage; double for f64). The CPU kernels read
// them; the CUDA code generator embeds the float tables in its kernels, so that both mix the
// same neighbours with the same weights. The gradient (the adjoint) gathers with the
// transposed table: per input index, the (output index, weight) pairs that read it, in output
// order.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_RESIZE_H
#define MEDRUN_RESIZE_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace medrun {

template <typename A> struct ResizeAxis {
  int taps = 1;                 ///< input indices per output index: 2 linear, 1 nearest
  std::vector<int64_t> index;   ///< [out × taps]
  std::vector<A> weight;        ///< [out × taps]
  // The transposed table: input index i is read by entries [begin[i], begin[i + 1]).
  std::vector<int64_t> begin;   ///< [in + 1]
  std::vector<int64_t> output;  ///< output index of each entry
  std::vector<A> readWeight;    ///< its weight
};

template <typename A>
ResizeAxis<A> resizeAxis(int64_t in, int64_t out, bool linear, bool alignCorners) {
  ResizeAxis<A> t;
  t.taps = linear ? 2 : 1;
  if (linear) {
    const A scale = alignCorners ? (out > 1 ? A(in - 1) / A(out - 1) : A(0)) : A(in) / A(out);
    for (int64_t o = 0; o < out; ++o) {
      A src = alignCorners ? scale * A(o) : scale * (A(o) + A(0.5)) - A(0.5);
      if (src < A(0))
        src = A(0);
      const int64_t i0 = static_cast<int64_t>(src);
      const int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
      A l1 = src - A(i0);
      l1 = l1 < A(0) ? A(0) : (l1 > A(1) ? A(1) : l1);
      t.index.insert(t.index.end(), {i0, i1});
      t.weight.insert(t.weight.end(), {A(1) - l1, l1});
    }
  } else {
    // torch's nearest_idx, in float whatever the math type.
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t i = in == out ? o
                  : out == 2 * in
                      ? o >> 1
                      : static_cast<int64_t>(std::floor(static_cast<float>(o) * scale));
      t.index.push_back(i < in - 1 ? i : in - 1);
      t.weight.push_back(A(1));
    }
  }
  t.begin.assign(in + 1, 0);
  for (int64_t e = 0; e < out * t.taps; ++e)
    ++t.begin[t.index[e] + 1];
  for (int64_t i = 0; i < in; ++i)
    t.begin[i + 1] += t.begin[i];
  t.output.resize(out * t.taps);
  t.readWeight.resize(out * t.taps);
  std::vector<int64_t> next(t.begin.begin(), t.begin.end() - 1);
  for (int64_t e = 0; e < out * t.taps; ++e) { // in output order, each output's taps in order
    const int64_t slot = next[t.index[e]]++;
    t.output[slot] = e / t.taps;
    t.readWeight[slot] = t.weight[e];
  }
  return t;
}

} // namespace medrun

#endif // MEDRUN_RESIZE_H
