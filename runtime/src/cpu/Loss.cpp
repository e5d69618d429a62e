//===- Loss.cpp - bce_with_logits and dice_ce -----------------------------------===//
//
// Both losses sum per-task partials over fixed pieces of the data (a piece never depends on
// the thread count) and combine the partials in piece order, so the scalar is the same bits
// for any thread count. Sums are in the accumulation type of the logits; the last few
// scalar operations (means over channels and levels) are in double.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <cmath>
#include <limits>

namespace medrun::cpu {
namespace {
using namespace detail;

/// N, C and the trailing size S of an N×C×… tensor (rank 0: 1×1×1, rank 1: 1×1×S).
struct Layout {
  int64_t n = 1, c = 1, s = 1;
};
Layout layoutOf(const Tensor &t) {
  Layout l;
  if (t.rank() == 1) {
    l.s = t.dim(0);
  } else if (t.rank() >= 2) {
    l.n = t.dim(0);
    l.c = t.dim(1);
    for (int64_t i = 2; i < t.rank(); ++i)
      l.s *= t.dim(i);
  }
  return l;
}

// ---- bce_with_logits -----------------------------------------------------------------------

template <typename T>
void bceImpl(const Tensor &x, const Tensor &t, const Tensor *mask, const Tensor *posWeight,
             const BceParams &p, Tensor &y) {
  using A = Acc<T>;
  const char *k = "bce_with_logits";
  requireDType(k, "target", t, x.dtype());
  if (mask)
    requireDType(k, "mask", *mask, x.dtype());
  if (posWeight)
    requireDType(k, "pos_weight", *posWeight, x.dtype());
  if (t.numel() != x.numel() || (mask && mask->numel() != x.numel()))
    throw Error(str("med kernel bce_with_logits: target/mask shapes do not match logits ",
                    shapeStr(x.shape())));
  const Layout L = layoutOf(x);
  const int64_t rows = L.n * L.c, per = L.s > 0 ? numChunks(L.s, kReduceChunk) : 0;
  const T *xp = ptr<T>(x), *tp = ptr<T>(t), *mp = mask ? ptr<T>(*mask) : nullptr;

  // Per-channel positive weights.
  std::vector<A> pw(static_cast<size_t>(L.c), A(1));
  if (p.autoPosWeight) {
    // pos_c = Σ counted y, neg_c = Σ counted (1 − y), per (row, piece), then combined in
    // order over samples and pieces.
    std::vector<A> pos(static_cast<size_t>(rows * per)), neg(static_cast<size_t>(rows * per));
    parallelFor(rows * per, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t task = t0; task < t1; ++task) {
        int64_t row = task / per, b = (task % per) * kReduceChunk;
        int64_t e = std::min(L.s, b + kReduceChunk);
        const int64_t base = row * L.s;
        A ps = A(0), ng = A(0);
        for (int64_t i = base + b; i < base + e; ++i) {
          if (mp && !(load(mp[i]) != A(0)))
            continue;
          A yv = load(tp[i]);
          ps += yv;
          ng += A(1) - yv;
        }
        pos[task] = ps;
        neg[task] = ng;
      }
    });
    for (int64_t c = 0; c < L.c; ++c) {
      A ps = A(0), ng = A(0);
      for (int64_t n = 0; n < L.n; ++n)
        for (int64_t j = 0; j < per; ++j) {
          ps += pos[(n * L.c + c) * per + j];
          ng += neg[(n * L.c + c) * per + j];
        }
      pw[c] = ps == A(0) ? A(p.maxPosWeight) : std::min(ng / ps, A(p.maxPosWeight));
    }
  } else if (posWeight) {
    const int64_t m = posWeight->numel();
    if (m != L.c && m != 1)
      throw Error(str("med kernel bce_with_logits: pos_weight has ", m, " values for ", L.c,
                      " channels"));
    const T *wp = ptr<T>(*posWeight);
    for (int64_t c = 0; c < L.c; ++c)
      pw[c] = load(wp[m == 1 ? 0 : c]);
  }

  auto lossAt = [&](int64_t i, A pc) {
    A xv = load(xp[i]), yv = load(tp[i]);
    A sp = std::log1p(std::exp(-std::abs(xv))) + std::max(-xv, A(0));
    return (A(1) - yv) * xv + (A(1) + (pc - A(1)) * yv) * sp;
  };

  if (p.reduction == LossReduction::None) {
    if (y.numel() != x.numel())
      throw Error(str("med kernel bce_with_logits: result shape ", shapeStr(y.shape()),
                      " does not match logits ", shapeStr(x.shape())));
    dispatchFloat(y.dtype(), k, [&](auto ytag) {
      using Y = decltype(ytag);
      Y *yp = ptr<Y>(y);
      parallelFor(rows * per, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t task = t0; task < t1; ++task) {
          int64_t row = task / per, b = (task % per) * kReduceChunk;
          int64_t e = std::min(L.s, b + kReduceChunk);
          const A pc = pw[row % L.c];
          for (int64_t i = row * L.s + b; i < row * L.s + e; ++i) {
            bool counted = !mp || load(mp[i]) != A(0);
            yp[i] = store<Y>(counted ? static_cast<Acc<Y>>(lossAt(i, pc)) : Acc<Y>(0));
          }
        }
      });
    });
    return;
  }

  std::vector<A> sum(static_cast<size_t>(rows * per));
  std::vector<int64_t> count(static_cast<size_t>(rows * per));
  parallelFor(rows * per, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      int64_t row = task / per, b = (task % per) * kReduceChunk;
      int64_t e = std::min(L.s, b + kReduceChunk);
      const A pc = pw[row % L.c];
      A s = A(0);
      int64_t cnt = 0;
      for (int64_t i = row * L.s + b; i < row * L.s + e; ++i) {
        if (mp && !(load(mp[i]) != A(0)))
          continue;
        s += lossAt(i, pc);
        ++cnt;
      }
      sum[task] = s;
      count[task] = cnt;
    }
  });

  double result = 0;
  if (p.reduction == LossReduction::PerChannel) {
    double total = 0;
    for (int64_t c = 0; c < L.c; ++c) {
      A s = A(0);
      int64_t cnt = 0;
      for (int64_t n = 0; n < L.n; ++n)
        for (int64_t j = 0; j < per; ++j) {
          s += sum[(n * L.c + c) * per + j];
          cnt += count[(n * L.c + c) * per + j];
        }
      total += cnt ? static_cast<double>(s) / static_cast<double>(cnt) : 0.0;
    }
    result = total;
  } else {
    A s = A(0);
    int64_t cnt = 0;
    for (size_t i = 0; i < sum.size(); ++i) {
      s += sum[i];
      cnt += count[i];
    }
    if (p.reduction == LossReduction::Sum)
      result = static_cast<double>(s);
    else
      result = cnt ? static_cast<double>(s) / static_cast<double>(cnt) : 0.0;
  }
  if (y.numel() != 1)
    throw Error(str("med kernel bce_with_logits: a reduced loss needs a scalar result, got ",
                    shapeStr(y.shape())));
  storeAny(y, 0, result);
}

// ---- dice_ce -------------------------------------------------------------------------------

/// Reads targets [b, e) as class indices into out; returns the first flat index whose
/// value is not a class in [0, classes), or −1.
int64_t readClasses(const Tensor &t, int64_t b, int64_t e, int64_t classes, int64_t *out) {
  auto run = [&](auto get) {
    for (int64_t i = b; i < e; ++i) {
      double v = get(i);
      if (!(v >= 0 && v < static_cast<double>(classes)))
        return i;
      out[i - b] = static_cast<int64_t>(v);
    }
    return int64_t(-1);
  };
  auto typed = [&](auto tag) {
    using U = decltype(tag);
    const U *p = ptr<U>(t);
    return run([p](int64_t i) { return static_cast<double>(p[i]); });
  };
  switch (t.dtype()) {
  case DType::F32: return typed(float());
  case DType::F64: return typed(double());
  case DType::BF16: return run([&](int64_t i) { return double(float(ptr<bf16>(t)[i])); });
  case DType::I8: return typed(int8_t());
  case DType::I16: return typed(int16_t());
  case DType::I32: return typed(int32_t());
  case DType::I64: return typed(int64_t());
  case DType::U8:
  case DType::Bool: return typed(uint8_t());
  case DType::F16: return run([&](int64_t i) { return t.at(i); });
  }
  return -1;
}

/// One level's loss: ce_weight·CE − dice_weight·dice.
template <typename T>
double diceCELevel(size_t level, const Tensor &x, const Tensor &t, const DiceCEParams &p) {
  using A = Acc<T>;
  const Layout L = layoutOf(x);
  if (x.rank() < 2 || t.numel() != L.n * L.s)
    throw Error(str("med kernel dice_ce: level ", level, ": logits ", shapeStr(x.shape()),
                    " and target ", shapeStr(t.shape()), " do not match"));
  const int64_t C = L.c, S = L.s;
  constexpr int64_t piece = 4096, block = 256;
  const int64_t per = S > 0 ? numChunks(S, piece) : 0, tasks = L.n * per;
  // Per task: [ce, tp[C], sp[C], sy[C]].
  const int64_t stride = 1 + 3 * C;
  std::vector<A> part(static_cast<size_t>(tasks * stride), A(0));
  std::vector<int64_t> bad(static_cast<size_t>(tasks), -1);
  const T *xp = ptr<T>(x);

  parallelFor(tasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<A> ex(static_cast<size_t>(C * block));
    A mx[block], se[block];
    int64_t cls[block];
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t n = task / per, pb = (task % per) * piece, pe = std::min(S, pb + piece);
      A *out = part.data() + task * stride;
      A ce = A(0), *tp = out + 1, *sp = out + 1 + C, *sy = out + 1 + 2 * C;
      for (int64_t b0 = pb; b0 < pe; b0 += block) {
        const int64_t len = std::min(block, pe - b0);
        int64_t first = readClasses(t, n * S + b0, n * S + b0 + len, C, cls);
        if (first >= 0) {
          bad[task] = first;
          break;
        }
        const T *xb = xp + n * C * S + b0;
        for (int64_t i = 0; i < len; ++i)
          mx[i] = load(xb[i]);
        for (int64_t c = 1; c < C; ++c)
          for (int64_t i = 0; i < len; ++i) {
            A v = load(xb[c * S + i]);
            mx[i] = v > mx[i] || v != v ? v : mx[i];
          }
        for (int64_t i = 0; i < len; ++i)
          se[i] = A(0);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < len; ++i) {
            A e = std::exp(load(xb[c * S + i]) - mx[i]);
            ex[c * block + i] = e;
            se[i] += e;
          }
        // CE: −log softmax(x)[t] = log Σ exp(x − max) − (x[t] − max).
        for (int64_t i = 0; i < len; ++i)
          ce += std::log(se[i]) - (load(xb[cls[i] * S + i]) - mx[i]);
        for (int64_t c = 0; c < C; ++c) {
          A s = A(0), tps = A(0), sys = A(0);
          for (int64_t i = 0; i < len; ++i) {
            A sm = ex[c * block + i] / se[i];
            s += sm;
            if (cls[i] == c) {
              tps += sm;
              sys += A(1);
            }
          }
          sp[c] += s;
          tp[c] += tps;
          sy[c] += sys;
        }
      }
      out[0] = ce;
    }
  });
  for (int64_t task = 0; task < tasks; ++task)
    if (bad[task] >= 0)
      throw Error(str("med kernel dice_ce: level ", level, ": target voxel ", bad[task],
                      " holds ", t.at(bad[task]), ", not a class index in [0, ", C, ")"));

  // Combine pieces in order: per sample, then over samples for batch dice.
  std::vector<A> tp(static_cast<size_t>(L.n * C), A(0)), sp(tp), sy(tp);
  A ce = A(0);
  for (int64_t n = 0; n < L.n; ++n)
    for (int64_t j = 0; j < per; ++j) {
      const A *q = part.data() + (n * per + j) * stride;
      ce += q[0];
      for (int64_t c = 0; c < C; ++c) {
        tp[n * C + c] += q[1 + c];
        sp[n * C + c] += q[1 + C + c];
        sy[n * C + c] += q[1 + 2 * C + c];
      }
    }
  const int64_t voxels = L.n * S;
  const double ceMean = static_cast<double>(ce) / static_cast<double>(voxels);

  auto dc = [&](A tpv, A spv, A syv) {
    A den = std::max(spv + syv + A(p.smooth), A(1e-8));
    return static_cast<double>((A(2) * tpv + A(p.smooth)) / den);
  };
  const int64_t c0 = p.includeBackground ? 0 : 1;
  double diceSum = 0;
  int64_t kept = 0;
  if (p.batchDice) {
    for (int64_t c = c0; c < C; ++c) {
      A tpv = A(0), spv = A(0), syv = A(0);
      for (int64_t n = 0; n < L.n; ++n) {
        tpv += tp[n * C + c];
        spv += sp[n * C + c];
        syv += sy[n * C + c];
      }
      diceSum += dc(tpv, spv, syv);
      ++kept;
    }
  } else {
    for (int64_t n = 0; n < L.n; ++n)
      for (int64_t c = c0; c < C; ++c) {
        diceSum += dc(tp[n * C + c], sp[n * C + c], sy[n * C + c]);
        ++kept;
      }
  }
  // As torch: the mean of no values is NaN.
  const double dice = kept ? diceSum / static_cast<double>(kept)
                           : std::numeric_limits<double>::quiet_NaN();
  return p.ceWeight * ceMean - p.diceWeight * dice;
}

} // namespace

void bceWithLogits(const Tensor &logits, const Tensor &target, const Tensor *mask,
                   const Tensor *posWeight, const BceParams &p, Tensor &y) {
  dispatchFloat(logits.dtype(), "bce_with_logits", [&](auto tag) {
    bceImpl<decltype(tag)>(logits, target, mask, posWeight, p, y);
  });
}

void diceCE(const std::vector<const Tensor *> &logits, const std::vector<const Tensor *> &targets,
            const DiceCEParams &p, Tensor &y) {
  if (logits.size() != targets.size() || logits.size() != p.weights.size())
    throw Error(str("med kernel dice_ce: ", logits.size(), " logits, ", targets.size(),
                    " targets and ", p.weights.size(), " weights"));
  if (y.numel() != 1)
    throw Error(str("med kernel dice_ce: the result must be a scalar, got ", shapeStr(y.shape())));
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (i > 0)
      requireDType("dice_ce", "logits", *logits[i], logits[0]->dtype());
    double level = dispatchFloat(logits[i]->dtype(), "dice_ce", [&](auto tag) {
      return diceCELevel<decltype(tag)>(i, *logits[i], *targets[i], p);
    });
    total += p.weights[i] * level;
  }
  storeAny(y, 0, total);
}

} // namespace medrun::cpu
