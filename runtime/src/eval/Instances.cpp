//===- Instances.cpp - affinities to instances: connected components, small objects ---===//
//
// A flood fill in C order, as BANIS's numba version: each unlabelled voxel with an
// affinity above the threshold to a neighbour starts an object, and everything reachable
// through such affinities joins it. The first voxel of an object in C order is where the
// fill starts (every edge of it leads forward), so objects come out numbered by their
// first voxel.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Metrics.h"

#include <algorithm>
#include <unordered_map>

namespace medrun {

std::vector<int64_t> affinityInstances(const float *aff, const Box3 &shape, float threshold,
                                       int64_t *objects) {
  const int64_t D = shape[0], H = shape[1], W = shape[2], n = D * H * W;
  const int64_t stride[3] = {H * W, W, 1};
  const float *a[3] = {aff, aff + n, aff + 2 * n};
  std::vector<int64_t> labels(static_cast<size_t>(n), 0);
  std::vector<int64_t> stack;
  int64_t next = 0;
  // Whether v has an edge along axis `ax` forward (to v + e) or backward (from v - e).
  auto forward = [&](int64_t v, int ax, int64_t coord, int64_t size) {
    return coord + 1 < size && a[ax][v] > threshold;
  };
  auto backward = [&](int64_t v, int ax, int64_t coord) {
    return coord > 0 && a[ax][v - stride[ax]] > threshold;
  };
  for (int64_t v = 0; v < n; ++v) {
    if (labels[v])
      continue;
    const int64_t z = v / stride[0], y = v / W % H, x = v % W;
    // Only forward edges can start an object: a backward one leads to a voxel already seen.
    if (!forward(v, 0, z, D) && !forward(v, 1, y, H) && !forward(v, 2, x, W))
      continue;
    labels[v] = ++next;
    stack.assign(1, v);
    while (!stack.empty()) {
      const int64_t u = stack.back();
      stack.pop_back();
      const int64_t c[3] = {u / stride[0], u / W % H, u % W};
      const int64_t size[3] = {D, H, W};
      for (int ax = 0; ax < 3; ++ax) {
        if (forward(u, ax, c[ax], size[ax]) && !labels[u + stride[ax]]) {
          labels[u + stride[ax]] = next;
          stack.push_back(u + stride[ax]);
        }
        if (backward(u, ax, c[ax]) && !labels[u - stride[ax]]) {
          labels[u - stride[ax]] = next;
          stack.push_back(u - stride[ax]);
        }
      }
    }
  }
  if (objects)
    *objects = next;
  return labels;
}

int64_t removeSmallObjects(std::vector<int64_t> &labels, int64_t minSize) {
  int64_t top = 0;
  for (int64_t id : labels)
    top = std::max(top, id);
  if (top > static_cast<int64_t>(labels.size())) {
    // Sparse ids (from a file): dense ones first, in the order of first appearance.
    std::unordered_map<int64_t, int64_t> dense;
    for (int64_t &id : labels)
      if (id > 0)
        id = dense.emplace(id, static_cast<int64_t>(dense.size()) + 1).first->second;
    top = static_cast<int64_t>(dense.size());
  }
  std::vector<int64_t> size(static_cast<size_t>(top) + 1, 0);
  for (int64_t id : labels)
    if (id > 0)
      ++size[id];
  // New ids in the order of first appearance, so the numbering stays by first voxel.
  std::vector<int64_t> renamed(size.size(), -1);
  renamed[0] = 0;
  int64_t next = 0;
  for (int64_t &id : labels) {
    if (id <= 0)
      continue;
    if (renamed[id] < 0)
      renamed[id] = size[id] >= minSize ? ++next : 0;
    id = renamed[id];
  }
  return next;
}

} // namespace medrun
