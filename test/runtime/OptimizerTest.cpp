//===- OptimizerTest.cpp - AdamW and SGD kernels vs the textbook recurrences ------===//
//
// The references follow torch.optim's code paths written out in double: AdamW's lerp and
// addcdiv form, SGD's buffer and Nesterov form. Several steps, so the state feeds back.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace medrun;

namespace {

Tensor random(int64_t n, std::mt19937 &rng, double scale = 1.0) {
  Tensor t(DType::F64, {n});
  std::normal_distribution<double> d(0.0, scale);
  for (int64_t i = 0; i < n; ++i)
    t.data<double>()[i] = d(rng);
  return t;
}

Tensor scalar(double v) {
  Tensor t(DType::F64, {});
  t.data<double>()[0] = v;
  return t;
}

TEST(Optimizer, AdamWMatchesTorchRecurrence) {
  std::mt19937 rng(3);
  const int64_t n = 37;
  cpu::AdamWParams p{0.9, 0.95, 1e-6, 3e-2};
  Tensor param = random(n, rng), m(DType::F64, {n}), v(DType::F64, {n});
  std::vector<double> rp(param.data<double>(), param.data<double>() + n), rm(n, 0), rv(n, 0);
  for (int step = 1; step <= 4; ++step) {
    Tensor g = random(n, rng), np(DType::F64, {n}), nm(DType::F64, {n}), nv(DType::F64, {n});
    double lr = 1e-3 * step;
    cpu::adamw(param, g, m, v, scalar(lr), scalar(step), p, np, nm, nv);
    for (int64_t i = 0; i < n; ++i) {
      double gi = g.data<double>()[i];
      rp[i] *= 1 - lr * p.weightDecay;
      rm[i] += (1 - p.beta1) * (gi - rm[i]);
      rv[i] = rv[i] * p.beta2 + (1 - p.beta2) * gi * gi;
      double bc1 = 1 - std::pow(p.beta1, step), bc2 = 1 - std::pow(p.beta2, step);
      double denom = std::sqrt(rv[i]) / std::sqrt(bc2) + p.eps;
      rp[i] += -(lr / bc1) * rm[i] / denom;
      EXPECT_NEAR(np.data<double>()[i], rp[i], 1e-14) << "step " << step << " element " << i;
      EXPECT_NEAR(nm.data<double>()[i], rm[i], 1e-15);
      EXPECT_NEAR(nv.data<double>()[i], rv[i], 1e-15);
    }
    param = np, m = nm, v = nv;
  }
}

TEST(Optimizer, SGDNesterovMatchesTorchRecurrence) {
  std::mt19937 rng(5);
  const int64_t n = 29;
  for (bool nesterov : {false, true}) {
    cpu::SGDParams p{0.99, 3e-5, nesterov};
    Tensor param = random(n, rng), buf(DType::F64, {n});
    std::vector<double> rp(param.data<double>(), param.data<double>() + n), rb(n);
    for (int step = 1; step <= 4; ++step) {
      Tensor g = random(n, rng), np(DType::F64, {n}), nb(DType::F64, {n});
      cpu::sgd(param, g, buf, scalar(1e-2), p, np, nb);
      for (int64_t i = 0; i < n; ++i) {
        double d = g.data<double>()[i] + p.weightDecay * rp[i];
        // torch: the first step copies d into the buffer; later steps scale and add.
        rb[i] = step == 1 ? d : p.momentum * rb[i] + d;
        double update = nesterov ? d + p.momentum * rb[i] : rb[i];
        rp[i] -= 1e-2 * update;
        EXPECT_NEAR(np.data<double>()[i], rp[i], 1e-14);
        EXPECT_NEAR(nb.data<double>()[i], rb[i], 1e-14);
      }
      param = np, buf = nb;
    }
  }
}

TEST(Optimizer, FloatAndBF16FollowDouble) {
  std::mt19937 rng(7);
  const int64_t n = 1000;
  Tensor param = random(n, rng), g = random(n, rng), zeros(DType::F64, {n});
  Tensor np(DType::F64, {n}), nm(DType::F64, {n}), nv(DType::F64, {n});
  cpu::adamw(param, g, zeros, zeros, scalar(1e-3), scalar(1), {}, np, nm, nv);
  for (DType t : {DType::F32, DType::BF16}) {
    Tensor p = param.to(t), gg = g.to(t), z(t, {n}), a(t, {n}), b(t, {n}), c(t, {n});
    cpu::adamw(p, gg, z, z, scalar(1e-3), scalar(1), {}, a, b, c);
    double tol = t == DType::F32 ? 1e-6 : 1e-2;
    for (int64_t i = 0; i < n; i += 97)
      EXPECT_NEAR(a.at(i), np.at(i), tol * (1 + std::abs(np.at(i))));
  }
}

TEST(Optimizer, RejectsMismatchedStateAndStepZero) {
  Tensor p(DType::F32, {4}), q(DType::F32, {5}), lr(DType::F32, {}), t(DType::F32, {});
  Tensor a(DType::F32, {4}), b(DType::F32, {4}), c(DType::F32, {4});
  t.data<float>()[0] = 1;
  EXPECT_THROW(cpu::adamw(p, q, p, p, lr, t, {}, a, b, c), Error);
  t.data<float>()[0] = 0;
  EXPECT_THROW(cpu::adamw(p, p, p, p, lr, t, {}, a, b, c), Error);
}

} // namespace
