//===- SyntheticData.cpp - the embedded synthetic dataset and BANIS affinities --===//
//
// A volume is built in four passes:
//  1. instances: neurite-like tubes (a persistent random walk whose direction drifts
//     smoothly, painted as capsules with a radius that varies along the path) and
//     ellipsoidal blobs at random orientations, each painted over what is there;
//  2. connected components (6-connectivity) split pieces of one object that another cut
//     apart, so every instance id is one connected piece (BANIS relabels its crops with
//     cc3d for the same reason); the class (tube or blob) stays with each piece;
//  3. the image: per-instance intensity on a darker background, dark membranes where two
//     instances touch, a smooth multiplicative intensity field, a Gaussian blur (sigma 1)
//     and Gaussian noise, clamped to [0, 1] (optionally standardized);
//  4. BANIS affinities and their mask, and the class map.
// Every random number comes from a Philox stream named by (volume, object), so a volume
// does not depend on the thread count or on any other volume.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Data.h"
#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/RecipeRules.h"

#include "DataRandom.h"

#include <algorithm>
#include <cmath>

namespace medrun {

using data::Stream;

const std::array<Index3, 6> &banisOffsets() {
  static const std::array<Index3, 6> offsets = {
      {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {10, 0, 0}, {0, 10, 0}, {0, 0, 10}}};
  return offsets;
}

void computeAffinities(const Tensor &labels, Tensor &affinity, Tensor &mask) {
  computeAffinities(labels, std::vector<Index3>(banisOffsets().begin(), banisOffsets().end()),
                    affinity, mask);
}

void computeAffinities(const Tensor &labels, const std::vector<Index3> &offsets, Tensor &affinity,
                       Tensor &mask) {
  if (labels.dtype() != DType::I32 || labels.rank() != 4 || labels.dim(0) != 1)
    throw Error(str("labels: expected an i32 tensor of shape 1xDxHxW, got ",
                    dtypeName(labels.dtype()), " ", shapeStr(labels.shape())));
  const int64_t K = static_cast<int64_t>(offsets.size());
  const int64_t D = labels.dim(1), H = labels.dim(2), W = labels.dim(3), plane = H * W;
  affinity = Tensor(DType::U8, {K, D, H, W});
  mask = Tensor(DType::U8, {K, D, H, W});
  const int32_t *seg = labels.data<int32_t>();
  uint8_t *aff = affinity.data<uint8_t>(), *msk = mask.data<uint8_t>();
  parallelFor(K * D, 1, [&](int64_t begin, int64_t end) {
    for (int64_t cz = begin; cz < end; ++cz) {
      const int64_t c = cz / D, z = cz % D;
      const Index3 &o = offsets[c];
      const int64_t shift = (o[0] * H + o[1]) * W + o[2];
      uint8_t *a = aff + cz * plane, *m = msk + cz * plane;
      if (z + o[0] < 0 || z + o[0] >= D)
        continue; // the whole plane's partners are outside: 0 and masked
      // The voxels whose partner v + o lies inside along H and W.
      const int64_t y0 = std::max<int64_t>(0, -o[1]), y1 = std::min(H, H - o[1]);
      const int64_t x0 = std::max<int64_t>(0, -o[2]), x1 = std::min(W, W - o[2]);
      for (int64_t y = y0; y < y1; ++y)
        for (int64_t x = x0; x < x1; ++x) {
          const int64_t v = (z * H + y) * W + x;
          a[y * W + x] = seg[v] != 0 && seg[v] == seg[v + shift];
          m[y * W + x] = 1;
        }
    }
  });
}

void validate(const SyntheticSpec &spec) {
  for (int64_t d : spec.shape)
    if (d < 1 || d > recipe::kMaxVolumeSize)
      throw Error(str("data.volume_shape: expected three sizes in 1..", recipe::kMaxVolumeSize,
                      ", got ", spec.shape[0], "x", spec.shape[1], "x", spec.shape[2]));
  if (spec.volumes < 1 || spec.volumes > recipe::kMaxVolumes)
    throw Error(str("data.volumes: expected an integer in 1..", recipe::kMaxVolumes, ", got ",
                    spec.volumes));
}

namespace {

using V3 = std::array<double, 3>;

V3 add(V3 a, V3 b) { return {a[0] + b[0], a[1] + b[1], a[2] + b[2]}; }
V3 sub(V3 a, V3 b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
V3 scale(V3 a, double s) { return {a[0] * s, a[1] * s, a[2] * s}; }
double dot(V3 a, V3 b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
V3 normalize(V3 a) {
  double n = std::sqrt(dot(a, a));
  return n > 0 ? scale(a, 1.0 / n) : V3{1, 0, 0};
}
V3 normal3(Stream &s) { return {s.normal(), s.normal(), s.normal()}; }

/// The instance canvas: raw object ids (1-based, painted over each other).
struct Canvas {
  int64_t D, H, W;
  std::vector<int32_t> ids;
  Canvas(const Index3 &shape)
      : D(shape[0]), H(shape[1]), W(shape[2]), ids(static_cast<size_t>(D * H * W), 0) {}

  /// Voxel-centre box [lo, hi] of a point set's bounding box grown by r, clipped.
  bool box(V3 lo, V3 hi, double r, Index3 &a, Index3 &b) const {
    const int64_t dims[3] = {D, H, W};
    for (int i = 0; i < 3; ++i) {
      a[i] = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(lo[i] - r)));
      b[i] = std::min<int64_t>(dims[i] - 1, static_cast<int64_t>(std::floor(hi[i] + r)));
      if (a[i] > b[i])
        return false;
    }
    return true;
  }

  /// Capsule from p (radius rp) to q (radius rq), the radius linear along the axis.
  void capsule(V3 p, V3 q, double rp, double rq, int32_t id) {
    Index3 a, b;
    V3 lo = {std::min(p[0], q[0]), std::min(p[1], q[1]), std::min(p[2], q[2])};
    V3 hi = {std::max(p[0], q[0]), std::max(p[1], q[1]), std::max(p[2], q[2])};
    if (!box(lo, hi, std::max(rp, rq), a, b))
      return;
    const V3 pq = sub(q, p);
    const double len2 = std::max(dot(pq, pq), 1e-12);
    for (int64_t z = a[0]; z <= b[0]; ++z)
      for (int64_t y = a[1]; y <= b[1]; ++y)
        for (int64_t x = a[2]; x <= b[2]; ++x) {
          V3 c = sub(V3{double(z), double(y), double(x)}, p);
          double t = std::clamp(dot(c, pq) / len2, 0.0, 1.0);
          V3 d = sub(c, scale(pq, t));
          double r = rp + t * (rq - rp);
          if (dot(d, d) <= r * r)
            ids[(z * H + y) * W + x] = id;
        }
  }

  /// Ellipsoid with semi-axes `radii` along the columns of the rotation `rot`.
  void ellipsoid(V3 centre, V3 radii, const std::array<V3, 3> &rot, int32_t id) {
    Index3 a, b;
    double r = std::max({radii[0], radii[1], radii[2]});
    if (!box(centre, centre, r, a, b))
      return;
    for (int64_t z = a[0]; z <= b[0]; ++z)
      for (int64_t y = a[1]; y <= b[1]; ++y)
        for (int64_t x = a[2]; x <= b[2]; ++x) {
          V3 c = sub(V3{double(z), double(y), double(x)}, centre);
          double e = 0;
          for (int k = 0; k < 3; ++k) {
            double u = dot(c, rot[k]) / radii[k];
            e += u * u;
          }
          if (e <= 1.0)
            ids[(z * H + y) * W + x] = id;
        }
  }
};

/// A neurite-like tube: enters through a random face and walks with a direction that
/// drifts smoothly (the drift itself is a damped random walk), until it leaves the volume.
void paintTube(Canvas &cv, Stream &s, int32_t id) {
  const V3 dims = {double(cv.D), double(cv.H), double(cv.W)};
  const double r0 = s.uniform(1.8, 4.5);
  const double wavelength = s.uniform(15, 45), phase = s.uniform(0, 2 * M_PI);
  const double swell = s.uniform(0.1, 0.35);
  // Start just outside a random face, heading inwards.
  const int axis = static_cast<int>(s.below(3));
  const bool fromLow = s.below(2) == 0;
  V3 pos;
  for (int i = 0; i < 3; ++i)
    pos[i] = s.uniform(0, dims[i] - 1);
  pos[axis] = fromLow ? -r0 : dims[axis] - 1 + r0;
  V3 dir = normal3(s);
  dir[axis] = (fromLow ? 1 : -1) * (std::fabs(dir[axis]) + 0.7);
  dir = normalize(dir);
  V3 drift = {0, 0, 0};
  auto radius = [&](int64_t k) {
    return r0 * (1 + swell * std::sin(2 * M_PI * double(k) / wavelength + phase));
  };
  const int64_t maxSteps = 4 * (cv.D + cv.H + cv.W);
  const double margin = r0 * (1 + swell) + 1;
  for (int64_t k = 0; k < maxSteps; ++k) {
    drift = add(scale(drift, 0.92), scale(normal3(s), 0.08 * 0.25));
    V3 next = add(pos, normalize(add(dir, drift)));
    dir = normalize(sub(next, pos));
    cv.capsule(pos, next, radius(k), radius(k + 1), id);
    pos = next;
    bool outside = false;
    for (int i = 0; i < 3; ++i)
      outside |= pos[i] < -margin || pos[i] > dims[i] - 1 + margin;
    if (outside && k > 2)
      break;
  }
}

/// An ellipsoidal blob (cell-body-like) at a random place and orientation.
void paintBlob(Canvas &cv, Stream &s, int32_t id) {
  V3 centre = {s.uniform(0, cv.D - 1.0), s.uniform(0, cv.H - 1.0), s.uniform(0, cv.W - 1.0)};
  const double r = s.uniform(4, 12);
  V3 radii = {r * s.uniform(0.6, 1.4), r * s.uniform(0.6, 1.4), r * s.uniform(0.6, 1.4)};
  // A uniformly random rotation from a normalized Gaussian quaternion.
  double q[4] = {s.normal(), s.normal(), s.normal(), s.normal()};
  double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (n == 0)
    q[0] = n = 1;
  const double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  std::array<V3, 3> rot = {V3{1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)},
                           V3{2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)},
                           V3{2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)}};
  cv.ellipsoid(centre, radii, rot, id);
}

/// Separable Gaussian blur along one axis (stride between neighbours `step`, `len` voxels
/// along it), replicating the border.
void blurAxis(const float *in, float *out, int64_t n, int64_t len, int64_t step,
              const std::vector<float> &kernel) {
  const int64_t radius = static_cast<int64_t>(kernel.size() / 2);
  // Lines along the axis are indexed by the voxels whose coordinate on it is 0.
  parallelFor(n, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      const int64_t i = v / step % len;
      float acc = 0;
      for (int64_t k = -radius; k <= radius; ++k) {
        const int64_t j = std::clamp<int64_t>(i + k, 0, len - 1);
        acc += kernel[k + radius] * in[v + (j - i) * step];
      }
      out[v] = acc;
    }
  });
}

} // namespace

Volume makeSyntheticVolume(const SyntheticSpec &spec, int64_t index) {
  validate(spec);
  if (index < 0 || index >= spec.volumes)
    throw Error(str("synthetic volume ", index, ": expected an index in 0..", spec.volumes - 1));
  const uint32_t vol = static_cast<uint32_t>(index);
  const int64_t D = spec.shape[0], H = spec.shape[1], W = spec.shape[2], n = D * H * W;

  // 1. Instances. Tube count grows with the cross-section (a tube spans the volume), blob
  //    count with the volume, so the foreground fraction does not depend on the size.
  Canvas cv(spec.shape);
  const double meanSide = (D + H + W) / 3.0;
  const int64_t tubes = std::max<int64_t>(1, std::llround(n / meanSide / 80.0));
  const int64_t blobs = std::max<int64_t>(1, std::llround(n / 40000.0));
  std::vector<int64_t> classOfRaw = {0};
  for (int64_t t = 0; t < tubes; ++t) {
    Stream s(spec.seed, data::TagTube | static_cast<uint32_t>(t) << 8, vol, 0);
    paintTube(cv, s, static_cast<int32_t>(classOfRaw.size()));
    classOfRaw.push_back(1);
  }
  for (int64_t b = 0; b < blobs; ++b) {
    Stream s(spec.seed, data::TagBlob | static_cast<uint32_t>(b) << 8, vol, 0);
    paintBlob(cv, s, static_cast<int32_t>(classOfRaw.size()));
    classOfRaw.push_back(2);
  }

  // 2. One id per connected piece; the class map.
  Volume v;
  v.labels = Tensor(DType::I32, {1, D, H, W});
  int32_t *lab = v.labels.data<int32_t>();
  std::vector<int32_t> rawOf = connectedComponents(cv.ids.data(), {D, H, W}, lab);
  cv.ids = {};
  v.segmentation = Tensor(DType::U8, {1, D, H, W});
  uint8_t *seg = v.segmentation.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    seg[i] = static_cast<uint8_t>(classOfRaw[rawOf[lab[i]]]);

  // 3. The image.
  Stream scene(spec.seed, data::TagScene, vol, 0);
  const float background = static_cast<float>(scene.uniform(0.2, 0.35));
  const float membrane = static_cast<float>(scene.uniform(0.03, 0.1));
  const float noiseStd = static_cast<float>(scene.uniform(0.03, 0.08));
  std::vector<float> intensity(rawOf.size());
  intensity[0] = background;
  for (size_t k = 1; k < rawOf.size(); ++k) // blobs a little brighter than tubes
    intensity[k] = static_cast<float>(classOfRaw[rawOf[k]] == 1 ? scene.uniform(0.5, 0.8)
                                                                : scene.uniform(0.65, 0.95));
  // A smooth intensity field, separable: one slow wave per axis.
  std::array<std::vector<float>, 3> field;
  for (int a = 0; a < 3; ++a) {
    const double amp = scene.uniform(0, 0.12), len = spec.shape[a] * scene.uniform(0.7, 2.0);
    const double phase = scene.uniform(0, 2 * M_PI);
    field[a].resize(spec.shape[a]);
    for (int64_t i = 0; i < spec.shape[a]; ++i)
      field[a][i] = static_cast<float>(1 + amp * std::sin(2 * M_PI * i / len + phase));
  }
  v.image = Tensor(DType::F32, {1, D, H, W});
  float *img = v.image.data<float>();
  std::vector<float> tmp(static_cast<size_t>(n));
  parallelFor(D * H, 64, [&](int64_t begin, int64_t end) {
    for (int64_t zy = begin; zy < end; ++zy) {
      const int64_t z = zy / H, y = zy % H;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t i = zy * W + x;
        const int32_t l = lab[i];
        float value = intensity[l];
        // A membrane where this instance touches another one (6-neighbourhood).
        auto other = [&](bool inside, int64_t u) { return inside && lab[u] != 0 && lab[u] != l; };
        if (l != 0 && (other(z > 0, i - H * W) || other(z + 1 < D, i + H * W) ||
                       other(y > 0, i - W) || other(y + 1 < H, i + W) || other(x > 0, i - 1) ||
                       other(x + 1 < W, i + 1)))
          value = membrane;
        tmp[i] = value * field[0][z] * field[1][y] * field[2][x];
      }
    }
  });
  std::vector<float> kernel;
  for (int k = -3; k <= 3; ++k)
    kernel.push_back(std::exp(-0.5f * k * k));
  float sum = 0;
  for (float k : kernel)
    sum += k;
  for (float &k : kernel)
    k /= sum;
  blurAxis(tmp.data(), img, n, W, 1, kernel);
  blurAxis(img, tmp.data(), n, H, W, kernel);
  blurAxis(tmp.data(), img, n, D, H * W, kernel);
  // Noise: four normals per Philox block, block b for voxels 4b..4b+3.
  const PhiloxKey key = philoxKey(spec.seed);
  parallelFor((n + 3) / 4, 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      PhiloxCounter r = philox4x32({data::TagNoise, vol, data::lo32(b), data::hi32(b)}, key);
      for (int k = 0; k < 4; k += 2) {
        double u1 = 1.0 - uniform01(r[k]), u2 = uniform01(r[k + 1]);
        double m = std::sqrt(-2.0 * std::log(u1));
        double z[2] = {m * std::cos(2 * M_PI * u2), m * std::sin(2 * M_PI * u2)};
        for (int j = 0; j < 2; ++j) {
          int64_t i = 4 * b + k + j;
          if (i < n)
            img[i] = std::clamp(img[i] + noiseStd * static_cast<float>(z[j]), 0.0f, 1.0f);
        }
      }
    }
  });
  if (spec.scale == ImageScale::ZScore) {
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i)
      s1 += img[i], s2 += double(img[i]) * img[i];
    const double mean = s1 / n, std = std::sqrt(std::max(s2 / n - mean * mean, 0.0));
    const float inv = static_cast<float>(1.0 / std::max(std, 1e-8));
    for (int64_t i = 0; i < n; ++i)
      img[i] = (img[i] - static_cast<float>(mean)) * inv;
  }

  // 4. Targets.
  computeAffinities(v.labels, v.affinity, v.affinityMask);
  return v;
}

std::shared_ptr<const std::vector<Volume>> makeSyntheticDataset(const SyntheticSpec &spec) {
  validate(spec);
  auto volumes = std::make_shared<std::vector<Volume>>();
  volumes->reserve(spec.volumes);
  for (int64_t i = 0; i < spec.volumes; ++i)
    volumes->push_back(makeSyntheticVolume(spec, i));
  return volumes;
}

} // namespace medrun
