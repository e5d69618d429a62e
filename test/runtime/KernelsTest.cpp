//===- KernelsTest.cpp - the CPU reference kernels against naive loops -----------===//
//
// Every kernel is compared with a direct, obviously-correct implementation written here in
// double precision (7-deep conv loops, a scattering transposed conv, textbook norms and
// losses) on random inputs with odd sizes: F64 to 1e-12 relative error norm, F32 to 1e-5,
// BF16 to bf16 precision. Determinism: results with 1 and 3 threads must be the same bits.
// Losses are also checked against small hand-computed examples.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Kernels.h"
#include "medrun/Parallel.h"
#include "medrun/Tensor.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>

using namespace medrun;
using namespace medrun::cpu;

namespace {

using Values = std::vector<double>;

const DType kFloatTypes[] = {DType::F64, DType::F32, DType::BF16};
/// The type of the norms' gamma and beta (and of their gradients): the accumulation type.
DType affineType(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

/// Relative error norm tolerated per storage type.
double tolerance(DType t) {
  switch (t) {
  case DType::F64: return 1e-12;
  case DType::F32: return 1e-5;
  default: return 1e-2; // bf16: 8 bits of mantissa
  }
}

Tensor make(DType dt, const Shape &shape, const Values &v) {
  Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dt) {
    case DType::F32: t.data<float>()[i] = static_cast<float>(v[i]); break;
    case DType::F64: t.data<double>()[i] = v[i]; break;
    case DType::BF16: t.data<bf16>()[i] = bf16(static_cast<float>(v[i])); break;
    case DType::I64: t.data<int64_t>()[i] = static_cast<int64_t>(v[i]); break;
    case DType::I32: t.data<int32_t>()[i] = static_cast<int32_t>(v[i]); break;
    case DType::U8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]); break;
    default: ADD_FAILURE() << "make: unsupported dtype"; break;
    }
  }
  return t;
}

Values vals(const Tensor &t) {
  Values v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.at(i);
  return v;
}

Tensor random(DType dt, const Shape &shape, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Values v(numElements(shape));
  for (double &x : v)
    x = d(gen);
  return make(dt, shape, v);
}

double relErr(const Tensor &got, const Values &ref) {
  EXPECT_EQ(got.numel(), static_cast<int64_t>(ref.size()));
  double num = 0, den = 0;
  for (int64_t i = 0; i < got.numel() && i < static_cast<int64_t>(ref.size()); ++i) {
    double d = got.at(i) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (den == 0)
    return std::sqrt(num);
  return std::sqrt(num / den);
}

bool sameBits(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

/// Runs `fn` with 1 and with 3 threads; the two results must be the same bits.
void expectDeterministic(const std::function<Tensor()> &fn, const std::string &what) {
  int saved = numThreads();
  setNumThreads(1);
  Tensor one = fn();
  setNumThreads(3);
  Tensor three = fn();
  setNumThreads(saved);
  EXPECT_TRUE(sameBits(one, three)) << what << ": 1 and 3 threads differ";
}

int64_t prod(const Shape &s) { return numElements(s); }

// ---- convolutions ---------------------------------------------------------------------------

struct ConvCase {
  std::string name;
  int64_t n, cin, cout, groups;
  std::array<int64_t, 3> in, k, stride, pad, dil, outPad;
  bool bias;
};

std::array<int64_t, 3> convOut(const ConvCase &c, bool transposed) {
  std::array<int64_t, 3> o;
  for (int a = 0; a < 3; ++a)
    o[a] = transposed ? (c.in[a] - 1) * c.stride[a] - 2 * c.pad[a] + c.dil[a] * (c.k[a] - 1) +
                            c.outPad[a] + 1
                      : (c.in[a] + 2 * c.pad[a] - c.dil[a] * (c.k[a] - 1) - 1) / c.stride[a] + 1;
  return o;
}

ConvParams paramsOf(const ConvCase &c) {
  ConvParams p;
  p.stride = c.stride;
  p.padding = c.pad;
  p.dilation = c.dil;
  p.outputPadding = c.outPad;
  p.groups = c.groups;
  return p;
}

/// The 7-deep loop.
Values naiveConv(const ConvCase &c, const Values &x, const Values &w, const Values *b) {
  auto o = convOut(c, false);
  const int64_t cinG = c.cin / c.groups, coutG = c.cout / c.groups;
  Values y(c.n * c.cout * o[0] * o[1] * o[2]);
  int64_t yi = 0;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.cout; ++co)
      for (int64_t od = 0; od < o[0]; ++od)
        for (int64_t oh = 0; oh < o[1]; ++oh)
          for (int64_t ow = 0; ow < o[2]; ++ow, ++yi) {
            double s = b ? (*b)[co] : 0.0;
            int64_t g = co / coutG;
            for (int64_t cl = 0; cl < cinG; ++cl)
              for (int64_t kd = 0; kd < c.k[0]; ++kd)
                for (int64_t kh = 0; kh < c.k[1]; ++kh)
                  for (int64_t kw = 0; kw < c.k[2]; ++kw) {
                    int64_t id = od * c.stride[0] - c.pad[0] + kd * c.dil[0];
                    int64_t ih = oh * c.stride[1] - c.pad[1] + kh * c.dil[1];
                    int64_t iw = ow * c.stride[2] - c.pad[2] + kw * c.dil[2];
                    if (id < 0 || ih < 0 || iw < 0 || id >= c.in[0] || ih >= c.in[1] ||
                        iw >= c.in[2])
                      continue;
                    int64_t ci = g * cinG + cl;
                    s += x[(((n * c.cin + ci) * c.in[0] + id) * c.in[1] + ih) * c.in[2] + iw] *
                         w[(((co * cinG + cl) * c.k[0] + kd) * c.k[1] + kh) * c.k[2] + kw];
                  }
            y[yi] = s;
          }
  return y;
}

/// Transposed conv by scattering every input element.
Values naiveConvTranspose(const ConvCase &c, const Values &x, const Values &w, const Values *b) {
  auto o = convOut(c, true);
  const int64_t cinG = c.cin / c.groups, coutG = c.cout / c.groups;
  const int64_t ov = o[0] * o[1] * o[2];
  Values y(c.n * c.cout * ov, 0.0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.cout; ++co)
      for (int64_t v = 0; v < ov; ++v)
        y[(n * c.cout + co) * ov + v] = b ? (*b)[co] : 0.0;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t ci = 0; ci < c.cin; ++ci)
      for (int64_t id = 0; id < c.in[0]; ++id)
        for (int64_t ih = 0; ih < c.in[1]; ++ih)
          for (int64_t iw = 0; iw < c.in[2]; ++iw) {
            double xv = x[(((n * c.cin + ci) * c.in[0] + id) * c.in[1] + ih) * c.in[2] + iw];
            int64_t g = ci / cinG;
            for (int64_t cl = 0; cl < coutG; ++cl)
              for (int64_t kd = 0; kd < c.k[0]; ++kd)
                for (int64_t kh = 0; kh < c.k[1]; ++kh)
                  for (int64_t kw = 0; kw < c.k[2]; ++kw) {
                    int64_t od = id * c.stride[0] - c.pad[0] + kd * c.dil[0];
                    int64_t oh = ih * c.stride[1] - c.pad[1] + kh * c.dil[1];
                    int64_t ow = iw * c.stride[2] - c.pad[2] + kw * c.dil[2];
                    if (od < 0 || oh < 0 || ow < 0 || od >= o[0] || oh >= o[1] || ow >= o[2])
                      continue;
                    int64_t co = g * coutG + cl;
                    y[(n * c.cout + co) * ov + (od * o[1] + oh) * o[2] + ow] +=
                        xv * w[(((ci * coutG + cl) * c.k[0] + kd) * c.k[1] + kh) * c.k[2] + kw];
                  }
          }
  return y;
}

void checkConv(const ConvCase &c, bool transposed) {
  SCOPED_TRACE(c.name + (transposed ? " (transposed)" : ""));
  auto o = convOut(c, transposed);
  Shape xs{c.n, c.cin, c.in[0], c.in[1], c.in[2]};
  Shape ws = transposed ? Shape{c.cin, c.cout / c.groups, c.k[0], c.k[1], c.k[2]}
                        : Shape{c.cout, c.cin / c.groups, c.k[0], c.k[1], c.k[2]};
  Shape ys{c.n, c.cout, o[0], o[1], o[2]};
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    Tensor x = random(dt, xs, 1), w = random(dt, ws, 2), b = random(dt, {c.cout}, 3);
    Values xv = vals(x), wv = vals(w), bv = vals(b);
    Values ref = transposed ? naiveConvTranspose(c, xv, wv, c.bias ? &bv : nullptr)
                            : naiveConv(c, xv, wv, c.bias ? &bv : nullptr);
    auto run = [&] {
      Tensor y(dt, ys);
      if (transposed)
        conv3dTranspose(x, w, c.bias ? &b : nullptr, paramsOf(c), y);
      else
        conv3d(x, w, c.bias ? &b : nullptr, paramsOf(c), y);
      return y;
    };
    EXPECT_LT(relErr(run(), ref), tolerance(dt));
    if (dt == DType::F32)
      expectDeterministic(run, c.name);
  }
}

const std::array<int64_t, 3> k1{1, 1, 1}, k3{3, 3, 3}, s1{1, 1, 1}, s2{2, 2, 2}, p0{0, 0, 0},
    p1{1, 1, 1};

TEST(KernelsConv, PointwiseGemmPath) {
  // 1×1×1: the packed GEMM, with remainders of the 6-channel × 8-voxel tile.
  checkConv({"1x1", 2, 5, 7, 1, {5, 6, 7}, k1, s1, p0, s1, p0, true}, false);
  checkConv({"1x1 no bias", 1, 9, 13, 1, {3, 3, 3}, k1, s1, p0, s1, p0, false}, false);
  checkConv({"1x1 groups", 2, 6, 14, 2, {3, 4, 5}, k1, s1, p0, s1, p0, true}, false);
  checkConv({"1x1 stride 2", 1, 4, 6, 1, {7, 6, 5}, k1, s2, p0, s1, p0, true}, false);
  checkConv({"1x1 odd stride, padding", 2, 3, 5, 1, {5, 4, 7}, k1, {2, 1, 3}, {1, 0, 2},
             {1, 2, 1}, p0, true},
            false);
  checkConv({"1x1 many outputs", 1, 3, 100, 1, {2, 3, 3}, k1, s1, p0, s1, p0, true}, false);
  checkConv({"1x1 many inputs", 1, 130, 7, 1, {3, 5, 7}, k1, s1, p0, s1, p0, true}, false);
}

TEST(KernelsConv, Depthwise) {
  checkConv({"dw k3", 2, 5, 5, 5, {9, 8, 7}, k3, s1, p1, s1, p0, true}, false);
  checkConv({"dw k5", 1, 3, 3, 3, {7, 9, 6}, {5, 5, 5}, s1, {2, 2, 2}, s1, p0, true}, false);
  checkConv({"dw k3 s2", 2, 4, 4, 4, {9, 8, 7}, k3, s2, p1, s1, p0, true}, false);
  checkConv({"dw k5 s2", 1, 3, 3, 3, {8, 9, 11}, {5, 5, 5}, s2, {2, 2, 2}, s1, p0, false}, false);
}

TEST(KernelsConv, General) {
  checkConv({"groups, mixed stride/pad/dilation", 2, 4, 6, 2, {7, 8, 9}, {3, 2, 3}, {2, 1, 3},
             {1, 0, 2}, {1, 2, 2}, p0, true},
            false);
  checkConv({"dense dilated", 1, 3, 4, 1, {9, 8, 10}, k3, s1, p0, {2, 2, 2}, p0, true}, false);
  checkConv({"dense padded", 2, 3, 2, 1, {4, 5, 3}, k3, s1, {2, 1, 2}, s1, p0, false}, false);
  checkConv({"kernel larger than input", 1, 2, 3, 1, {2, 2, 3}, {4, 3, 4}, s1, {2, 1, 2}, s1, p0,
             true},
            false);
  checkConv({"channel multiplier", 1, 2, 6, 2, {5, 5, 5}, k3, s2, p1, s1, p0, true}, false);
}

TEST(KernelsConvTranspose, PointwiseGemmPath) {
  checkConv({"t1x1", 2, 5, 7, 1, {4, 3, 5}, k1, s1, p0, s1, p0, true}, true);
  checkConv({"t1x1 stride 2", 1, 6, 4, 1, {3, 4, 5}, k1, s2, p0, s1, p0, true}, true);
  checkConv({"t1x1 stride 2 output_padding", 2, 4, 6, 2, {3, 2, 4}, k1, s2, p0, s1, {1, 0, 1},
             true},
            true);
  checkConv({"t1x1 stride 3 padding", 1, 3, 5, 1, {4, 3, 3}, k1, {3, 2, 3}, {1, 0, 1}, s1,
             {2, 1, 0}, false},
            true);
}

TEST(KernelsConvTranspose, DepthwiseStride2) {
  // MedNeXt's up block: depthwise k3, stride 2, padding 1.
  checkConv({"dw t k3 s2", 2, 4, 4, 4, {4, 5, 3}, k3, s2, p1, s1, p0, true}, true);
  checkConv({"dw t k3 s2 op1", 1, 3, 3, 3, {3, 4, 5}, k3, s2, p1, s1, {1, 1, 1}, true}, true);
  checkConv({"dw t k5 s2", 1, 3, 3, 3, {4, 3, 5}, {5, 5, 5}, s2, {2, 2, 2}, s1, p0, false}, true);
}

TEST(KernelsConvTranspose, General) {
  checkConv({"groups, mixed", 2, 4, 6, 2, {3, 4, 5}, {3, 2, 3}, {2, 3, 1}, {1, 0, 1}, {1, 2, 2},
             {1, 1, 0}, true},
            true);
  checkConv({"dense k2 s2", 1, 3, 2, 1, {3, 4, 2}, {2, 2, 2}, s2, p0, s1, p0, true}, true);
  checkConv({"dilation > stride with output_padding", 1, 2, 3, 1, {3, 3, 4}, k3, s1, p0,
             {3, 2, 2}, {2, 1, 1}, true},
            true);
  checkConv({"dense k3 s1 p1", 2, 3, 4, 1, {4, 5, 3}, k3, s1, p1, s1, p0, true}, true);
}

TEST(KernelsConv, DeterministicOnLargerProblems) {
  // Enough rows and voxel blocks for several tasks per thread on every path.
  Tensor x = random(DType::F32, {1, 8, 20, 21, 22}, 4);
  Tensor w1 = random(DType::F32, {16, 8, 1, 1, 1}, 5), b = random(DType::F32, {16}, 6);
  Tensor wd = random(DType::F32, {8, 1, 3, 3, 3}, 7);
  expectDeterministic([&] {
    Tensor y(DType::F32, {1, 16, 20, 21, 22});
    conv3d(x, w1, &b, ConvParams{}, y);
    return y;
  }, "1x1");
  expectDeterministic([&] {
    Tensor y(DType::F32, {1, 8, 10, 11, 11});
    ConvParams p;
    p.stride = {2, 2, 2};
    p.padding = {1, 1, 1};
    p.groups = 8;
    conv3d(x, wd, nullptr, p, y);
    return y;
  }, "depthwise s2");
  expectDeterministic([&] {
    Tensor y(DType::F32, {1, 8, 39, 41, 43});
    ConvParams p;
    p.stride = {2, 2, 2};
    p.padding = {1, 1, 1};
    p.groups = 8;
    conv3dTranspose(x, wd, nullptr, p, y);
    return y;
  }, "depthwise transposed s2");
}

// ---- normalizations -------------------------------------------------------------------------

Values naiveGroupNorm(const Shape &s, const Values &x, const Values &g, const Values &b,
                      int64_t groups, double eps) {
  int64_t n = s[0], c = s[1], sp = prod(s) / (n * c), cg = c / groups, m = cg * sp;
  Values y(x.size());
  for (int64_t i = 0; i < n * groups; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < m; ++j)
      mean += x[i * m + j];
    mean /= m;
    for (int64_t j = 0; j < m; ++j)
      var += (x[i * m + j] - mean) * (x[i * m + j] - mean);
    var /= m;
    for (int64_t j = 0; j < m; ++j) {
      int64_t ch = (i % groups) * cg + j / sp;
      y[i * m + j] = (x[i * m + j] - mean) / std::sqrt(var + eps) * g[ch] + b[ch];
    }
  }
  return y;
}

Values naiveChannelLayerNorm(const Shape &s, const Values &x, const Values &g, const Values &b,
                             double eps) {
  int64_t n = s[0], c = s[1], sp = prod(s) / (n * c);
  Values y(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < sp; ++p) {
      double mean = 0, var = 0;
      for (int64_t ch = 0; ch < c; ++ch)
        mean += x[(i * c + ch) * sp + p];
      mean /= c;
      for (int64_t ch = 0; ch < c; ++ch)
        var += std::pow(x[(i * c + ch) * sp + p] - mean, 2);
      var /= c;
      for (int64_t ch = 0; ch < c; ++ch) {
        int64_t k = (i * c + ch) * sp + p;
        y[k] = (x[k] - mean) / std::sqrt(var + eps) * g[ch] + b[ch];
      }
    }
  return y;
}

Values naiveGrn(const Shape &s, const Values &x, const Values &g, const Values &b, double eps) {
  int64_t n = s[0], c = s[1], sp = prod(s) / (n * c);
  Values y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    Values gx(c);
    double mean = 0;
    for (int64_t ch = 0; ch < c; ++ch) {
      double ss = 0;
      for (int64_t p = 0; p < sp; ++p)
        ss += x[(i * c + ch) * sp + p] * x[(i * c + ch) * sp + p];
      gx[ch] = std::sqrt(ss);
      mean += gx[ch] / c;
    }
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < sp; ++p) {
        int64_t k = (i * c + ch) * sp + p;
        y[k] = g[ch] * (x[k] * (gx[ch] / (mean + eps))) + b[ch] + x[k];
      }
  }
  return y;
}

TEST(KernelsNorm, GroupNorm) {
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    for (auto [shape, groups] : std::vector<std::pair<Shape, int64_t>>{
             {{2, 6, 5, 4, 3}, 1}, {{2, 6, 5, 4, 3}, 2}, {{2, 6, 5, 4, 3}, 3},
             {{2, 6, 5, 4, 3}, 6}, {{1, 4, 21, 22, 23}, 2}, {{3, 2, 7}, 2}}) {
      SCOPED_TRACE(shapeStr(shape) + " groups " + std::to_string(groups));
      Tensor x = random(dt, shape, 10, -2, 3), g = random(affineType(dt), {shape[1]}, 11),
             b = random(affineType(dt), {shape[1]}, 12);
      Values ref = naiveGroupNorm(shape, vals(x), vals(g), vals(b), groups, 1e-5);
      auto run = [&] {
        Tensor y(dt, shape);
        groupNorm(x, g, b, groups, 1e-5, y);
        return y;
      };
      EXPECT_LT(relErr(run(), ref), tolerance(dt));
      if (dt == DType::F32)
        expectDeterministic(run, "group_norm");
    }
  }
}

TEST(KernelsNorm, GroupNormSavesStatistics) {
  // The saved mean and rstd = 1/sqrt(var + eps) per (sample, group) against a textbook
  // computation; y must be the same bits with and without saving.
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    const DType st = dt == DType::F64 ? DType::F64 : DType::F32;
    for (auto [shape, groups] : std::vector<std::pair<Shape, int64_t>>{
             {{2, 6, 5, 4, 3}, 3}, {{3, 4, 7}, 1}, {{1, 5, 3, 2, 3}, 5}}) {
      SCOPED_TRACE(shapeStr(shape) + " groups " + std::to_string(groups));
      const double eps = 1e-3;
      Tensor x = random(dt, shape, 16, -2, 3), g = random(affineType(dt), {shape[1]}, 17),
             b = random(affineType(dt), {shape[1]}, 18);
      Tensor y(dt, shape), ys(dt, shape), mean(st, {shape[0], groups}),
          rstd(st, {shape[0], groups});
      groupNorm(x, g, b, groups, eps, y);
      groupNorm(x, g, b, groups, eps, ys, &mean, &rstd);
      EXPECT_TRUE(sameBits(y, ys));
      const Values xv = vals(x);
      const int64_t m = x.numel() / (shape[0] * groups);
      Values refMean, refRstd;
      for (int64_t seg = 0; seg < shape[0] * groups; ++seg) {
        double mu = 0, var = 0;
        for (int64_t j = 0; j < m; ++j)
          mu += xv[seg * m + j];
        mu /= m;
        for (int64_t j = 0; j < m; ++j)
          var += (xv[seg * m + j] - mu) * (xv[seg * m + j] - mu);
        refMean.push_back(mu);
        refRstd.push_back(1 / std::sqrt(var / m + eps));
      }
      // Statistics are kept in the accumulation type: float even for bf16 storage.
      const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
      EXPECT_LT(relErr(mean, refMean), tol);
      EXPECT_LT(relErr(rstd, refRstd), tol);
    }
  }
  Tensor x(DType::F32, {2, 4, 3}), g(DType::F32, {4}), y(DType::F32, {2, 4, 3});
  Tensor wrongType(DType::BF16, {2, 2}), wrongSize(DType::F32, {2, 3}), ok(DType::F32, {2, 2});
  EXPECT_THROW(groupNorm(x, g, g, 2, 1e-5, y, &wrongType, &ok), Error);
  EXPECT_THROW(groupNorm(x, g, g, 2, 1e-5, y, &ok, &wrongSize), Error);
  EXPECT_THROW(groupNorm(x, g, g, 2, 1e-5, y, &ok, nullptr), Error);
}

TEST(KernelsNorm, GroupNormLargeMeanIsStable) {
  // Values 1000 ± 1: a one-pass E[x²] − E[x]² in float would lose the variance.
  Shape shape{1, 2, 30, 30, 30};
  Tensor x = random(DType::F32, shape, 13, 999, 1001), g = random(DType::F32, {2}, 14),
         b = random(DType::F32, {2}, 15);
  Tensor y(DType::F32, shape);
  groupNorm(x, g, b, 2, 1e-5, y);
  EXPECT_LT(relErr(y, naiveGroupNorm(shape, vals(x), vals(g), vals(b), 2, 1e-5)), 2e-5);
}

TEST(KernelsNorm, ChannelLayerNorm) {
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    for (Shape shape : std::vector<Shape>{{2, 5, 3, 4, 5}, {1, 7, 9, 10, 11}, {2, 3}}) {
      SCOPED_TRACE(shapeStr(shape));
      Tensor x = random(dt, shape, 20, -2, 3), g = random(affineType(dt), {shape[1]}, 21),
             b = random(affineType(dt), {shape[1]}, 22);
      Values ref = naiveChannelLayerNorm(shape, vals(x), vals(g), vals(b), 1e-6);
      auto run = [&] {
        Tensor y(dt, shape);
        channelLayerNorm(x, g, b, 1e-6, y);
        return y;
      };
      EXPECT_LT(relErr(run(), ref), tolerance(dt));
      if (dt == DType::F32)
        expectDeterministic(run, "channel_layer_norm");
    }
  }
}

TEST(KernelsNorm, Grn) {
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    for (Shape shape : std::vector<Shape>{{2, 6, 5, 6, 7}, {1, 3, 20, 21, 22}}) {
      SCOPED_TRACE(shapeStr(shape));
      Tensor x = random(dt, shape, 30), g = random(affineType(dt), {1, shape[1], 1, 1, 1}, 31),
             b = random(affineType(dt), {1, shape[1], 1, 1, 1}, 32);
      Values ref = naiveGrn(shape, vals(x), vals(g), vals(b), 1e-6);
      auto run = [&] {
        Tensor y(dt, shape);
        grn(x, g, b, 1e-6, y);
        return y;
      };
      EXPECT_LT(relErr(run(), ref), tolerance(dt));
      if (dt == DType::F32)
        expectDeterministic(run, "grn");
    }
  }
}

// ---- elementwise ----------------------------------------------------------------------------

TEST(KernelsElementwise, Unary) {
  struct Case {
    Unary op;
    const char *name;
    double lo, hi;
    double (*f)(double);
  };
  const Case cases[] = {
      {Unary::Gelu, "gelu", -4, 4, [](double v) { return v * 0.5 * (1 + std::erf(v / std::sqrt(2.0))); }},
      {Unary::Sigmoid, "sigmoid", -6, 6, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {Unary::Neg, "neg", -3, 3, [](double v) { return -v; }},
      {Unary::Exp, "exp", -3, 3, [](double v) { return std::exp(v); }},
      {Unary::Log, "log", 0.01, 5, [](double v) { return std::log(v); }},
      {Unary::Sqrt, "sqrt", 0, 5, [](double v) { return std::sqrt(v); }},
  };
  for (const Case &c : cases)
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName(dt));
      Shape shape{3, 5, 7, 11, 13};
      Tensor x = random(dt, shape, 40, c.lo, c.hi);
      Values ref = vals(x);
      for (double &v : ref)
        v = c.f(v);
      auto run = [&] {
        Tensor y(dt, shape);
        unary(c.op, x, y);
        return y;
      };
      // Elementwise: each value is within a few ulps (float) of the exact value.
      EXPECT_LT(relErr(run(), ref), dt == DType::F32 ? 1e-6 : tolerance(dt));
      if (dt == DType::F32)
        expectDeterministic(run, c.name);
    }
}

Shape broadcastShape(Shape a, Shape b) {
  size_t r = std::max(a.size(), b.size());
  a.insert(a.begin(), r - a.size(), 1);
  b.insert(b.begin(), r - b.size(), 1);
  Shape y(r);
  for (size_t i = 0; i < r; ++i)
    y[i] = a[i] == 1 ? b[i] : a[i];
  return y;
}

/// Element of `v` (shape s) read at multi-index idx of the broadcast shape y.
double bcastAt(const Values &v, Shape s, const Shape &y, const std::vector<int64_t> &idx) {
  s.insert(s.begin(), y.size() - s.size(), 1);
  int64_t off = 0;
  for (size_t d = 0; d < y.size(); ++d)
    off = off * s[d] + (s[d] == 1 ? 0 : idx[d]);
  return v[off];
}

double applyBinary(Binary op, double a, double b) {
  switch (op) {
  case Binary::Add: return a + b;
  case Binary::Sub: return a - b;
  case Binary::Mul: return a * b;
  case Binary::Div: return a / b;
  case Binary::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  case Binary::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  }
  return 0;
}

TEST(KernelsElementwise, BinaryBroadcasting) {
  const std::pair<Shape, Shape> shapes[] = {
      {{2, 3, 4, 5}, {2, 3, 4, 5}}, {{2, 3, 4, 5}, {3, 1, 5}}, {{1}, {2, 3}},
      {{2, 1, 4}, {2, 3, 1}},       {{}, {3, 2}},              {{4, 3, 1, 1, 1}, {4, 3, 5, 6, 7}},
      {{2, 3, 5, 6, 7}, {1, 3, 1, 1, 1}}, {{5, 1, 7}, {}}};
  const Binary ops[] = {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Max,
                        Binary::Min};
  for (auto [sa, sb] : shapes)
    for (DType dt : kFloatTypes)
      for (Binary op : ops) {
        SCOPED_TRACE(shapeStr(sa) + " op " + shapeStr(sb) + " " + dtypeName(dt) + " #" +
                     std::to_string(static_cast<int>(op)));
        Shape sy = broadcastShape(sa, sb);
        Tensor a = random(dt, sa, 50), b = random(dt, sb, 51, 0.5, 2);
        Values av = vals(a), bv = vals(b), ref(prod(sy));
        std::vector<int64_t> idx(sy.size(), 0);
        for (int64_t i = 0; i < prod(sy); ++i) {
          int64_t rest = i;
          for (int64_t d = static_cast<int64_t>(sy.size()) - 1; d >= 0; --d) {
            idx[d] = rest % sy[d];
            rest /= sy[d];
          }
          ref[i] = applyBinary(op, bcastAt(av, sa, sy, idx), bcastAt(bv, sb, sy, idx));
        }
        auto run = [&] {
          Tensor y(dt, sy);
          binary(op, a, b, y);
          return y;
        };
        EXPECT_LT(relErr(run(), ref), dt == DType::F32 ? 1e-7 : tolerance(dt));
        if (dt == DType::F32)
          expectDeterministic(run, "binary");
      }
}

TEST(KernelsElementwise, MaxMinPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = make(DType::F32, {4}, {nan, 1, 2, nan});
  Tensor b = make(DType::F32, {4}, {1, nan, 3, nan});
  for (Binary op : {Binary::Max, Binary::Min}) {
    Tensor y(DType::F32, {4});
    binary(op, a, b, y);
    EXPECT_TRUE(std::isnan(y.at(0)));
    EXPECT_TRUE(std::isnan(y.at(1)));
    EXPECT_EQ(y.at(2), op == Binary::Max ? 3 : 2);
    EXPECT_TRUE(std::isnan(y.at(3)));
  }
}

// ---- data movement --------------------------------------------------------------------------

std::vector<int64_t> unravel(int64_t i, const Shape &s) {
  std::vector<int64_t> idx(s.size());
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t> &idx, const Shape &s) {
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d)
    off = off * s[d] + idx[d];
  return off;
}

TEST(KernelsDataMovement, Pad) {
  struct Case {
    Shape x;
    std::vector<int64_t> low, high;
  };
  const Case cases[] = {{{2, 3, 4, 5}, {0, 1, 2, 0}, {1, 0, 3, 2}},
                        {{2, 3, 4, 4, 4}, {0, 0, 1, 1, 1}, {0, 0, 0, 0, 0}}, // MedNeXt up block
                        {{7}, {3}, {2}},
                        {{5, 6}, {-1, 2}, {1, -2}}, // negative entries crop
                        {{}, {}, {}}};
  for (const Case &c : cases)
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(shapeStr(c.x) + " " + dtypeName(dt));
      Shape ys = c.x;
      for (size_t d = 0; d < ys.size(); ++d)
        ys[d] += c.low[d] + c.high[d];
      Tensor x = random(dt, c.x, 60);
      Values xv = vals(x), ref(prod(ys));
      const double value = 0.75;
      for (int64_t i = 0; i < prod(ys); ++i) {
        auto idx = unravel(i, ys);
        bool inside = true;
        for (size_t d = 0; d < idx.size(); ++d) {
          idx[d] -= c.low[d];
          inside = inside && idx[d] >= 0 && idx[d] < c.x[d];
        }
        ref[i] = inside ? xv[ravel(idx, c.x)] : value;
      }
      auto run = [&] {
        Tensor y(dt, ys);
        pad(x, c.low, c.high, value, y);
        return y;
      };
      EXPECT_EQ(relErr(run(), ref), 0.0);
      expectDeterministic(run, "pad");
    }
}

TEST(KernelsDataMovement, AnyDType) {
  // Data movement copies bytes, so integer tensors (targets) work too.
  Tensor x = make(DType::I64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor p(DType::I64, {2, 5});
  pad(x, {0, 1}, {0, 1}, 7, p);
  EXPECT_EQ(vals(p), (Values{7, 1, 2, 3, 7, 7, 4, 5, 6, 7}));
  Tensor s(DType::I64, {2, 2});
  slice(p, {0, 1}, {1, 2}, s);
  EXPECT_EQ(vals(s), (Values{1, 3, 4, 6}));
  Tensor u = make(DType::U8, {1, 2}, {9, 8}), c(DType::U8, {3, 2});
  Tensor v = make(DType::U8, {2, 2}, {1, 2, 3, 4});
  concat({&u, &v}, 0, c);
  EXPECT_EQ(vals(c), (Values{9, 8, 1, 2, 3, 4}));
}

TEST(KernelsDataMovement, Slice) {
  struct Case {
    Shape x, y;
    std::vector<int64_t> offsets, strides;
  };
  const Case cases[] = {{{3, 7, 8, 9}, {2, 3, 3, 3}, {1, 2, 0, 3}, {1, 2, 3, 2}},
                        {{2, 6, 13, 13, 13}, {2, 6, 8, 8, 8}, {0, 0, 5, 5, 5}, {1, 1, 1, 1, 1}},
                        {{10}, {4}, {0}, {3}},
                        {{4, 5}, {2, 5}, {2, 0}, {}}};
  for (const Case &c : cases)
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(shapeStr(c.x) + " " + dtypeName(dt));
      Tensor x = random(dt, c.x, 61);
      Values xv = vals(x), ref(prod(c.y));
      for (int64_t i = 0; i < prod(c.y); ++i) {
        auto idx = unravel(i, c.y);
        for (size_t d = 0; d < idx.size(); ++d)
          idx[d] = c.offsets[d] + idx[d] * (c.strides.empty() ? 1 : c.strides[d]);
        ref[i] = xv[ravel(idx, c.x)];
      }
      auto run = [&] {
        Tensor y(dt, c.y);
        slice(x, c.offsets, c.strides, y);
        return y;
      };
      EXPECT_EQ(relErr(run(), ref), 0.0);
      expectDeterministic(run, "slice");
    }
}

TEST(KernelsDataMovement, Concat) {
  for (DType dt : kFloatTypes)
    for (int64_t axis : {0, 1, 4}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " axis " + std::to_string(axis));
      Shape base{2, 3, 4, 3, 5};
      std::vector<Tensor> ins;
      Shape ys = base;
      ys[axis] = 0;
      for (int64_t k : {2, 0, 3}) { // an empty input in the middle
        Shape s = base;
        s[axis] = k;
        ys[axis] += k;
        ins.push_back(random(dt, s, 62 + k));
      }
      Values ref(prod(ys));
      for (int64_t i = 0; i < prod(ys); ++i) {
        auto idx = unravel(i, ys);
        for (const Tensor &t : ins) {
          if (idx[axis] < t.dim(axis)) {
            ref[i] = t.at(ravel(idx, t.shape()));
            break;
          }
          idx[axis] -= t.dim(axis);
        }
      }
      std::vector<const Tensor *> ptrs;
      for (const Tensor &t : ins)
        ptrs.push_back(&t);
      auto run = [&] {
        Tensor y(dt, ys);
        concat(ptrs, axis, y);
        return y;
      };
      EXPECT_EQ(relErr(run(), ref), 0.0);
      expectDeterministic(run, "concat");
    }
}

TEST(KernelsDataMovement, Transpose) {
  struct Case {
    Shape x;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {{{3, 5, 7}, {0, 1, 2}},
                        {{3, 5, 7}, {2, 0, 1}},
                        {{2, 3, 5, 7}, {3, 1, 0, 2}},
                        {{2, 3, 5, 4, 5}, {0, 2, 3, 4, 1}}, // NCDHW -> NDHWC
                        {{2, 5, 4, 5, 3}, {0, 4, 1, 2, 3}}, // and back
                        {{2, 16, 24, 20, 18}, {0, 2, 3, 4, 1}}, // many parallel chunks
                        {{9}, {0}},
                        {{4, 0, 3}, {2, 1, 0}}};
  for (const Case &c : cases)
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(shapeStr(c.x) + " " + dtypeName(dt));
      Shape ys;
      for (int64_t p : c.perm)
        ys.push_back(c.x[p]);
      Tensor x = random(dt, c.x, 63);
      Values xv = vals(x), ref(prod(ys));
      for (int64_t i = 0; i < prod(ys); ++i) {
        auto idx = unravel(i, ys);
        std::vector<int64_t> src(idx.size());
        for (size_t d = 0; d < idx.size(); ++d)
          src[c.perm[d]] = idx[d];
        ref[i] = xv[ravel(src, c.x)];
      }
      auto run = [&] {
        Tensor y(dt, ys);
        transpose(x, c.perm, y);
        return y;
      };
      EXPECT_EQ(relErr(run(), ref), 0.0);
      expectDeterministic(run, "transpose");
    }
  // Integers move as bytes; a result that is not the input permuted is refused.
  Tensor x = make(DType::I64, {2, 3}, {1, 2, 3, 4, 5, 6}), y(DType::I64, {3, 2});
  transpose(x, {1, 0}, y);
  EXPECT_EQ(vals(y), (Values{1, 4, 2, 5, 3, 6}));
  EXPECT_THROW(transpose(x, {0, 0}, y), Error);
  EXPECT_THROW(transpose(x, {0, 1}, y), Error);
}

// ---- reductions -----------------------------------------------------------------------------

TEST(KernelsReduce, SumMeanMaxMin) {
  struct Case {
    Shape x;
    std::vector<int64_t> axes;
    bool keep;
  };
  const Case cases[] = {{{3, 4, 5, 6}, {}, false},         {{3, 4, 5, 6}, {0}, false},
                        {{3, 4, 5, 6}, {1, 3}, true},      {{3, 4, 5, 6}, {0, 1, 2, 3}, false},
                        {{2, 3, 5, 6, 7}, {2, 3, 4}, true}, {{2, 3, 70, 80}, {0, 2, 3}, false},
                        {{1, 50000}, {1}, false},          {{4, 1, 3}, {1}, true}};
  const Reduce ops[] = {Reduce::Sum, Reduce::Mean, Reduce::Max, Reduce::Min};
  for (const Case &c : cases)
    for (DType dt : kFloatTypes)
      for (Reduce op : ops) {
        SCOPED_TRACE(shapeStr(c.x) + " " + dtypeName(dt) + " #" +
                     std::to_string(static_cast<int>(op)));
        std::vector<bool> red(c.x.size(), false);
        for (int64_t a : c.axes)
          red[a] = true;
        Shape ys, kept;
        for (size_t d = 0; d < c.x.size(); ++d) {
          if (!red[d])
            kept.push_back(c.x[d]);
          if (!red[d] || c.keep)
            ys.push_back(red[d] ? 1 : c.x[d]);
        }
        Tensor x = random(dt, c.x, 70, -1, 2);
        Values xv = vals(x), ref(prod(kept), 0.0);
        std::vector<int64_t> count(ref.size(), 0);
        for (int64_t i = 0; i < x.numel(); ++i) {
          auto idx = unravel(i, c.x);
          std::vector<int64_t> k;
          for (size_t d = 0; d < idx.size(); ++d)
            if (!red[d])
              k.push_back(idx[d]);
          int64_t o = ravel(k, kept);
          double v = xv[i];
          if (op == Reduce::Max)
            ref[o] = count[o] ? std::max(ref[o], v) : v;
          else if (op == Reduce::Min)
            ref[o] = count[o] ? std::min(ref[o], v) : v;
          else
            ref[o] += v;
          ++count[o];
        }
        if (op == Reduce::Mean)
          for (size_t o = 0; o < ref.size(); ++o)
            ref[o] /= count[o];
        auto run = [&] {
          Tensor y(dt, ys);
          reduce(op, x, c.axes, y);
          return y;
        };
        double tol = op == Reduce::Max || op == Reduce::Min ? 0.0 : tolerance(dt);
        EXPECT_LE(relErr(run(), ref), tol);
        if (dt == DType::F32)
          expectDeterministic(run, "reduce");
      }
}

TEST(KernelsReduce, MaxPropagatesNaN) {
  Values v(20000, 1.0);
  v[12345] = std::numeric_limits<double>::quiet_NaN();
  Tensor x = make(DType::F32, {2, 10000}, v), y(DType::F32, {2});
  reduce(Reduce::Max, x, {1}, y);
  EXPECT_EQ(y.at(0), 1.0);
  EXPECT_TRUE(std::isnan(y.at(1)));
}

// ---- losses ---------------------------------------------------------------------------------

TEST(KernelsLoss, BceHandExample) {
  // N=1, C=2, S=2: channel 0 holds (x, y) = (0.5, 1), (−1, 0); channel 1 (2, 0), (0, 1).
  // l = softplus(−x) for y = 1, softplus(x) for y = 0.
  Tensor x = make(DType::F64, {1, 2, 2}, {0.5, -1.0, 2.0, 0.0});
  Tensor t = make(DType::F64, {1, 2, 2}, {1, 0, 0, 1});
  auto run = [&](BceParams p, const Tensor *mask, const Tensor *pw) {
    Tensor y(DType::F64, {});
    bceWithLogits(x, t, mask, pw, p, y);
    return y.at(0);
  };
  BceParams p;
  EXPECT_NEAR(run(p, nullptr, nullptr), 0.9018534658253119, 1e-14);
  p.reduction = LossReduction::Sum;
  EXPECT_NEAR(run(p, nullptr, nullptr), 3.6074138633012476, 1e-14);
  p.reduction = LossReduction::PerChannel;
  EXPECT_NEAR(run(p, nullptr, nullptr), 1.8037069316506238, 1e-14);
  // pos_weight (2, 3) scales the positive terms.
  Tensor pw = make(DType::F64, {2}, {2, 3});
  p.reduction = LossReduction::Mean;
  EXPECT_NEAR(run(p, nullptr, &pw), 1.366946302150311, 1e-14);
  // Mask out everything but (2, 0): mean = softplus(2).
  Tensor m = make(DType::F64, {1, 2, 2}, {0, 0, 1, 0});
  EXPECT_NEAR(run(p, &m, nullptr), std::log1p(std::exp(2.0)), 1e-14);
  // auto_pos_weight: channel 0 has pos 1, neg 1 -> p = 1; channel 1 likewise. Channel 1
  // masked to (2, 0) only: pos 0 -> p = max_pos_weight (no positive term left anyway).
  p.autoPosWeight = true;
  EXPECT_NEAR(run(p, nullptr, nullptr), 0.9018534658253119, 1e-14);
  // Elementwise, masked-out elements are 0.
  BceParams none;
  none.reduction = LossReduction::None;
  Tensor y(DType::F64, {1, 2, 2});
  bceWithLogits(x, t, &m, nullptr, none, y);
  EXPECT_EQ(y.at(0), 0.0);
  EXPECT_NEAR(y.at(2), std::log1p(std::exp(2.0)), 1e-14);
  // Nothing counted: mean 0.
  Tensor zero = make(DType::F64, {1, 2, 2}, {0, 0, 0, 0});
  EXPECT_EQ(run(BceParams{}, &zero, nullptr), 0.0);
}

/// Textbook BCE: −[p·y·log σ(x) + (1 − y)·log(1 − σ(x))].
double naiveBce(double x, double y, double p) {
  double s = 1 / (1 + std::exp(-x));
  return -(p * y * std::log(s) + (1 - y) * std::log(1 - s));
}

TEST(KernelsLoss, BceAgainstNaive) {
  const Shape shape{2, 3, 23, 24, 25}; // several chunks per (n, c) row
  const int64_t N = 2, C = 3, S = 23 * 24 * 25;
  for (DType dt : kFloatTypes) {
    Tensor x = random(dt, shape, 80, -4, 4);
    // Channel 0: soft targets, channel 1: binary, channel 2: all zero (auto weight = max).
    Values tv = vals(random(DType::F64, shape, 81, 0, 1));
    Values mv = vals(random(DType::F64, shape, 82, 0, 1));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < S; ++i) {
        tv[(n * C + 1) * S + i] = tv[(n * C + 1) * S + i] > 0.7 ? 1 : 0;
        tv[(n * C + 2) * S + i] = 0;
      }
    for (double &m : mv)
      m = m > 0.3 ? 1 : 0;
    Tensor t = make(dt, shape, tv), mask = make(dt, shape, mv);
    Tensor pwT = make(dt, {C}, {0.5, 2.0, 3.0});
    Values xv = vals(x), tvr = vals(t), pwv = vals(pwT);
    const DType lossType = dt == DType::F64 ? DType::F64 : DType::F32;
    const double tol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 1e-5 : 1e-2;
    for (bool useMask : {false, true})
      for (int weights = 0; weights < 3; ++weights) // none, operand, auto
        for (LossReduction red : {LossReduction::Mean, LossReduction::Sum, LossReduction::None,
                                  LossReduction::PerChannel}) {
          SCOPED_TRACE(std::string(dtypeName(dt)) + " mask " + std::to_string(useMask) +
                       " weights " + std::to_string(weights) + " reduction " +
                       std::to_string(static_cast<int>(red)));
          BceParams p;
          p.reduction = red;
          p.autoPosWeight = weights == 2;
          p.maxPosWeight = 7.5;
          Values pc(C, 1.0);
          if (weights == 1)
            pc = pwv;
          if (weights == 2)
            for (int64_t c = 0; c < C; ++c) {
              double pos = 0, neg = 0;
              for (int64_t n = 0; n < N; ++n)
                for (int64_t i = 0; i < S; ++i) {
                  int64_t k = (n * C + c) * S + i;
                  if (useMask && mv[k] == 0)
                    continue;
                  pos += tvr[k];
                  neg += 1 - tvr[k];
                }
              pc[c] = pos == 0 ? p.maxPosWeight : std::min(neg / pos, p.maxPosWeight);
            }
          Values elem(x.numel(), 0.0), sumC(C, 0.0), cntC(C, 0.0);
          double sum = 0, cnt = 0;
          for (int64_t k = 0; k < x.numel(); ++k) {
            if (useMask && mv[k] == 0)
              continue;
            int64_t c = (k / S) % C;
            elem[k] = naiveBce(xv[k], tvr[k], pc[c]);
            sum += elem[k];
            sumC[c] += elem[k];
            cnt += 1;
            cntC[c] += 1;
          }
          double perChannel = 0;
          for (int64_t c = 0; c < C; ++c)
            perChannel += cntC[c] ? sumC[c] / cntC[c] : 0;
          auto run = [&] {
            Tensor y = red == LossReduction::None ? Tensor(dt, shape) : Tensor(lossType, {});
            bceWithLogits(x, t, useMask ? &mask : nullptr, weights == 1 ? &pwT : nullptr, p, y);
            return y;
          };
          Tensor y = run();
          if (red == LossReduction::None)
            EXPECT_LT(relErr(y, elem), tol);
          else {
            double ref = red == LossReduction::Mean  ? sum / cnt
                         : red == LossReduction::Sum ? sum
                                                     : perChannel;
            EXPECT_EQ(y.dtype(), lossType);
            EXPECT_LT(std::abs(y.at(0) - ref) / std::abs(ref), tol);
          }
          if (dt == DType::F32)
            expectDeterministic(run, "bce_with_logits");
        }
  }
}

TEST(KernelsLoss, DiceCEHandExample) {
  // One sample, C = 2, two voxels: logits (0, 0) target 0 and (0, ln 3) target 1.
  // softmax: (½, ½) and (¼, ¾); CE = (ln 2 − ln ¾) / 2. Class 1: tp = ¾, sp = 5/4, sy = 1
  // -> dc = 1.5 / 2.25 = 2/3. Class 0: tp = ½, sp = ¾, sy = 1 -> dc = 1 / 1.75.
  Tensor x = make(DType::F64, {1, 2, 2}, {0, 0, 0, std::log(3.0)});
  Tensor t = make(DType::I64, {1, 1, 2}, {0, 1});
  DiceCEParams p;
  p.weights = {1.0};
  p.smooth = 0;
  Tensor y(DType::F64, {});
  diceCE({&x}, {&t}, p, y);
  EXPECT_NEAR(y.at(0), -0.17625204016080354, 1e-14);
  p.includeBackground = true;
  diceCE({&x}, {&t}, p, y);
  EXPECT_NEAR(y.at(0), -0.12863299254175597, 1e-14);
  // Two levels with weights, float targets, ce/dice weights.
  p.includeBackground = false;
  p.weights = {0.75, 0.25};
  p.ceWeight = 2;
  p.diceWeight = 0.5;
  Tensor tf = make(DType::F32, {1, 1, 2}, {0, 1});
  Tensor x2 = make(DType::F64, {1, 2, 1}, {5, 5}); // softmax ½, target 0: CE ln 2, tp 0, sy 0
  Tensor t2 = make(DType::F32, {1, 1, 1}, {0});
  p.smooth = 1;
  diceCE({&x, &x2}, {&tf, &t2}, p, y);
  const double ce1 = (std::log(2.0) - std::log(0.75)) / 2, dc1 = (1.5 + 1) / (2.25 + 1);
  const double ce2 = std::log(2.0), dc2 = (0 + 1) / (0.5 + 0 + 1);
  EXPECT_NEAR(y.at(0), 0.75 * (2 * ce1 - 0.5 * dc1) + 0.25 * (2 * ce2 - 0.5 * dc2), 1e-14);
}

/// nnU-Net's DC_and_CE_loss for one level, in double.
double naiveDiceCE(const Shape &s, const Values &x, const Values &t, const DiceCEParams &p) {
  int64_t N = s[0], C = s[1], S = prod(s) / (N * C);
  double ce = 0;
  Values tp(N * C, 0), sp(N * C, 0), sy(N * C, 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i) {
      double mx = -INFINITY, z = 0;
      for (int64_t c = 0; c < C; ++c)
        mx = std::max(mx, x[(n * C + c) * S + i]);
      for (int64_t c = 0; c < C; ++c)
        z += std::exp(x[(n * C + c) * S + i] - mx);
      int64_t cls = static_cast<int64_t>(t[n * S + i]);
      ce += -std::log(std::exp(x[(n * C + cls) * S + i] - mx) / z);
      for (int64_t c = 0; c < C; ++c) {
        double sm = std::exp(x[(n * C + c) * S + i] - mx) / z;
        sp[n * C + c] += sm;
        if (c == cls) {
          tp[n * C + c] += sm;
          sy[n * C + c] += 1;
        }
      }
    }
  ce /= N * S;
  Values dcs;
  int64_t c0 = p.includeBackground ? 0 : 1;
  auto dc = [&](double a, double b, double c) {
    return (2 * a + p.smooth) / std::max(b + c + p.smooth, 1e-8);
  };
  if (p.batchDice) {
    for (int64_t c = c0; c < C; ++c) {
      double a = 0, b = 0, d = 0;
      for (int64_t n = 0; n < N; ++n) {
        a += tp[n * C + c];
        b += sp[n * C + c];
        d += sy[n * C + c];
      }
      dcs.push_back(dc(a, b, d));
    }
  } else {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = c0; c < C; ++c)
        dcs.push_back(dc(tp[n * C + c], sp[n * C + c], sy[n * C + c]));
  }
  double dice = 0;
  for (double d : dcs)
    dice += d / dcs.size();
  return p.ceWeight * ce - p.diceWeight * dice;
}

TEST(KernelsLoss, DiceCEAgainstNaive) {
  const Shape s0{2, 4, 17, 18, 19}, s1{2, 4, 9, 9, 10};
  for (DType dt : kFloatTypes)
    for (DType targetType : {DType::I64, DType::F32, DType::U8})
      for (bool batchDice : {true, false})
        for (bool bg : {false, true}) {
          SCOPED_TRACE(std::string(dtypeName(dt)) + " targets " + dtypeName(targetType) +
                       " batch_dice " + std::to_string(batchDice) + " bg " + std::to_string(bg));
          Tensor x0 = random(dt, s0, 90, -3, 3), x1 = random(dt, s1, 91, -3, 3);
          auto classes = [&](const Shape &s, uint64_t seed) {
            Values v = vals(random(DType::F64, {s[0], 1, s[2], s[3], s[4]}, seed, 0, 4));
            for (double &c : v)
              c = std::min(3.0, std::floor(c));
            return make(targetType, {s[0], 1, s[2], s[3], s[4]}, v);
          };
          Tensor t0 = classes(s0, 92), t1 = classes(s1, 93);
          DiceCEParams p;
          p.weights = {2.0 / 3, 1.0 / 3};
          p.batchDice = batchDice;
          p.includeBackground = bg;
          p.ceWeight = 1.5;
          p.diceWeight = 0.5;
          double ref = p.weights[0] * naiveDiceCE(s0, vals(x0), vals(t0), p) +
                       p.weights[1] * naiveDiceCE(s1, vals(x1), vals(t1), p);
          const DType lossType = dt == DType::F64 ? DType::F64 : DType::F32;
          auto run = [&] {
            Tensor y(lossType, {});
            diceCE({&x0, &x1}, {&t0, &t1}, p, y);
            return y;
          };
          EXPECT_LT(std::abs(run().at(0) - ref) / std::abs(ref),
                    dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 1e-5 : 1e-2);
          if (dt == DType::F32 && targetType == DType::I64)
            expectDeterministic(run, "dice_ce");
        }
}

TEST(KernelsLoss, DiceCERejectsBadTargets) {
  Tensor x = random(DType::F32, {1, 3, 4, 4, 4}, 95);
  Tensor good = make(DType::I32, {1, 1, 4, 4, 4}, Values(64, 2));
  Values bad(64, 1);
  bad[37] = 3;
  Tensor t = make(DType::I32, {1, 1, 4, 4, 4}, bad);
  DiceCEParams p;
  p.weights = {0.5, 0.5};
  Tensor y(DType::F32, {});
  try {
    diceCE({&x, &x}, {&good, &t}, p, y);
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("level 1"), std::string::npos) << m;
    EXPECT_NE(m.find("voxel 37"), std::string::npos) << m;
    EXPECT_NE(m.find("holds 3"), std::string::npos) << m;
  }
  Tensor neg = make(DType::F32, {1, 1, 4, 4, 4}, Values(64, -1));
  p.weights = {1};
  EXPECT_THROW(diceCE({&x}, {&neg}, p, y), Error);
}

// ---- dtypes and edge cases ------------------------------------------------------------------

TEST(KernelsEdge, UnsupportedDTypeNamesKernelAndType) {
  Tensor x(DType::I32, {4}), y(DType::I32, {4});
  try {
    unary(Unary::Exp, x, y);
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unary"), std::string::npos) << m;
    EXPECT_NE(m.find("i32"), std::string::npos) << m;
  }
  Tensor w(DType::F16, {1, 1, 1, 1, 1}), xc(DType::F16, {1, 1, 2, 2, 2}),
      yc(DType::F16, {1, 1, 2, 2, 2});
  EXPECT_THROW(conv3d(xc, w, nullptr, ConvParams{}, yc), Error);
}

TEST(KernelsEdge, EmptyTensorsDoNotCrash) {
  for (DType dt : kFloatTypes) {
    Tensor x(dt, {0, 3, 4, 4, 4}), w(dt, {5, 3, 1, 1, 1}), w3(dt, {3, 1, 3, 3, 3}),
        b(dt, {5}), y(dt, {0, 5, 4, 4, 4}), y3(dt, {0, 3, 4, 4, 4});
    conv3d(x, w, &b, ConvParams{}, y);
    ConvParams dw;
    dw.groups = 3;
    dw.padding = {1, 1, 1};
    conv3d(x, w3, nullptr, dw, y3);
    conv3dTranspose(x, w3, nullptr, dw, y3);
    Tensor g(affineType(dt), {3}), be(affineType(dt), {3}), g5(affineType(dt), {1, 3, 1, 1, 1});
    groupNorm(x, g, be, 3, 1e-5, y3);
    channelLayerNorm(x, g, be, 1e-6, y3);
    grn(x, g5, g5, 1e-6, y3);
    unary(Unary::Gelu, x, y3);
    binary(Binary::Add, x, Tensor(dt, {1, 3, 1, 1, 1}), y3);
    Tensor s(dt, {3});
    reduce(Reduce::Sum, x, {0, 2, 3, 4}, s);
    EXPECT_EQ(s.at(0), 0.0);
    Tensor e(dt, {0});
    Tensor e3(dt, {3});
    pad(e, {1}, {2}, 4.0, e3);
    EXPECT_EQ(e3.at(1), 4.0);
    Tensor l(dt == DType::F64 ? DType::F64 : DType::F32, {});
    bceWithLogits(x, x, nullptr, nullptr, BceParams{}, l);
    EXPECT_EQ(l.at(0), 0.0);
    // Zero-size spatial input with padding: the output is the bias only.
    Tensor xs(dt, {1, 3, 0, 2, 2}), ws(dt, {5, 3, 1, 1, 1}), ys(dt, {1, 5, 2, 2, 2});
    Tensor bs = make(dt, {5}, {1, 2, 3, 4, 5});
    ConvParams padded;
    padded.padding = {1, 0, 0};
    conv3d(xs, ws, &bs, padded, ys);
    EXPECT_EQ(ys.at(8 * 4), 5.0);
  }
}

/// Not run by default: prints the speed of the two hot convolutions of MedNeXt
/// (run with --gtest_also_run_disabled_tests --gtest_filter='*Timing*').
TEST(KernelsTiming, DISABLED_PointwiseAndDepthwiseConv) {
  const int64_t S = 64;
  Tensor x = random(DType::F32, {1, 32, S, S, S}, 100);
  Tensor w1 = random(DType::F32, {64, 32, 1, 1, 1}, 101), b1 = random(DType::F32, {64}, 102);
  Tensor wd = random(DType::F32, {32, 1, 3, 3, 3}, 103), bd = random(DType::F32, {32}, 104);
  Tensor y1(DType::F32, {1, 64, S, S, S}), yd(DType::F32, {1, 32, S, S, S});
  ConvParams dw;
  dw.groups = 32;
  dw.padding = {1, 1, 1};
  auto best = [](const std::function<void()> &f) {
    f();
    double t = 1e30;
    for (int r = 0; r < 5; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      f();
      t = std::min(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return t;
  };
  double t1 = best([&] { conv3d(x, w1, &b1, ConvParams{}, y1); });
  double td = best([&] { conv3d(x, wd, &bd, dw, yd); });
  double f1 = 2.0 * 32 * 64 * S * S * S, fd = 2.0 * 32 * 27 * S * S * S;
  std::printf("threads %d: 1x1x1 conv 1x32x64^3 -> 1x64x64^3: %.1f ms, %.1f GFLOP/s\n",
              numThreads(), t1 * 1e3, f1 / t1 * 1e-9);
  std::printf("threads %d: depthwise k3 conv 1x32x64^3: %.1f ms, %.1f GFLOP/s\n", numThreads(),
              td * 1e3, fd / td * 1e-9);
}

} // namespace
