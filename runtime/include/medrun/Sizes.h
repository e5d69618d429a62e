//===- Sizes.h - declared sizes of untrusted files, checked before use ----------------===//
//
// Every reader takes shapes, counts and byte sizes from the file it reads. Before any of
// them is multiplied, used as an offset or allocated, it goes through these checks, which
// throw medrun::Error naming `what` (the file and the dataset, array or key, e.g.
// "a.h5/volumes/raw"), what was declared and the rule it breaks:
//
//   int64_t n = checkedCount(shape, "a.h5/raw");                       // every dim >= 1, no overflow
//   checkedBytes(n, 4, fileBytes, "a.h5/raw", "the file's 1400 bytes"); // n * 4 <= the bound
//   auto buf = allocate<float>(n, "a.h5/raw", "4096x4096x4096 float32"); // bad_alloc -> Error
//
// The bound for uncompressed data is what the file can hold; for compressed data, which a
// few bytes can expand to anything, a stated limit (kMaxDecodedChunkBytes for one decoded
// chunk, kMaxArrayElements for an array read piece by piece).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SIZES_H
#define MEDRUN_SIZES_H

#include "medrun/Error.h"

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace medrun {

/// One decoded chunk of a compressed format (a Zarr or HDF5 chunk, a decompressed blob):
/// 1 GiB, below the codecs' int-sized buffers (Blosc's and LZ4's limit is 2 GiB - 1).
inline constexpr uint64_t kMaxDecodedChunkBytes = uint64_t(1) << 30;
/// Elements of one array read piece by piece (a volume larger than memory): 2^48, so that
/// every byte offset into it, times 8 bytes and a channel count, stays inside int64.
inline constexpr int64_t kMaxArrayElements = int64_t(1) << 48;

/// "24x4294967296x4294967296" (the shape as declared, for messages); "()" for a scalar.
std::string shapeString(const std::vector<int64_t> &shape);

/// a * b, or Error naming `what` when it leaves int64 ("<what>: <a> x <b> overflows").
/// Both must be >= 0.
int64_t checkedMul(int64_t a, int64_t b, const std::string &what);

/// The element count of an array of `shape` declared by `what`: every dimension at least
/// `minDim` (1 for volumes; 0 where empty arrays are legal, e.g. .npy and safetensors) and
/// the product within `maxElements`. Error otherwise, naming what, the shape and the rule;
/// `label` names the list in the message ("shape", "chunks").
int64_t checkedCount(const std::vector<int64_t> &shape, const std::string &what,
                     int64_t minDim = 1, int64_t maxElements = INT64_MAX,
                     const char *label = "shape");

/// count * elemSize bytes, which must not exceed `limit`; `limitWhat` says what the limit
/// is ("the file's 1400 bytes", "the 1 GiB limit on a decoded chunk"). Error naming what,
/// the bytes declared and the limit otherwise.
uint64_t checkedBytes(int64_t count, uint64_t elemSize, uint64_t limit, const std::string &what,
                      const std::string &limitWhat);

/// "1.5 GiB", "4096 bytes": a byte count for messages.
std::string byteString(uint64_t bytes);

/// The Error an allocation of `bytes` for `what` (`declared`: what the file declared, e.g.
/// "4096x4096x4096 float32") throws when it fails.
Error allocationError(const std::string &what, const std::string &declared, uint64_t bytes);

/// A vector of n value-initialized T; std::bad_alloc or std::length_error become
/// allocationError. Use where a file's declared size decides an allocation.
template <typename T>
std::vector<T> allocate(int64_t n, const std::string &what, const std::string &declared) {
  const uint64_t bytes = static_cast<uint64_t>(n < 0 ? 0 : n) * sizeof(T);
  if (n < 0 || static_cast<uint64_t>(n) > SIZE_MAX / sizeof(T))
    throw allocationError(what, declared, bytes);
  try {
    return std::vector<T>(static_cast<size_t>(n));
  } catch (const std::bad_alloc &) {
    throw allocationError(what, declared, bytes);
  } catch (const std::length_error &) {
    throw allocationError(what, declared, bytes);
  }
}

/// v.resize(n) under the same rule.
template <typename Vector>
void resizeChecked(Vector &v, int64_t n, const std::string &what, const std::string &declared) {
  const uint64_t bytes = static_cast<uint64_t>(n < 0 ? 0 : n) * sizeof(typename Vector::value_type);
  if (n < 0)
    throw allocationError(what, declared, bytes);
  try {
    v.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc &) {
    throw allocationError(what, declared, bytes);
  } catch (const std::length_error &) {
    throw allocationError(what, declared, bytes);
  }
}

} // namespace medrun

#endif // MEDRUN_SIZES_H
