//===- KernelsGradTest.cpp - the gradient kernels against finite differences --------===//
//
// Every gradient kernel is checked in F64 against central finite differences of the
// forward kernel it differentiates: with a fixed random r, L = Σ r ⊙ forward(...) (for the
// reduced losses L = r·loss), and (L(t + h·e_i) − L(t − h·e_i)) / 2h must match the
// kernel's gradient with dy = r at ~30 random elements i of every differentiated tensor, to
// 1e-6 of the tensor's largest gradient. The conv weight gradient is also compared with a
// naive loop at every element. F32 (1e-5) and BF16 (1e-2) results must agree with F64 on
// the same (rounded) inputs, and results with 1 and 3 threads must be the same bits.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Kernels.h"
#include "medrun/Parallel.h"
#include "medrun/Tensor.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>

using namespace medrun;
using namespace medrun::cpu;

namespace {

using Values = std::vector<double>;
using Tensors = std::vector<Tensor>;

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

Tensor random(const Shape &shape, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Values v(numElements(shape));
  for (double &x : v)
    x = d(gen);
  return make(DType::F64, shape, v);
}

double relErr(const Tensor &got, const Tensor &ref) {
  EXPECT_EQ(got.numel(), ref.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < got.numel() && i < ref.numel(); ++i) {
    double d = got.at(i) - ref.at(i);
    num += d * d;
    den += ref.at(i) * ref.at(i);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

bool sameBits(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

/// Σ a ⊙ b, compensated (Neumaier) in long double: the finite differences divide the
/// rounding error of L by 2h, so L must be summed more accurately than plain double.
double dot(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.numel(), b.numel());
  long double s = 0, c = 0;
  for (int64_t i = 0; i < a.numel() && i < b.numel(); ++i) {
    const long double v = static_cast<long double>(a.at(i)) * b.at(i), t = s + v;
    c += std::abs(s) >= std::abs(v) ? (s - t) + v : (v - t) + s;
    s = t;
  }
  return static_cast<double>(s + c);
}

/// Central differences of `loss` with respect to ~30 random elements of the F64 tensor `t`
/// (perturbed in place and restored) against `grad`, to `tol` of the largest |grad|.
void expectFD(Tensor &t, const Tensor &grad, const std::function<double()> &loss,
              const std::string &what, uint64_t seed = 7, double tol = 1e-6, double h = 1e-6) {
  SCOPED_TRACE(what);
  ASSERT_EQ(t.dtype(), DType::F64);
  ASSERT_EQ(grad.numel(), t.numel());
  if (t.numel() == 0)
    return;
  double scale = 0;
  for (int64_t i = 0; i < grad.numel(); ++i)
    scale = std::max(scale, std::abs(grad.at(i)));
  ASSERT_TRUE(std::isfinite(scale));
  scale = std::max(scale, 1e-12);
  std::mt19937_64 gen(seed);
  std::vector<int64_t> idx;
  if (t.numel() <= 30) {
    for (int64_t i = 0; i < t.numel(); ++i)
      idx.push_back(i);
  } else {
    std::uniform_int_distribution<int64_t> d(0, t.numel() - 1);
    for (int k = 0; k < 30; ++k)
      idx.push_back(d(gen));
  }
  double *p = t.data<double>();
  int bad = 0;
  for (int64_t i : idx) {
    const double v = p[i];
    p[i] = v + h;
    const double up = loss();
    p[i] = v - h;
    const double down = loss();
    p[i] = v;
    const double fd = (up - down) / (2 * h), g = grad.at(i);
    if (!(std::abs(fd - g) <= tol * scale) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << ": kernel " << g << ", finite difference "
                    << fd << " (scale " << scale << ")";
  }
}

/// The gradients `run(dt, bf16Inputs)` computes from the inputs converted to dt (rounded
/// through bf16 first when bf16Inputs): F32 must match F64 to 1e-5 and be the same bits for
/// 1 and 3 threads; BF16 must match F64 on the same rounded inputs to 1e-2.
void expectTypesAgree(const std::function<Tensors(DType, bool)> &run, const std::string &what) {
  SCOPED_TRACE(what);
  Tensors ref = run(DType::F64, false);
  int saved = numThreads();
  setNumThreads(1);
  Tensors one = run(DType::F32, false);
  setNumThreads(3);
  Tensors three = run(DType::F32, false);
  setNumThreads(saved);
  ASSERT_EQ(one.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(one[i].dtype(), DType::F32);
    EXPECT_LT(relErr(one[i], ref[i]), 1e-5) << "result " << i << " (f32)";
    EXPECT_TRUE(sameBits(one[i], three[i])) << "result " << i << ": 1 and 3 threads differ";
  }
  Tensors refB = run(DType::F64, true), bf = run(DType::BF16, true);
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_LT(relErr(bf[i], refB[i]), 1e-2) << "result " << i << " (bf16)";
}

/// x converted to dt, rounded through bf16 first if asked.
Tensor as(const Tensor &x, DType dt, bool bf16Inputs) {
  return bf16Inputs ? x.to(DType::BF16).to(dt) : x.to(dt);
}

// ---- conv3d_grad_weight -------------------------------------------------------------------

struct ConvCase {
  std::string name;
  int64_t n, cin, cout, groups;
  std::array<int64_t, 3> in, k, stride, pad, dil, outPad;
};

const std::array<int64_t, 3> k1{1, 1, 1}, k3{3, 3, 3}, k5{5, 5, 5}, s1{1, 1, 1}, s2{2, 2, 2},
    p0{0, 0, 0}, p1{1, 1, 1}, p2{2, 2, 2};

ConvParams paramsOf(const ConvCase &c) {
  ConvParams p;
  p.stride = c.stride;
  p.padding = c.pad;
  p.dilation = c.dil;
  p.outputPadding = c.outPad;
  p.groups = c.groups;
  return p;
}

Shape outShape(const ConvCase &c, bool transposed) {
  Shape o{c.n, c.cout, 0, 0, 0};
  for (int a = 0; a < 3; ++a)
    o[2 + a] = transposed ? (c.in[a] - 1) * c.stride[a] - 2 * c.pad[a] +
                                c.dil[a] * (c.k[a] - 1) + c.outPad[a] + 1
                          : (c.in[a] + 2 * c.pad[a] - c.dil[a] * (c.k[a] - 1) - 1) / c.stride[a] + 1;
  return o;
}

/// The defining sum, one weight at a time.
Tensor naiveGradWeight(const Tensor &x, const Tensor &dy, const ConvParams &p, const Shape &ws) {
  Tensor dw(DType::F64, ws);
  const int64_t N = x.dim(0), cin = x.dim(1), cout = dy.dim(1), g = p.groups;
  const int64_t cinG = cin / g, coutG = cout / g;
  const int64_t D = x.dim(2), H = x.dim(3), W = x.dim(4);
  const int64_t OD = dy.dim(2), OH = dy.dim(3), OW = dy.dim(4);
  int64_t wi = 0;
  for (int64_t co = 0; co < cout; ++co)
    for (int64_t cl = 0; cl < cinG; ++cl)
      for (int64_t a = 0; a < ws[2]; ++a)
        for (int64_t b = 0; b < ws[3]; ++b)
          for (int64_t c = 0; c < ws[4]; ++c, ++wi) {
            double s = 0;
            const int64_t ci = (co / coutG) * cinG + cl;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t z = 0; z < OD; ++z)
                for (int64_t y = 0; y < OH; ++y)
                  for (int64_t q = 0; q < OW; ++q) {
                    int64_t id = z * p.stride[0] - p.padding[0] + a * p.dilation[0];
                    int64_t ih = y * p.stride[1] - p.padding[1] + b * p.dilation[1];
                    int64_t iw = q * p.stride[2] - p.padding[2] + c * p.dilation[2];
                    if (id < 0 || ih < 0 || iw < 0 || id >= D || ih >= H || iw >= W)
                      continue;
                    s += dy.at((((n * cout + co) * OD + z) * OH + y) * OW + q) *
                         x.at((((n * cin + ci) * D + id) * H + ih) * W + iw);
                  }
            dw.data<double>()[wi] = s;
          }
  return dw;
}

void checkConvGrad(const ConvCase &c, bool transposed) {
  SCOPED_TRACE(c.name + (transposed ? " (transposed)" : ""));
  const ConvParams p = paramsOf(c);
  const Shape xs{c.n, c.cin, c.in[0], c.in[1], c.in[2]}, ys = outShape(c, transposed);
  // conv3d: w Cout×Cin/g×k; conv3d_transpose: w Cin×Cout/g×k.
  const Shape ws = transposed ? Shape{c.cin, c.cout / c.groups, c.k[0], c.k[1], c.k[2]}
                              : Shape{c.cout, c.cin / c.groups, c.k[0], c.k[1], c.k[2]};
  Tensor x = random(xs, 1), w = random(ws, 2), r = random(ys, 3);
  // The weight gradient: for conv3d from (x, dy = r); for the transposed conv with the
  // roles swapped, from (r, x).
  auto grad = [&](DType dt, bool bf) {
    Tensor dw(dt, ws);
    if (transposed)
      conv3dGradWeight(as(r, dt, bf), as(x, dt, bf), p, dw);
    else
      conv3dGradWeight(as(x, dt, bf), as(r, dt, bf), p, dw);
    return dw;
  };
  Tensor dw = grad(DType::F64, false);
  auto loss = [&] {
    Tensor y(DType::F64, ys);
    if (transposed)
      conv3dTranspose(x, w, nullptr, p, y);
    else
      conv3d(x, w, nullptr, p, y);
    return dot(y, r);
  };
  expectFD(w, dw, loss, "dw");
  Tensor ref = transposed ? naiveGradWeight(r, x, p, ws) : naiveGradWeight(x, r, p, ws);
  EXPECT_LT(relErr(dw, ref), 1e-12);
  expectTypesAgree([&](DType dt, bool bf) { return Tensors{grad(dt, bf)}; }, "dtypes");
}

TEST(KernelsGrad, ConvWeight) {
  checkConvGrad({"dense k3 s1 p1", 2, 3, 4, 1, {5, 6, 7}, k3, s1, p1, s1, p0}, false);
  checkConvGrad({"groups, mixed stride/padding/dilation", 2, 4, 6, 2, {7, 6, 9}, {3, 2, 3},
                 {2, 1, 3}, {1, 0, 2}, {1, 2, 1}, p0},
                false);
  checkConvGrad({"dilation 2", 1, 2, 3, 1, {9, 8, 7}, k3, s1, p1, s2, p0}, false);
  checkConvGrad({"depthwise k3", 2, 5, 5, 5, {7, 8, 9}, k3, s1, p1, s1, p0}, false);
  checkConvGrad({"depthwise k5", 1, 3, 3, 3, {7, 6, 9}, k5, s1, p2, s1, p0}, false);
  checkConvGrad({"depthwise k3 s2", 2, 3, 3, 3, {7, 8, 9}, k3, s2, p1, s1, p0}, false);
  checkConvGrad({"depthwise multiplier 2", 1, 3, 6, 3, {5, 6, 7}, k3, s1, p1, s1, p0}, false);
  checkConvGrad({"1x1x1", 2, 7, 5, 1, {5, 6, 7}, k1, s1, p0, s1, p0}, false);
  checkConvGrad({"1x1x1 s2 p1", 1, 5, 7, 1, {7, 6, 5}, k1, s2, p1, s1, p0}, false);
  checkConvGrad({"1x1x1 groups 3", 2, 6, 9, 3, {3, 5, 7}, k1, s1, p0, s1, p0}, false);
  checkConvGrad({"stride 2 k2 (downsampling)", 1, 4, 3, 1, {7, 6, 9}, {2, 2, 2}, s2, p0, s1, p0},
                false);
}

TEST(KernelsGrad, ConvTransposeWeightViaSwappedRoles) {
  checkConvGrad({"dense k3 s2 p1 output_padding 1", 2, 3, 4, 1, {3, 4, 5}, k3, s2, p1, s1, p1},
                true);
  checkConvGrad({"depthwise k3 s2 p1", 1, 4, 4, 4, {4, 5, 3}, k3, s2, p1, s1, p1}, true);
  checkConvGrad({"1x1x1 s2 (upsampling)", 2, 5, 3, 1, {3, 4, 5}, k1, s2, p0, s1, p1}, true);
  checkConvGrad({"1x1x1 s1", 1, 6, 4, 2, {3, 4, 5}, k1, s1, p0, s1, p0}, true);
  checkConvGrad({"k2 s2", 1, 3, 2, 1, {3, 4, 2}, {2, 2, 2}, s2, p0, s1, p0}, true);
  checkConvGrad({"groups, mixed", 2, 4, 6, 2, {3, 4, 5}, {3, 2, 3}, {2, 3, 1}, {1, 0, 1},
                 {1, 2, 2}, {1, 1, 0}},
                true);
}

TEST(KernelsGrad, ConvWeightDeterministicOnLargerProblems) {
  // Several voxel chunks (1×1×1) and row chunks (direct) per weight.
  Tensor x = random({2, 8, 20, 21, 22}, 4).to(DType::F32);
  Tensor dy1 = random({2, 16, 20, 21, 22}, 5).to(DType::F32);
  Tensor dyd = random({2, 8, 20, 21, 22}, 6).to(DType::F32);
  auto both = [](const std::function<Tensor()> &f, const std::string &what) {
    int saved = numThreads();
    setNumThreads(1);
    Tensor a = f();
    setNumThreads(3);
    Tensor b = f();
    setNumThreads(saved);
    EXPECT_TRUE(sameBits(a, b)) << what << ": 1 and 3 threads differ";
  };
  both([&] {
    Tensor dw(DType::F32, {16, 8, 1, 1, 1});
    conv3dGradWeight(x, dy1, ConvParams{}, dw);
    return dw;
  }, "1x1x1");
  both([&] {
    Tensor dw(DType::F32, {8, 1, 3, 3, 3});
    ConvParams p;
    p.padding = {1, 1, 1};
    p.groups = 8;
    conv3dGradWeight(x, dyd, p, dw);
    return dw;
  }, "depthwise k3");
  both([&] {
    Tensor dw(DType::F32, {8, 8, 3, 3, 3});
    ConvParams p;
    p.padding = {1, 1, 1};
    conv3dGradWeight(x, dyd, p, dw);
    return dw;
  }, "dense k3");
  // And the F32 result agrees with F64 on this larger reduction.
  Tensor dw32(DType::F32, {16, 8, 1, 1, 1}), dw64(DType::F64, {16, 8, 1, 1, 1});
  conv3dGradWeight(x, dy1, ConvParams{}, dw32);
  conv3dGradWeight(x.to(DType::F64), dy1.to(DType::F64), ConvParams{}, dw64);
  EXPECT_LT(relErr(dw32, dw64), 1e-5);
}

TEST(KernelsGrad, ConvWeightRejectsMismatchedShapes) {
  Tensor x(DType::F64, {1, 4, 3, 3, 3}), dy(DType::F64, {1, 6, 3, 3, 3});
  Tensor bad(DType::F64, {6, 3, 1, 1, 1});
  ConvParams p;
  p.groups = 2;
  EXPECT_THROW(conv3dGradWeight(x, dy, p, bad), Error);
  Tensor dw32(DType::F32, {6, 2, 1, 1, 1});
  EXPECT_THROW(conv3dGradWeight(x, dy, p, dw32), Error);
}

// ---- normalizations -----------------------------------------------------------------------

enum class NormKind { Group, Layer, Grn };

void checkNormGrad(NormKind kind, const Shape &shape, int64_t groups, uint64_t seed,
                   bool zeroChannel = false) {
  const double eps = kind == NormKind::Group ? 1e-5 : 1e-6;
  const int64_t C = shape[1];
  const Shape ps = kind == NormKind::Grn ? Shape{1, C, 1, 1, 1} : Shape{C};
  Tensor x = random(shape, seed, -2, 3), g = random(ps, seed + 1), b = random(ps, seed + 2);
  Tensor r = random(shape, seed + 3);
  if (zeroChannel) { // channel 1 of sample 0 all zero: a zero norm for grn
    const int64_t S = x.numel() / (shape[0] * C);
    for (int64_t i = 0; i < S; ++i)
      x.data<double>()[S + i] = 0;
  }
  auto grads = [&](DType dt, bool bf) {
    // gamma, beta and their gradients in the accumulation type, as the executor keeps them
    const DType st = dt == DType::F64 ? DType::F64 : DType::F32;
    Tensor dx(dt, shape), dg(st, ps), db(st, ps);
    Tensor xi = as(x, dt, bf), gi = as(g, st, bf), ri = as(r, dt, bf);
    switch (kind) {
    case NormKind::Group: { // from the statistics the forward kernel saves
      Tensor y(dt, shape), mean(st, {shape[0], groups}), rstd(st, {shape[0], groups});
      groupNorm(xi, gi, as(b, st, bf), groups, eps, y, &mean, &rstd);
      groupNormGrad(xi, gi, mean, rstd, ri, groups, dx, dg, db);
      break;
    }
    case NormKind::Layer: channelLayerNormGrad(xi, gi, ri, eps, dx, dg, db); break;
    case NormKind::Grn: grnGrad(xi, gi, ri, eps, dx, dg, db); break;
    }
    return Tensors{dx, dg, db};
  };
  auto loss = [&] {
    Tensor y(DType::F64, shape);
    switch (kind) {
    case NormKind::Group: groupNorm(x, g, b, groups, eps, y); break;
    case NormKind::Layer: channelLayerNorm(x, g, b, eps, y); break;
    case NormKind::Grn: grn(x, g, b, eps, y); break;
    }
    return dot(y, r);
  };
  Tensors d = grads(DType::F64, false);
  expectFD(x, d[0], loss, "dx", seed);
  expectFD(g, d[1], loss, "dgamma", seed);
  expectFD(b, d[2], loss, "dbeta", seed);
  if (zeroChannel) { // there dx = dy (the norm's own derivative is taken as 0)
    const int64_t S = x.numel() / (shape[0] * C);
    for (int64_t i = 0; i < S; ++i)
      EXPECT_NEAR(d[0].at(S + i), r.at(S + i), 1e-12);
  }
  expectTypesAgree(grads, "dtypes");
}

TEST(KernelsGrad, GroupNorm) {
  for (auto [shape, groups] : std::vector<std::pair<Shape, int64_t>>{
           {{2, 6, 5, 4, 3}, 1}, {{2, 6, 5, 4, 3}, 2}, {{2, 6, 5, 4, 3}, 3},
           {{2, 6, 5, 4, 3}, 6}, {{3, 2, 7}, 2}, {{1, 4, 21, 22, 23}, 2}}) {
    SCOPED_TRACE(shapeStr(shape) + " groups " + std::to_string(groups));
    checkNormGrad(NormKind::Group, shape, groups, 20);
  }
}

TEST(KernelsGrad, ChannelLayerNorm) {
  for (const Shape &shape : std::vector<Shape>{{2, 5, 4, 5, 3}, {3, 4, 7}, {2, 3, 17, 18, 19}}) {
    SCOPED_TRACE(shapeStr(shape));
    checkNormGrad(NormKind::Layer, shape, 1, 30);
  }
}

TEST(KernelsGrad, Grn) {
  for (const Shape &shape : std::vector<Shape>{{2, 5, 4, 5, 3}, {1, 3, 21, 22, 23}}) {
    SCOPED_TRACE(shapeStr(shape));
    checkNormGrad(NormKind::Grn, shape, 1, 40);
  }
  SCOPED_TRACE("zero channel");
  checkNormGrad(NormKind::Grn, {2, 4, 3, 5, 3}, 1, 50, true);
}

TEST(KernelsGrad, GroupNormRejectsBadStatistics) {
  Tensor x(DType::F32, {2, 4, 3}), g(DType::F32, {4}), dx(DType::F32, {2, 4, 3});
  Tensor dg(DType::F32, {4}), db(DType::F32, {4}), ok(DType::F32, {2, 2});
  Tensor f64(DType::F64, {2, 2}), small(DType::F32, {2, 1});
  EXPECT_THROW(groupNormGrad(x, g, f64, ok, x, 2, dx, dg, db), Error);
  EXPECT_THROW(groupNormGrad(x, g, ok, small, x, 2, dx, dg, db), Error);
  // bf16 storage reads its statistics in float.
  Tensor xb(DType::BF16, {2, 4, 3}), gb(DType::F32, {4}), dxb(DType::BF16, {2, 4, 3});
  Tensor dgb(DType::F32, {4}), dbb(DType::F32, {4}), b16(DType::BF16, {2, 2});
  EXPECT_THROW(groupNormGrad(xb, gb, b16, b16, xb, 2, dxb, dgb, dbb), Error);
}

// ---- max / min, reduce max / min, strided slice -------------------------------------------

/// x broadcast to `shape` (the broadcast kernel is checked against a naive loop below).
Tensor expanded(const Tensor &x, const Shape &shape) {
  Tensor y(x.dtype(), shape);
  broadcast(x, y);
  return y;
}

TEST(KernelsGrad, ExtremumAgainstRule) {
  // torch.maximum / minimum's backward at every element, ties and NaNs included:
  // where(a == b, dy/2, dy), zeroed where the other side wins.
  const std::vector<std::array<Shape, 3>> cases{{Shape{2, 3, 4}, Shape{3, 1}, Shape{2, 3, 4}},
                                                {Shape{}, Shape{2, 5}, Shape{2, 5}},
                                                {Shape{4, 1, 3}, Shape{1, 5, 1}, Shape{4, 5, 3}},
                                                {Shape{3, 7}, Shape{3, 7}, Shape{3, 7}}};
  for (const auto &[as_, bs, ys] : cases) {
    SCOPED_TRACE(shapeStr(as_) + " vs " + shapeStr(bs));
    // Values on a coarse grid so that ties are frequent; one NaN (in b if a is a scalar).
    Tensor a = random(as_, 80), b = random(bs, 81), r = random(ys, 82);
    for (Tensor *t : {&a, &b})
      for (int64_t i = 0; i < t->numel(); ++i)
        t->data<double>()[i] = std::round(t->at(i) * 2) / 2;
    (a.numel() > 1 ? a : b).data<double>()[0] = std::nan("");
    Tensor ea = expanded(a, ys), eb = expanded(b, ys);
    for (Extremum op : {Extremum::Max, Extremum::Min}) {
      const bool isMax = op == Extremum::Max;
      int ties = 0;
      for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
        Tensor da(dt, ys), db(dt, ys);
        extremumGrad(op, a.to(dt), b.to(dt), r.to(dt), da, db);
        const Tensor g = r.to(dt);
        for (int64_t i = 0; i < g.numel(); ++i) {
          const double u = ea.at(i), v = eb.at(i), gi = g.at(i);
          const double shared = u == v ? gi / 2 : gi;
          ties += u == v;
          ASSERT_EQ(da.at(i), (isMax ? u < v : u > v) ? 0.0 : shared) << "da, element " << i;
          ASSERT_EQ(db.at(i), (isMax ? u > v : u < v) ? 0.0 : shared) << "db, element " << i;
        }
      }
      EXPECT_GT(ties, 0);
    }
  }
  Tensor a(DType::F32, {2, 3}), b(DType::F32, {4}), dy(DType::F32, {2, 3});
  EXPECT_THROW(extremumGrad(Extremum::Max, a, b, dy, dy, dy), Error);
  Tensor d2(DType::F32, {3, 2});
  EXPECT_THROW(extremumGrad(Extremum::Max, a, a, dy, d2, dy), Error);
}

TEST(KernelsGrad, ExtremumFiniteDifferences) {
  // Without broadcasting the gradients are the partial derivatives of Σ r ⊙ max(a, b); at a
  // tie the central difference is dy/2 too, the rule's choice.
  const Shape shape{3, 5, 7};
  for (Extremum op : {Extremum::Max, Extremum::Min}) {
    Tensor a = random(shape, 90), b = random(shape, 91), r = random(shape, 92);
    for (int64_t i = 0; i < a.numel(); i += 3)
      b.data<double>()[i] = a.at(i);
    Tensor da(DType::F64, shape), db(DType::F64, shape);
    extremumGrad(op, a, b, r, da, db);
    auto loss = [&] {
      Tensor y(DType::F64, shape);
      binary(op == Extremum::Max ? Binary::Max : Binary::Min, a, b, y);
      return dot(y, r);
    };
    expectFD(a, da, loss, "da");
    expectFD(b, db, loss, "db");
    EXPECT_EQ(da.at(0), r.at(0) / 2); // a tie
    expectTypesAgree([&](DType dt, bool bf) {
      Tensor x(dt, shape), y(dt, shape);
      extremumGrad(op, as(a, dt, bf), as(b, dt, bf), as(r, dt, bf), x, y);
      return Tensors{x, y};
    }, "dtypes");
  }
}

TEST(KernelsGrad, ReduceExtremum) {
  // dx = (dy / count) · (x == extremum) per reduced set, against a loop over the sets of a
  // 4-D tensor; values on a coarse grid make ties (count > 1) frequent.
  const Shape shape{3, 4, 5, 2};
  const std::vector<std::vector<int64_t>> axesCases{{1}, {0, 2}, {1, 2, 3}, {0, 1, 2, 3}, {}};
  for (const auto &axes : axesCases) {
    std::string name;
    for (int64_t a : axes)
      name += std::to_string(a) + " ";
    SCOPED_TRACE("axes " + name);
    Shape ys;
    for (int64_t d = 0; d < 4; ++d)
      ys.push_back(std::find(axes.begin(), axes.end(), d) == axes.end() ? shape[d] : 1);
    Tensor x = random(shape, 95);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<double>()[i] = std::round(x.at(i) * 2) / 2;
    Tensor r = random(ys, 96);
    for (Reduce kind : {Reduce::Max, Reduce::Min}) {
      for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
        Tensor xi = x.to(dt), y(dt, ys), g = r.to(dt), dx(dt, shape);
        reduce(kind, xi, axes, y);
        reduceExtremumGrad(xi, y, g, axes, dx);
        // Output element of each input index: the kept coordinates.
        auto outIndex = [&](int64_t i) {
          int64_t o = 0, stride = 1, rest = i;
          std::array<int64_t, 4> c{};
          for (int64_t d = 3; d >= 0; --d) {
            c[d] = rest % shape[d];
            rest /= shape[d];
          }
          for (int64_t d = 3; d >= 0; --d) {
            o += (ys[d] == 1 ? 0 : c[d]) * stride;
            stride *= ys[d];
          }
          return o;
        };
        std::vector<int64_t> count(y.numel(), 0);
        for (int64_t i = 0; i < x.numel(); ++i)
          count[outIndex(i)] += xi.at(i) == y.at(outIndex(i));
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int64_t o = outIndex(i);
          ASSERT_GE(count[o], 1);
          const double want = xi.at(i) == y.at(o) ? g.at(o) / count[o] : 0.0;
          ASSERT_NEAR(dx.at(i), want, dt == DType::F64 ? 0 : std::abs(want) * 1e-2)
              << dtypeName(dt) << " element " << i;
        }
      }
    }
  }
  // Without ties: finite differences of Σ r ⊙ reduce max.
  Tensor x = random(shape, 97), r = random({3, 5}, 98), y(DType::F64, {3, 5}),
         dx(DType::F64, shape);
  reduce(Reduce::Max, x, {1, 3}, y);
  reduceExtremumGrad(x, y, r, {1, 3}, dx);
  expectFD(x, dx, [&] {
    Tensor z(DType::F64, {3, 5});
    reduce(Reduce::Max, x, {1, 3}, z);
    return dot(z, r);
  }, "dx");
  // A NaN in a set: its extremum is NaN, which no element equals: NaN gradients (torch).
  Tensor xn = random({2, 3}, 99), yn(DType::F64, {2}), dn(DType::F64, {2, 3});
  xn.data<double>()[4] = std::nan("");
  reduce(Reduce::Max, xn, {1}, yn);
  reduceExtremumGrad(xn, yn, make(DType::F64, {2}, {1.0, 1.0}), {1}, dn);
  EXPECT_FALSE(std::isnan(dn.at(0)));
  EXPECT_TRUE(std::isnan(dn.at(3)) && std::isnan(dn.at(5)));
  Tensor bad(DType::F64, {3});
  EXPECT_THROW(reduceExtremumGrad(xn, bad, yn, {1}, dn), Error);
}

TEST(KernelsGrad, SliceGrad) {
  // The adjoint of slice: <slice(x), dy> = <x, sliceGrad(dy)> for every x, dy; and every
  // element of dx outside the box is zero.
  const Shape xs{3, 8, 9, 7};
  const std::vector<int64_t> offsets{1, 0, 2, 1}, strides{1, 3, 2, 2};
  const Shape ys{2, 3, 4, 3};
  Tensor x = random(xs, 110), dy = random(ys, 111), y(DType::F64, ys), dx(DType::F64, xs);
  slice(x, offsets, strides, y);
  sliceGrad(dy, offsets, strides, dx);
  EXPECT_NEAR(dot(y, dy), dot(x, dx), 1e-12);
  int64_t nonzero = 0;
  for (int64_t i = 0; i < dx.numel(); ++i)
    nonzero += dx.at(i) != 0;
  EXPECT_EQ(nonzero, dy.numel());
  // Any dtype, bytes moved as they are; same bits for any thread count.
  for (DType dt : {DType::F32, DType::BF16, DType::I64}) {
    Tensor g = make(dt, ys, vals(random(ys, 112, -50, 50))), d(dt, xs), t(dt, ys);
    sliceGrad(g, offsets, strides, d);
    slice(d, offsets, strides, t);
    EXPECT_TRUE(sameBits(t, g)) << dtypeName(dt);
  }
  int saved = numThreads();
  setNumThreads(1);
  Tensor one(DType::F32, xs);
  sliceGrad(dy.to(DType::F32), offsets, strides, one);
  setNumThreads(3);
  Tensor three(DType::F32, xs);
  sliceGrad(dy.to(DType::F32), offsets, strides, three);
  setNumThreads(saved);
  EXPECT_TRUE(sameBits(one, three));
  Tensor big(DType::F64, {2, 3, 5, 3});
  EXPECT_THROW(sliceGrad(big, offsets, strides, dx), Error);
  Tensor other(DType::F32, xs);
  EXPECT_THROW(sliceGrad(dy, offsets, strides, other), Error);
}

// ---- gelu, broadcast ----------------------------------------------------------------------

TEST(KernelsGrad, Gelu) {
  const Shape shape{3, 5, 7, 9};
  Tensor x = random(shape, 60, -4, 4), r = random(shape, 61);
  x.data<double>()[0] = 0;
  auto grad = [&](DType dt, bool bf) {
    Tensor dx(dt, shape);
    geluGrad(as(x, dt, bf), as(r, dt, bf), dx);
    return Tensors{dx};
  };
  Tensor dx = grad(DType::F64, false)[0];
  expectFD(x, dx, [&] {
    Tensor y(DType::F64, shape);
    unary(Unary::Gelu, x, y);
    return dot(y, r);
  }, "dx");
  EXPECT_DOUBLE_EQ(dx.at(0), 0.5 * r.at(0)); // Φ(0) = ½
  expectTypesAgree(grad, "dtypes");
}

TEST(KernelsGrad, Broadcast) {
  const std::vector<std::pair<Shape, Shape>> cases{
      {{3, 1, 4}, {2, 3, 5, 4}}, {{}, {2, 3}},          {{1}, {4}},
      {{2, 1, 1, 3}, {2, 4, 5, 3}}, {{2, 3, 4}, {2, 3, 4}}, {{5, 1}, {1, 5, 7}},
      {{1, 6, 1, 1, 1}, {2, 6, 3, 4, 5}}};
  for (auto [xs, ys] : cases) {
    SCOPED_TRACE(shapeStr(xs) + " -> " + shapeStr(ys));
    for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::I64}) {
      Tensor x = make(dt, xs, vals(random(xs, 70, -5, 5))), y(dt, ys);
      broadcast(x, y);
      // Naive: each output index, aligned at the trailing axes, size-1 axes read index 0.
      const int64_t ry = static_cast<int64_t>(ys.size()), rx = static_cast<int64_t>(xs.size());
      for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t rest = i, xi = 0, xstride = 1;
        for (int64_t a = ry - 1; a >= 0; --a) {
          const int64_t idx = rest % ys[a];
          rest /= ys[a];
          const int64_t ax = a - (ry - rx);
          if (ax >= 0) {
            if (xs[ax] != 1)
              xi += idx * xstride;
            xstride *= xs[ax];
          }
        }
        ASSERT_EQ(y.at(i), x.at(xi)) << dtypeName(dt) << " element " << i;
      }
    }
  }
  Tensor x(DType::F32, {3, 2}), y(DType::F32, {3, 4});
  EXPECT_THROW(broadcast(x, y), Error);
  Tensor y64(DType::F64, {3, 2});
  EXPECT_THROW(broadcast(x, y64), Error);
}

// ---- losses -------------------------------------------------------------------------------

TEST(KernelsGrad, BceWithLogits) {
  const Shape shape{2, 3, 5, 4, 3};
  const int64_t N = 2, C = 3, S = 60;
  Tensor x = random(shape, 80, -4, 4), r = random(shape, 83);
  // Channel 0: soft targets, 1: binary, 2: all zero.
  Values tv = vals(random(shape, 81, 0, 1)), mv = vals(random(shape, 82, 0, 1));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i) {
      tv[(n * C + 1) * S + i] = tv[(n * C + 1) * S + i] > 0.6 ? 1 : 0;
      tv[(n * C + 2) * S + i] = 0;
    }
  for (double &m : mv)
    m = m > 0.3 ? 1 : 0;
  Tensor t = make(DType::F64, shape, tv), mask = make(DType::F64, shape, mv);
  // A mask leaving channel 2 empty (per_channel: its count is 0).
  Values mv2 = mv;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i)
      mv2[(n * C + 2) * S + i] = 0;
  Tensor mask2 = make(DType::F64, shape, mv2);
  Tensor pwC = make(DType::F64, {C}, {0.5, 2.0, 3.0}), pw1 = make(DType::F64, {1}, {2.5});
  const double up = 1.3; // the upstream gradient of a reduced loss
  for (int masks = 0; masks < 3; ++masks)     // none, mask, mask with an empty channel
    for (int weights = 0; weights < 4; ++weights) // none, per channel, single, auto
      for (LossReduction red : {LossReduction::Mean, LossReduction::Sum, LossReduction::None,
                                LossReduction::PerChannel}) {
        const std::string what = "mask " + std::to_string(masks) + " weights " +
                                 std::to_string(weights) + " reduction " +
                                 std::to_string(static_cast<int>(red));
        SCOPED_TRACE(what);
        BceParams p;
        p.reduction = red;
        p.autoPosWeight = weights == 3;
        p.maxPosWeight = 7.5;
        const Tensor *m = masks == 0 ? nullptr : masks == 1 ? &mask : &mask2;
        const Tensor *pw = weights == 1 ? &pwC : weights == 2 ? &pw1 : nullptr;
        const bool none = red == LossReduction::None;
        auto grad = [&](DType dt, bool bf) {
          Tensor mi = m ? m->to(dt) : Tensor(), pwi = pw ? as(*pw, dt, bf) : Tensor();
          const DType lossType = dt == DType::F64 ? DType::F64 : DType::F32;
          Tensor dl = none ? as(r, dt, bf) : make(lossType, {}, {up});
          Tensor dx(dt, shape);
          bceWithLogitsGrad(as(x, dt, bf), as(t, dt, bf), m ? &mi : nullptr, pw ? &pwi : nullptr,
                            dl, p, dx);
          return Tensors{dx};
        };
        Tensor dx = grad(DType::F64, false)[0];
        expectFD(x, dx, [&] {
          Tensor y = none ? Tensor(DType::F64, shape) : Tensor(DType::F64, {});
          bceWithLogits(x, t, m, pw, p, y);
          return none ? dot(y, r) : up * y.at(0);
        }, "dlogits");
        if (m)
          for (int64_t i = 0; i < dx.numel(); ++i)
            if (m->at(i) == 0)
              ASSERT_EQ(dx.at(i), 0.0) << "masked-out element " << i;
        expectTypesAgree(grad, "dtypes");
      }
}

void checkDiceCEGrad(const std::vector<Shape> &shapes, DiceCEParams p, DType targetType,
                     uint64_t seed, double h = 1e-6) {
  std::vector<Tensor> xs, ts;
  for (size_t l = 0; l < shapes.size(); ++l) {
    Shape ts_ = shapes[l];
    ts_[1] = 1;
    xs.push_back(random(shapes[l], seed + 10 * l, -3, 3));
    Values tv = vals(random(ts_, seed + 10 * l + 1, 0, static_cast<double>(shapes[l][1])));
    for (double &v : tv)
      v = std::floor(v);
    ts.push_back(make(targetType, ts_, tv));
  }
  const double up = 0.7;
  auto grads = [&](DType dt, bool bf) {
    std::vector<Tensor> xi, dx;
    std::vector<const Tensor *> xp, tp;
    std::vector<Tensor *> dp;
    for (size_t l = 0; l < xs.size(); ++l) {
      xi.push_back(as(xs[l], dt, bf));
      dx.emplace_back(dt, shapes[l]);
    }
    for (size_t l = 0; l < xs.size(); ++l) {
      xp.push_back(&xi[l]);
      tp.push_back(&ts[l]);
      dp.push_back(&dx[l]);
    }
    diceCEGrad(xp, tp, make(dt == DType::F64 ? DType::F64 : DType::F32, {}, {up}), p, dp);
    return dx;
  };
  Tensors d = grads(DType::F64, false);
  std::vector<const Tensor *> xp, tp;
  for (size_t l = 0; l < xs.size(); ++l) {
    xp.push_back(&xs[l]);
    tp.push_back(&ts[l]);
  }
  for (size_t l = 0; l < xs.size(); ++l)
    expectFD(xs[l], d[l], [&] {
      Tensor y(DType::F64, {});
      diceCE(xp, tp, p, y);
      return up * y.at(0);
    }, "level " + std::to_string(l), seed, 1e-6, h);
  expectTypesAgree(grads, "dtypes");
}

TEST(KernelsGrad, DiceCE) {
  for (bool batchDice : {true, false})
    for (bool bg : {false, true})
      for (int levels : {1, 2}) {
        SCOPED_TRACE(std::string("batch_dice ") + (batchDice ? "on" : "off") + ", background " +
                     (bg ? "on" : "off") + ", levels " + std::to_string(levels));
        DiceCEParams p;
        p.batchDice = batchDice;
        p.includeBackground = bg;
        p.weights = levels == 1 ? std::vector<double>{1.0} : std::vector<double>{0.6, 0.4};
        std::vector<Shape> shapes{{2, 4, 5, 6, 7}};
        if (levels == 2)
          shapes.push_back({2, 4, 3, 3, 4});
        checkDiceCEGrad(shapes, p, levels == 1 ? DType::I64 : DType::F32, 90);
      }
  // Weighted terms, larger smooth, three classes, 2-D, several pieces per sample.
  DiceCEParams p;
  p.weights = {0.25};
  p.smooth = 0.5;
  p.ceWeight = 2;
  p.diceWeight = 0.5;
  SCOPED_TRACE("weighted");
  // The gradients are ~1/M here (M = 5183 voxels) while L's rounding error is that of a sum
  // of M terms: a larger step keeps the difference quotient's noise below the tolerance.
  checkDiceCEGrad({{1, 3, 71, 73}}, p, DType::U8, 95, 1e-4);
}

TEST(KernelsGrad, DiceCENoKeptClass) {
  // C = 1 without background: the dice term is NaN, but no gradient flows from it; the CE
  // gradient of a single class is 0.
  Tensor x = random({2, 1, 3, 4}, 100), t(DType::I64, {2, 1, 3, 4}), dx(DType::F64, {2, 1, 3, 4});
  DiceCEParams p;
  p.weights = {1.0};
  diceCEGrad({&x}, {&t}, make(DType::F64, {}, {1.0}), p, {&dx});
  for (int64_t i = 0; i < dx.numel(); ++i)
    EXPECT_EQ(dx.at(i), 0.0);
  Tensor bad = make(DType::I64, {2, 1, 3, 4}, Values(24, 3.0));
  EXPECT_THROW(diceCEGrad({&x}, {&bad}, make(DType::F64, {}, {1.0}), p, {&dx}), Error);
}

// ---- edge cases ---------------------------------------------------------------------------

TEST(KernelsGrad, EmptyTensorsDoNotCrash) {
  for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dt));
    Tensor x(dt, {0, 3, 4, 4, 4}), dy5(dt, {0, 5, 4, 4, 4}), dy3(dt, {0, 3, 4, 4, 4});
    Tensor dw = make(dt, {5, 3, 1, 1, 1}, Values(15, 9.0)), dwd(dt, {3, 1, 3, 3, 3});
    conv3dGradWeight(x, dy5, ConvParams{}, dw);
    EXPECT_EQ(dw.at(0), 0.0);
    ConvParams dwp;
    dwp.groups = 3;
    dwp.padding = {1, 1, 1};
    conv3dGradWeight(x, dy3, dwp, dwd);
    // Zero-size spatial input with padding: no terms.
    Tensor xs(dt, {1, 3, 0, 2, 2}), dys(dt, {1, 5, 2, 2, 2});
    ConvParams padded;
    padded.padding = {1, 0, 0};
    conv3dGradWeight(xs, dys, padded, dw);
    EXPECT_EQ(dw.at(0), 0.0);
    const DType st = dt == DType::F64 ? DType::F64 : DType::F32;
    Tensor g(st, {3}), dg = make(st, {3}, {1, 2, 3}), db = make(st, {3}, {1, 2, 3});
    Tensor dx(dt, {0, 3, 4, 4, 4});
    Tensor mean(st, {0, 3}), rstd(st, {0, 3});
    groupNormGrad(x, g, mean, rstd, dy3, 3, dx, dg, db);
    EXPECT_EQ(dg.at(1), 0.0);
    EXPECT_EQ(db.at(2), 0.0);
    channelLayerNormGrad(x, g, dy3, 1e-6, dx, dg, db);
    Tensor g5(st, {1, 3, 1, 1, 1}), dg5(st, {1, 3, 1, 1, 1}), db5(st, {1, 3, 1, 1, 1});
    grnGrad(x, g5, dy3, 1e-6, dx, dg5, db5);
    geluGrad(x, dy3, dx);
    Tensor e(dt, {0, 3}), eb(dt, {2, 0, 3});
    broadcast(e, eb);
    Tensor l(dt == DType::F64 ? DType::F64 : DType::F32, {});
    bceWithLogitsGrad(x, x, nullptr, nullptr, l, BceParams{}, dx);
    BceParams none;
    none.reduction = LossReduction::None;
    bceWithLogitsGrad(x, x, &x, nullptr, dy3, none, dx);
    Tensor gl(dt, {0, 3, 4, 4, 4}), gr(dt, {0, 3, 4, 4, 4});
    extremumGrad(Extremum::Max, x, Tensor(dt, {1, 3, 1, 1, 1}), dy3, gl, gr);
    Tensor m(dt, {0, 3}), dr(dt, {0, 3, 4, 4, 4});
    reduceExtremumGrad(x, m, m, {2, 3, 4}, dr);
    Tensor ds(dt, {0, 3, 9, 4, 4});
    sliceGrad(dy3, {0, 0, 1, 0, 0}, {1, 1, 2, 1, 1}, ds);
    Tensor xl(dt, {0, 4, 3}), tl(dt, {0, 1, 3}), dxl(dt, {0, 4, 3});
    DiceCEParams dp;
    dp.weights = {1.0};
    diceCEGrad({&xl}, {&tl}, l, dp, {&dxl});
  }
}

/// Not run by default: prints the speed of the weight gradients of MedNeXt's two hot
/// convolutions (run with --gtest_also_run_disabled_tests --gtest_filter='*GradTiming*').
TEST(KernelsGradTiming, DISABLED_ConvWeight) {
  const int64_t S = 64;
  Tensor x = random({1, 32, S, S, S}, 100).to(DType::F32);
  Tensor dy1 = random({1, 64, S, S, S}, 101).to(DType::F32);
  Tensor dyd = random({1, 32, S, S, S}, 102).to(DType::F32);
  Tensor dw1(DType::F32, {64, 32, 1, 1, 1}), dwd(DType::F32, {32, 1, 3, 3, 3});
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
  double t1 = best([&] { conv3dGradWeight(x, dy1, ConvParams{}, dw1); });
  double td = best([&] { conv3dGradWeight(x, dyd, dw, dwd); });
  double f1 = 2.0 * 32 * 64 * S * S * S, fd = 2.0 * 32 * 27 * S * S * S;
  std::printf("threads %d: 1x1x1 grad weight 1x32x64^3, 64 out: %.1f ms, %.1f GFLOP/s\n",
              numThreads(), t1 * 1e3, f1 / t1 * 1e-9);
  std::printf("threads %d: depthwise k3 grad weight 1x32x64^3: %.1f ms, %.1f GFLOP/s\n",
              numThreads(), td * 1e3, fd / td * 1e-9);
}

} // namespace
