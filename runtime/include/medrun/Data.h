//===- Data.h - training data: synthetic volumes, patch sampler, batch loader ---===//
//
// The data side of `medrun train` (docs/training.md, "Data"):
//
//  - an embedded synthetic dataset (procedural 3D instance labels: neurite-like tubes and
//    ellipsoidal blobs, a blurred noisy image) so every command works with no download;
//  - a counter-based patch sampler: the patch of sample j of step s is a pure function of
//    (seed, s, j) where j counts the samples of the step's global batch (all ranks of a
//    data-parallel job), with nnU-Net's foreground oversampling over that batch;
//  - a DataLoader whose worker threads only crop, pad and stack patches into a fixed pool
//    of reusable batch buffers, handing out batches strictly in step order.
//
// Every random number comes from Philox (Random.h), so datasets and batches are identical
// for any number of threads or workers, and a run resumed at step s sees the same batches.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_DATA_H
#define MEDRUN_DATA_H

#include "medrun/Tensor.h"

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace medrun {

using Index3 = std::array<int64_t, 3>;

/// One training volume. Spatial shape D x H x W (z, y, x), C order.
struct Volume {
  Tensor image;        ///< f32 [1,D,H,W]
  Tensor labels;       ///< i32 [1,D,H,W], instance ids, 0 = background
  Tensor affinity;     ///< u8 [6,D,H,W], BANIS affinities (computeAffinities)
  Tensor affinityMask; ///< u8 [6,D,H,W], 1 where the affinity is defined
  Tensor segmentation; ///< u8 [1,D,H,W], class indices (synthetic: 0 bg, 1 tube, 2 blob)
};

/// BANIS offsets (z, y, x) of the six affinity channels: short range 1, long range 10.
const std::array<Index3, 6> &banisOffsets();
/// The longest offset: a patch's targets need this many voxels past its trailing edges.
constexpr int64_t kAffinityMargin = 10;

/// BANIS targets (`data.py::comp_affinities`), forward convention: for channel c with
/// offset o, aff[c][v] = labels[v] == labels[v+o] && labels[v] != 0, and
/// mask[c][v] = 1 iff v+o lies inside the volume (the trailing `o` planes of each axis are
/// masked, aff there is 0). Background is a real label: its affinities (0) are valid.
/// `labels`: i32 [1,D,H,W]; sets `affinity` and `mask` to new u8 [6,D,H,W] tensors.
void computeAffinities(const Tensor &labels, Tensor &affinity, Tensor &mask);
/// The same for any offsets (a recipe's loss.affinities.offsets; negative ones too): channel c
/// of [K,D,H,W] is labels[v] == labels[v+o_c] && labels[v] != 0, masked where v+o_c lies
/// outside the volume (med.affinities with unlabelled_below 0).
void computeAffinities(const Tensor &labels, const std::vector<Index3> &offsets, Tensor &affinity,
                       Tensor &mask);

/// Relabels the 6-connected pieces of equal nonzero id in `ids` (D x H x W) as 1, 2, ... in
/// raster order of their first voxel, into `out` (not `ids`); 0 stays 0. Returns the id of
/// each piece (element 0: 0); a negative id (unlabelled: padding) becomes -1. As BANIS relabels its crops (cc3d, connectivity 6), so that
/// pieces of one object that meet only outside a crop are different instances in it.
std::vector<int32_t> connectedComponents(const int32_t *ids, const Index3 &shape, int32_t *out);

/// Number of segmentation classes of the synthetic data (background, tube, blob).
constexpr int64_t kSyntheticClasses = 3;

enum class ImageScale {
  Unit,   ///< intensities in [0, 1] (like EM divided by 255)
  ZScore, ///< per-volume zero mean, unit variance (nnU-Net's CT/MR normalization)
};

struct SyntheticSpec {
  Index3 shape{96, 96, 96}; ///< recipe key data.volume_shape
  int64_t volumes = 2;      ///< data.volumes
  uint64_t seed = 0;        ///< data.seed
  ImageScale scale = ImageScale::Unit;
};

/// Throws Error naming the key (data.volume_shape, data.volumes) for bad values.
void validate(const SyntheticSpec &spec);

/// Volume `index` of the dataset: a pure function of (spec.seed, spec.shape, index),
/// independent of the thread count.
Volume makeSyntheticVolume(const SyntheticSpec &spec, int64_t index);
/// All spec.volumes volumes.
std::shared_ptr<const std::vector<Volume>> makeSyntheticDataset(const SyntheticSpec &spec);

/// What the loader produces; keys of the recipe's `data:` section in brackets.
struct LoaderSpec {
  int64_t batch = 2;                          ///< [batch] samples per step (per rank)
  Index3 patch{64, 64, 64};                   ///< [patch] D, H, W of every patch
  std::vector<std::string> tensors{"image"};  ///< [tensors] names below
  int64_t affinityChannels = 6;               ///< first C of the 6 BANIS channels, 1..6
  int64_t imageChannels = 1;                  ///< input channels of the image (the volumes')
  int workers = 2;                            ///< [workers] threads filling batches
  int prefetch = 3;                           ///< [prefetch] batch buffers in the pool
  double foreground = 1.0 / 3;                ///< [foreground] oversampled fraction
  uint64_t seed = 0;                          ///< [seed]
  /// Data parallel: a step's global batch is `ranks` x `batch` samples; rank r draws its
  /// samples r*batch .. r*batch + batch-1, so that R ranks of batch b see exactly the
  /// samples one rank of batch R*b sees (sample index = step * R*b + r*b + i).
  int64_t rank = 0;
  int64_t ranks = 1;
};

/// Tensor names a LoaderSpec may request (f32 each; P = patch, B = batch):
///   image          [B,C,P]  C = imageChannels (the volumes' channels), padding 0
///   labels         [B,1,P]  instance ids as floats, padding 0
///   affinity       [B,C,P]  C = affinityChannels, padding 0
///   affinity_mask  [B,C,P]  padding 0 (padded voxels never enter the loss)
///   segmentation   [B,1,P]  class indices, padding 0 (background, as nnU-Net's -1 -> 0)
///   segmentation/F [B,1,P/F] F = 2, 4, 8, ... dividing every patch axis: the nearest
///                  (strided) downsample seg[F*i] of the padded patch, for deep supervision
///   instances      [B,1,P]  i32 instance ids of the patch, its 6-connected pieces
///                  relabelled 1, 2, ... (connectedComponents), padding -1 (unlabelled:
///                  the affinities reaching it are masked): the raw labels an augmentation
///                  pipeline in the step turns into affinities (docs/augment.md)
///   classes        [B,1,P]  i32 class indices, padding -1 (nnU-Net's padding label)
/// Throws Error naming the key and what was expected for any bad value.
void validate(const LoaderSpec &spec);

/// Where one sample's patch comes from.
struct PatchInfo {
  int64_t volume = 0;
  Index3 corner{}; ///< volume coordinate of patch voxel (0,0,0); may be negative (padding)
  bool forced = false; ///< foreground oversampling forced a foreground voxel in
  int64_t cls = 0;     ///< the class it chose (forced samples), else 0
};

/// nnU-Net `get_do_oversample`: sample j of a batch of B is forced to contain foreground
/// iff j >= round(B * (1 - fraction)), round half to even as Python's round.
/// Over a data-parallel job's global batch (as nnU-Net's DDP shares its oversampled samples
/// out to the ranks), so the forced samples do not depend on how many ranks there are.
bool oversampled(int64_t j, int64_t batch, double fraction);

/// Where the sampler and the loader take volumes from: the in-memory synthetic volumes, or
/// volume files (Dataset.h). A patch is read as a view: a Volume holding at least the box
/// [corner, corner + extent) clipped to the volume, with its tensors as Volume documents
/// them, and the volume coordinate of the view's voxel (0,0,0).
class PatchSource {
public:
  virtual ~PatchSource();
  virtual int64_t size() const = 0;
  /// D, H, W of volume v.
  virtual Index3 shape(int64_t v) const = 0;
  /// The foreground classes present in volume v (class indices, or 1 for any nonzero
  /// instance id), and for each the flat indices of its voxels (all, or a sample).
  virtual const std::vector<int64_t> &classes(int64_t v) const = 0;
  virtual const std::vector<std::vector<int64_t>> &foreground(int64_t v) const = 0;
  /// A view of volume v covering [corner, corner + extent) where it overlaps the volume.
  /// `view` is scratch space a reading source fills; the returned Volume may be it.
  virtual const Volume &read(int64_t v, const Index3 &corner, const Index3 &extent,
                             Volume &view, Index3 &origin) const = 0;
};

/// The synthetic (or any in-memory) volumes as a PatchSource: views are the volumes.
/// Checks the tensors as the loader needs them (Error naming the volume otherwise).
std::shared_ptr<const PatchSource> memorySource(std::shared_ptr<const std::vector<Volume>> volumes);

/// Counter-based patch choice. Non-forced samples: a uniformly random volume and corner
/// (per axis uniform in [min(0, V-P), max(0, V-P)], so a patch larger than the volume holds
/// all of it). Forced samples: a random volume, a random class among the foreground classes
/// present in it, a random voxel of that class, the patch centred on it (corner = voxel -
/// P/2) and clamped to the same range; a volume without foreground falls back to random.
class Sampler {
public:
  Sampler(std::shared_ptr<const std::vector<Volume>> volumes, const LoaderSpec &spec);
  Sampler(std::shared_ptr<const PatchSource> source, const LoaderSpec &spec);
  /// Sample j (0 <= j < batch) of this rank at `step`: a pure function of (seed, step,
  /// rank * batch + j, ranks * batch).
  PatchInfo sample(int64_t step, int64_t j) const;

private:
  std::shared_ptr<const PatchSource> source_;
  LoaderSpec spec_;
};

/// One step's batch: the requested tensors plus where each sample came from.
struct Batch {
  int64_t step = -1;
  std::map<std::string, Tensor> tensors;
  std::vector<PatchInfo> samples;
};

/// Allocates a batch buffer's tensor; the default makes an ordinary host Tensor. A CUDA
/// backend passes one that returns pinned host memory.
using BatchAllocator = std::function<Tensor(DType, const Shape &)>;

/// Fills batches for steps firstStep, firstStep+1, ... on `spec.workers` threads into a
/// pool of `spec.prefetch` preallocated buffers. The batch of step s is the same for any
/// worker count and any first step. next() hands them out in step order; the consumer gives
/// each back with release() when it no longer reads it (after an async copy has finished),
/// so it may hold several. The destructor stops and joins the workers at any point.
class DataLoader {
public:
  DataLoader(std::shared_ptr<const std::vector<Volume>> volumes, LoaderSpec spec,
             int64_t firstStep = 0, BatchAllocator allocate = {});
  /// Patches read from `source` by the workers (volume files: Dataset.h).
  DataLoader(std::shared_ptr<const PatchSource> source, LoaderSpec spec, int64_t firstStep = 0,
             BatchAllocator allocate = {});
  ~DataLoader();
  DataLoader(const DataLoader &) = delete;
  DataLoader &operator=(const DataLoader &) = delete;

  /// The batch of the next step. `waitSeconds` (optional) receives how long this call
  /// blocked waiting for workers. Throws Error if every buffer is held by the consumer
  /// (it would wait forever), and rethrows a worker's failure.
  const Batch &next(double *waitSeconds = nullptr);
  /// True if next() would return at once: the next step's batch is filled (or failed).
  bool ready() const;
  /// Gives a batch returned by next() back to the pool.
  void release(const Batch &batch);
  /// Gives the oldest batch still held back to the pool.
  void release();

  /// Step of the batch the next call to next() returns.
  int64_t nextStep() const;
  const LoaderSpec &spec() const { return spec_; }
  /// Shape of each requested tensor in a batch.
  const std::map<std::string, Shape> &shapes() const { return shapes_; }

private:
  /// One requested tensor: which volume array, how many channels, downsampling factor.
  struct Request {
    std::string name;
    enum class Source { Image, Labels, Affinity, AffinityMask, Segmentation, Instances, Classes } source;
    int64_t channels = 1;
    int64_t factor = 1;
    DType dtype = DType::F32; ///< i32 for the raw labels (instances, classes)
    int32_t pad = 0;          ///< their value outside the volume
  };
  enum class SlotState { Free, Filling, Ready, Held };
  struct Slot {
    Batch batch;
    SlotState state = SlotState::Free;
    std::exception_ptr error;
  };
  DataLoader(std::shared_ptr<const PatchSource> source, LoaderSpec spec, int64_t firstStep,
             BatchAllocator allocate, bool);
  void start(); ///< starts the workers
  void work();
  void fill(Batch &batch);

  std::shared_ptr<const PatchSource> source_;
  LoaderSpec spec_;
  Sampler sampler_;
  std::vector<Request> requests_;
  std::map<std::string, Shape> shapes_;
  std::vector<Slot> slots_;
  mutable std::mutex mutex_;
  std::condition_variable freeCv_, readyCv_;
  int64_t nextClaim_;                  ///< next step a worker starts
  int64_t nextServe_;                  ///< next step next() returns
  std::vector<size_t> held_;           ///< slots the consumer holds, oldest first
  std::atomic<bool> stop_{false};
  std::exception_ptr failure_; ///< a worker's error, rethrown by every later next()
  std::vector<std::thread> threads_;
};

} // namespace medrun

#endif // MEDRUN_DATA_H
