//===- Augment.h - the index and weight rules of the augmentation ops -----------===//
//
// One definition of each rule, for the CPU kernels; lib/Target/Cuda/prelude.cuh carries
// the device side of the same rules (docs/dialect.md gives the ops' meaning).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_AUGMENT_H
#define MEDRUN_AUGMENT_H

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace medrun::augment {

/// med.gaussian_blur: the radius r of the 2r + 1 taps for `sigma` along an axis of n (0 when
/// sigma <= 0 or is not finite): the odd integer nearest to 6 sigma + 1/2, rounded half to
/// even first and an even result moved towards 6 sigma + 1/2; at most 2n (a wider kernel
/// only folds back onto the same voxels).
inline int64_t blurRadius(float sigma, int64_t n) {
  if (!(sigma > 0) || !std::isfinite(sigma))
    return 0;
  const double t = 6.0 * static_cast<double>(sigma) + 0.5;
  if (t > 4.0 * static_cast<double>(n) + 1)
    return 2 * n;
  double k = std::nearbyint(t);
  if (std::fmod(k, 2.0) == 0)
    k += t - k >= 0 ? 1 : -1;
  return static_cast<int64_t>((k - 1) / 2);
}

/// torch's `reflect` padding (the edge not repeated), folded again beyond one period.
inline int64_t reflect(int64_t i, int64_t n) {
  if (n == 1)
    return 0;
  const int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0)
    i += period;
  return i < n ? i : period - i;
}

/// med.simulate_low_resolution: the voxels of an axis of n at scale s: round(n s) (half to
/// even, the product exact in double) within [1, n]; a scale that is not finite gives n.
inline int64_t lowResolutionSize(int64_t n, float scale) {
  if (!std::isfinite(scale))
    return n;
  const double m = std::nearbyint(static_cast<double>(n) * scale);
  return m < 1 ? 1 : m > static_cast<double>(n) ? n : static_cast<int64_t>(m);
}

/// torch's `nearest-exact` (interpolate from n to m voxels): the source of voxel j, in
/// torch's arithmetic (a float scale, the product in double, floored as a float).
inline int64_t nearestExactSource(int64_t j, int64_t n, int64_t m) {
  const float scale = static_cast<float>(n) / static_cast<float>(m);
  const int64_t src = static_cast<int64_t>(
      std::floor(static_cast<float>((static_cast<double>(j) + 0.5) * scale)));
  return std::min(src, n - 1);
}

/// torch's `linear` (align_corners=False) from m to n voxels: voxel o lies between source
/// voxels i0 and i1 with weight `frac` on i1 (float arithmetic, as torch's).
struct LinearSource {
  int64_t i0, i1;
  float frac;
};
inline LinearSource linearSource(int64_t o, int64_t m, int64_t n) {
  const float scale = static_cast<float>(m) / static_cast<float>(n);
  float src = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
  if (src < 0)
    src = 0;
  const int64_t i0 = static_cast<int64_t>(src);
  return {i0, i0 < m - 1 ? i0 + 1 : i0, src - static_cast<float>(i0)};
}

/// med.affine_matrix: the 3×4 matrix (row-major) of one sample, in double.
inline void affineMatrix(const double a[3], const double k[3], const double sh[6], double m[12]) {
  const double c0 = std::cos(a[0]), s0 = std::sin(a[0]), c1 = std::cos(a[1]), s1 = std::sin(a[1]),
               c2 = std::cos(a[2]), s2 = std::sin(a[2]);
  const double rd[9] = {1, 0, 0, 0, c0, -s0, 0, s0, c0};
  const double rh[9] = {c1, 0, s1, 0, 1, 0, -s1, 0, c1};
  const double rw[9] = {c2, -s2, 0, s2, c2, 0, 0, 0, 1};
  const double shear[9] = {1, sh[0], sh[1], sh[2], 1, sh[3], sh[4], sh[5], 1};
  auto mul = [](const double *x, const double *y, double *z) {
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        z[i * 3 + j] = x[i * 3] * y[j] + x[i * 3 + 1] * y[3 + j] + x[i * 3 + 2] * y[6 + j];
  };
  double t0[9], t1[9], t2[9];
  mul(rd, rh, t0);
  mul(t0, rw, t1);
  mul(t1, shear, t2);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j)
      m[i * 4 + j] = t2[i * 3 + j] * k[j];
    m[i * 4 + 3] = 0;
  }
}

/// med.orientation_matrix: the 3×4 matrix (row-major) of element ⌊48 u⌋ of the signed axis
/// permutations: the permutation 8·q + f (lexicographic q), axis a flipped where bit a of f.
inline void orientationMatrix(float u, float m[12]) {
  static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const float scaled = u * 48.0f;
  const int e = !(scaled > 0) ? 0 : scaled >= 47 ? 47 : static_cast<int>(scaled);
  for (int i = 0; i < 12; ++i)
    m[i] = 0;
  for (int i = 0; i < 3; ++i)
    m[i * 4 + perms[e / 8][i]] = (e % 8 >> i & 1) ? -1.0f : 1.0f;
}

/// med.shift_slices: the voxel of an axis of n that voxel i reads when rolled by ⌊s⌋ (a
/// non-finite s by 0); the remainder taken in double, exact for every float.
inline int64_t rolledSource(int64_t i, int64_t n, float s) {
  const double k = std::isfinite(s) ? std::fmod(std::floor(static_cast<double>(s)), static_cast<double>(n)) : 0.0;
  const int64_t j = (i - static_cast<int64_t>(k)) % n;
  return j < 0 ? j + n : j;
}

} // namespace medrun::augment

#endif // MEDRUN_AUGMENT_H
