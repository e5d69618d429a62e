//===- DataRandom.h - Philox streams for the data side (private) ----------------===//
//
// A stream is the Philox sequence of one (seed, c0, c1, c2): block k is
// philox4x32({c0, c1, c2, k}, key(seed)). The three words name what the numbers are for
// (a tag and, e.g., volume and object, or step, rank and sample), so no stream depends on
// how many numbers another one drew.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_DATARANDOM_H
#define MEDRUN_DATARANDOM_H

#include "medrun/Random.h"

#include <cmath>
#include <cstdint>

namespace medrun::data {

/// Counter word c0 of each stream: tag in the low 8 bits, an object/sample index above.
enum Tag : uint32_t {
  TagScene = 1,  // per-volume parameters (intensities, intensity field)
  TagTube = 2,   // one tube
  TagBlob = 3,   // one blob
  TagNoise = 4,  // per-voxel noise (counter {TagNoise, volume, block lo, block hi})
  TagSample = 5, // one sample of one step
};

inline uint32_t lo32(uint64_t v) { return static_cast<uint32_t>(v); }
inline uint32_t hi32(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

class Stream {
public:
  Stream(uint64_t seed, uint32_t c0, uint32_t c1, uint32_t c2)
      : key_(philoxKey(seed)), counter_{c0, c1, c2, 0} {}

  uint32_t bits() {
    if (used_ == 4) {
      block_ = philox4x32(counter_, key_);
      ++counter_[3];
      used_ = 0;
    }
    return block_[used_++];
  }
  uint64_t bits64() {
    uint64_t hi = bits();
    return hi << 32 | bits();
  }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(bits64() >> 11) * 0x1p-53; }
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  /// Uniform integer in [0, n), n >= 1 (multiply-shift; the bias is below 2^-64 * n).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(bits64()) * n) >> 64);
  }
  /// Standard normal (Box-Muller, one value per call).
  double normal() {
    double u1 = 1.0 - uniform(), u2 = uniform(); // u1 in (0, 1]
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

private:
  PhiloxKey key_;
  PhiloxCounter counter_;
  PhiloxCounter block_{};
  int used_ = 4;
};

} // namespace medrun::data

#endif // MEDRUN_DATARANDOM_H
