//===- Checksum.cpp - CRC-32C ------------------------------------------------------===//
#include "medrun/Checksum.h"
#include "medrun/Error.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace medrun {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u; // reflected Castagnoli polynomial

/// table[k][b]: the CRC of byte b followed by k zero bytes (slicing by 8).
using Tables = std::array<std::array<uint32_t, 256>, 8>;
const Tables &tables() {
  static const Tables t = [] {
    Tables t{};
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? kPoly ^ (c >> 1) : c >> 1;
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (int k = 1; k < 8; ++k)
        t[k][b] = t[0][t[k - 1][b] & 0xff] ^ (t[k - 1][b] >> 8);
    return t;
  }();
  return t;
}

/// Works on the inverted register (no initial/final xor).
uint32_t crcSoftware(const unsigned char *p, size_t n, uint32_t c) {
  const Tables &t = tables();
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4); // little-endian host (checked in Npy.cpp)
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n; --n, ++p)
    c = t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crcHardware(const unsigned char *p, size_t n,
                                                        uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  c = static_cast<uint32_t>(c64);
  for (; n; --n, ++p)
    c = _mm_crc32_u8(c, *p);
  return c;
}

bool haveHardware() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

} // namespace

uint32_t crc32c(const void *data, size_t size, uint32_t crc) {
  const auto *p = static_cast<const unsigned char *>(data);
#if defined(__x86_64__)
  if (haveHardware())
    return ~crcHardware(p, size, ~crc);
#endif
  return ~crcSoftware(p, size, ~crc);
}

uint32_t detail::crc32cPortable(const void *data, size_t size, uint32_t crc) {
  return ~crcSoftware(static_cast<const unsigned char *>(data), size, ~crc);
}

uint32_t maskedCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

FileChecksum checksumFile(const std::string &path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0)
    throw Error(str(path, ": cannot open: ", std::strerror(errno)));
  FileChecksum result;
  std::vector<unsigned char> buf(size_t(4) << 20);
  for (;;) {
    ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR)
        continue;
      int err = errno;
      ::close(fd);
      throw Error(str(path, ": cannot read: ", std::strerror(err)));
    }
    if (got == 0)
      break;
    result.crc32c = crc32c(buf.data(), static_cast<size_t>(got), result.crc32c);
    result.size += static_cast<uint64_t>(got);
  }
  ::close(fd);
  return result;
}

std::string hex32(uint32_t v) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

} // namespace medrun
