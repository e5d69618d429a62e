//===- Random.h - counter-based random numbers (Philox 4x32-10) ----------------===//
//
// Every random number is a pure function of (key, counter), so CPU and CUDA, any thread
// count and a resumed run all draw the same numbers. Keys come from the seed; counters
// from what the number is for (a parameter's name and element index, later the step,
// rank, sample and op).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_RANDOM_H
#define MEDRUN_RANDOM_H

#include <array>
#include <cstdint>
#include <string_view>

namespace medrun {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// Philox 4x32 with 10 rounds (Salmon et al., SC'11).
inline PhiloxCounter philox4x32(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(M0) * c[0], p1 = static_cast<uint64_t>(M1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += W0;
    k[1] += W1;
  }
  return c;
}

/// A uniform float in [0, 1) from 24 random bits.
inline float uniform01(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

/// 64-bit FNV-1a, to turn names into counter words.
inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s)
    h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

inline PhiloxKey philoxKey(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

} // namespace medrun

#endif // MEDRUN_RANDOM_H
