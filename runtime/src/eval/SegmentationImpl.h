//===- SegmentationImpl.h - what Watershed/MutexWatershed/Segmentation.cpp share -----===//
//
// Edges of a block and their order, union-find with the watershed's and the mutex
// watershed's rules, and the pieces of one block's work that the block-wise driver
// (Segmentation.cpp) calls. Internal to runtime/src/eval.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_EVAL_SEGMENTATIONIMPL_H
#define MEDRUN_EVAL_SEGMENTATIONIMPL_H

#include "medrun/Segmentation.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace medrun::seg {

inline int64_t volumeOf(const Box3 &s) { return s[0] * s[1] * s[2]; }
inline bool isShortRange(const Offset &o) {
  return std::abs(o[0]) + std::abs(o[1]) + std::abs(o[2]) == 1;
}

/// An edge by weight and its index (voxel * K + channel; inside a block the block's voxel
/// index, which orders as the global one): the processing order is descending weight, then
/// ascending index, a total order.
struct WEdge {
  float w;
  uint64_t id;
};
inline bool before(const WEdge &a, const WEdge &b) {
  return a.w > b.w || (a.w == b.w && a.id < b.id);
}
/// Sorts in that order (radix passes; the order is total, so the result is unique).
void sortEdges(std::vector<WEdge> &edges);

/// An edge from a voxel of the block being processed to a voxel of another block: its
/// weight and index, the raw id of the near voxel and the global index of the far one
/// (resolved to its raw id once every block has been labelled).
struct CrossEdge {
  float w;
  uint64_t id;
  uint64_t nearRaw;
  uint64_t far; ///< global voxel index, later the far voxel's raw id
  bool attractive;
};

/// A block of the volume and where its voxels are.
struct BlockGeom {
  Box3 shape; ///< the volume's
  Box3 lo, size;
  int64_t voxels() const { return volumeOf(size); }
  uint64_t global(int64_t z, int64_t y, int64_t x) const {
    return static_cast<uint64_t>(((lo[0] + z) * shape[1] + lo[1] + y) * shape[2] + lo[2] + x);
  }
};

/// Calls fn(localVoxel, z, y, x, farGlobal, inBlock, farLocal) for every edge of channel
/// offset `o` whose near voxel has local z in [z0, z1) and whose far voxel is in the
/// volume (farLocal is valid when inBlock).
template <typename Fn>
void forEachEdge(const BlockGeom &g, const Offset &o, int64_t z0, int64_t z1, Fn &&fn) {
  const int64_t H = g.size[1], W = g.size[2];
  for (int64_t z = z0; z < z1; ++z) {
    const int64_t gz = g.lo[0] + z + o[0];
    if (gz < 0 || gz >= g.shape[0])
      continue;
    for (int64_t y = 0; y < H; ++y) {
      const int64_t gy = g.lo[1] + y + o[1];
      if (gy < 0 || gy >= g.shape[1])
        continue;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t gx = g.lo[2] + x + o[2];
        if (gx < 0 || gx >= g.shape[2])
          continue;
        const int64_t fz = z + o[0], fy = y + o[1], fx = x + o[2];
        const bool in = fz >= 0 && fz < g.size[0] && fy >= 0 && fy < H && fx >= 0 && fx < W;
        fn((z * H + y) * W + x, z, y, x,
           static_cast<uint64_t>((gz * g.shape[1] + gy) * g.shape[2] + gx), in,
           in ? (fz * H + fy) * W + fx : int64_t(-1));
      }
    }
  }
}

/// Union-find with path halving; union keeps the lower index as the root.
struct UnionFind {
  std::vector<int64_t> parent;
  explicit UnionFind(int64_t n = 0) { reset(n); }
  void reset(int64_t n) {
    parent.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      parent[i] = i;
  }
  int64_t find(int64_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  }
  /// Joins the roots a != b; returns the new root.
  int64_t join(int64_t a, int64_t b) {
    if (b < a)
      std::swap(a, b);
    parent[b] = a;
    return a;
  }
};

/// The watershed's rule: trees join unless both hold a seed and the seeds differ.
struct SeededForest {
  UnionFind uf;
  std::vector<uint64_t> seed; ///< per root: the seed's identity, 0 for none
  explicit SeededForest(std::vector<uint64_t> seeds)
      : uf(static_cast<int64_t>(seeds.size())), seed(std::move(seeds)) {}
  void edge(int64_t a, int64_t b) {
    a = uf.find(a);
    b = uf.find(b);
    if (a == b || (seed[a] && seed[b] && seed[a] != seed[b]))
      return;
    const uint64_t s = seed[a] ? seed[a] : seed[b];
    seed[uf.join(a, b)] = s;
  }
};

/// The mutex watershed's rule: clusters and the mutexes between them (kept between roots,
/// a set per root that has any).
struct MutexForest {
  using Set = std::unordered_set<int64_t>;
  UnionFind uf;
  std::vector<std::unique_ptr<Set>> mutex;
  explicit MutexForest(int64_t n) : uf(n), mutex(static_cast<size_t>(n)) {}
  bool hasMutex(int64_t a, int64_t b) const {
    const Set *sa = mutex[a].get(), *sb = mutex[b].get();
    if (!sa || !sb)
      return false;
    return sa->size() < sb->size() ? sa->count(b) > 0 : sb->count(a) > 0;
  }
  Set &setOf(int64_t a) {
    if (!mutex[a])
      mutex[a] = std::make_unique<Set>();
    return *mutex[a];
  }
  void addMutex(int64_t a, int64_t b) {
    setOf(a).insert(b);
    setOf(b).insert(a);
  }
  void edge(int64_t a, int64_t b, bool attractive) {
    a = uf.find(a);
    b = uf.find(b);
    if (a == b || hasMutex(a, b))
      return;
    if (!attractive) {
      addMutex(a, b);
      return;
    }
    // The cluster with more mutexes stays the root, so each move is of the smaller set
    // (which root represents a cluster does not change any decision or label).
    const size_t na = mutex[a] ? mutex[a]->size() : 0, nb = mutex[b] ? mutex[b]->size() : 0;
    const int64_t root = na >= nb ? a : b, gone = root == a ? b : a;
    uf.parent[gone] = root;
    if (!mutex[gone])
      return;
    Set &mine = setOf(root);
    for (int64_t m : *mutex[gone]) {
      Set &theirs = *mutex[m];
      theirs.erase(gone);
      theirs.insert(root);
      mine.insert(m);
    }
    mutex[gone].reset();
  }
};

/// One block's labelling: local ids 0..count-1 numbered by first voxel in the block.
struct BlockLabels {
  std::vector<uint64_t> local;
  int64_t count = 0;
  std::vector<int64_t> size;        ///< voxels per local id
  std::vector<uint64_t> seed;       ///< watershed: the seed identity per local id
  std::vector<std::pair<int64_t, int64_t>> mutexes; ///< mutex watershed: pairs a < b
};

/// Numbers the roots of `uf` over the block's voxels by first voxel.
void numberRoots(UnionFind &uf, BlockLabels &out);

/// Components of the short-range edges >= params.seedThreshold inside the block; appends
/// the edges >= seedThreshold to other blocks (nearRaw = local id, attractive unused).
BlockLabels seedBlock(const float *affs, const BlockGeom &g, const Offsets &offsets,
                      const SegmentParams &params, std::vector<CrossEdge> &cross);

/// The seeded watershed inside the block, `seeds` per voxel (0: none); appends every
/// short-range edge to other blocks (nearRaw = local id). `graph`: when not null, the
/// in-block region graph of the local ids (pairs a < b).
BlockLabels watershedBlock(const float *affs, const BlockGeom &g, const Offsets &offsets,
                           const SegmentParams &params, const std::vector<uint64_t> &seeds,
                           std::vector<CrossEdge> &cross, std::vector<RegionEdge> *graph);

/// The mutex watershed inside the block; appends the edges to other blocks.
BlockLabels mutexBlock(const float *affs, const BlockGeom &g, const Offsets &offsets,
                       const SegmentParams &params, std::vector<CrossEdge> &cross);

/// Sums edges of equal (u, v) into one, sorted by (u, v).
void mergeRegionEdges(std::vector<RegionEdge> &edges);

} // namespace medrun::seg

#endif // MEDRUN_EVAL_SEGMENTATIONIMPL_H
