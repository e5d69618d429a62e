//===- Segmentation.cpp - whole-volume and block-wise segmentation from affinities ---===//
//
// One driver for both: the volume is cut into blocks (one block when it is in memory);
// each block is labelled on its own edges, its raw ids (block-unique) go to a LabelStore,
// and the edges between blocks are kept. After the last block those edges are resolved to
// the raw ids at both ends and processed by the same rule on the blocks' trees (the
// stitching step); final labels are numbered by first voxel, a map from raw ids.
// Watershed methods make two passes: seeds (components, joined exactly across the faces,
// sizes summed), then the seeded watershed reading each block's seeds back from the store.
//
//===----------------------------------------------------------------------------------===//
#include "SegmentationImpl.h"

#include "medrun/Error.h"
#include "medrun/Parallel.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace medrun {

LabelStore::~LabelStore() = default;

MemoryLabels::MemoryLabels(const Box3 &shape)
    : shape_(shape), labels_(static_cast<size_t>(seg::volumeOf(shape)), 0) {}

void MemoryLabels::write(const Box3 &lo, const Box3 &size, const uint64_t *labels) {
  for (int64_t z = 0; z < size[0]; ++z)
    for (int64_t y = 0; y < size[1]; ++y)
      std::copy(labels + (z * size[1] + y) * size[2], labels + (z * size[1] + y + 1) * size[2],
                labels_.begin() + ((lo[0] + z) * shape_[1] + lo[1] + y) * shape_[2] + lo[2]);
}

void MemoryLabels::read(const Box3 &lo, const Box3 &size, uint64_t *labels) const {
  for (int64_t z = 0; z < size[0]; ++z)
    for (int64_t y = 0; y < size[1]; ++y) {
      auto from = labels_.begin() + ((lo[0] + z) * shape_[1] + lo[1] + y) * shape_[2] + lo[2];
      std::copy(from, from + size[2], labels + (z * size[1] + y) * size[2]);
    }
}

namespace {
using namespace seg;

bool crossBefore(const CrossEdge &a, const CrossEdge &b) {
  return a.w > b.w || (a.w == b.w && a.id < b.id);
}

class Driver {
public:
  Driver(const AffinityReader *read, const float *whole, const Box3 &shape, const Box3 &block,
         const Offsets &offsets, const SegmentParams &params, LabelStore &raw)
      : read_(read), whole_(whole), shape_(shape), offsets_(offsets), params_(params),
        raw_(raw) {
    const int64_t K = static_cast<int64_t>(offsets.size());
    for (int a = 0; a < 3; ++a) {
      if (shape[a] < 1)
        throw Error(str("segmentation: empty volume shape ", shape[0], "x", shape[1], "x",
                        shape[2]));
      if (block[a] < 0)
        throw Error(str("segmentation: negative block size along ", "zyx"[a]));
      bs_[a] = block[a] > 0 ? std::min(block[a], shape[a]) : shape[a];
      nb_[a] = (shape[a] + bs_[a] - 1) / bs_[a];
    }
    checkOffsets(offsets, K, params.method != SegmentMethod::Mutex, "offsets");
    if (params.method != SegmentMethod::Mutex && !(params.seedThreshold > params.low))
      throw Error(str("segmentation: the seed threshold ", params.seedThreshold,
                      " must be above the low threshold ", params.low));
    if (params.minSeedSize < 1)
      throw Error("segmentation: the minimum seed size must be at least 1");
    for (int a = 0; a < 3; ++a)
      if (params.repulsiveStride[a] < 1)
        throw Error("segmentation: the repulsive stride must be at least 1 per axis");
    for (int64_t z = 0; z < nb_[0]; ++z)
      for (int64_t y = 0; y < nb_[1]; ++y)
        for (int64_t x = 0; x < nb_[2]; ++x) {
          const Box3 lo{z * bs_[0], y * bs_[1], x * bs_[2]};
          blocks_.push_back({shape, lo,
                             {std::min(bs_[0], shape[0] - lo[0]), std::min(bs_[1], shape[1] - lo[1]),
                              std::min(bs_[2], shape[2] - lo[2])}});
        }
  }

  BlockwiseResult run(const std::vector<double> &thresholds) {
    BlockwiseResult r;
    if (params_.method == SegmentMethod::Mutex) {
      r.maps.push_back(mutex(r.rawIds));
      return r;
    }
    std::vector<uint64_t> seeds = seedPass();
    uint64_t fragments = 0;
    std::vector<RegionEdge> graph;
    std::vector<uint64_t> fragMap = watershedPass(seeds, fragments, r.rawIds,
                                                  params_.method == SegmentMethod::MeanAgglomeration
                                                      ? &graph
                                                      : nullptr);
    if (params_.method == SegmentMethod::Watershed) {
      r.maps.push_back(std::move(fragMap));
      return r;
    }
    if (params_.progress)
      params_.progress("agglomeration", 0, 1);
    const std::vector<double> ts = thresholds.empty() ? std::vector<double>{params_.threshold}
                                                       : thresholds;
    for (double t : ts)
      if (std::isnan(t))
        throw Error("agglomeration: a threshold is NaN");
    auto segMaps = agglomerateMean(fragments, graph, ts);
    for (auto &m : segMaps) {
      std::vector<uint64_t> composed(fragMap.size());
      for (size_t i = 0; i < fragMap.size(); ++i)
        composed[i] = m[fragMap[i]];
      r.maps.push_back(std::move(composed));
    }
    if (params_.progress)
      params_.progress("agglomeration", 1, 1);
    return r;
  }

private:
  int64_t K() const { return static_cast<int64_t>(offsets_.size()); }

  const float *load(size_t b) {
    const BlockGeom &g = blocks_[b];
    const int64_t n = g.voxels() * K();
    const float *p;
    if (whole_ && blocks_.size() == 1) {
      p = whole_;
    } else {
      buf_.resize(static_cast<size_t>(n));
      (*read_)(g.lo, g.size, buf_.data());
      p = buf_.data();
    }
    for (int64_t i = 0; i < n; ++i)
      if (std::isnan(p[i])) {
        const int64_t v = i % g.voxels();
        throw Error(str("affinities: NaN in channel ", i / g.voxels(), " at voxel (z, y, x) = (",
                        g.lo[0] + v / (g.size[1] * g.size[2]), ", ",
                        g.lo[1] + v / g.size[2] % g.size[1], ", ", g.lo[2] + v % g.size[2], ")"));
      }
    return p;
  }

  void progress(const char *stage, size_t done) {
    if (params_.progress)
      params_.progress(stage, static_cast<int64_t>(done), static_cast<int64_t>(blocks_.size()));
  }

  /// Replaces each edge's `far` (a global voxel index) with the raw id stored there,
  /// reading one block of the store at a time.
  void resolve(std::vector<CrossEdge> &cross) {
    if (cross.empty())
      return;
    std::vector<std::pair<size_t, size_t>> byBlock(cross.size());
    for (size_t i = 0; i < cross.size(); ++i) {
      const uint64_t f = cross[i].far;
      const int64_t z = static_cast<int64_t>(f / (shape_[1] * shape_[2])),
                    y = static_cast<int64_t>(f / shape_[2] % shape_[1]),
                    x = static_cast<int64_t>(f % shape_[2]);
      byBlock[i] = {static_cast<size_t>(((z / bs_[0]) * nb_[1] + y / bs_[1]) * nb_[2] + x / bs_[2]), i};
    }
    std::sort(byBlock.begin(), byBlock.end());
    std::vector<uint64_t> labels;
    for (size_t j = 0; j < byBlock.size();) {
      const BlockGeom &g = blocks_[byBlock[j].first];
      labels.resize(static_cast<size_t>(g.voxels()));
      raw_.read(g.lo, g.size, labels.data());
      for (; j < byBlock.size() && &blocks_[byBlock[j].first] == &g; ++j) {
        CrossEdge &c = cross[byBlock[j].second];
        const int64_t f = static_cast<int64_t>(c.far);
        const int64_t z = f / (shape_[1] * shape_[2]) - g.lo[0],
                      y = f / shape_[2] % shape_[1] - g.lo[1], x = f % shape_[2] - g.lo[2];
        c.far = labels[(z * g.size[1] + y) * g.size[2] + x];
      }
    }
  }

  /// Writes a block's local ids as raw ids base + 1 + local, and records each raw id's
  /// first voxel (global index).
  void writeRaw(const BlockGeom &g, const BlockLabels &L, uint64_t base,
                std::vector<uint64_t> *firstVoxel) {
    std::vector<uint64_t> ids(L.local.size());
    if (firstVoxel)
      firstVoxel->resize(base + 1 + L.count, UINT64_MAX);
    for (int64_t v = 0; v < g.voxels(); ++v) {
      ids[v] = base + 1 + L.local[v];
      if (firstVoxel && (*firstVoxel)[ids[v]] == UINT64_MAX)
        (*firstVoxel)[ids[v]] = g.global(v / (g.size[1] * g.size[2]), v / g.size[2] % g.size[1],
                                         v % g.size[2]);
    }
    raw_.write(g.lo, g.size, ids.data());
  }

  /// Seeds: per raw seed component id (1..), its seed identity (the root of its joined
  /// component) when the component is large enough, else 0.
  std::vector<uint64_t> seedPass() {
    std::vector<int64_t> size(1, 0);
    std::vector<CrossEdge> cross;
    uint64_t base = 0;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      progress("seeds", b);
      const float *affs = load(b);
      const size_t first = cross.size();
      BlockLabels L = seedBlock(affs, blocks_[b], offsets_, params_, cross);
      for (size_t i = first; i < cross.size(); ++i)
        cross[i].nearRaw += base + 1;
      writeRaw(blocks_[b], L, base, nullptr);
      size.insert(size.end(), L.size.begin(), L.size.end());
      base += static_cast<uint64_t>(L.count);
    }
    progress("seeds", blocks_.size());
    resolve(cross);
    UnionFind uf(static_cast<int64_t>(base + 1));
    for (const CrossEdge &c : cross) {
      const int64_t a = uf.find(static_cast<int64_t>(c.nearRaw)),
                    b = uf.find(static_cast<int64_t>(c.far));
      if (a != b)
        uf.join(a, b);
    }
    std::vector<int64_t> total(base + 1, 0);
    for (uint64_t s = 1; s <= base; ++s)
      total[uf.find(static_cast<int64_t>(s))] += size[s];
    const int64_t least = std::max<int64_t>(2, params_.minSeedSize);
    std::vector<uint64_t> identity(base + 1, 0);
    for (uint64_t s = 1; s <= base; ++s) {
      const int64_t r = uf.find(static_cast<int64_t>(s));
      identity[s] = total[r] >= least ? static_cast<uint64_t>(r) : 0;
    }
    return identity;
  }

  /// The seeded watershed, stitched; returns raw id -> fragment (1..F by first voxel, 0
  /// for background) and, when `graph` is given, the fragments' region graph.
  std::vector<uint64_t> watershedPass(const std::vector<uint64_t> &seedIdentity,
                                      uint64_t &fragments, uint64_t &rawIds,
                                      std::vector<RegionEdge> *graph) {
    std::vector<int64_t> size(1, 0);
    std::vector<uint64_t> seed(1, 0), firstVoxel(1, UINT64_MAX);
    std::vector<CrossEdge> cross;
    std::vector<RegionEdge> rawGraph;
    uint64_t base = 0;
    std::vector<uint64_t> stored;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      progress("watershed", b);
      const BlockGeom &g = blocks_[b];
      const float *affs = load(b);
      stored.resize(static_cast<size_t>(g.voxels()));
      raw_.read(g.lo, g.size, stored.data());
      std::vector<uint64_t> seeds(stored.size());
      for (size_t v = 0; v < stored.size(); ++v)
        seeds[v] = seedIdentity[stored[v]];
      const size_t first = cross.size();
      std::vector<RegionEdge> local;
      BlockLabels L = watershedBlock(affs, g, offsets_, params_, seeds, cross,
                                     graph ? &local : nullptr);
      for (size_t i = first; i < cross.size(); ++i)
        cross[i].nearRaw += base + 1;
      for (RegionEdge &e : local)
        rawGraph.push_back({e.u + base + 1, e.v + base + 1, e.sum, e.count});
      writeRaw(g, L, base, &firstVoxel);
      size.insert(size.end(), L.size.begin(), L.size.end());
      seed.insert(seed.end(), L.seed.begin(), L.seed.end());
      base += static_cast<uint64_t>(L.count);
    }
    progress("watershed", blocks_.size());
    rawIds = base;
    resolve(cross);
    if (params_.progress)
      params_.progress("stitch", 0, 1);
    std::vector<CrossEdge> flood;
    for (const CrossEdge &c : cross)
      if (c.w > params_.low)
        flood.push_back(c);
    std::sort(flood.begin(), flood.end(), crossBefore);
    SeededForest forest(seed);
    for (const CrossEdge &c : flood)
      forest.edge(static_cast<int64_t>(c.nearRaw), static_cast<int64_t>(c.far));
    std::vector<uint64_t> map = number(forest.uf, size, firstVoxel, true, fragments);
    if (graph) {
      for (const RegionEdge &e : rawGraph)
        addEdge(*graph, map[e.u], map[e.v], e.sum, e.count);
      for (const CrossEdge &c : cross)
        addEdge(*graph, map[c.nearRaw], map[c.far], c.w, 1);
      mergeRegionEdges(*graph);
    }
    if (params_.progress)
      params_.progress("stitch", 1, 1);
    return map;
  }

  static void addEdge(std::vector<RegionEdge> &graph, uint64_t u, uint64_t v, double sum,
                      int64_t count) {
    if (!u || !v || u == v)
      return;
    graph.push_back({std::min(u, v), std::max(u, v), sum, count});
  }

  /// Raw id -> final label: the trees of `uf` over raw ids 1..R numbered by first voxel
  /// (a tree of one voxel is background 0 when `singleIsBackground`).
  static std::vector<uint64_t> number(UnionFind &uf, const std::vector<int64_t> &size,
                                      const std::vector<uint64_t> &firstVoxel,
                                      bool singleIsBackground, uint64_t &count) {
    const size_t R = uf.parent.size();
    std::vector<int64_t> total(R, 0);
    std::vector<uint64_t> first(R, UINT64_MAX);
    for (size_t r = 1; r < R; ++r) {
      const int64_t root = uf.find(static_cast<int64_t>(r));
      total[root] += size[r];
      first[root] = std::min(first[root], firstVoxel[r]);
    }
    std::vector<std::pair<uint64_t, size_t>> roots;
    for (size_t r = 1; r < R; ++r)
      if (uf.find(static_cast<int64_t>(r)) == static_cast<int64_t>(r) &&
          !(singleIsBackground && total[r] == 1))
        roots.push_back({first[r], r});
    std::sort(roots.begin(), roots.end());
    std::vector<uint64_t> label(R, 0);
    for (size_t i = 0; i < roots.size(); ++i)
      label[roots[i].second] = i + 1;
    std::vector<uint64_t> map(R, 0);
    for (size_t r = 1; r < R; ++r)
      map[r] = label[uf.find(static_cast<int64_t>(r))];
    count = roots.size();
    return map;
  }

  std::vector<uint64_t> mutex(uint64_t &rawIds) {
    std::vector<int64_t> size(1, 0);
    std::vector<uint64_t> firstVoxel(1, UINT64_MAX);
    std::vector<std::pair<int64_t, int64_t>> mutexes;
    std::vector<CrossEdge> cross;
    uint64_t base = 0;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      progress("mutex", b);
      const float *affs = load(b);
      const size_t first = cross.size();
      BlockLabels L = mutexBlock(affs, blocks_[b], offsets_, params_, cross);
      for (size_t i = first; i < cross.size(); ++i)
        cross[i].nearRaw += base + 1;
      for (auto [a, c] : L.mutexes)
        mutexes.push_back({a + static_cast<int64_t>(base) + 1, c + static_cast<int64_t>(base) + 1});
      writeRaw(blocks_[b], L, base, &firstVoxel);
      size.insert(size.end(), L.size.begin(), L.size.end());
      base += static_cast<uint64_t>(L.count);
    }
    progress("mutex", blocks_.size());
    rawIds = base;
    resolve(cross);
    if (params_.progress)
      params_.progress("stitch", 0, 1);
    std::sort(cross.begin(), cross.end(), crossBefore);
    MutexForest forest(static_cast<int64_t>(base + 1));
    for (auto [a, c] : mutexes)
      forest.addMutex(a, c);
    for (const CrossEdge &c : cross)
      forest.edge(static_cast<int64_t>(c.nearRaw), static_cast<int64_t>(c.far), c.attractive);
    uint64_t count = 0;
    auto map = number(forest.uf, size, firstVoxel, false, count);
    if (params_.progress)
      params_.progress("stitch", 1, 1);
    return map;
  }

  const AffinityReader *read_;
  const float *whole_;
  Box3 shape_, bs_{}, nb_{};
  Offsets offsets_;
  SegmentParams params_;
  LabelStore &raw_;
  std::vector<BlockGeom> blocks_;
  std::vector<float> buf_;
};

void applyMap(std::vector<uint64_t> &labels, const std::vector<uint64_t> &map,
              std::vector<uint64_t> &out) {
  out.resize(labels.size());
  parallelFor(static_cast<int64_t>(labels.size()), int64_t(1) << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i] = map[labels[i]];
  });
}

} // namespace

BlockwiseResult segmentBlockwise(const AffinityReader &read, const Box3 &shape,
                                 const Box3 &block, const Offsets &offsets,
                                 const SegmentParams &params, LabelStore &raw,
                                 const std::vector<double> &thresholds) {
  return Driver(&read, nullptr, shape, block, offsets, params, raw).run(thresholds);
}

std::vector<uint64_t> segmentAffinities(const float *affs, const Box3 &shape,
                                        const Offsets &offsets, const SegmentParams &params) {
  MemoryLabels raw(shape);
  BlockwiseResult r = Driver(nullptr, affs, shape, shape, offsets, params, raw).run({});
  std::vector<uint64_t> out;
  applyMap(raw.labels(), r.maps[0], out);
  return out;
}

void segmentAffinitiesSweep(const float *affs, const Box3 &shape, const Offsets &offsets,
                            const SegmentParams &params, const std::vector<double> &thresholds,
                            const std::function<void(size_t, const std::vector<uint64_t> &)> &each) {
  if (params.method != SegmentMethod::MeanAgglomeration)
    throw Error(str("segmentation: a threshold sweep needs mean-agglomeration, not ",
                    segmentMethodName(params.method)));
  if (thresholds.empty())
    throw Error("segmentation: a threshold sweep with no threshold");
  MemoryLabels raw(shape);
  BlockwiseResult r = Driver(nullptr, affs, shape, shape, offsets, params, raw).run(thresholds);
  std::vector<size_t> order(thresholds.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return thresholds[a] > thresholds[b]; });
  std::vector<uint64_t> out;
  for (size_t i : order) {
    applyMap(raw.labels(), r.maps[i], out);
    each(i, out);
  }
}

std::vector<std::vector<uint64_t>> segmentAffinitiesSweep(const float *affs, const Box3 &shape,
                                                          const Offsets &offsets,
                                                          const SegmentParams &params,
                                                          const std::vector<double> &thresholds) {
  std::vector<std::vector<uint64_t>> all(thresholds.size());
  segmentAffinitiesSweep(affs, shape, offsets, params, thresholds,
                         [&](size_t i, const std::vector<uint64_t> &s) { all[i] = s; });
  return all;
}

std::vector<uint64_t> watershedFragments(const float *affs, const Box3 &shape,
                                         const Offsets &offsets, const SegmentParams &params,
                                         uint64_t *count) {
  SegmentParams p = params;
  p.method = SegmentMethod::Watershed;
  std::vector<uint64_t> out = segmentAffinities(affs, shape, offsets, p);
  if (count)
    *count = out.empty() ? 0 : *std::max_element(out.begin(), out.end());
  return out;
}

std::vector<uint64_t> mutexWatershed(const float *affs, const Box3 &shape,
                                     const Offsets &offsets, const SegmentParams &params) {
  SegmentParams p = params;
  p.method = SegmentMethod::Mutex;
  return segmentAffinities(affs, shape, offsets, p);
}

} // namespace medrun
