//===- Skeleton.h - ground-truth skeletons; expected run length (ERL, NERL) ----------===//
//
// Skeletons are graphs of nodes (a position and the id of the neuron they trace) and edges
// (pairs of nodes of one neuron). `medrun eval --skeletons FILE` reads them from the JSON
// format of docs/skeletons.md (scripts/nisb_skeletons.py converts NISB's skeleton.pkl) and
// scores a segmentation on them as NISB/BANIS do (banis/metrics.py over
// funlib.evaluate.run_length):
//
//   - each node takes the predicted id at its voxel;
//   - a merging segment is a predicted id (0 included) holding nodes of 2 or more
//     skeletons;
//   - an edge is omitted if a node has id 0, split if its nodes' ids differ, merged if its
//     skeleton meets a merging segment and the edge lies in one, else correct, grouped by
//     predicted id;
//   - ERL = sum over skeletons s and ids k of c_sk^2 / L, where c_sk is the length of the
//     correct edges of s in k and L the length of every skeleton; the maximum ERL is that of
//     the ground truth itself, sum_s L_s^2 / L; NERL = ERL / max ERL.
//
// So a merge zeroes the part of each skeleton inside the merging segment, and a split cuts
// a skeleton's run into the pieces of each predicted id. BANIS's adapted NERL (nerl_N)
// leaves out of the merge detection every (skeleton, id) pair of N nodes or fewer.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SKELETON_H
#define MEDRUN_SKELETON_H

#include "medrun/Metrics.h"
#include "medrun/Volume.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace medrun {

struct Skeletons {
  std::string file;
  std::vector<int64_t> nodeIds;  ///< as the file names them
  std::vector<int64_t> skeleton; ///< per node: the neuron (ground-truth id, > 0)
  std::vector<Box3> voxel;       ///< per node: (z, y, x) inside the volume
  std::vector<std::array<double, 3>> position; ///< per node: (z, y, x) in physical units
  std::vector<std::array<int64_t, 2>> edges;   ///< node indices (into the vectors above)
  std::array<double, 3> spacing{1, 1, 1};      ///< what converted voxels and positions
  size_t size() const { return skeleton.size(); }
};

/// Reads the skeletons of `path` (docs/skeletons.md) for a volume of `shape` and voxel size
/// `spacing` (z, y, x; the file's own "spacing" wins where the volume has none, i.e. unit
/// spacing, and must agree otherwise). Throws Error naming the file and the node, edge or
/// skeleton for: malformed JSON, a missing or non-numeric key, a skeleton id <= 0, a node
/// outside the volume, duplicate node ids, an edge naming an unknown node or joining two
/// skeletons, skeletons of no length.
/// `volume` names the volume in messages.
Skeletons readSkeletons(const std::string &path, const Box3 &shape,
                        const std::array<double, 3> &spacing, const std::string &volume);

/// The predicted id of each node: `segmentation` (C order, `shape`) at its voxel.
std::vector<int64_t> nodeSegments(const Skeletons &s, const int64_t *segmentation,
                                  const Box3 &shape);

/// The run-length scores of one segmentation (see the file comment).
struct RunLengthScores {
  double erl = 0, maxErl = 0, nerl = 0; ///< physical units (the skeletons' positions)
  double length = 0;                    ///< of every skeleton
  int64_t skeletons = 0, nodes = 0, edges = 0;
  int64_t correctEdges = 0, splitEdges = 0, mergedEdges = 0, omittedEdges = 0;
  /// BANIS's n_mergers: (merging id, skeleton) pairs; n_non0_mergers leaves id 0 out.
  int64_t mergers = 0, nonzeroMergers = 0;
  /// BANIS's nerl_5, nerl_20, nerl_100, nerl_inf (ignored merger sizes 5, 20, 100, all).
  std::array<double, 4> adaptedNerl{};
  static constexpr std::array<const char *, 4> kAdaptedNames{"nerl_5", "nerl_20", "nerl_100",
                                                             "nerl_inf"};
  /// VOI and Rand on the nodes only (BANIS's rand_voi over nodes): the skeleton ids as
  /// ground truth.
  InstanceScores nodeScores;
};

/// The ERL of `nodeSegment` (a predicted id per node), merges found among the
/// (skeleton, id) pairs of more than `ignoredMergerSize` nodes (0: funlib's ERL; INT64_MAX:
/// no merge is detected). The edge classes and mergers are added to `counts` when given.
double expectedRunLength(const Skeletons &s, const std::vector<int64_t> &nodeSegment,
                         int64_t ignoredMergerSize, RunLengthScores *counts = nullptr);

/// Every score of RunLengthScores for one segmentation's node ids.
RunLengthScores runLengthScores(const Skeletons &s, const std::vector<int64_t> &nodeSegment);

} // namespace medrun

#endif // MEDRUN_SKELETON_H
