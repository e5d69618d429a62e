//===- Volume.h - 3-D volumes in files: HDF5, NIfTI, Zarr v2, NumPy ----------------===//
//
// One interface for the formats training data and predictions come in:
//
//   auto v = openVolume("cremi_A.hdf/volumes/raw");   // or "case.nii.gz", "data.zarr/img",
//   v->info().shape, .type, .spacing, .affine           //    "x.npy", "pytc.h5" (first dataset)
//   v->read(lo, size, floatBuffer);                     // any box inside the volume
//
// A volume is named by one path: a file (.nii, .nii.gz, .npy), or a container and the
// array inside it (HDF5: FILE.h5/KEY with the dataset's path, the first dataset when KEY is
// left out; Zarr: DIR.zarr/KEY, the array's directory, DIR.zarr itself when it is an
// array). Axes are (z, y, x) = (D, H, W), x fastest: HDF5, Zarr and NumPy arrays as
// stored (C order), NIfTI's i, j, k as x, y, z. Reads go chunk by chunk through a cache of
// decoded chunks bounded in bytes (the format's chunks: HDF5 and Zarr chunks, planes of an
// uncompressed NIfTI or .npy file, a whole gzip'd NIfTI image, which gzip cannot seek into),
// so a patch never decodes more than the chunks it touches.
//
// Every failure is a medrun::Error naming the file (and key) and what was expected.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_VOLUME_H
#define MEDRUN_VOLUME_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace medrun {

using Box3 = std::array<int64_t, 3>;

/// Element types of volume files.
enum class VoxelType : uint8_t { U8, I8, U16, I16, U32, I32, U64, I64, F32, F64 };
size_t voxelSize(VoxelType t);
/// "uint8", ..., "float64" (NumPy's names).
const char *voxelTypeName(VoxelType t);
bool isIntegerVoxel(VoxelType t);

struct VolumeInfo {
  std::string path;   ///< the file or container
  std::string key;    ///< the array inside a container ("" for files)
  std::string format; ///< "hdf5", "nifti", "zarr", "npy"
  Box3 shape{};       ///< D, H, W
  VoxelType type = VoxelType::F32;
  /// Voxel size along (z, y, x) in the file's unit (NIfTI: pixdim, usually mm; HDF5/Zarr:
  /// the `resolution` attribute, CREMI's nm); 1 where the file says nothing.
  std::array<double, 3> spacing{1, 1, 1};
  /// Where `spacing` comes from, for messages: "the resolution attribute", "the header's
  /// pixdim", or what assumeSpacing was given ("--spacing", "data.spacing"); "" where
  /// nothing says it (spacing is then 1 x 1 x 1, a placeholder, not a fact).
  std::string spacingFrom;
  /// Voxel (x, y, z) index -> world, row-major 4x4 (NIfTI: sform, else qform, else
  /// pixdim scaling; otherwise spacing on the diagonal and `offset` attributes as the
  /// translation). Kept so predictions can be written in the input's space.
  std::array<double, 16> affine{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  Box3 chunk{}; ///< the unit the reader decodes
  /// Channels of the array (openChannel: its leading axis, NIfTI's dim[4]); the reader
  /// reads one of them. 1 for a 3-D volume.
  int64_t channels = 1;
  /// "path" or "path/key": how messages name the volume.
  std::string name() const { return key.empty() ? path : path + "/" + key; }
};

/// Decoded chunks shared by readers, least recently used evicted past `bytes` (a chunk in
/// use stays until its reader lets go). Thread-safe; concurrent misses of one chunk decode
/// it once.
class ChunkCache {
public:
  explicit ChunkCache(size_t bytes);
  ~ChunkCache();
  ChunkCache(const ChunkCache &) = delete;
  ChunkCache &operator=(const ChunkCache &) = delete;
  size_t capacity() const;
  /// Bytes held now, and decodes so far (misses).
  size_t held() const;
  uint64_t decodes() const;

  struct Impl;

private:
  friend class VolumeReader;
  std::unique_ptr<Impl> impl_;
};

class VolumeReader {
public:
  virtual ~VolumeReader();
  const VolumeInfo &info() const { return info_; }

  /// Reads the box [lo, lo + size), which must lie inside the volume, into `dst` (C order,
  /// size[0] x size[1] x size[2]), converting to float / int64 (a float voxel as int64:
  /// truncated, NaN as 0, saturated at int64's range). Thread-safe.
  void read(const Box3 &lo, const Box3 &size, float *dst) const;
  void read(const Box3 &lo, const Box3 &size, int64_t *dst) const;
  /// The whole volume.
  std::vector<float> readAll() const;

  /// Chunks come from `cache` (shared with other readers); without one, a private cache
  /// of 256 MiB.
  void setCache(std::shared_ptr<ChunkCache> cache);

  /// The spacing (z, y, x) the user gives for this volume, `from` naming where ("--spacing",
  /// "data.spacing in R.yaml"): taken where the file states none (info().spacing, the
  /// affine's diagonal and spacingFrom become it); where the file states one, they must
  /// agree (within 1e-3 relative), else Error naming the volume, its attribute, `from` and
  /// both values. nullopt: nothing given, nothing changes.
  void assumeSpacing(const std::optional<std::array<double, 3>> &spacing, const std::string &from);
  /// Where the file states no spacing: takes `other`'s spacing and affine (a label volume
  /// of an image's grid that carries no geometry of its own), spacingFrom saying `from`.
  void assumeGeometry(const VolumeInfo &other, const std::string &from);

protected:
  VolumeReader();
  /// Decodes the chunk box [lo, lo + size) (a chunk clipped to the volume) in the file's
  /// type into `dst`, C order.
  virtual void decode(const Box3 &lo, const Box3 &size, void *dst) const = 0;
  VolumeInfo info_;

private:
  template <typename T> void readAs(const Box3 &lo, const Box3 &size, T *dst) const;
  std::shared_ptr<ChunkCache> cache_;
  uint64_t id_; ///< distinguishes this reader's chunks in a shared cache
};

/// Opens a volume by path (see above). Throws Error for a missing file or key, a format
/// or dtype or codec it does not read, or an array that is not 3-D (leading or trailing
/// axes of size 1 are dropped: a 1xDxHxW array or a NIfTI image with dim[4] = 1 is 3-D).
std::unique_ptr<VolumeReader> openVolume(const std::string &path);

/// Opens channel `channel` of a volume with a leading channel axis, C x D x H x W (what
/// writeVolume writes for channels > 1, e.g. `medrun infer`'s predictions; NIfTI: dim[4]
/// = C; axes of size 1 before or after are dropped until 4 remain); info().channels is C.
/// A 3-D volume is one channel. Throws Error naming the path for a channel past C.
std::unique_ptr<VolumeReader> openChannel(const std::string &path, int64_t channel);

/// How the geometry of `b` differs from `a`'s beyond the spacing: "" when their affines
/// agree (origin within 1e-3 of the largest spacing, direction within 1e-4), else e.g.
/// "origin (x, y, z) = (0, 0, 30) vs (0, 0, 0) mm", for an error that names both files.
std::string geometryMismatch(const VolumeInfo &a, const VolumeInfo &b);

/// Where a volume's samples come from, for writeVolume.
struct VolumeData {
  Box3 shape{};
  VoxelType type = VoxelType::F32;
  const void *data = nullptr; ///< C order, channels x shape[0] x shape[1] x shape[2] of `type`
  /// More than 1: a leading channel axis (network outputs), written as a 4-D array
  /// (C, D, H, W); NIfTI: dim[4] = C.
  int64_t channels = 1;
  std::array<double, 3> spacing{1, 1, 1};
  std::array<double, 16> affine{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
};

/// Writes a volume to `path` named as openVolume names it: .nii/.nii.gz (qform and sform
/// from `affine`, pixdim from `spacing`), .npy, HDF5 FILE.h5/KEY (gzip'd chunks, a
/// `resolution` attribute; the file is created or the key added), Zarr DIR.zarr/KEY (zlib
/// chunks, `resolution` in .zattrs), each with the channel axis first if there is one.
/// HDF5 and Zarr arrays are written under a temporary name and moved into place when
/// complete (VolumeWriter), so a failed write leaves nothing under `path`. Throws Error
/// naming the path.
void writeVolume(const std::string &path, const VolumeData &volume);

/// Arrays written under a temporary name (VolumeWriter) end in this; readers skip them
/// when they pick an array by themselves.
inline constexpr const char *kPartialSuffix = ".partial";

/// A volume's path split into the container and the key inside it ("a/b.zarr/img" ->
/// "a/b.zarr", "img"; HDF5 likewise); a plain file has the key "".
std::pair<std::string, std::string> splitVolumePath(const std::string &path);

/// True for the formats written chunk by chunk (HDF5 FILE.h5/KEY, Zarr DIR.zarr/KEY):
/// outputs that need not fit in memory.
bool isChunkedVolumePath(const std::string &path);

/// A chunked volume written box by box (block-wise inference into HDF5 or Zarr): the
/// array is made (or reopened) first, every box written when it is ready, and finish()
/// moves it into place. Until then it lives under a temporary name (HDF5: the dataset
/// KEY.partial in the same file; Zarr: the directory KEY.partial beside KEY), which readers
/// never open, so a run killed or failing midway (a full disk) leaves no array at the
/// name asked for that reads back (an older one there stays until finish() replaces it).
class VolumeWriter {
public:
  virtual ~VolumeWriter();
  /// The chunk along D, H, W (each channel its own chunks).
  const Box3 &chunk() const { return chunk_; }
  /// Writes every channel of the box [lo, lo + size) from `data` (C x size, C order, of the
  /// volume's type). `lo` lies on the chunk grid and `size` is whole chunks or reaches the
  /// volume's end, so no chunk is written by two boxes. Zarr: each chunk file is written
  /// to a temporary name and renamed, so a killed run leaves no chunk half written.
  virtual void write(const Box3 &lo, const Box3 &size, const void *data) = 0;
  /// Makes what was written durable (HDF5: flushes the file).
  virtual void flush() {}
  /// Every box is written: flushes and moves the array from its temporary name to the
  /// name asked for, replacing what was there. Throws Error naming the path.
  virtual void finish() = 0;

protected:
  Box3 chunk_{};
};

/// Creates the chunked volume `path` (isChunkedVolumePath) of `header`'s shape, channels,
/// type, spacing and affine (header.data unused) with chunks `chunk` (clipped to the shape)
/// under its temporary name (see VolumeWriter). `reopen`: opens the array to add boxes (a
/// resumed run: the temporary one, or the finished one if there is no temporary one) and
/// throws Error naming the path unless its shape, channels, type and chunks are those
/// asked for.
std::unique_ptr<VolumeWriter> createVolume(const std::string &path, const VolumeData &header,
                                           const Box3 &chunk, bool reopen = false);

namespace io {
// The formats (runtime/src/io/). `container` is the file or directory, `key` the array;
// `channel` < 0: a 3-D volume, else that channel of a C x D x H x W array (openChannel).
std::unique_ptr<VolumeReader> openHdf5(const std::string &container, const std::string &key,
                                       int64_t channel = -1);
std::unique_ptr<VolumeReader> openNifti(const std::string &path, int64_t channel = -1);
std::unique_ptr<VolumeReader> openZarr(const std::string &container, const std::string &key,
                                       int64_t channel = -1);
std::unique_ptr<VolumeReader> openNpy(const std::string &path, int64_t channel = -1);
void writeHdf5(const std::string &container, const std::string &key, const VolumeData &v);
void writeNifti(const std::string &path, const VolumeData &v);
void writeZarr(const std::string &container, const std::string &key, const VolumeData &v);
void writeNpyVolume(const std::string &path, const VolumeData &v);
std::unique_ptr<VolumeWriter> createHdf5(const std::string &container, const std::string &key,
                                         const VolumeData &v, const Box3 &chunk, bool reopen);
std::unique_ptr<VolumeWriter> createZarr(const std::string &container, const std::string &key,
                                         const VolumeData &v, const Box3 &chunk, bool reopen);

/// Drops leading and trailing axes of size 1; throws Error naming `what` unless 3 remain.
Box3 squeeze3(const std::vector<int64_t> &shape, const std::string &what);

/// Where a reader finds its volume in a stored array's axes.
struct ArrayAxes {
  Box3 shape{};            ///< D, H, W
  size_t first = 0;        ///< the index of D in the stored axes
  int64_t channels = 1;    ///< the channel axis's size (1 without one)
  int64_t channelAxis = -1; ///< its index, -1 for none
};
/// `channel` < 0: squeeze3's axes; else size-1 axes are dropped until 4 remain (the first
/// is the channel axis) or 3 (one channel), and `channel` must be below the channels.
ArrayAxes arrayAxes(const std::vector<int64_t> &shape, const std::string &what, int64_t channel);
} // namespace io

} // namespace medrun

#endif // MEDRUN_VOLUME_H
