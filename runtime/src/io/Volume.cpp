//===- Volume.cpp - opening volumes by path, the chunk cache, typed box reads -------===//
//
// A format only decodes chunk boxes in its own element type (VolumeReader::decode); this
// file assembles any box from the chunks it touches, through the shared cache, converting
// to float or int64 on the way.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Volume.h"
#include "medrun/Error.h"
#include "medrun/Sizes.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <type_traits>

namespace medrun {

namespace fs = std::filesystem;

size_t voxelSize(VoxelType t) {
  switch (t) {
  case VoxelType::U8:
  case VoxelType::I8: return 1;
  case VoxelType::U16:
  case VoxelType::I16: return 2;
  case VoxelType::U32:
  case VoxelType::I32:
  case VoxelType::F32: return 4;
  case VoxelType::U64:
  case VoxelType::I64:
  case VoxelType::F64: return 8;
  }
  return 0;
}

const char *voxelTypeName(VoxelType t) {
  switch (t) {
  case VoxelType::U8: return "uint8";
  case VoxelType::I8: return "int8";
  case VoxelType::U16: return "uint16";
  case VoxelType::I16: return "int16";
  case VoxelType::U32: return "uint32";
  case VoxelType::I32: return "int32";
  case VoxelType::U64: return "uint64";
  case VoxelType::I64: return "int64";
  case VoxelType::F32: return "float32";
  case VoxelType::F64: return "float64";
  }
  return "?";
}

bool isIntegerVoxel(VoxelType t) { return t != VoxelType::F32 && t != VoxelType::F64; }

// ---- ChunkCache ------------------------------------------------------------------------

using Chunk = std::shared_ptr<const std::vector<char>>;

struct ChunkCache::Impl {
  struct Key {
    uint64_t reader, chunk;
    bool operator<(const Key &o) const {
      return reader != o.reader ? reader < o.reader : chunk < o.chunk;
    }
  };
  struct Entry {
    Chunk data;   ///< null while being decoded
    bool failed = false;
    std::list<Key>::iterator lru;
  };
  size_t capacity;
  size_t held = 0;
  uint64_t decodes = 0;
  std::mutex mutex;
  std::condition_variable decoded;
  std::map<Key, Entry> entries;
  std::list<Key> lru; ///< ready entries, most recently used first

  template <typename Decode>
  Chunk get(const Key &key, size_t bytes, const std::string &name, Decode &&decode) {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      auto it = entries.find(key);
      if (it == entries.end())
        break;
      if (it->second.data) {
        lru.splice(lru.begin(), lru, it->second.lru);
        return it->second.data;
      }
      decoded.wait(lock); // another thread decodes it; look again (it may have failed)
    }
    entries[key]; // a placeholder: others wait for it
    ++decodes;
    lock.unlock();
    auto buffer = std::make_shared<std::vector<char>>();
    try {
      resizeChecked(*buffer, static_cast<int64_t>(bytes), name, "a decoded chunk");
      decode(buffer->data());
    } catch (...) {
      lock.lock();
      entries.erase(key);
      decoded.notify_all();
      throw;
    }
    lock.lock();
    Entry &e = entries[key];
    e.data = buffer;
    lru.push_front(key);
    e.lru = lru.begin();
    held += bytes;
    // Evict the least recently used (not the new one); readers holding a chunk keep it alive.
    while (held > capacity && lru.size() > 1) {
      Key old = lru.back();
      lru.pop_back();
      auto victim = entries.find(old);
      held -= victim->second.data->size();
      entries.erase(victim);
    }
    decoded.notify_all();
    return buffer;
  }
};

ChunkCache::ChunkCache(size_t bytes) : impl_(std::make_unique<Impl>()) {
  impl_->capacity = bytes;
}
ChunkCache::~ChunkCache() = default;
size_t ChunkCache::capacity() const { return impl_->capacity; }
size_t ChunkCache::held() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->held;
}
uint64_t ChunkCache::decodes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->decodes;
}

// ---- VolumeReader ----------------------------------------------------------------------

namespace {

std::atomic<uint64_t> nextReaderId{1};

template <typename S, typename T> void convertRow(const char *src, T *dst, int64_t n) {
  const S *s = reinterpret_cast<const S *>(src);
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<T>) {
    // A float voxel read as an integer: truncated, NaN as 0, saturated at the type's range
    // (converting a value outside it is undefined behaviour).
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(s[i]);
      dst[i] = v != v ? 0
               : v <= -0x1p63 ? std::numeric_limits<T>::min()
               : v >= 0x1p63  ? std::numeric_limits<T>::max()
                              : static_cast<T>(v);
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<T>(s[i]);
  }
}

template <typename T> void convertRow(VoxelType type, const char *src, T *dst, int64_t n) {
  switch (type) {
  case VoxelType::U8: return convertRow<uint8_t>(src, dst, n);
  case VoxelType::I8: return convertRow<int8_t>(src, dst, n);
  case VoxelType::U16: return convertRow<uint16_t>(src, dst, n);
  case VoxelType::I16: return convertRow<int16_t>(src, dst, n);
  case VoxelType::U32: return convertRow<uint32_t>(src, dst, n);
  case VoxelType::I32: return convertRow<int32_t>(src, dst, n);
  case VoxelType::U64: return convertRow<uint64_t>(src, dst, n); // ids: bits kept as int64
  case VoxelType::I64: return convertRow<int64_t>(src, dst, n);
  case VoxelType::F32: return convertRow<float>(src, dst, n);
  case VoxelType::F64: return convertRow<double>(src, dst, n);
  }
}

std::string boxStr(const Box3 &lo, const Box3 &size) {
  return str("[", lo[0], ":", lo[0] + size[0], ", ", lo[1], ":", lo[1] + size[1], ", ", lo[2],
             ":", lo[2] + size[2], "]");
}

} // namespace

VolumeReader::VolumeReader()
    : cache_(std::make_shared<ChunkCache>(size_t(256) << 20)), id_(nextReaderId++) {}

VolumeReader::~VolumeReader() = default;

void VolumeReader::setCache(std::shared_ptr<ChunkCache> cache) { cache_ = std::move(cache); }

void VolumeReader::assumeSpacing(const std::optional<std::array<double, 3>> &spacing,
                                 const std::string &from) {
  if (!spacing)
    return;
  const std::array<double, 3> &s = *spacing;
  for (double v : s)
    if (!(v > 0) || !std::isfinite(v))
      throw Error(str(from, ": expected three positive numbers (z, y, x), got ", s[0], ", ", s[1],
                      ", ", s[2]));
  if (info_.spacingFrom.empty()) {
    info_.spacing = s;
    info_.spacingFrom = from;
    for (int a = 0; a < 3; ++a) // the affine's rows are x, y, z
      info_.affine[a * 4 + a] = s[2 - a];
    return;
  }
  for (int a = 0; a < 3; ++a)
    if (std::abs(info_.spacing[a] - s[a]) > 1e-3 * std::max(info_.spacing[a], s[a]))
      throw Error(str(info_.name(), ": ", info_.spacingFrom, " gives the spacing ", info_.spacing[0],
                      " x ", info_.spacing[1], " x ", info_.spacing[2], " (z, y, x) but ", from,
                      " gives ", s[0], " x ", s[1], " x ", s[2],
                      ": they disagree (leave ", from, " out to use the file's, or fix the file)"));
}

template <typename T>
void VolumeReader::readAs(const Box3 &lo, const Box3 &size, T *dst) const {
  const Box3 &V = info_.shape, &C = info_.chunk;
  for (int a = 0; a < 3; ++a)
    if (lo[a] < 0 || size[a] < 0 || lo[a] + size[a] > V[a])
      throw Error(str(info_.name(), ": the box ", boxStr(lo, size), " is not inside the volume ",
                      V[0], "x", V[1], "x", V[2]));
  if (size[0] == 0 || size[1] == 0 || size[2] == 0)
    return;
  const size_t elem = voxelSize(info_.type);
  Box3 first, last, grid;
  for (int a = 0; a < 3; ++a) {
    first[a] = lo[a] / C[a];
    last[a] = (lo[a] + size[a] - 1) / C[a];
    grid[a] = (V[a] + C[a] - 1) / C[a];
  }
  for (int64_t cz = first[0]; cz <= last[0]; ++cz)
    for (int64_t cy = first[1]; cy <= last[1]; ++cy)
      for (int64_t cx = first[2]; cx <= last[2]; ++cx) {
        const Box3 c0 = {cz * C[0], cy * C[1], cx * C[2]};
        Box3 cs;
        for (int a = 0; a < 3; ++a)
          cs[a] = std::min(C[a], V[a] - c0[a]);
        const uint64_t index = static_cast<uint64_t>((cz * grid[1] + cy) * grid[2] + cx);
        Chunk chunk = cache_->impl_->get({id_, index}, cs[0] * cs[1] * cs[2] * elem, info_.name(),
                                         [&](char *buf) { decode(c0, cs, buf); });
        // The overlap of the chunk and the box, in volume coordinates.
        Box3 a0, a1;
        for (int a = 0; a < 3; ++a) {
          a0[a] = std::max(lo[a], c0[a]);
          a1[a] = std::min(lo[a] + size[a], c0[a] + cs[a]);
        }
        const int64_t n = a1[2] - a0[2];
        for (int64_t z = a0[0]; z < a1[0]; ++z)
          for (int64_t y = a0[1]; y < a1[1]; ++y) {
            const char *src =
                chunk->data() +
                (((z - c0[0]) * cs[1] + (y - c0[1])) * cs[2] + (a0[2] - c0[2])) * elem;
            T *d = dst + ((z - lo[0]) * size[1] + (y - lo[1])) * size[2] + (a0[2] - lo[2]);
            convertRow(info_.type, src, d, n);
          }
      }
}

void VolumeReader::read(const Box3 &lo, const Box3 &size, float *dst) const {
  readAs(lo, size, dst);
}
void VolumeReader::read(const Box3 &lo, const Box3 &size, int64_t *dst) const {
  readAs(lo, size, dst);
}

std::vector<float> VolumeReader::readAll() const {
  const Box3 &V = info_.shape;
  std::vector<float> out = allocate<float>(V[0] * V[1] * V[2], info_.name(),
                                           str("the whole volume, ", V[0], "x", V[1], "x", V[2]));
  read({0, 0, 0}, V, out.data());
  return out;
}

void VolumeReader::assumeGeometry(const VolumeInfo &other, const std::string &from) {
  if (!info_.spacingFrom.empty() || other.spacingFrom.empty())
    return;
  info_.spacing = other.spacing;
  info_.affine = other.affine;
  info_.spacingFrom = from;
}

// ---- opening and writing by path -----------------------------------------------------

namespace io {

Box3 squeeze3(const std::vector<int64_t> &shape, const std::string &what) {
  size_t b = 0, e = shape.size();
  while (e - b > 3 && shape[b] == 1)
    ++b;
  while (e - b > 3 && shape[e - 1] == 1)
    --e;
  if (e - b != 3) {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i)
      s += (i ? "x" : "") + std::to_string(shape[i]);
    throw Error(str(what, ": expected a 3-D volume (D x H x W; axes of size 1 before or after "
                          "are dropped), got shape ",
                    s.empty() ? "() (a scalar)" : s));
  }
  for (size_t i = b; i < e; ++i)
    if (shape[i] < 1)
      throw Error(str(what, ": the volume is empty (a dimension of size 0)"));
  return {shape[b], shape[b + 1], shape[b + 2]};
}

ArrayAxes arrayAxes(const std::vector<int64_t> &shape, const std::string &what, int64_t channel) {
  ArrayAxes axes;
  if (channel < 0) {
    axes.shape = squeeze3(shape, what);
    while (axes.first + 3 < shape.size() && shape[axes.first] == 1)
      ++axes.first; // squeeze3 drops these leading axes
    return axes;
  }
  size_t b = 0, e = shape.size();
  while (e - b > 4 && shape[b] == 1)
    ++b;
  while (e - b > 4 && shape[e - 1] == 1)
    --e;
  if (e - b != 3 && e - b != 4) {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i)
      s += (i ? "x" : "") + std::to_string(shape[i]);
    throw Error(str(what, ": expected channels and a volume (C x D x H x W) or a 3-D volume, "
                          "got shape ",
                    s.empty() ? "() (a scalar)" : s));
  }
  for (size_t i = b; i < e; ++i)
    if (shape[i] < 1)
      throw Error(str(what, ": the volume is empty (a dimension of size 0)"));
  if (e - b == 4) {
    axes.channelAxis = static_cast<int64_t>(b);
    axes.channels = shape[b++];
  }
  axes.first = b;
  axes.shape = {shape[b], shape[b + 1], shape[b + 2]};
  if (channel >= axes.channels)
    throw Error(str(what, ": no channel ", channel, " (the volume has ", axes.channels,
                    axes.channels == 1 ? " channel)" : " channels)"));
  return axes;
}

} // namespace io

namespace {

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

enum class Format { Hdf5, Zarr, Nifti, Npy, Unknown };

Format formatOf(const std::string &file) {
  std::string lower = file;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  for (const char *e : {".h5", ".hdf5", ".hdf", ".he5"})
    if (endsWith(lower, e))
      return Format::Hdf5;
  if (endsWith(lower, ".zarr"))
    return Format::Zarr;
  if (endsWith(lower, ".nii") || endsWith(lower, ".nii.gz"))
    return Format::Nifti;
  if (endsWith(lower, ".npy"))
    return Format::Npy;
  return Format::Unknown;
}

const char *kFormats = ".h5/.hdf5/.hdf (HDF5, FILE/KEY), .zarr (Zarr v2, DIR/KEY), .nii/.nii.gz "
                       "(NIfTI) or .npy";

/// Splits "a/b.h5/volumes/raw" into the container "a/b.h5" and the key "volumes/raw": the
/// first path component with a container suffix. Plain files have no key.
void splitPath(const std::string &path, std::string &container, std::string &key, Format &f) {
  size_t pos = 0;
  for (;;) {
    size_t slash = path.find('/', pos);
    std::string head = path.substr(0, slash);
    f = formatOf(head);
    if (f == Format::Hdf5 || f == Format::Zarr) {
      container = head;
      key = slash == std::string::npos ? "" : path.substr(slash + 1);
      while (!key.empty() && key.back() == '/')
        key.pop_back();
      return;
    }
    if (slash == std::string::npos)
      break;
    pos = slash + 1;
  }
  container = path;
  key.clear();
  f = formatOf(path);
}

/// Opens a 3-D volume (channel < 0) or one channel of a C x D x H x W array.
std::unique_ptr<VolumeReader> open(const std::string &path, int64_t channel) {
  std::string container, key;
  Format f;
  splitPath(path, container, key, f);
  if (f == Format::Unknown)
    throw Error(str(path, ": not a volume file this reader knows (expected ", kFormats, ")"));
  std::error_code ec;
  if (!fs::exists(container, ec))
    throw Error(str(container, ": no such file or directory"));
  switch (f) {
  case Format::Hdf5: return io::openHdf5(container, key, channel);
  case Format::Zarr: return io::openZarr(container, key, channel);
  case Format::Nifti: return io::openNifti(container, channel);
  case Format::Npy: return io::openNpy(container, channel);
  case Format::Unknown: break;
  }
  return nullptr;
}

} // namespace

std::unique_ptr<VolumeReader> openVolume(const std::string &path) { return open(path, -1); }

std::unique_ptr<VolumeReader> openChannel(const std::string &path, int64_t channel) {
  if (channel < 0)
    throw Error(str(path, ": no channel ", channel));
  return open(path, channel);
}

std::pair<std::string, std::string> splitVolumePath(const std::string &path) {
  std::string container, key;
  Format f;
  splitPath(path, container, key, f);
  return {container, key};
}

bool isChunkedVolumePath(const std::string &path) {
  std::string container, key;
  Format f;
  splitPath(path, container, key, f);
  return f == Format::Hdf5 || f == Format::Zarr;
}

VolumeWriter::~VolumeWriter() = default;

std::unique_ptr<VolumeWriter> createVolume(const std::string &path, const VolumeData &header,
                                           const Box3 &chunk, bool reopen) {
  std::string container, key;
  Format f;
  splitPath(path, container, key, f);
  for (int a = 0; a < 3; ++a)
    if (header.shape[a] < 1 || chunk[a] < 1)
      throw Error(str(path, ": cannot write an empty volume or chunk"));
  if (header.channels < 1)
    throw Error(str(path, ": cannot write a volume of ", header.channels, " channels"));
  if (f == Format::Hdf5) {
    if (key.empty())
      throw Error(str(path, ": name the dataset to write (FILE.h5/KEY, e.g. ", path, "/main)"));
    return io::createHdf5(container, key, header, chunk, reopen);
  }
  if (f == Format::Zarr)
    return io::createZarr(container, key, header, chunk, reopen);
  throw Error(str(path, ": not a chunked format (block by block needs FILE.h5/KEY or "
                        "DIR.zarr/KEY)"));
}

void writeVolume(const std::string &path, const VolumeData &volume) {
  std::string container, key;
  Format f;
  splitPath(path, container, key, f);
  for (int64_t d : volume.shape)
    if (d < 1)
      throw Error(str(path, ": cannot write an empty volume"));
  if (volume.channels < 1)
    throw Error(str(path, ": cannot write a volume of ", volume.channels, " channels"));
  switch (f) {
  case Format::Hdf5:
    if (key.empty())
      throw Error(str(path, ": name the dataset to write (FILE.h5/KEY, e.g. ", path, "/main)"));
    return io::writeHdf5(container, key, volume);
  case Format::Zarr: return io::writeZarr(container, key, volume);
  case Format::Nifti: return io::writeNifti(container, volume);
  case Format::Npy: return io::writeNpyVolume(container, volume);
  case Format::Unknown: break;
  }
  throw Error(str(path, ": cannot write this format (expected ", kFormats, ")"));
}

std::string geometryMismatch(const VolumeInfo &a, const VolumeInfo &b) {
  const double scale = std::max(
      {a.spacing[0], a.spacing[1], a.spacing[2], b.spacing[0], b.spacing[1], b.spacing[2]});
  for (int r = 0; r < 3; ++r)
    if (std::abs(a.affine[r * 4 + 3] - b.affine[r * 4 + 3]) > 1e-3 * scale)
      return str("origin (x, y, z) = (", b.affine[3], ", ", b.affine[7], ", ", b.affine[11],
                 ") vs (", a.affine[3], ", ", a.affine[7], ", ", a.affine[11], ")");
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      if (std::abs(a.affine[r * 4 + c] - b.affine[r * 4 + c]) > 1e-4 * scale)
        return str("direction (the affine's rotation) differs: row ", r, " (", b.affine[r * 4],
                   ", ", b.affine[r * 4 + 1], ", ", b.affine[r * 4 + 2], ") vs (", a.affine[r * 4],
                   ", ", a.affine[r * 4 + 1], ", ", a.affine[r * 4 + 2], ")");
  return "";
}

} // namespace medrun
