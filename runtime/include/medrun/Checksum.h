//===- Checksum.h - CRC-32C for checkpoints and event files --------------------------===//
//
// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final xor
// 0xFFFFFFFF; crc32c("123456789") == 0xE3069283). TensorBoard event files frame every
// record with its masked form, and checkpoints list it for every file. Computed with the
// SSE4.2 crc32 instruction where the CPU has it, else with tables (slicing by 8).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_CHECKSUM_H
#define MEDRUN_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace medrun {

/// CRC-32C of `size` bytes; pass a previous result as `crc` to continue it.
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);

/// TensorFlow's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32).
uint32_t maskedCrc32c(uint32_t crc);

/// CRC-32C and size of a whole file, read in chunks. Throws Error naming the file.
struct FileChecksum {
  uint64_t size = 0;
  uint32_t crc32c = 0;
};
FileChecksum checksumFile(const std::string &path);

/// "0a1b2c3d": 8 lowercase hex digits, the spelling used in state.json.
std::string hex32(uint32_t v);

namespace detail {
/// The table-driven CRC-32C that crc32c falls back to (exposed to test it on every CPU).
uint32_t crc32cPortable(const void *data, size_t size, uint32_t crc = 0);
} // namespace detail

} // namespace medrun

#endif // MEDRUN_CHECKSUM_H
