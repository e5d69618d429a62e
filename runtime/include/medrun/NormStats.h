//===- NormStats.h - the chunked statistics of med.group_norm_stats -------------------===//
//
// The one definition of group-norm statistics (docs/dialect.md, med.group_norm_stats):
// per (sample, group), each (n, c) plane, seen as D×H×W (its trailing axes; W the last, H
// the one before, D the product of the others), is cut into boxes of kChunk (the last ones
// along an axis clipped); each box gives (count, mean, M2); the group's boxes, plane after
// plane and in row-major box order within a plane, are merged by Chan's formula in a fixed
// pairwise tree, each mean carried as a pivot plus a small rest. A box is the output tile
// of the stencil template (lib/Target/Cuda/Stencil.cpp), so a shift-sum can compute the
// statistics of its output in its epilogue. The CPU kernel runs these functions; the CUDA
// code generator emits the same chunking, tree and formula (prelude.cuh's chanMerge), so
// the two agree to rounding. Header-only: medc includes it without linking the runtime.
//
//===----------------------------------------------------------------------------------===//

#ifndef MEDRUN_NORMSTATS_H
#define MEDRUN_NORMSTATS_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace medrun::normstats {

/// A box of D×H×W extents: a plane or a chunk.
struct Box {
  int64_t d, h, w;
  int64_t volume() const { return d * h * w; }
};

/// The chunk: 4,096 values.
constexpr Box kChunk{4, 16, 64};

/// A plane of the trailing axes of `shape` (N×C×…) as D×H×W.
inline Box planeOf(const std::vector<int64_t> &shape) {
  Box p{1, 1, 1};
  const size_t r = shape.size();
  if (r >= 3)
    p.w = shape[r - 1];
  if (r >= 4)
    p.h = shape[r - 2];
  for (size_t i = 2; i + 2 < r; ++i)
    p.d *= shape[i];
  return p;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Chunks of a plane.
inline int64_t chunksPerPlane(Box p) {
  return ceilDiv(p.d, kChunk.d) * ceilDiv(p.h, kChunk.h) * ceilDiv(p.w, kChunk.w);
}

/// Chunk k of a plane: its first element (d0, h0, w0) and clipped extents.
struct ChunkAt {
  int64_t d0, h0, w0;
  Box e;
};
inline ChunkAt chunkAt(int64_t k, Box p) {
  const int64_t nH = ceilDiv(p.h, kChunk.h), nW = ceilDiv(p.w, kChunk.w);
  ChunkAt c;
  c.d0 = k / (nH * nW) * kChunk.d;
  c.h0 = k / nW % nH * kChunk.h;
  c.w0 = k % nW * kChunk.w;
  c.e = {std::min(kChunk.d, p.d - c.d0), std::min(kChunk.h, p.h - c.h0),
         std::min(kChunk.w, p.w - c.w0)};
  return c;
}

/// The values in chunks [0, c) of a group whose planes are `p`, `per` chunks each.
inline int64_t valuesBefore(int64_t c, Box p, int64_t per) {
  const int64_t k = c % per;
  const ChunkAt a = chunkAt(k, p);
  return c / per * p.volume() + a.d0 * p.h * p.w + a.e.d * (a.h0 * p.w + a.e.h * a.w0);
}

/// A chunk's mean is kept as pivot + dev: the pivot is a value near the mean (the chunk's
/// first-pass mean), dev the small rest. A difference of two means is then the exact
/// difference of the pivots plus that of the small parts: under a large mean it keeps the
/// digits a difference of two rounded means would lose.
///
/// Chan's merge of chunk b (nb values) into chunk a (na values), in the order of operations
/// prelude.cuh's chanMerge uses. Chunk a keeps its pivot.
template <typename A>
void merge(A pivot, A &dev, A &m2, A pivotB, A devB, A m2B, int64_t na, int64_t nb) {
  const A wb = A(nb) / A(na + nb);
  const A d = (pivotB - pivot) + (devB - dev);
  dev = dev + d * wb;
  m2 = (m2 + m2B) + (d * d) * (A(na) * wb);
}

/// Merges the `chunks` (pivot, dev, m2) triples of one group in place, in the fixed tree:
/// level w = 1, 2, 4, … merges chunk i + w into chunk i for every i that is a multiple of
/// 2w. The group's mean is pivot[0] + dev[0], its M2 m2[0].
template <typename A>
void mergeTree(const A *pivot, A *dev, A *m2, int64_t chunks, Box p, int64_t per) {
  for (int64_t w = 1; w < chunks; w *= 2)
    for (int64_t i = 0; i + w < chunks; i += 2 * w) {
      const int64_t a = valuesBefore(i, p, per), b = valuesBefore(i + w, p, per),
                    e = valuesBefore(std::min(i + 2 * w, chunks), p, per);
      merge(pivot[i], dev[i], m2[i], pivot[i + w], dev[i + w], m2[i + w], b - a, e - b);
    }
}

} // namespace medrun::normstats

#endif // MEDRUN_NORMSTATS_H
