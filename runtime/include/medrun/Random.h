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
#include <cmath>
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

/// The key of a training step's random numbers (train_step's `rng` input): one Philox block of
/// the run's seed with the counter (step, rank, "rand"), so that every step and every rank
/// of a data-parallel job draws its own numbers, and a resumed run the same ones again.
inline int64_t stepKey(uint64_t seed, uint32_t rank, uint64_t step) {
  PhiloxCounter c = philox4x32(
      {static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), rank, 0x646e6172u},
      philoxKey(seed));
  return static_cast<int64_t>((static_cast<uint64_t>(c[1]) << 32) | c[0]);
}

/// med.random (docs/dialect.md): the four words of element i of sample n of `stream` under
/// the step's key. prelude.cuh's medRandomWords is the CUDA side of this definition.
inline PhiloxCounter randomWords(int64_t key, uint32_t stream, uint32_t n, uint32_t i) {
  return philox4x32({i, n, stream, 0}, philoxKey(static_cast<uint64_t>(key)));
}
/// med.dropout (docs/dialect.md): the words of element i of sample n of dropout `stream` under
/// the step's key. The fourth counter word is 1, so that the network's draws never meet
/// med.random's (word 0) under the same key. prelude.cuh's medDropoutKeeps is the CUDA side.
inline PhiloxCounter dropoutWords(int64_t key, uint32_t stream, uint32_t n, uint32_t i) {
  return philox4x32({i, n, stream, 1}, philoxKey(static_cast<uint64_t>(key)));
}
/// Whether med.dropout keeps the element: its uniform number (w0 >> 8) * 2^-24 is at least p.
inline bool dropoutKeeps(const PhiloxCounter &w, double p) {
  return static_cast<double>(uniform01(w[0])) >= p;
}
/// med.dropout's scale of a kept element: 1/(1 - p), rounded to f32 once.
inline float dropoutScale(double p) { return static_cast<float>(1.0 / (1.0 - p)); }
/// med.random's uniform: [0, 1) on a grid of 2^-24.
inline float randomUniform(const PhiloxCounter &w) { return uniform01(w[0]); }
/// med.random's normal: Box-Muller of u1 in (0, 1] and u2 in [0, 1).
inline float randomNormal(const PhiloxCounter &w) {
  const float u1 = static_cast<float>((w[0] >> 8) + 1) * 0x1p-24f;
  const float u2 = static_cast<float>(w[1] >> 8) * 0x1p-24f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530717958648f * u2);
}

} // namespace medrun

#endif // MEDRUN_RANDOM_H
