//===- Optimizer.cpp - AdamW and SGD steps --------------------------------------===//
//
// Elementwise, in the formulas' order as torch.optim implements them (single-tensor path),
// so results match PyTorch to rounding.
//
//===----------------------------------------------------------------------------------===//
#include "Dispatch.h"
#include "medrun/Kernels.h"

#include <cmath>

namespace medrun::cpu {

using namespace detail;

namespace {
constexpr int64_t kGrain = 1 << 14;

void requireSame(const char *kernel, const Tensor &param,
                 std::initializer_list<std::pair<const char *, const Tensor *>> others) {
  for (auto [what, t] : others)
    if (t->shape() != param.shape() || t->dtype() != param.dtype())
      throw Error(str("med kernel ", kernel, ": ", what, " is ", shapeStr(t->shape()), " ",
                      dtypeName(t->dtype()), ", expected ", shapeStr(param.shape()), " ",
                      dtypeName(param.dtype()), " like the parameter"));
}
} // namespace

void adamw(const Tensor &param, const Tensor &grad, const Tensor &expAvg, const Tensor &expAvgSq,
           const Tensor &lr, const Tensor &step, const AdamWParams &p, Tensor &newParam,
           Tensor &newExpAvg, Tensor &newExpAvgSq) {
  requireSame("adamw", param,
              {{"grad", &grad}, {"exp_avg", &expAvg}, {"exp_avg_sq", &expAvgSq},
               {"new_param", &newParam}, {"new_exp_avg", &newExpAvg},
               {"new_exp_avg_sq", &newExpAvgSq}});
  double rate = lr.at(0), t = step.at(0);
  if (!(t >= 1))
    throw Error(str("med kernel adamw: step must be at least 1, got ", t));
  dispatchFloat(param.dtype(), "adamw", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const A decay = static_cast<A>(1 - rate * p.weightDecay);
    const A b2 = static_cast<A>(p.beta2);
    // 1 - β in double, then rounded, as torch's scalar (1 - beta2) reaches its f32 kernels:
    // 1 - 0.999f is 1.3e-5 off 0.001 (found by medcheck --against-f64).
    const A c1 = static_cast<A>(1 - p.beta1), c2 = static_cast<A>(1 - p.beta2);
    const A stepSize = static_cast<A>(rate / (1 - std::pow(p.beta1, t)));
    const A correction2 = static_cast<A>(std::sqrt(1 - std::pow(p.beta2, t)));
    const A eps = static_cast<A>(p.eps);
    const T *pp = ptr<T>(param), *g = ptr<T>(grad), *m = ptr<T>(expAvg), *v = ptr<T>(expAvgSq);
    T *np = ptr<T>(newParam), *nm = ptr<T>(newExpAvg), *nv = ptr<T>(newExpAvgSq);
    parallelFor(param.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        A gi = load(g[i]);
        A mi = load(m[i]) + c1 * (gi - load(m[i])); // torch: exp_avg.lerp_(g, 1 - β1)
        A vi = b2 * load(v[i]) + c2 * gi * gi;
        A denom = std::sqrt(vi) / correction2 + eps;
        np[i] = store<T>(load(pp[i]) * decay - stepSize * mi / denom);
        nm[i] = store<T>(mi);
        nv[i] = store<T>(vi);
      }
    });
  });
}

void sgd(const Tensor &param, const Tensor &grad, const Tensor &buffer, const Tensor &lr,
         const SGDParams &p, Tensor &newParam, Tensor &newBuffer) {
  requireSame("sgd", param,
              {{"grad", &grad}, {"momentum_buffer", &buffer}, {"new_param", &newParam},
               {"new_momentum_buffer", &newBuffer}});
  double rate = lr.at(0);
  dispatchFloat(param.dtype(), "sgd", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const A wd = static_cast<A>(p.weightDecay), mu = static_cast<A>(p.momentum);
    const A r = static_cast<A>(rate);
    const T *pp = ptr<T>(param), *g = ptr<T>(grad), *b = ptr<T>(buffer);
    T *np = ptr<T>(newParam), *nb = ptr<T>(newBuffer);
    parallelFor(param.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        A d = load(g[i]) + wd * load(pp[i]);
        A bi = mu * load(b[i]) + d;
        d = p.nesterov ? d + mu * bi : bi;
        np[i] = store<T>(load(pp[i]) - r * d);
        nb[i] = store<T>(bi);
      }
    });
  });
}

} // namespace medrun::cpu
