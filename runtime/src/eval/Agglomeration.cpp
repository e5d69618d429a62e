//===- Agglomeration.cpp - the region graph and waterz's mean-affinity merging -------===//
//
// Regions merge in order of the mean affinity of the short-range edges between them,
// highest first, as waterz's IterativeRegionMerging with OneMinus<MeanAffinity>: a heap of
// (mean, pair) with stale entries skipped (an entry is current while both regions are
// alive and their edge still has the entry's count). A merged region keeps the smaller id
// and sums the statistics of the edges it inherits. Thresholds are visited from the
// highest down, so one run gives the segmentation at every threshold.
//
//===----------------------------------------------------------------------------------===//
#include "SegmentationImpl.h"

#include "medrun/Error.h"
#include "medrun/Parallel.h"

#include <algorithm>
#include <numeric>
#include <queue>

namespace medrun {

namespace seg {
void mergeRegionEdges(std::vector<RegionEdge> &edges) {
  std::stable_sort(edges.begin(), edges.end(), [](const RegionEdge &a, const RegionEdge &b) {
    return a.u != b.u ? a.u < b.u : a.v < b.v;
  });
  size_t w = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    if (w && edges[w - 1].u == edges[i].u && edges[w - 1].v == edges[i].v) {
      edges[w - 1].sum += edges[i].sum;
      edges[w - 1].count += edges[i].count;
    } else {
      edges[w++] = edges[i];
    }
  }
  edges.resize(w);
}
} // namespace seg

namespace {
struct PairHash {
  size_t operator()(const std::pair<uint64_t, uint64_t> &p) const {
    return std::hash<uint64_t>()(p.first * 0x9E3779B97F4A7C15ull ^ p.second);
  }
};
} // namespace

std::vector<RegionEdge> regionGraph(const uint64_t *fragments, const float *affs,
                                    const Box3 &shape, const Offsets &offsets) {
  checkOffsets(offsets, static_cast<int64_t>(offsets.size()), true, "offsets");
  const int64_t K = static_cast<int64_t>(offsets.size()), n = seg::volumeOf(shape);
  const seg::BlockGeom g{shape, {0, 0, 0}, shape};
  std::vector<std::vector<RegionEdge>> parts(static_cast<size_t>(shape[0]));
  parallelFor(shape[0], 1, [&](int64_t z0, int64_t z1) {
    for (int64_t z = z0; z < z1; ++z) {
      std::unordered_map<std::pair<uint64_t, uint64_t>, size_t, PairHash> at;
      auto &mine = parts[z];
      for (int64_t k = 0; k < K; ++k) {
        if (!seg::isShortRange(offsets[k]))
          continue;
        const float *a = affs + k * n;
        seg::forEachEdge(g, offsets[k], z, z + 1,
                         [&](int64_t v, int64_t, int64_t, int64_t, uint64_t far, bool, int64_t) {
                           uint64_t u = fragments[v], w = fragments[far];
                           if (u == w || !u || !w)
                             return;
                           if (w < u)
                             std::swap(u, w);
                           auto it = at.emplace(std::make_pair(u, w), mine.size());
                           if (it.second)
                             mine.push_back({u, w, 0.0, 0});
                           mine[it.first->second].sum += a[v];
                           ++mine[it.first->second].count;
                         });
      }
    }
  });
  std::vector<RegionEdge> edges;
  for (auto &p : parts)
    edges.insert(edges.end(), p.begin(), p.end());
  seg::mergeRegionEdges(edges);
  return edges;
}

std::vector<std::vector<uint64_t>> agglomerateMean(uint64_t fragmentCount,
                                                   const std::vector<RegionEdge> &edges,
                                                   const std::vector<double> &thresholds) {
  const size_t F = static_cast<size_t>(fragmentCount);
  struct Stat {
    double sum;
    int64_t count;
  };
  std::vector<std::unordered_map<uint64_t, Stat>> adj(F + 1);
  struct Entry {
    double mean;
    uint64_t u, v;
    int64_t count;
  };
  // The heap's top is the highest mean, then the lowest (u, v).
  auto later = [](const Entry &a, const Entry &b) {
    if (a.mean != b.mean)
      return a.mean < b.mean;
    return a.u != b.u ? a.u > b.u : a.v > b.v;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later);
  for (const RegionEdge &e : edges) {
    if (!e.u || !e.v || e.u == e.v || e.u > fragmentCount || e.v > fragmentCount || !e.count)
      throw Error(str("agglomeration: region edge (", e.u, ", ", e.v,
                      ") outside fragments 1..", fragmentCount, " or empty"));
    Stat &s = adj[e.u][e.v];
    s.sum += e.sum;
    s.count += e.count;
    adj[e.v][e.u] = s;
  }
  for (uint64_t u = 1; u <= fragmentCount; ++u)
    for (const auto &[v, s] : adj[u])
      if (u < v)
        heap.push({s.sum / static_cast<double>(s.count), u, v, s.count});
  std::vector<uint64_t> parent(F + 1);
  std::iota(parent.begin(), parent.end(), uint64_t(0));
  auto find = [&](uint64_t x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  };
  std::vector<size_t> order(thresholds.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return thresholds[a] > thresholds[b]; });
  std::vector<std::vector<uint64_t>> maps(thresholds.size());
  for (size_t i : order) {
    const double t = thresholds[i];
    while (!heap.empty() && heap.top().mean > t) {
      const Entry e = heap.top();
      heap.pop();
      if (parent[e.u] != e.u || parent[e.v] != e.v)
        continue;
      auto it = adj[e.u].find(e.v);
      if (it == adj[e.u].end() || it->second.count != e.count)
        continue;
      const uint64_t keep = e.u, gone = e.v; // u < v: the smaller id stays
      parent[gone] = keep;
      adj[keep].erase(gone);
      for (const auto &[n, s] : adj[gone]) {
        if (n == keep)
          continue;
        adj[n].erase(gone);
        Stat &mine = adj[keep][n];
        mine.sum += s.sum;
        mine.count += s.count;
        adj[n][keep] = mine;
        heap.push({mine.sum / static_cast<double>(mine.count), std::min(keep, n),
                   std::max(keep, n), mine.count});
      }
      adj[gone].clear();
    }
    // Segments numbered by their smallest fragment: the roots in increasing order.
    std::vector<uint64_t> &map = maps[i];
    map.assign(F + 1, 0);
    uint64_t next = 0;
    for (uint64_t f = 1; f <= fragmentCount; ++f) {
      const uint64_t r = find(f);
      map[f] = r == f ? ++next : map[r];
    }
  }
  return maps;
}

} // namespace medrun
