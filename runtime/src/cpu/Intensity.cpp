//===- Intensity.cpp - augmentation transforms of a batch ----------------------------===//
//
// med.gaussian_blur, med.simulate_low_resolution and med.mirror: each (sample, channel)
// volume on its own, with the index and weight rules of medrun/Augment.h, the parameters
// read per sample (f32) from their operand.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Augment.h"
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <cstring>
#include <vector>

namespace medrun::cpu {
using namespace detail;
using namespace augment;

namespace {

struct Volume {
  int64_t n, c, d, h, w;
  int64_t plane() const { return d * h * w; }
};

Volume volumeOf(const char *kernel, const Tensor &x, const Tensor &param, int64_t perSample,
                const Tensor &y) {
  if (x.shape().size() != 5)
    throw Error(str("med kernel ", kernel, ": expected an N×C×D×H×W input, got ",
                    shapeStr(x.shape())));
  const Volume v{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], x.shape()[4]};
  if (!isFloat(param.dtype()))
    throw Error(str("med kernel ", kernel, ": the parameters have element type ",
                    dtypeName(param.dtype()), ", expected a float type"));
  if (param.numel() != v.n * perSample || y.shape() != x.shape())
    throw Error(str("med kernel ", kernel, ": parameters ", shapeStr(param.shape()),
                    " and result ", shapeStr(y.shape()), " do not fit the input ",
                    shapeStr(x.shape())));
  return v;
}

/// The parameters in f32, however they are stored.
Tensor f32(const Tensor &t) { return t.dtype() == DType::F32 ? t : t.to(DType::F32); }

/// One pass of the blur along the axis of `stride` and `size`: `line` of each voxel.
void blurAxis(const float *in, float *out, const Volume &v, int64_t nc, int axis,
              const std::vector<float> &weights, int64_t radius) {
  const int64_t size = axis == 0 ? v.d : axis == 1 ? v.h : v.w;
  const int64_t stride = axis == 0 ? v.h * v.w : axis == 1 ? v.w : 1;
  const float *x = in + nc * v.plane();
  float *y = out + nc * v.plane();
  for (int64_t i = 0; i < v.plane(); ++i) {
    const int64_t at = i / stride % size, base = i - at * stride;
    float acc = 0;
    for (int64_t j = -radius; j <= radius; ++j)
      acc += weights[static_cast<size_t>(j + radius)] * x[base + reflect(at + j, size) * stride];
    y[i] = acc;
  }
}

} // namespace

void gaussianBlur(const Tensor &x, const Tensor &sigma, Tensor &y) {
  const Volume v = volumeOf("gaussian_blur", x, sigma, x.shape().at(1) * 3, y);
  const Tensor params = f32(sigma);
  const float *s = ptr<float>(params);
  Tensor work = x.to(DType::F32), other(DType::F32, x.shape());
  float *a = work.data<float>(), *b = other.data<float>();
  parallelFor(v.n * v.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      float *from = a, *to = b;
      for (int axis = 0; axis < 3; ++axis) {
        const float sg = s[nc * 3 + axis];
        const int64_t r = blurRadius(sg, axis == 0 ? v.d : axis == 1 ? v.h : v.w);
        if (r == 0)
          continue;
        std::vector<float> w(static_cast<size_t>(2 * r + 1));
        float sum = 0;
        for (int64_t j = -r; j <= r; ++j) {
          const float q = static_cast<float>(j) / sg;
          sum += w[static_cast<size_t>(j + r)] = std::exp(-0.5f * q * q);
        }
        for (float &wj : w)
          wj /= sum;
        blurAxis(from, to, v, nc, axis, w, r);
        std::swap(from, to);
      }
      if (from != a) // the result of an odd number of passes: back into `work`
        std::memcpy(a + nc * v.plane(), from + nc * v.plane(), sizeof(float) * v.plane());
    }
  });
  y = y.dtype() == DType::F32 ? std::move(work) : work.to(y.dtype());
}

void simulateLowResolution(const Tensor &x, const Tensor &scale, Tensor &y) {
  const Volume v = volumeOf("simulate_low_resolution", x, scale, x.shape().at(1) * 3, y);
  const Tensor params = f32(scale);
  const float *s = ptr<float>(params);
  const int64_t sizes[3] = {v.d, v.h, v.w};
  dispatchFloat(x.dtype(), "simulate_low_resolution", [&](auto tag) {
    using T = decltype(tag);
    const T *in = ptr<T>(x);
    T *out = ptr<T>(y);
    parallelFor(v.n * v.c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        // Per axis and output voxel: the two low-resolution voxels it lies between, as the
        // input voxels they read, and the weight of the second.
        std::vector<int64_t> lo[3], hi[3];
        std::vector<float> frac[3];
        for (int a = 0; a < 3; ++a) {
          const int64_t n = sizes[a], m = lowResolutionSize(n, s[nc * 3 + a]);
          for (int64_t o = 0; o < n; ++o) {
            const LinearSource ls = linearSource(o, m, n);
            lo[a].push_back(nearestExactSource(ls.i0, n, m));
            hi[a].push_back(nearestExactSource(ls.i1, n, m));
            frac[a].push_back(ls.frac);
          }
        }
        const T *xv = in + nc * v.plane();
        T *yv = out + nc * v.plane();
        auto at = [&](int64_t d, int64_t h, int64_t w) {
          return static_cast<float>(load(xv[(d * v.h + h) * v.w + w]));
        };
        for (int64_t d = 0; d < v.d; ++d)
          for (int64_t h = 0; h < v.h; ++h)
            for (int64_t w = 0; w < v.w; ++w) {
              const int64_t d0 = lo[0][d], d1 = hi[0][d], h0 = lo[1][h], h1 = hi[1][h],
                            w0 = lo[2][w], w1 = hi[2][w];
              const float fd = frac[0][d], fh = frac[1][h], fw = frac[2][w];
              auto row = [&](int64_t dd, int64_t hh) {
                return (1 - fw) * at(dd, hh, w0) + fw * at(dd, hh, w1);
              };
              auto slab = [&](int64_t dd) { return (1 - fh) * row(dd, h0) + fh * row(dd, h1); };
              yv[(d * v.h + h) * v.w + w] = store<T>(static_cast<Acc<T>>((1 - fd) * slab(d0) + fd * slab(d1)));
            }
      }
    });
  });
}

void mirror(const Tensor &x, const Tensor &flip, Tensor &y) {
  const Volume v = volumeOf("mirror", x, flip, 3, y);
  if (x.dtype() != y.dtype())
    throw Error(str("med kernel mirror: the result has element type ", dtypeName(y.dtype()),
                    ", the input ", dtypeName(x.dtype())));
  const Tensor params = f32(flip);
  const float *f = ptr<float>(params);
  const size_t e = dtypeSize(x.dtype());
  const auto *in = static_cast<const std::byte *>(x.raw());
  auto *out = static_cast<std::byte *>(y.raw());
  parallelFor(v.n * v.c * v.d, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ncd = begin; ncd < end; ++ncd) {
      const int64_t n = ncd / (v.c * v.d), d = ncd % v.d, nc = ncd / v.d;
      const bool fd = f[n * 3] != 0, fh = f[n * 3 + 1] != 0, fw = f[n * 3 + 2] != 0;
      const int64_t sd = fd ? v.d - 1 - d : d;
      for (int64_t h = 0; h < v.h; ++h) {
        const int64_t sh = fh ? v.h - 1 - h : h;
        for (int64_t w = 0; w < v.w; ++w) {
          const int64_t sw = fw ? v.w - 1 - w : w;
          std::memcpy(out + (((nc * v.d + d) * v.h + h) * v.w + w) * e,
                      in + (((nc * v.d + sd) * v.h + sh) * v.w + sw) * e, e);
        }
      }
    }
  });
}

void affineMatrix(const Tensor &angles, const Tensor &scales, const Tensor *shear, Tensor &y) {
  const int64_t n = angles.shape().at(0);
  if (angles.numel() != n * 3 || scales.numel() != n * 3 || (shear && shear->numel() != n * 6) ||
      y.numel() != n * 12)
    throw Error(str("med kernel affine_matrix: angles ", shapeStr(angles.shape()), ", scales ",
                    shapeStr(scales.shape()), " and result ", shapeStr(y.shape()),
                    " do not fit N×3, N×3 and N×3×4"));
  const Tensor a = f32(angles), k = f32(scales), s = shear ? f32(*shear) : Tensor();
  Tensor out(DType::F32, y.shape());
  for (int64_t i = 0; i < n; ++i) {
    double av[3], kv[3], sv[6] = {0, 0, 0, 0, 0, 0}, mv[12];
    for (int j = 0; j < 3; ++j) {
      av[j] = a.data<float>()[i * 3 + j];
      kv[j] = k.data<float>()[i * 3 + j];
    }
    for (int j = 0; shear && j < 6; ++j)
      sv[j] = s.data<float>()[i * 6 + j];
    augment::affineMatrix(av, kv, sv, mv);
    for (int j = 0; j < 12; ++j)
      out.data<float>()[i * 12 + j] = static_cast<float>(mv[j]);
  }
  y = out.to(y.dtype());
}

void orientationMatrix(const Tensor &u, Tensor &y) {
  if (u.shape().size() != 1 || y.numel() != u.numel() * 12)
    throw Error(str("med kernel orientation_matrix: u ", shapeStr(u.shape()), " and result ",
                    shapeStr(y.shape()), " do not fit N and N×3×4"));
  const Tensor v = f32(u);
  Tensor out(DType::F32, y.shape());
  for (int64_t n = 0; n < u.numel(); ++n)
    augment::orientationMatrix(v.data<float>()[n], out.data<float>() + n * 12);
  y = out.to(y.dtype());
}

void shiftSlices(const Tensor &x, const Tensor &shift, Tensor &y) {
  if (x.shape().size() != 5 || y.shape() != x.shape() || x.dtype() != y.dtype())
    throw Error(str("med kernel shift_slices: expected an N×C×D×H×W input and a result like "
                    "it, got ",
                    shapeStr(x.shape()), " and ", shapeStr(y.shape())));
  const Volume v{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], x.shape()[4]};
  if (!isFloat(shift.dtype()) || shift.numel() != v.n * v.d * 2)
    throw Error(str("med kernel shift_slices: shift ", shapeStr(shift.shape()), " ",
                    dtypeName(shift.dtype()), " does not fit the input ", shapeStr(x.shape())));
  const Tensor params = f32(shift);
  const float *s = ptr<float>(params);
  const size_t e = dtypeSize(x.dtype());
  const auto *in = static_cast<const std::byte *>(x.raw());
  auto *out = static_cast<std::byte *>(y.raw());
  parallelFor(v.n * v.c * v.d, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ncd = begin; ncd < end; ++ncd) {
      const int64_t n = ncd / (v.c * v.d), d = ncd % v.d;
      const float sh = s[(n * v.d + d) * 2], sw = s[(n * v.d + d) * 2 + 1];
      for (int64_t h = 0; h < v.h; ++h) {
        const int64_t fh = rolledSource(h, v.h, sh);
        for (int64_t w = 0; w < v.w; ++w)
          std::memcpy(out + ((ncd * v.h + h) * v.w + w) * e,
                      in + ((ncd * v.h + fh) * v.w + rolledSource(w, v.w, sw)) * e, e);
      }
    }
  });
}

} // namespace medrun::cpu
