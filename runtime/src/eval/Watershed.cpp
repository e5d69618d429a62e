//===- Watershed.cpp - offsets, edge order, seeds and the seeded watershed of a block --===//
//
// The seeded watershed as Segmentation.h states it: seeds are components of strong
// short-range edges, then Kruskal over the edges above `low` in descending order, trees
// joining unless they hold different seeds (a minimum-spanning-forest cut). Edges are built
// and sorted in parallel; the union-find pass is sequential (it is near-linear and the
// order it depends on is total, so the result does not depend on the thread count).
//
//===----------------------------------------------------------------------------------===//
#include "SegmentationImpl.h"

#include "medrun/Error.h"
#include "medrun/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

namespace medrun {

Offsets banisOffsets(int64_t longRange) {
  const int64_t L = longRange;
  return {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {L, 0, 0}, {0, L, 0}, {0, 0, L}};
}

Offsets parseOffsets(const std::string &text, const std::string &what) {
  Offsets out;
  auto bad = [&](const std::string &why) {
    return Error(str(what, ": ", why, " in '", text,
                     "' (expected offsets along z, y, x: \"1,0,0;0,1,0;0,0,1\" or "
                     "[[1,0,0],[0,1,0],[0,0,1]])"));
  };
  std::string t = text;
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return std::isspace((unsigned char)c); }),
          t.end());
  if (!t.empty() && t[0] == '[') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(t);
    } catch (const std::exception &) {
      throw bad("not JSON");
    }
    if (!j.is_array())
      throw bad("not a list");
    for (const auto &o : j) {
      if (!o.is_array() || o.size() != 3)
        throw bad("an offset that is not 3 integers");
      Offset v{};
      for (int a = 0; a < 3; ++a) {
        if (!o[a].is_number_integer())
          throw bad("an offset that is not 3 integers");
        v[a] = o[a].get<int64_t>();
      }
      out.push_back(v);
    }
  } else {
    size_t pos = 0;
    while (pos <= t.size()) {
      size_t end = t.find(';', pos);
      if (end == std::string::npos)
        end = t.size();
      const std::string one = t.substr(pos, end - pos);
      Offset v{};
      int a = 0;
      size_t p = 0;
      while (a < 3) {
        size_t q = one.find(',', p);
        if (q == std::string::npos)
          q = one.size();
        const std::string num = one.substr(p, q - p);
        char *stop = nullptr;
        if (num.empty())
          throw bad("an offset that is not 3 integers");
        v[a++] = std::strtoll(num.c_str(), &stop, 10);
        if (*stop)
          throw bad("an offset that is not 3 integers");
        p = q + 1;
        if (q == one.size())
          break;
      }
      if (a != 3 || p <= one.size())
        throw bad("an offset that is not 3 integers");
      out.push_back(v);
      pos = end + 1;
    }
  }
  if (out.empty())
    throw bad("no offset");
  for (const Offset &o : out)
    if (o[0] == 0 && o[1] == 0 && o[2] == 0)
      throw bad("a zero offset");
  return out;
}

std::string formatOffsets(const Offsets &offsets) {
  std::string s = "[";
  for (size_t i = 0; i < offsets.size(); ++i)
    s += str(i ? "," : "", "[", offsets[i][0], ",", offsets[i][1], ",", offsets[i][2], "]");
  return s + "]";
}

void checkOffsets(const Offsets &offsets, int64_t channels, bool needShortRange,
                  const std::string &what) {
  if (static_cast<int64_t>(offsets.size()) != channels)
    throw Error(str(what, ": ", offsets.size(), " offsets ", formatOffsets(offsets), " for ",
                    channels, " affinity channels (one offset per channel)"));
  for (const Offset &o : offsets)
    if (o[0] == 0 && o[1] == 0 && o[2] == 0)
      throw Error(str(what, ": a zero offset in ", formatOffsets(offsets)));
  if (!needShortRange)
    return;
  for (int a = 0; a < 3; ++a) {
    int found = 0;
    for (const Offset &o : offsets)
      found += seg::isShortRange(o) && o[a] != 0;
    if (found != 1)
      throw Error(str(what, ": ", found, " short-range offsets along ", "zyx"[a], " in ",
                      formatOffsets(offsets),
                      " (the watershed and the agglomeration need exactly one |offset| = 1 "
                      "channel per axis)"));
  }
}

const char *segmentMethodName(SegmentMethod m) {
  switch (m) {
  case SegmentMethod::Watershed:
    return "watershed";
  case SegmentMethod::MeanAgglomeration:
    return "mean-agglomeration";
  case SegmentMethod::Mutex:
    return "mutex";
  }
  return "?";
}

SegmentMethod parseSegmentMethod(const std::string &name, const std::string &what) {
  for (SegmentMethod m :
       {SegmentMethod::Watershed, SegmentMethod::MeanAgglomeration, SegmentMethod::Mutex})
    if (name == segmentMethodName(m))
      return m;
  throw Error(str(what, ": unknown method '", name,
                  "' (watershed, mean-agglomeration or mutex)"));
}

namespace seg {

namespace {
/// The weight's bits mapped so that ascending unsigned order is descending float order
/// (NaN is refused before reaching here; -0 is 0).
inline uint32_t descendingKey(float w) {
  if (w == 0.0f)
    w = 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &w, 4);
  // Ascending floats as ascending unsigned: flip all bits of negatives, the sign of others.
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~bits;
}

/// One stable counting pass on `bits` bits of `digit(e)` from `src` into `dst`.
template <typename Digit>
void countingPass(const std::vector<WEdge> &src, std::vector<WEdge> &dst, int bits, Digit digit) {
  std::vector<size_t> start((size_t(1) << bits) + 1, 0);
  for (const WEdge &e : src)
    ++start[digit(e) + 1];
  for (size_t i = 1; i < start.size(); ++i)
    start[i] += start[i - 1];
  for (const WEdge &e : src)
    dst[start[digit(e)]++] = e;
}
} // namespace

void sortEdges(std::vector<WEdge> &edges) {
  // LSD radix sort: the index's digits first, then the weight's, each pass stable, so the
  // result is ordered by weight (descending), then index (ascending): O(n) per pass.
  if (edges.size() < 2)
    return;
  uint64_t top = 0;
  for (const WEdge &e : edges)
    top = std::max(top, e.id);
  const int bits = 11;
  const uint64_t mask = (uint64_t(1) << bits) - 1;
  std::vector<WEdge> tmp(edges.size());
  for (int shift = 0; shift < 64 && (top >> shift) != 0; shift += bits) {
    countingPass(edges, tmp, bits, [&](const WEdge &e) { return (e.id >> shift) & mask; });
    edges.swap(tmp);
  }
  for (int shift = 0; shift < 32; shift += bits) {
    countingPass(edges, tmp, bits,
                 [&](const WEdge &e) { return (descendingKey(e.w) >> shift) & mask; });
    edges.swap(tmp);
  }
}

void numberRoots(UnionFind &uf, BlockLabels &out) {
  const int64_t n = static_cast<int64_t>(uf.parent.size());
  out.local.assign(static_cast<size_t>(n), 0);
  std::vector<int64_t> id(static_cast<size_t>(n), -1);
  out.count = 0;
  out.size.clear();
  for (int64_t v = 0; v < n; ++v) {
    const int64_t r = uf.find(v);
    if (id[r] < 0) {
      id[r] = out.count++;
      out.size.push_back(0);
    }
    out.local[v] = static_cast<uint64_t>(id[r]);
    ++out.size[id[r]];
  }
}

namespace {

/// Edges of the short-range channels, inside the block (weight filter `keep`) and to
/// other blocks (all of them when `allCross`, else those passing `keep`).
template <typename Keep>
std::vector<WEdge> shortRangeEdges(const float *affs, const BlockGeom &g, const Offsets &offsets,
                                   Keep keep, std::vector<CrossEdge> *cross,
                                   std::vector<std::vector<CrossEdge>> &crossParts,
                                   bool allCross) {
  const int64_t K = static_cast<int64_t>(offsets.size()), n = g.voxels();
  const int64_t D = g.size[0];
  std::vector<std::vector<WEdge>> parts(static_cast<size_t>(D));
  crossParts.assign(static_cast<size_t>(D), {});
  parallelFor(D, 1, [&](int64_t z0, int64_t z1) {
    for (int64_t z = z0; z < z1; ++z)
      for (int64_t k = 0; k < K; ++k) {
        if (!isShortRange(offsets[k]))
          continue;
        const float *a = affs + k * n;
        forEachEdge(g, offsets[k], z, z + 1,
                    [&](int64_t v, int64_t vz, int64_t vy, int64_t vx, uint64_t far, bool in,
                        int64_t) {
                      const float w = a[v];
                      if (in) {
                        // Inside the block the local index orders as the global one.
                        if (keep(w))
                          parts[z].push_back({w, static_cast<uint64_t>(v * K + k)});
                      } else if (cross && (allCross || keep(w))) {
                        crossParts[z].push_back({w, g.global(vz, vy, vx) * K + k,
                                                 static_cast<uint64_t>(v), far, true});
                      }
                    });
      }
  });
  size_t total = 0;
  for (auto &p : parts)
    total += p.size();
  std::vector<WEdge> edges;
  edges.reserve(total);
  for (auto &p : parts)
    edges.insert(edges.end(), p.begin(), p.end());
  (void)n;
  return edges;
}

/// The two voxels of an in-block edge (local index v * K + k): v and v + the channel's
/// offset in the block's strides.
struct LocalEdges {
  int64_t K;
  std::vector<int64_t> delta;
  LocalEdges(const BlockGeom &g, const Offsets &offsets) : K(static_cast<int64_t>(offsets.size())) {
    for (const Offset &o : offsets)
      delta.push_back((o[0] * g.size[1] + o[1]) * g.size[2] + o[2]);
  }
  int64_t near(uint64_t id) const { return static_cast<int64_t>(id) / K; }
  int64_t far(uint64_t id) const {
    return static_cast<int64_t>(id) / K + delta[static_cast<int64_t>(id) % K];
  }
};

} // namespace

BlockLabels seedBlock(const float *affs, const BlockGeom &g, const Offsets &offsets,
                      const SegmentParams &params, std::vector<CrossEdge> &cross) {
  const float thr = params.seedThreshold;
  std::vector<std::vector<CrossEdge>> crossParts;
  std::vector<WEdge> edges = shortRangeEdges(
      affs, g, offsets, [thr](float w) { return w >= thr; }, &cross, crossParts, false);
  UnionFind uf(g.voxels());
  const LocalEdges local(g, offsets);
  for (const WEdge &e : edges) {
    const int64_t ra = uf.find(local.near(e.id)), rb = uf.find(local.far(e.id));
    if (ra != rb)
      uf.join(ra, rb);
  }
  BlockLabels out;
  numberRoots(uf, out);
  for (auto &p : crossParts)
    for (CrossEdge &c : p) {
      c.nearRaw = out.local[c.nearRaw];
      cross.push_back(c);
    }
  return out;
}

BlockLabels watershedBlock(const float *affs, const BlockGeom &g, const Offsets &offsets,
                           const SegmentParams &params, const std::vector<uint64_t> &seeds,
                           std::vector<CrossEdge> &cross, std::vector<RegionEdge> *graph) {
  const float low = params.low;
  std::vector<std::vector<CrossEdge>> crossParts;
  std::vector<WEdge> edges = shortRangeEdges(
      affs, g, offsets, [low](float w) { return w > low; }, &cross, crossParts, true);
  sortEdges(edges);
  if (params.progress)
    params.progress("watershed", 0, 1);
  SeededForest forest(seeds);
  const LocalEdges local(g, offsets);
  for (const WEdge &e : edges)
    forest.edge(local.near(e.id), local.far(e.id));
  BlockLabels out;
  numberRoots(forest.uf, out);
  out.seed.assign(static_cast<size_t>(out.count), 0);
  for (int64_t v = 0; v < g.voxels(); ++v)
    out.seed[out.local[v]] = forest.seed[forest.uf.find(v)];
  for (auto &p : crossParts)
    for (CrossEdge &c : p) {
      c.nearRaw = out.local[c.nearRaw];
      cross.push_back(c);
    }
  if (graph) {
    // Every in-block short-range edge between two trees, summed per pair in chunk order.
    const int64_t K = static_cast<int64_t>(offsets.size()), n = g.voxels(), D = g.size[0];
    std::vector<std::vector<RegionEdge>> parts(static_cast<size_t>(D));
    parallelFor(D, 1, [&](int64_t z0, int64_t z1) {
      for (int64_t z = z0; z < z1; ++z) {
        std::unordered_map<uint64_t, size_t> at;
        auto &mine = parts[z];
        for (int64_t k = 0; k < K; ++k) {
          if (!isShortRange(offsets[k]))
            continue;
          const float *a = affs + k * n;
          forEachEdge(g, offsets[k], z, z + 1,
                      [&](int64_t v, int64_t, int64_t, int64_t, uint64_t, bool in, int64_t f) {
                        if (!in)
                          return;
                        uint64_t u = out.local[v], w = out.local[f];
                        if (u == w)
                          return;
                        if (w < u)
                          std::swap(u, w);
                        const uint64_t key = u * static_cast<uint64_t>(out.count) + w;
                        auto it = at.emplace(key, mine.size());
                        if (it.second)
                          mine.push_back({u, w, 0.0, 0});
                        mine[it.first->second].sum += a[v];
                        ++mine[it.first->second].count;
                      });
        }
      }
    });
    for (auto &p : parts)
      graph->insert(graph->end(), p.begin(), p.end());
    mergeRegionEdges(*graph);
  }
  return out;
}

} // namespace seg
} // namespace medrun
