//===- MutexWatershed.cpp - the mutex watershed of a block (Wolf et al. 2018) --------===//
//
// Attractive edges (short-range channels, weight a) and repulsive ones (the others,
// weight 1 - a) in one descending order; clusters join along attractive edges unless a
// mutex (a repulsive edge taken earlier) lies between them. Edges are built and sorted in
// parallel, the Kruskal pass is sequential.
//
//===----------------------------------------------------------------------------------===//
#include "SegmentationImpl.h"

#include "medrun/Parallel.h"

namespace medrun::seg {

BlockLabels mutexBlock(const float *affs, const BlockGeom &g, const Offsets &offsets,
                       const SegmentParams &params, std::vector<CrossEdge> &cross) {
  const int64_t K = static_cast<int64_t>(offsets.size()), n = g.voxels(), D = g.size[0];
  const Box3 s = params.repulsiveStride;
  std::vector<std::vector<WEdge>> parts(static_cast<size_t>(D));
  std::vector<std::vector<CrossEdge>> crossParts(static_cast<size_t>(D));
  std::vector<uint8_t> attractive(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k)
    attractive[k] = isShortRange(offsets[k]);
  parallelFor(D, 1, [&](int64_t z0, int64_t z1) {
    for (int64_t z = z0; z < z1; ++z)
      for (int64_t k = 0; k < K; ++k) {
        const float *a = affs + k * n;
        const bool attr = attractive[k];
        forEachEdge(g, offsets[k], z, z + 1,
                    [&](int64_t v, int64_t vz, int64_t vy, int64_t vx, uint64_t far, bool in,
                        int64_t) {
                      if (!attr && ((g.lo[0] + vz) % s[0] || (g.lo[1] + vy) % s[1] ||
                                    (g.lo[2] + vx) % s[2]))
                        return;
                      const float w = attr ? a[v] : 1.0f - a[v];
                      // Inside the block the local index orders as the global one.
                      if (in)
                        parts[z].push_back({w, static_cast<uint64_t>(v * K + k)});
                      else
                        crossParts[z].push_back({w, g.global(vz, vy, vx) * K + k,
                                                 static_cast<uint64_t>(v), far, attr});
                    });
      }
  });
  std::vector<WEdge> edges;
  {
    size_t total = 0;
    for (auto &p : parts)
      total += p.size();
    edges.reserve(total);
    for (auto &p : parts) {
      edges.insert(edges.end(), p.begin(), p.end());
      std::vector<WEdge>().swap(p);
    }
  }
  sortEdges(edges);
  if (params.progress)
    params.progress("mutex", 0, 1);
  std::vector<int64_t> delta;
  for (const Offset &o : offsets)
    delta.push_back((o[0] * g.size[1] + o[1]) * g.size[2] + o[2]);
  MutexForest forest(n);
  for (const WEdge &e : edges) {
    const int64_t k = static_cast<int64_t>(e.id % K), a = static_cast<int64_t>(e.id / K);
    const int64_t b = a + delta[k];
    forest.edge(a, b, attractive[k]);
  }
  BlockLabels out;
  numberRoots(forest.uf, out);
  // The mutexes between the block's clusters, by local id, for the stitching step.
  for (size_t r = 0; r < forest.mutex.size(); ++r)
    if (forest.mutex[r])
      for (int64_t m : *forest.mutex[r]) {
        const int64_t a = static_cast<int64_t>(out.local[r]),
                      b = static_cast<int64_t>(out.local[m]);
        if (a < b)
          out.mutexes.push_back({a, b});
      }
  std::sort(out.mutexes.begin(), out.mutexes.end());
  for (auto &p : crossParts)
    for (CrossEdge &c : p) {
      c.nearRaw = out.local[c.nearRaw];
      cross.push_back(c);
    }
  return out;
}

} // namespace medrun::seg
