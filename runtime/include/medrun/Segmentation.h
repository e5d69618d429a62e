//===- Segmentation.h - instances from affinities: watershed, agglomeration, MWS ------===//
//
// What `medrun segment` (and `medrun eval`'s sweep) turns predicted affinities into:
//
//   Offsets off = {{1,0,0}, {0,1,0}, {0,0,1}, {10,0,0}, {0,10,0}, {0,0,10}};   // BANIS's six
//   SegmentParams p;  p.method = SegmentMethod::MeanAgglomeration;  p.threshold = 0.5;
//   std::vector<uint64_t> ids = segmentAffinities(affs, shape, off, p);
//
// Affinities: K channels, [K][D][H][W] C order (x fastest); channel k at voxel v is the
// affinity of v and v + off_k (off_k along z, y, x; either sign; 1 = same object), the
// convention of the training targets (med.affinities). An edge whose other end leaves the
// volume does not exist. The short-range channels are those with |off_k|_1 = 1; exactly one
// per axis must be present (either sign) for the watershed and the agglomeration.
//
// Every result is numbered 1..N by the first voxel of each object in C order, so the labels
// depend only on the affinities and the parameters: the same run to run and for any thread
// count. Ties between equal weights are broken by the edge's index, v * K + k (lower first).
//
// 1. Seeded watershed (SegmentMethod::Watershed: the fragments), on the short-range edges:
//    - seeds: the connected components of the graph of edges with affinity >= seedThreshold
//      that have at least minSeedSize voxels (a voxel with no such edge is a component of 1);
//    - flooding, Kruskal order: the edges with affinity > low, in descending affinity; an
//      edge joins the trees of its two voxels unless both trees hold a seed and the seeds
//      differ (the minimum-spanning-forest cut that Meyer's flooding computes);
//    - a tree with no seed is a fragment of its own; a voxel with no edge > low is 0
//      (waterz's rule for voxels whose best edge is at most `low`).
// 2. Mean agglomeration (SegmentMethod::MeanAgglomeration, waterz's OneMinus<MeanAffinity>):
//    the region graph of the fragments (fragments u != v, both > 0, joined by short-range
//    edges; its weight is the mean affinity of those edges); repeatedly merge the pair of
//    highest mean (ties: the lower pair of ids (min, max), a merged region keeping the
//    smaller id), the merged region's edges re-weighted by the count-weighted mean, until the
//    highest mean is <= threshold. waterz's threshold t is 1 - t here. A list of thresholds
//    is one run: highest first, each continuing from the previous state.
// 3. Mutex watershed (SegmentMethod::Mutex, Wolf et al. 2018, affogato's rule) over all
//    offsets: short-range edges are attractive with weight a, the others repulsive with
//    weight 1 - a (a low long-range affinity pushes apart). All edges in descending weight:
//    an edge whose voxels are already in one cluster, or whose clusters have a mutex, is
//    skipped; an attractive edge merges the two clusters (their mutexes joined); a repulsive
//    one adds a mutex between them. Every voxel ends in a cluster (no background).
//    `repulsiveStride` keeps the repulsive edges of voxels on a grid only (affogato's strides).
//
// Block-wise (segmentBlockwise): the volume in blocks (no overlap is needed: the edges
// between blocks are kept and processed in the stitching step). Seeds are computed exactly
// (components joined across the faces, sizes summed). The watershed and the mutex
// watershed run inside each block on the edges whose two voxels lie in it, then over the
// edges between blocks, in the same order and by the same rule, on the blocks' trees. The
// result equals the whole-volume result with every edge between blocks taken after every
// edge inside a block (test/medrun/segment.test checks exactly that), so it can differ
// from segmentAffinities only where an edge between blocks would have been taken earlier:
//   - watershed: a tree without a seed that the whole volume floods across a face before
//     an edge inside the block (seeded trees never join other seeds either way);
//   - mutex watershed: inside a block, a weak attractive edge is taken before a stronger
//     repulsive edge that leaves the block, so two objects meeting inside a block can be
//     joined where the whole volume keeps them apart; use blocks much larger than the
//     longest offset.
// The agglomeration runs on the whole region graph (the stitched fragments and every
// short-range edge between them, gathered block by block), exactly as on the whole volume;
// only the order in which a pair's affinities are summed differs (last bits of a mean).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SEGMENTATION_H
#define MEDRUN_SEGMENTATION_H

#include "medrun/Volume.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace medrun {

/// One affinity channel's offset along (z, y, x).
using Offset = std::array<int64_t, 3>;
using Offsets = std::vector<Offset>;

/// BANIS's six: +1 and +longRange along z, y, x.
Offsets banisOffsets(int64_t longRange = 10);
/// "1,0,0;0,1,0;0,0,1" or JSON "[[1,0,0],[0,1,0],...]"; throws Error naming `what` (the
/// option or key) for a malformed list or a zero offset.
Offsets parseOffsets(const std::string &text, const std::string &what);
/// "[[1,0,0],[0,1,0]]".
std::string formatOffsets(const Offsets &offsets);
/// Checks the offsets against the channel count and, for methods on the short-range
/// edges, one |off|_1 = 1 channel per axis; throws Error naming `what`.
void checkOffsets(const Offsets &offsets, int64_t channels, bool needShortRange,
                  const std::string &what);

enum class SegmentMethod { Watershed, MeanAgglomeration, Mutex };
/// "watershed", "mean-agglomeration", "mutex".
const char *segmentMethodName(SegmentMethod m);
/// Throws Error naming `what` for another name.
SegmentMethod parseSegmentMethod(const std::string &name, const std::string &what);

struct SegmentParams {
  SegmentMethod method = SegmentMethod::MeanAgglomeration;
  /// Watershed: seeds are components of edges >= seedThreshold with >= minSeedSize voxels;
  /// edges <= low never join.
  float seedThreshold = 0.9f;
  int64_t minSeedSize = 2;
  float low = 1e-4f;
  /// Mean agglomeration: merge while the highest mean affinity is > threshold.
  double threshold = 0.5;
  /// Mutex watershed: repulsive edges only at voxels whose (z, y, x) are multiples of this.
  Box3 repulsiveStride{1, 1, 1};
  /// Reports the work done: a stage name ("seeds", "watershed", "region graph",
  /// "agglomeration", "mutex", "stitch", "blocks"), done and total units. May be empty.
  std::function<void(const char *stage, int64_t done, int64_t total)> progress;
};

/// Segments whole affinities in memory (`affs`: offsets.size() channels of `shape`). One
/// label per voxel, 1..N by first voxel (0: watershed background). Throws Error for offsets
/// that do not fit the method (checkOffsets).
std::vector<uint64_t> segmentAffinities(const float *affs, const Box3 &shape,
                                        const Offsets &offsets, const SegmentParams &params);

/// Mean agglomeration at every threshold of `thresholds` from one watershed and one merge
/// run: result[i] is what segmentAffinities gives with threshold = thresholds[i] (any order
/// of the list; computed from the highest down).
std::vector<std::vector<uint64_t>> segmentAffinitiesSweep(const float *affs, const Box3 &shape,
                                                          const Offsets &offsets,
                                                          const SegmentParams &params,
                                                          const std::vector<double> &thresholds);
/// The same, handing each segmentation to `each` (index into `thresholds`, in the order
/// computed: highest threshold first) so that one is held at a time.
void segmentAffinitiesSweep(const float *affs, const Box3 &shape, const Offsets &offsets,
                            const SegmentParams &params, const std::vector<double> &thresholds,
                            const std::function<void(size_t, const std::vector<uint64_t> &)> &each);

/// The steps, for callers that keep the fragments (e.g. to agglomerate them at many
/// thresholds themselves). Fragments: the seeded watershed, 1..F by first voxel, 0 for
/// background; `count` receives F.
std::vector<uint64_t> watershedFragments(const float *affs, const Box3 &shape,
                                         const Offsets &offsets, const SegmentParams &params,
                                         uint64_t *count = nullptr);

/// The region graph of fragments: per pair u < v of adjacent fragments, the sum and the
/// number of the short-range affinities between them.
struct RegionEdge {
  uint64_t u = 0, v = 0;
  double sum = 0;
  int64_t count = 0;
};
/// Edges sorted by (u, v).
std::vector<RegionEdge> regionGraph(const uint64_t *fragments, const float *affs,
                                    const Box3 &shape, const Offsets &offsets);

/// Mean agglomeration of F fragments over `edges`: for each threshold (any order), a map
/// fragment -> segment (index 0..F; map[0] = 0), segments numbered 1..N by their smallest
/// fragment (fragments numbered by first voxel, so segments are too).
std::vector<std::vector<uint64_t>> agglomerateMean(uint64_t fragmentCount,
                                                   const std::vector<RegionEdge> &edges,
                                                   const std::vector<double> &thresholds);

/// The mutex watershed alone (params.repulsiveStride applies).
std::vector<uint64_t> mutexWatershed(const float *affs, const Box3 &shape,
                                     const Offsets &offsets, const SegmentParams &params);

/// Labels written and read back by box, for volumes larger than memory (the caller's
/// files: segmentBlockwise writes and reads whole blocks of its grid only, each box as it
/// was written) or held in memory (MemoryLabels).
class LabelStore {
public:
  virtual ~LabelStore();
  virtual void write(const Box3 &lo, const Box3 &size, const uint64_t *labels) = 0;
  virtual void read(const Box3 &lo, const Box3 &size, uint64_t *labels) const = 0;
};
class MemoryLabels : public LabelStore {
public:
  explicit MemoryLabels(const Box3 &shape);
  void write(const Box3 &lo, const Box3 &size, const uint64_t *labels) override;
  void read(const Box3 &lo, const Box3 &size, uint64_t *labels) const override;
  std::vector<uint64_t> &labels() { return labels_; }

private:
  Box3 shape_;
  std::vector<uint64_t> labels_;
};

/// Where block-wise segmentation reads affinities: every channel of the box [lo, lo +
/// size), [K][size] C order, into `dst`.
using AffinityReader =
    std::function<void(const Box3 &lo, const Box3 &size, float *dst)>;

/// The result of segmentBlockwise: `raw` holds block-unique ids 1..rawIds, and
/// maps[i][raw id] is the final label for threshold i (one map for the watershed and the
/// mutex watershed; 0 for background), numbered 1..N by first voxel in C order as
/// segmentAffinities numbers.
struct BlockwiseResult {
  std::vector<std::vector<uint64_t>> maps;
  uint64_t rawIds = 0; ///< raw ids are 0..rawIds
};

/// Segments a volume of `shape` block by block (blocks of `block` voxels, 0 = the whole
/// axis, the last ones clipped; the affinities of one block are read at a time, the edges leaving it are
/// stored at its voxels). Writes raw ids to `raw` and returns the maps to final labels (the
/// header comment says how the result relates to segmentAffinities). `thresholds`: mean
/// agglomeration's (empty: params.threshold).
BlockwiseResult segmentBlockwise(const AffinityReader &read, const Box3 &shape,
                                 const Box3 &block, const Offsets &offsets,
                                 const SegmentParams &params, LabelStore &raw,
                                 const std::vector<double> &thresholds = {});

} // namespace medrun

#endif // MEDRUN_SEGMENTATION_H
