//===- LossScale.cpp - kernels of dynamic loss scaling ---------------------------===//
//
// The three ops with which a training step skips an update and adapts the loss scale on
// the device, as torch.amp.GradScaler does, without the host reading found_inf.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

namespace medrun::cpu {
using namespace detail;

namespace {
void requireScalar(const char *kernel, const char *what, const Tensor &t) {
  if (t.numel() != 1 || !isFloat(t.dtype()))
    throw Error(str("med kernel ", kernel, ": ", what, " must be a float scalar, got ",
                    shapeStr(t.shape()), " ", dtypeName(t.dtype())));
}
} // namespace

void anyNonFinite(const std::vector<const Tensor *> &inputs, Tensor &y) {
  requireScalar("any_non_finite", "result", y);
  std::atomic<bool> found{false};
  for (const Tensor *x : inputs) {
    if (found.load(std::memory_order_relaxed))
      break;
    if (x->dtype() == DType::F16) { // no kernel computes in f16; read it as stored
      for (int64_t i = 0; i < x->numel() && !found; ++i)
        found = !std::isfinite(x->at(i));
      continue;
    }
    dispatchFloat(x->dtype(), "any_non_finite", [&](auto tag) {
      using T = decltype(tag);
      const T *p = ptr<T>(*x);
      parallelFor(x->numel(), 1 << 16, [&](int64_t b, int64_t e) {
        if (found.load(std::memory_order_relaxed))
          return;
        bool any = false;
        for (int64_t i = b; i < e; ++i)
          any |= !std::isfinite(load(p[i]));
        if (any)
          found.store(true, std::memory_order_relaxed);
      });
    });
  }
  storeAny(y, 0, found ? 1.0 : 0.0);
}

void select(const Tensor &cond, const Tensor &onTrue, const Tensor &onFalse, Tensor &y) {
  requireScalar("select", "cond", cond);
  for (const Tensor *t : {&onTrue, &onFalse})
    if (t->dtype() != y.dtype() || t->shape() != y.shape())
      throw Error(str("med kernel select: operands ", shapeStr(onTrue.shape()), " ",
                      dtypeName(onTrue.dtype()), " and ", shapeStr(onFalse.shape()), " ",
                      dtypeName(onFalse.dtype()), " do not match the result ",
                      shapeStr(y.shape()), " ", dtypeName(y.dtype())));
  const Tensor &chosen = cond.at(0) != 0 ? onTrue : onFalse; // NaN != 0: on_true
  std::memcpy(y.raw(), chosen.raw(), y.nbytes());
}

void updateLossScale(const Tensor &scale, const Tensor &tracker, const Tensor &foundInf,
                     const LossScaleParams &p, Tensor &newScale, Tensor &newTracker) {
  requireScalar("update_loss_scale", "scale", scale);
  requireScalar("update_loss_scale", "growth_tracker", tracker);
  requireScalar("update_loss_scale", "found_inf", foundInf);
  requireScalar("update_loss_scale", "new_scale", newScale);
  requireScalar("update_loss_scale", "new_growth_tracker", newTracker);
  // As torch's kernel: float state, double factors, the product stored as float.
  float s = static_cast<float>(scale.at(0));
  double n = tracker.at(0);
  if (foundInf.at(0) != 0) {
    s = static_cast<float>(s * p.backoffFactor);
    n = 0;
  } else if (n + 1 == static_cast<double>(p.growthInterval)) {
    float grown = static_cast<float>(s * p.growthFactor);
    if (std::isfinite(grown))
      s = grown;
    n = 0;
  } else {
    n = n + 1;
  }
  storeAny(newScale, 0, s);
  storeAny(newTracker, 0, n);
}

} // namespace medrun::cpu
