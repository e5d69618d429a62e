//===- Skeleton.cpp - skeletons from JSON; ERL and NERL as NISB/BANIS score them -----===//
//
// The run length follows funlib.evaluate.run_length (the version BANIS calls, where only
// the edges inside a merging segment count as merged) and BANIS's adapted_erl for the
// ignored merger sizes. Skeleton lengths are summed in double precision from the physical
// positions; ERL is summed as sum c^2 / L, which is funlib's sum_s (L_s / L) (sum c^2 / L_s)
// without the division by a skeleton's own length (so a skeleton of length 0 adds 0).
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Skeleton.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

namespace medrun {

namespace {

using json = nlohmann::json;

std::string tripleText(const std::array<double, 3> &v) {
  return str("(", v[0], ", ", v[1], ", ", v[2], ")");
}

/// Whether `v` holds arrays or objects nested more than `limit` deep.
bool nestedDeeper(const json &v, int limit) {
  if (!v.is_structured())
    return false;
  if (limit == 0)
    return true;
  for (const json &e : v)
    if (nestedDeeper(e, limit - 1))
      return true;
  return false;
}

/// A value as a message shows it. The serializer recurses once per level, so a deeply
/// nested value in a hostile file would exhaust the stack: those are described, not shown,
/// and long values are cut.
std::string shown(const json &v) {
  if (nestedDeeper(v, 8))
    return str("(", v.type_name(), " nested more than 8 deep)");
  std::string text = v.dump();
  if (text.size() > 200)
    text = text.substr(0, 200) + "...";
  return text;
}

/// Three finite numbers (the value `v` of `key` at `where`), reordered from the file's axes
/// to z, y, x.
std::array<double, 3> triple(const json &v, const char *key, bool xyz, const std::string &where) {
  if (!v.is_array() || v.size() != 3)
    throw Error(str(where, ": ", key, " = ", shown(v), ": expected 3 numbers"));
  std::array<double, 3> out{};
  for (int k = 0; k < 3; ++k) {
    if (!v[k].is_number() || !std::isfinite(v[k].get<double>()))
      throw Error(str(where, ": ", key, " = ", shown(v), ": expected 3 finite numbers"));
    out[xyz ? 2 - k : k] = v[k].get<double>();
  }
  return out;
}

int64_t integer(const json &v, const std::string &what) {
  if (v.is_number_integer())
    return v.get<int64_t>();
  if (v.is_number_float() && std::nearbyint(v.get<double>()) == v.get<double>() &&
      std::abs(v.get<double>()) < 9e15)
    return static_cast<int64_t>(v.get<double>());
  throw Error(str(what, " = ", shown(v), ": expected an integer"));
}

} // namespace

Skeletons readSkeletons(const std::string &path, const Box3 &shape,
                        const std::array<double, 3> &volumeSpacing, const std::string &volume) {
  std::ifstream in(path);
  if (!in)
    throw Error(str(path, ": cannot read the skeletons"));
  const json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded())
    throw Error(str(path, ": malformed JSON (skeletons: docs/skeletons.md)"));
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array())
    throw Error(str(path, ": expected an object with the keys nodes and edges "
                          "(docs/skeletons.md; scripts/nisb_skeletons.py converts NISB's "
                          "skeleton.pkl)"));
  if (!doc.contains("edges") || !doc["edges"].is_array())
    throw Error(str(path, ": expected the key edges, a list of [node, node] pairs"));
  for (const auto &[key, value] : doc.items())
    if (key != "nodes" && key != "edges" && key != "axes" && key != "spacing")
      throw Error(str(path, ": unknown key '", key, "' (expected nodes, edges, axes, spacing)"));
  bool xyz = false;
  if (doc.contains("axes")) {
    const json &a = doc["axes"];
    if (a != "zyx" && a != "xyz")
      throw Error(str(path, ": axes = ", shown(a), ": expected \"zyx\" or \"xyz\""));
    xyz = a == "xyz";
  }
  Skeletons s;
  s.file = path;
  s.spacing = volumeSpacing;
  const std::array<double, 3> unit{1, 1, 1};
  if (doc.contains("spacing")) {
    const std::array<double, 3> fileSpacing = triple(doc["spacing"], "spacing", xyz, path);
    for (double v : fileSpacing)
      if (!(v > 0))
        throw Error(str(path, ": spacing ", shown(doc["spacing"]), ": expected sizes > 0"));
    bool differs = false;
    for (int k = 0; k < 3; ++k)
      differs = differs || std::abs(fileSpacing[k] - volumeSpacing[k]) >
                               1e-3 * std::max(fileSpacing[k], volumeSpacing[k]);
    if (differs && volumeSpacing != unit)
      throw Error(str(path, ": spacing (z, y, x) ", tripleText(fileSpacing),
                      " differs from the volume's ", tripleText(volumeSpacing), " (", volume,
                      ")"));
    s.spacing = fileSpacing;
  }

  const json &nodes = doc["nodes"];
  const size_t n = nodes.size();
  s.nodeIds.reserve(n);
  s.skeleton.reserve(n);
  s.voxel.reserve(n);
  s.position.reserve(n);
  std::unordered_map<int64_t, int64_t> index; // node id -> index
  for (size_t i = 0; i < n; ++i) {
    const json &node = nodes[i];
    std::string where = str(path, ": nodes[", i, "]");
    if (!node.is_object())
      throw Error(str(where, ": expected an object with skeleton and voxel or position"));
    const int64_t id = node.contains("node") ? integer(node["node"], where + ": node")
                                             : static_cast<int64_t>(i);
    where = str(path, ": node ", id);
    if (!node.contains("skeleton"))
      throw Error(str(where, ": no key skeleton (the id of the neuron it traces)"));
    const int64_t sk = integer(node["skeleton"], where + ": skeleton");
    if (sk <= 0)
      throw Error(str(where, ": skeleton id ", sk, ": expected an id > 0 (0 and below are "
                             "background)"));
    where = str(path, ": node ", id, " (skeleton ", sk, ")");
    if (!index.emplace(id, static_cast<int64_t>(i)).second)
      throw Error(str(where, ": the node id appears twice (nodes[", index[id], "] and nodes[",
                      i, "])"));
    const bool hasVoxel = node.contains("voxel"), hasPosition = node.contains("position");
    if (!hasVoxel && !hasPosition)
      throw Error(str(where, ": expected voxel (indices) or position (physical units), or both"));
    std::array<double, 3> p{}, f{}; // the physical position; the voxel, still as numbers
    if (hasVoxel) {
      f = triple(node["voxel"], "voxel", xyz, where);
      for (int k = 0; k < 3; ++k)
        if (std::nearbyint(f[k]) != f[k])
          throw Error(str(where, ": voxel ", shown(node["voxel"]),
                          ": expected whole voxel indices"));
    }
    if (hasPosition)
      p = triple(node["position"], "position", xyz, where);
    if (!hasVoxel)
      for (int k = 0; k < 3; ++k)
        f[k] = std::floor(p[k] / s.spacing[k] + 0.5);
    // Checked as numbers, so that no index outside int64 is ever converted.
    for (int k = 0; k < 3; ++k)
      if (!(f[k] >= 0 && f[k] < static_cast<double>(shape[k])))
        throw Error(str(where, ": ",
                        hasVoxel ? str("voxel (z, y, x) = ")
                                 : str("position (z, y, x) ", tripleText(p), " is voxel "),
                        tripleText(f), ", outside the volume ", volume, " (", shape[0], "x",
                        shape[1], "x", shape[2],
                        hasVoxel ? "" : str(", spacing ", tripleText(s.spacing)), ")"));
    const Box3 v{static_cast<int64_t>(f[0]), static_cast<int64_t>(f[1]),
                 static_cast<int64_t>(f[2])};
    if (!hasPosition)
      for (int k = 0; k < 3; ++k)
        p[k] = f[k] * s.spacing[k];
    s.nodeIds.push_back(id);
    s.skeleton.push_back(sk);
    s.voxel.push_back(v);
    s.position.push_back(p);
  }
  if (n == 0)
    throw Error(str(path, ": no nodes"));

  const json &edges = doc["edges"];
  s.edges.reserve(edges.size());
  for (size_t e = 0; e < edges.size(); ++e) {
    const std::string where = str(path, ": edges[", e, "]");
    const json &pair = edges[e];
    if (!pair.is_array() || pair.size() != 2)
      throw Error(str(where, " = ", shown(pair), ": expected [node, node]"));
    std::array<int64_t, 2> ends{};
    for (int k = 0; k < 2; ++k) {
      const int64_t id = integer(pair[k], where);
      auto it = index.find(id);
      if (it == index.end())
        throw Error(str(where, " = ", shown(pair), ": node ", id, " is not among the nodes"));
      ends[k] = it->second;
    }
    if (s.skeleton[ends[0]] != s.skeleton[ends[1]])
      throw Error(str(where, " joins node ", shown(pair[0]), " (skeleton ", s.skeleton[ends[0]],
                      ") and node ", shown(pair[1]), " (skeleton ", s.skeleton[ends[1]],
                      "): an edge belongs to one skeleton"));
    s.edges.push_back(ends);
  }
  double length = 0;
  for (const auto &[u, v] : s.edges)
    length += std::hypot(s.position[u][0] - s.position[v][0], s.position[u][1] - s.position[v][1],
                         s.position[u][2] - s.position[v][2]);
  if (!(length > 0))
    throw Error(str(path, ": the skeletons have no length (", s.edges.size(),
                    " edges, every one of length 0): no run length to score"));
  return s;
}

std::vector<int64_t> nodeSegments(const Skeletons &s, const int64_t *segmentation,
                                  const Box3 &shape) {
  std::vector<int64_t> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const Box3 &v = s.voxel[i];
    out[i] = segmentation[(v[0] * shape[1] + v[1]) * shape[2] + v[2]];
  }
  return out;
}

double expectedRunLength(const Skeletons &s, const std::vector<int64_t> &nodeSegment,
                         int64_t ignoredMergerSize, RunLengthScores *counts) {
  // The nodes of each (skeleton, id) pair; the pairs of more than ignoredMergerSize nodes
  // decide which ids merge skeletons.
  std::map<std::pair<int64_t, int64_t>, int64_t> pairs;
  for (size_t i = 0; i < s.size(); ++i)
    ++pairs[{s.skeleton[i], nodeSegment[i]}];
  std::unordered_map<int64_t, int64_t> skeletonsOf; // id -> skeletons it holds
  for (const auto &[pair, nodes] : pairs)
    if (nodes > ignoredMergerSize)
      ++skeletonsOf[pair.second];
  std::set<int64_t> merging, mergedSkeletons;
  for (const auto &[id, skeletons] : skeletonsOf)
    if (skeletons > 1)
      merging.insert(id);
  for (const auto &[pair, nodes] : pairs)
    if (nodes > ignoredMergerSize && merging.count(pair.second)) {
      mergedSkeletons.insert(pair.first);
      if (counts) {
        ++counts->mergers;
        counts->nonzeroMergers += pair.second != 0;
      }
    }
  // Correct length per (skeleton, id); every edge's length counts in the total.
  std::map<std::pair<int64_t, int64_t>, double> correct;
  double total = 0;
  for (const auto &[u, v] : s.edges) {
    const double length = std::hypot(s.position[u][0] - s.position[v][0],
                                     s.position[u][1] - s.position[v][1],
                                     s.position[u][2] - s.position[v][2]);
    total += length;
    const int64_t sk = s.skeleton[u], a = nodeSegment[u], b = nodeSegment[v];
    if (a == 0 || b == 0) {
      if (counts)
        ++counts->omittedEdges;
    } else if (a != b) {
      if (counts)
        ++counts->splitEdges;
    } else if (mergedSkeletons.count(sk) && merging.count(a)) {
      if (counts)
        ++counts->mergedEdges;
    } else {
      correct[{sk, a}] += length;
      if (counts)
        ++counts->correctEdges;
    }
  }
  double sum = 0;
  for (const auto &[pair, c] : correct)
    sum += c * c;
  return total > 0 ? sum / total : 0;
}

RunLengthScores runLengthScores(const Skeletons &s, const std::vector<int64_t> &nodeSegment) {
  RunLengthScores r;
  r.erl = expectedRunLength(s, nodeSegment, 0, &r);
  r.maxErl = expectedRunLength(s, s.skeleton, 0);
  r.nerl = r.maxErl > 0 ? r.erl / r.maxErl : 0;
  const int64_t sizes[4] = {5, 20, 100, std::numeric_limits<int64_t>::max()};
  for (int k = 0; k < 4; ++k)
    r.adaptedNerl[k] = r.maxErl > 0 ? expectedRunLength(s, nodeSegment, sizes[k]) / r.maxErl : 0;
  std::set<int64_t> ids(s.skeleton.begin(), s.skeleton.end());
  r.skeletons = static_cast<int64_t>(ids.size());
  r.nodes = static_cast<int64_t>(s.size());
  r.edges = static_cast<int64_t>(s.edges.size());
  for (const auto &[u, v] : s.edges)
    r.length += std::hypot(s.position[u][0] - s.position[v][0],
                           s.position[u][1] - s.position[v][1],
                           s.position[u][2] - s.position[v][2]);
  r.nodeScores = compareInstances(nodeSegment.data(), s.skeleton.data(),
                                  static_cast<int64_t>(s.size()));
  return r;
}

} // namespace medrun
