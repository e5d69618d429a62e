//===- Agglomeration.cpp - the region graph and waterz's mean-affinity merging -------===//
//
// Regions merge in order of the mean affinity of the short-range edges between them,
// highest first, as waterz's IterativeRegionMerging with OneMinus<MeanAffinity>: a heap of
// (mean, pair) with stale entries skipped (an entry is current while both regions are
// alive and their edge still has the entry's count). A merged region is named by the
// smaller id and sums the statistics of the edges it inherits; it is stored where the
// larger adjacency was, so each merge moves the smaller one (O(E log E) overall). Equal
// means are ranked by the regions' names at the time they are popped. Thresholds are
// visited from the highest down, so one run gives the segmentation at every threshold.
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
  // A region is stored at one of its fragments (its root: the one whose adjacency is the
  // larger, so a merge moves the smaller adjacency) and named by its smallest fragment
  // (`label`), which the tie rule and the numbering use.
  const size_t F = static_cast<size_t>(fragmentCount);
  struct Stat {
    double sum;
    int64_t count;
  };
  std::vector<std::unordered_map<uint64_t, Stat>> adj(F + 1);
  struct Entry {
    double mean;
    uint64_t lu, lv; ///< the regions' labels when pushed, lu < lv (the tie order)
    uint64_t su, sv; ///< their roots
    int64_t count;   ///< the edge's count when pushed: current while it is unchanged
  };
  // The heap's top is the highest mean, then the lowest (lu, lv).
  auto later = [](const Entry &a, const Entry &b) {
    if (a.mean != b.mean)
      return a.mean < b.mean;
    return a.lu != b.lu ? a.lu > b.lu : a.lv > b.lv;
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
  std::vector<uint64_t> parent(F + 1), label(F + 1);
  std::iota(parent.begin(), parent.end(), uint64_t(0));
  std::iota(label.begin(), label.end(), uint64_t(0));
  auto find = [&](uint64_t x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  };
  auto entry = [&](uint64_t a, uint64_t b, const Stat &s) {
    const uint64_t la = label[a], lb = label[b];
    return la < lb ? Entry{s.sum / static_cast<double>(s.count), la, lb, a, b, s.count}
                   : Entry{s.sum / static_cast<double>(s.count), lb, la, b, a, s.count};
  };
  for (uint64_t u = 1; u <= fragmentCount; ++u)
    for (const auto &[v, s] : adj[u])
      if (u < v)
        heap.push(entry(u, v, s));
  auto current = [&](const Entry &e) {
    if (parent[e.su] != e.su || parent[e.sv] != e.sv)
      return false;
    auto it = adj[e.su].find(e.sv);
    return it != adj[e.su].end() && it->second.count == e.count;
  };
  auto merge = [&](uint64_t a, uint64_t b) {
    uint64_t root = a, gone = b;
    if (adj[b].size() > adj[a].size() || (adj[b].size() == adj[a].size() && label[b] < label[a]))
      std::swap(root, gone);
    parent[gone] = root;
    label[root] = std::min(label[a], label[b]);
    adj[root].erase(gone);
    for (const auto &[n, s] : adj[gone]) {
      if (n == root)
        continue;
      adj[n].erase(gone);
      Stat &mine = adj[root][n];
      mine.sum += s.sum;
      mine.count += s.count;
      adj[n][root] = mine;
      heap.push(entry(root, n, mine));
    }
    adj[gone].clear();
  };
  std::vector<size_t> order(thresholds.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return thresholds[a] > thresholds[b]; });
  std::vector<std::vector<uint64_t>> maps(thresholds.size());
  std::vector<Entry> ties;
  for (size_t i : order) {
    const double t = thresholds[i];
    while (!heap.empty() && heap.top().mean > t) {
      Entry e = heap.top();
      heap.pop();
      if (!current(e))
        continue;
      if (!heap.empty() && heap.top().mean == e.mean) {
        // Equal means: a region renamed (a smaller label joined it) after its entries were
        // pushed ranks by an old label, so the whole tie group is re-ranked by the labels
        // now. Without ties labels play no part and nothing is re-ranked.
        ties.assign(1, e);
        while (!heap.empty() && heap.top().mean == e.mean) {
          if (current(heap.top()))
            ties.push_back(heap.top());
          heap.pop();
        }
        for (Entry &x : ties) {
          x.lu = label[x.su];
          x.lv = label[x.sv];
          if (x.lv < x.lu) {
            std::swap(x.lu, x.lv);
            std::swap(x.su, x.sv);
          }
        }
        auto best = std::min_element(ties.begin(), ties.end(), [](const Entry &a, const Entry &b) {
          return a.lu != b.lu ? a.lu < b.lu : a.lv < b.lv;
        });
        e = *best;
        for (const Entry &x : ties)
          if (&x != &*best)
            heap.push(x);
      }
      merge(e.su, e.sv);
    }
    // Segments numbered by their smallest fragment: the labels in increasing order.
    std::vector<uint64_t> &map = maps[i];
    map.assign(F + 1, 0);
    std::vector<uint64_t> number(F + 1, 0);
    uint64_t next = 0;
    for (uint64_t f = 1; f <= fragmentCount; ++f) {
      const uint64_t r = find(f);
      if (label[r] == f)
        number[r] = ++next;
      map[f] = number[r];
    }
  }
  return maps;
}

} // namespace medrun
