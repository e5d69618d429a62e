//===- Safetensors.h - safetensors checkpoint files ----------------------------------===//
//
// Layout (huggingface/safetensors): u64 little-endian header length N, N bytes of UTF-8
// JSON starting with '{' (right-padded with spaces), then the tensor data. The header maps
// tensor names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the
// data buffer) plus an optional "__metadata__" string->string map.
//
// dtypes: F32 F64 BF16 F16 I8 I16 I32 I64 U8 BOOL <-> DType::F32 ... DType::Bool.
//
// The reader validates like the reference implementation: header length <= 100,000,000
// and within the file, JSON object, well-typed entries, known dtype, end-begin ==
// numel*size, entries tiling the buffer from 0 without holes or overlaps, the last end
// equal to the buffer size, no duplicate keys, string-only metadata. Every failure is a
// medrun::Error starting with the file name and naming the tensor or key; nothing is
// returned from a file that fails any check.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SAFETENSORS_H
#define MEDRUN_SAFETENSORS_H

#include "medrun/Tensor.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace medrun {

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;         ///< "__metadata__"
  std::vector<std::pair<std::string, Tensor>> tensors; ///< in header (file) order

  /// The tensor named `name`, or nullptr.
  const Tensor *find(const std::string &name) const;
};

/// Reads and validates a whole safetensors file. Throws Error.
SafetensorsFile readSafetensors(const std::string &path);

/// Writes `tensors` in the given order (header entries and data in that order, data
/// contiguous from offset 0) with `metadata` as "__metadata__" ("format": "pt" is added
/// if absent). The JSON header is padded with spaces to a multiple of 8 bytes. Atomic:
/// temporary file in the same directory, fsync, rename. Throws Error for duplicate, empty
/// or reserved ("__metadata__") names, undefined tensors, non-UTF-8 names/metadata, and
/// I/O failures.
void writeSafetensors(const std::string &path,
                      const std::vector<std::pair<std::string, Tensor>> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// "F32", "BF16", "BOOL", ... (safetensors spelling of a DType).
const char *safetensorsDTypeName(DType t);

} // namespace medrun

#endif // MEDRUN_SAFETENSORS_H
