//===- Labels.cpp - label transforms: affinities, remove-label, regions, nearest resize ---===//
//
// Labels are float or integer tensors, compared in their own type (an i64 id is never
// rounded through a double). Results are 0/1 floats (affinities, regions) or the input's
// own type (remove_label, downsample_nearest). No arithmetic on values: the results are the
// same bits for any thread count.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace medrun::cpu {
namespace {
using namespace detail;

/// Calls f(T{}) for the storage type of the labels `t`; throws Error naming `kernel` else.
template <typename F> void dispatchLabel(DType t, const char *kernel, F &&f) {
  switch (t) {
  case DType::F32: return f(float());
  case DType::F64: return f(double());
  case DType::BF16: return f(bf16());
  case DType::I8: return f(int8_t());
  case DType::I16: return f(int16_t());
  case DType::I32: return f(int32_t());
  case DType::I64: return f(int64_t());
  case DType::U8: return f(uint8_t());
  default:
    throw Error(str("med kernel ", kernel, ": unsupported label type ", dtypeName(t),
                    " (expected a float type or a signed integer type)"));
  }
}

/// A label as a number to compare with an integer attribute: integers as they are, floats
/// (bf16 through float) as doubles.
template <typename T> auto labelValue(T v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<int64_t>(v);
  else if constexpr (std::is_same_v<T, double>)
    return v;
  else
    return static_cast<double>(static_cast<float>(v));
}

/// A 0/1 result of float type T.
template <typename T> T flag(bool on) { return store<T>(on ? Acc<T>(1) : Acc<T>(0)); }

constexpr int64_t kGrain = 16384; // elements per parallel chunk

/// The input index output index j reads along an axis of input size `inSize` and output
/// size `outSize`: torch's nearest_neighbor_exact_compute_source_index (the scale an f32
/// division, the product rounded to f32 once: the double product of two floats is exact).
int64_t nearestExactIndex(int64_t j, int64_t inSize, int64_t outSize) {
  const float scale = static_cast<float>(inSize) / static_cast<float>(outSize);
  const float at = (static_cast<float>(j) + 0.5f) * scale;
  return std::min(static_cast<int64_t>(std::floor(at)), inSize - 1);
}

} // namespace

void affinities(const Tensor &seg, const std::vector<int64_t> &offsets,
                const std::array<int64_t, 3> &cropLow, int64_t unlabelledBelow, Tensor &aff,
                Tensor &mask) {
  const Shape &in = seg.shape(), &out = aff.shape();
  if (in.size() != 5 || out.size() != 5 || mask.shape() != out || offsets.size() % 3 != 0 ||
      out[1] != static_cast<int64_t>(offsets.size() / 3) || aff.dtype() != mask.dtype())
    throw Error("med kernel affinities: inconsistent shapes or offsets");
  const int64_t n = out[0], k = out[1], od = out[2], oh = out[3], ow = out[4];
  const int64_t D = in[2], H = in[3], W = in[4];
  dispatchLabel(seg.dtype(), "affinities", [&](auto ltag) {
    using L = decltype(ltag);
    dispatchFloat(aff.dtype(), "affinities", [&](auto ftag) {
      using T = decltype(ftag);
      const L *s = ptr<L>(seg);
      T *a = ptr<T>(aff), *m = ptr<T>(mask);
      // One row (n, k, z, y) of the output at a time.
      parallelFor(n * k * od * oh, grainFor(ow, kGrain), [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          const int64_t y = row % oh, z = (row / oh) % od, c = (row / (oh * od)) % k,
                        b0 = row / (oh * od * k);
          const int64_t vz = z + cropLow[0], vy = y + cropLow[1];
          const int64_t uz = vz + offsets[3 * c], uy = vy + offsets[3 * c + 1];
          const int64_t dx = offsets[3 * c + 2];
          const bool rowInside = uz >= 0 && uz < D && uy >= 0 && uy < H;
          const L *sv = s + ((b0 * D + vz) * H + vy) * W + cropLow[2];
          const L *su = s + ((b0 * D + uz) * H + uy) * W + cropLow[2] + dx;
          T *ar = a + row * ow, *mr = m + row * ow;
          for (int64_t x = 0; x < ow; ++x) {
            const int64_t ux = x + cropLow[2] + dx;
            bool valid = rowInside && ux >= 0 && ux < W;
            bool same = false;
            if (valid) {
              const auto lv = labelValue(sv[x]), lu = labelValue(su[x]);
              valid = lv >= unlabelledBelow && lu >= unlabelledBelow;
              same = valid && lv == lu && lv != 0;
            }
            ar[x] = flag<T>(same);
            mr[x] = flag<T>(valid);
          }
        }
      });
    });
  });
}

void removeLabel(const Tensor &x, int64_t label, int64_t replaceWith, Tensor &y) {
  if (x.shape() != y.shape() || x.dtype() != y.dtype())
    throw Error("med kernel remove_label: the result differs from the input in shape or type");
  dispatchLabel(x.dtype(), "remove_label", [&](auto tag) {
    using L = decltype(tag);
    const L *p = ptr<L>(x);
    L *q = ptr<L>(y);
    const L to = [&] {
      if constexpr (std::is_same_v<L, bf16>)
        return bf16(static_cast<float>(replaceWith));
      else
        return static_cast<L>(replaceWith);
    }();
    parallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        q[i] = labelValue(p[i]) == label ? to : p[i];
    });
  });
}

void labelRegions(const Tensor &x, const std::vector<std::vector<int64_t>> &regions, Tensor &y) {
  const Shape &xs = x.shape(), &ys = y.shape();
  if (xs.size() < 2 || ys.size() != xs.size() || xs[1] != 1 ||
      ys[1] != static_cast<int64_t>(regions.size()) || ys[0] != xs[0])
    throw Error("med kernel label_regions: inconsistent shapes");
  const int64_t n = xs[0], r = ys[1], s = x.numel() / std::max<int64_t>(n, 1);
  dispatchLabel(x.dtype(), "label_regions", [&](auto ltag) {
    using L = decltype(ltag);
    dispatchFloat(y.dtype(), "label_regions", [&](auto ftag) {
      using T = decltype(ftag);
      const L *p = ptr<L>(x);
      T *q = ptr<T>(y);
      parallelFor(n * r, grainFor(s, kGrain), [&](int64_t b, int64_t e) {
        for (int64_t plane = b; plane < e; ++plane) {
          const std::vector<int64_t> &labels = regions[plane % r];
          const L *src = p + (plane / r) * s;
          T *dst = q + plane * s;
          for (int64_t i = 0; i < s; ++i) {
            const auto v = labelValue(src[i]);
            bool in = false;
            for (int64_t l : labels)
              in |= v == l;
            dst[i] = flag<T>(in);
          }
        }
      });
    });
  });
}

void downsampleNearest(const Tensor &x, Tensor &y) {
  const Shape &xs = x.shape(), &ys = y.shape();
  if (xs.size() != 5 || ys.size() != 5 || xs[0] != ys[0] || xs[1] != ys[1] ||
      x.dtype() != y.dtype())
    throw Error("med kernel downsample_nearest: inconsistent shapes or types");
  std::array<std::vector<int64_t>, 3> from; // the input index each output index reads, per axis
  for (int a = 0; a < 3; ++a)
    for (int64_t j = 0; j < ys[2 + a]; ++j)
      from[a].push_back(nearestExactIndex(j, xs[2 + a], ys[2 + a]));
  const size_t es = dtypeSize(x.dtype());
  const auto *src = static_cast<const std::byte *>(x.raw());
  auto *dst = static_cast<std::byte *>(y.raw());
  const int64_t planes = ys[0] * ys[1], od = ys[2], oh = ys[3], ow = ys[4];
  const int64_t D = xs[2], H = xs[3], W = xs[4];
  parallelFor(planes * od * oh, grainFor(ow, kGrain), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t yy = row % oh, z = (row / oh) % od, p = row / (oh * od);
      const std::byte *in = src + ((p * D + from[0][z]) * H + from[1][yy]) * W * es;
      std::byte *o = dst + row * ow * es;
      for (int64_t xx = 0; xx < ow; ++xx)
        std::memcpy(o + xx * es, in + from[2][xx] * es, es);
    }
  });
}

} // namespace medrun::cpu
