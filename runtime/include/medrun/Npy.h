//===- Npy.h - NumPy .npy tensor files ----------------------------------------------===//
//
// Reads and writes single tensors in NumPy's .npy format (format versions 1.0, 2.0 and
// 3.0; little-endian, C order). Supported descrs: <f4 <f8 <f2 <i1/|i1 <i2 <i4 <i8 |u1 |b1.
// NumPy has no bfloat16, so a bf16 tensor cannot be written (convert it first).
//
// Every failure is a medrun::Error whose message starts with the file name and says what
// was expected and what was found; a reader never returns a partially loaded tensor.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_NPY_H
#define MEDRUN_NPY_H

#include "medrun/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace medrun {

/// Reads a .npy file. Throws Error on a missing/unreadable file, bad magic, unsupported
/// version, malformed or truncated header, unsupported descr, fortran_order True, and
/// data shorter ("truncated") or longer ("trailing data") than the shape requires.
Tensor readNpy(const std::string &path);

/// Writes `t` as a .npy file (version 1.0, or 2.0 if the header needs it). Atomic: the
/// data goes to a temporary file in the same directory, which is fsync'ed and renamed over
/// `path`. Throws Error for a bf16 or undefined tensor or on any I/O failure.
void writeNpy(const std::string &path, const Tensor &t);

/// Writes the arrays as an .npz (numpy.load's dict: key -> array): a zip of KEY.npy members,
/// stored uncompressed, each at most 4 GiB. Atomic as writeNpy.
void writeNpz(const std::string &path, const std::vector<std::pair<std::string, Tensor>> &arrays);

namespace detail {

class InputFile;

/// A .npy file's header: the descr as written ('<f4', '>u2', ...), the shape and where the
/// C-order data begins.
struct NpyHeader {
  std::string descr;
  Shape shape;
  uint64_t dataOffset = 0;
};

/// Reads and checks the header (magic, version, the dict, fortran_order False, the shape);
/// the descr is left to the caller. Errors name the file.
NpyHeader readNpyHeader(const InputFile &f);

/// Shared by the tensor file readers: a read-only regular file with its size at open time.
/// Errors name the file.
class InputFile {
public:
  explicit InputFile(const std::string &path);
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  const std::string &path() const { return path_; }
  uint64_t size() const { return size_; }
  /// Reads exactly `n` bytes at `offset`; `what` names the part for the "truncated" message.
  void read(uint64_t offset, void *dst, size_t n, const char *what) const;

private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// Writes `pieces` back to back to `path` atomically: a temporary file next to `path`
/// (created with the process umask's permissions), fsync, rename, fsync of the directory.
/// On failure the temporary file is removed and `path` is left untouched.
void writeFileAtomic(const std::string &path,
                     const std::vector<std::pair<const void *, size_t>> &pieces);

} // namespace detail
} // namespace medrun

#endif // MEDRUN_NPY_H
