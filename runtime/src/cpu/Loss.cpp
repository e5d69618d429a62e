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

/// Per-channel positive weights: all 1, the pos_weight operand (C values or 1), or the
/// automatic min(neg_c / pos_c, max) from the counted targets (fixed pieces of kReduceChunk
/// per (n, c) row, combined in order over samples and pieces).
template <typename T>
std::vector<Acc<T>> positiveWeights(const char *k, const Layout &L, const T *tp, const T *mp,
                                    const Tensor *posWeight, const BceParams &p) {
  using A = Acc<T>;
  const int64_t rows = L.n * L.c, per = L.s > 0 ? numChunks(L.s, kReduceChunk) : 0;
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
      throw Error(str("med kernel ", k, ": pos_weight has ", m, " values for ", L.c,
                      " channels"));
    const T *wp = ptr<T>(*posWeight);
    for (int64_t c = 0; c < L.c; ++c)
      pw[c] = load(wp[m == 1 ? 0 : c]);
  }
  return pw;
}

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

  std::vector<A> pw = positiveWeights<T>(k, L, tp, mp, posWeight, p);

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

/// Reads targets [b, e) as class indices into out (−1 for a voxel holding the ignore label);
/// returns the first flat index whose value is neither a class in [0, classes) nor the
/// ignore label, or −1.
int64_t readClasses(const Tensor &t, int64_t b, int64_t e, int64_t classes,
                    const std::optional<int64_t> &ignore, int64_t *out) {
  const double ign = ignore ? static_cast<double>(*ignore) : std::nan("");
  auto run = [&](auto get) {
    for (int64_t i = b; i < e; ++i) {
      double v = get(i);
      if (v == ign) {
        out[i - b] = -1;
        continue;
      }
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

/// Sums of one dice_ce level: Σ CE over the counted voxels (all but those of the ignore
/// label), their number, and per (n, c) tp = Σ softmax·onehot, sp = Σ softmax, sy = Σ onehot.
template <typename A> struct LevelSums {
  A ce = A(0);
  int64_t counted = 0;
  std::vector<A> tp, sp, sy;
};

/// Checks a level's logits and targets; returns its layout.
Layout diceLayout(size_t level, const Tensor &x, const Tensor &t) {
  const Layout L = layoutOf(x);
  if (x.rank() < 2 || t.numel() != L.n * L.s)
    throw Error(str("med kernel dice_ce: level ", level, ": logits ", shapeStr(x.shape()),
                    " and target ", shapeStr(t.shape()), " do not match"));
  return L;
}

/// Throws the error for target voxel `first` (a flat index) of a level.
[[noreturn]] void badTarget(size_t level, const Tensor &t, int64_t first, int64_t C,
                           const std::optional<int64_t> &ignore) {
  throw Error(str("med kernel dice_ce: level ", level, ": target voxel ", first, " holds ",
                  t.at(first), ", not a class index in [0, ", C, ")",
                  ignore ? str(" nor the ignore label ", *ignore) : std::string()));
}

/// Pieces of voxels a dice_ce task handles, and the blocks it computes softmax over.
constexpr int64_t kDicePiece = 4096, kDiceBlock = 256;

/// The softmax of `len` voxels over C channels (channel stride S) before the division:
/// mx[i] the channel maximum (a NaN wins), ex[c·kDiceBlock + i] = exp(x − mx), se[i] their
/// sum in channel order. dice_ce's forward and backward both call it, so the gradient sees
/// the forward's bits.
template <typename T, typename A>
void softmaxBlock(const T *xb, int64_t C, int64_t S, int64_t len, A *ex, A *mx, A *se) {
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
      ex[c * kDiceBlock + i] = e;
      se[i] += e;
    }
}

template <typename T>
LevelSums<Acc<T>> diceLevelSums(size_t level, const Tensor &x, const Tensor &t, const Layout &L,
                                const std::optional<int64_t> &ignore) {
  using A = Acc<T>;
  const int64_t C = L.c, S = L.s;
  constexpr int64_t piece = kDicePiece, block = kDiceBlock;
  const int64_t per = S > 0 ? numChunks(S, piece) : 0, tasks = L.n * per;
  // Per task: [ce, tp[C], sp[C], sy[C]].
  const int64_t stride = 1 + 3 * C;
  std::vector<A> part(static_cast<size_t>(tasks * stride), A(0));
  std::vector<int64_t> bad(static_cast<size_t>(tasks), -1), counted(static_cast<size_t>(tasks), 0);
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
        int64_t first = readClasses(t, n * S + b0, n * S + b0 + len, C, ignore, cls);
        if (first >= 0) {
          bad[task] = first;
          break;
        }
        const T *xb = xp + n * C * S + b0;
        for (int64_t i = 0; i < len; ++i)
          counted[task] += cls[i] >= 0;
        softmaxBlock(xb, C, S, len, ex.data(), mx, se);
        // CE: −log softmax(x)[t] = log Σ exp(x − max) − (x[t] − max).
        for (int64_t i = 0; i < len; ++i)
          if (cls[i] >= 0)
            ce += std::log(se[i]) - (load(xb[cls[i] * S + i]) - mx[i]);
        for (int64_t c = 0; c < C; ++c) {
          A s = A(0), tps = A(0), sys = A(0);
          for (int64_t i = 0; i < len; ++i) {
            if (cls[i] < 0)
              continue;
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
      badTarget(level, t, bad[task], C, ignore);

  // Combine pieces in order per sample.
  LevelSums<A> r;
  for (int64_t task = 0; task < tasks; ++task)
    r.counted += counted[task];
  r.tp.assign(static_cast<size_t>(L.n * C), A(0));
  r.sp = r.tp;
  r.sy = r.tp;
  for (int64_t n = 0; n < L.n; ++n)
    for (int64_t j = 0; j < per; ++j) {
      const A *q = part.data() + (n * per + j) * stride;
      r.ce += q[0];
      for (int64_t c = 0; c < C; ++c) {
        r.tp[n * C + c] += q[1 + c];
        r.sp[n * C + c] += q[1 + C + c];
        r.sy[n * C + c] += q[1 + 2 * C + c];
      }
    }
  return r;
}

/// One level's loss: ce_weight·CE − dice_weight·dice.
template <typename T>
double diceCELevel(size_t level, const Tensor &x, const Tensor &t, const DiceCEParams &p) {
  using A = Acc<T>;
  const Layout L = diceLayout(level, x, t);
  const int64_t C = L.c, S = L.s;
  LevelSums<A> sums = diceLevelSums<T>(level, x, t, L, p.ignoreIndex);
  const std::vector<A> &tp = sums.tp, &sp = sums.sp, &sy = sums.sy;
  const A ce = sums.ce;
  // The mean over the counted voxels; with an ignore label and none counted, nnU-Net leaves
  // CE out (0).
  const int64_t voxels = p.ignoreIndex ? sums.counted : L.n * S;
  const double ceMean = p.ignoreIndex && voxels == 0
                            ? 0.0
                            : static_cast<double>(ce) / static_cast<double>(voxels);

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

// ---- gradients -----------------------------------------------------------------------------

// bce_with_logits: l = (1 − y)·x + (1 + (p − 1)·y)·softplus(−x), so
// dl/dx = σ(x)·(1 + (p − 1)·y) − p·y; times dloss (elementwise for none), divided by the
// counted elements for mean (all of them) and per_channel (those of the element's channel).
// Targets, mask and the positive weights (also the automatic ones) are constants.
template <typename T>
void bceGradImpl(const Tensor &x, const Tensor &t, const Tensor *mask, const Tensor *posWeight,
                 const Tensor &dloss, const BceParams &p, Tensor &dx) {
  using A = Acc<T>;
  const char *k = "bce_with_logits_grad";
  requireDType(k, "target", t, x.dtype());
  if (mask)
    requireDType(k, "mask", *mask, x.dtype());
  if (posWeight)
    requireDType(k, "pos_weight", *posWeight, x.dtype());
  requireDType(k, "result", dx, x.dtype());
  if (t.numel() != x.numel() || (mask && mask->numel() != x.numel()) || dx.numel() != x.numel())
    throw Error(str("med kernel ", k, ": target/mask/result shapes do not match logits ",
                    shapeStr(x.shape())));
  const bool none = p.reduction == LossReduction::None;
  if (none ? dloss.numel() != x.numel() : dloss.numel() != 1)
    throw Error(str("med kernel ", k, ": upstream gradient ", shapeStr(dloss.shape()),
                    none ? " does not match logits " : " is not a scalar for logits ",
                    shapeStr(x.shape())));
  if (!isFloat(dloss.dtype()))
    throw Error(str("med kernel ", k, ": upstream gradient has element type ",
                    dtypeName(dloss.dtype()), ", expected a float type"));
  const Layout L = layoutOf(x);
  const int64_t rows = L.n * L.c, per = L.s > 0 ? numChunks(L.s, kReduceChunk) : 0;
  const T *xp = ptr<T>(x), *tp = ptr<T>(t), *mp = mask ? ptr<T>(*mask) : nullptr;
  T *dp = ptr<T>(dx);
  const std::vector<A> pw = positiveWeights<T>(k, L, tp, mp, posWeight, p);

  // Scale per channel: dloss, dloss / count or dloss / count_c (1 for none).
  std::vector<A> scale(static_cast<size_t>(L.c), A(1));
  if (!none) {
    const double g = dloss.at(0);
    std::vector<int64_t> cnt(static_cast<size_t>(L.c), 0);
    if (p.reduction != LossReduction::Sum) {
      if (!mp) {
        std::fill(cnt.begin(), cnt.end(), L.n * L.s);
      } else {
        std::vector<int64_t> part(static_cast<size_t>(rows * per));
        parallelFor(rows * per, 1, [&](int64_t t0, int64_t t1) {
          for (int64_t task = t0; task < t1; ++task) {
            int64_t row = task / per, b = (task % per) * kReduceChunk;
            int64_t e = std::min(L.s, b + kReduceChunk), c = 0;
            for (int64_t i = row * L.s + b; i < row * L.s + e; ++i)
              c += load(mp[i]) != A(0);
            part[task] = c;
          }
        });
        for (int64_t task = 0; task < rows * per; ++task)
          cnt[(task / per) % L.c] += part[task];
      }
    }
    int64_t total = 0;
    for (int64_t c : cnt)
      total += c;
    for (int64_t c = 0; c < L.c; ++c) {
      const int64_t n = p.reduction == LossReduction::PerChannel ? cnt[c] : total;
      scale[c] = p.reduction == LossReduction::Sum ? A(g)
                 : n > 0                           ? A(g / static_cast<double>(n))
                                                   : A(0);
    }
  }

  auto gradAt = [&](int64_t i, A pc) {
    const A xv = load(xp[i]), yv = load(tp[i]);
    A sig;
    if (xv >= A(0)) {
      sig = A(1) / (A(1) + std::exp(-xv));
    } else {
      const A e = std::exp(xv);
      sig = e / (A(1) + e);
    }
    return sig * (A(1) + (pc - A(1)) * yv) - pc * yv;
  };
  auto run = [&](auto upstream) {
    parallelFor(rows * per, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t task = t0; task < t1; ++task) {
        int64_t row = task / per, b = (task % per) * kReduceChunk;
        int64_t e = std::min(L.s, b + kReduceChunk);
        const int64_t c = row % L.c;
        const A pc = pw[c], sc = scale[c];
        for (int64_t i = row * L.s + b; i < row * L.s + e; ++i) {
          const bool counted = !mp || load(mp[i]) != A(0);
          dp[i] = store<T>(counted ? gradAt(i, pc) * (sc * upstream(i)) : A(0));
        }
      }
    });
  };
  if (!none) {
    run([](int64_t) { return A(1); });
  } else {
    dispatchFloat(dloss.dtype(), k, [&](auto gtag) {
      using G = decltype(gtag);
      const G *gp = ptr<G>(dloss);
      run([gp](int64_t i) { return static_cast<A>(load(gp[i])); });
    });
  }
}

// dice_ce for one level with upstream scale w = weight·dloss. With p = softmax(x) and the
// one-hot target o, per kept dice unit u (a class, or a (sample, class) without batch
// dice): dc_u = (2·tp_u + s) / max(sp_u + sy_u + s, 1e-8), the loss −dice_weight·mean_u dc_u,
// so ∂L/∂p_c = α_u·o_c + β_u with α_u = −dice_weight/K · 2/den_u and
// β_u = dice_weight/K · (2·tp_u + s)/den_u² (0 where the clip is active). Through the
// softmax: dx_c = p_c·(g_c − Σ_j g_j·p_j), plus the CE term ce_weight·(p_c − o_c)/M.
// No kept unit (K = 0): the forward dice is NaN, but no gradient flows from it (torch's mean
// of an empty tensor), so only the CE term remains.
template <typename T>
void diceCEGradLevel(size_t level, const Tensor &x, const Tensor &t, const DiceCEParams &p,
                     double w, Tensor &dx) {
  using A = Acc<T>;
  const char *k = "dice_ce_grad";
  requireDType(k, "result", dx, x.dtype());
  if (dx.numel() != x.numel())
    throw Error(str("med kernel ", k, ": level ", level, ": result ", shapeStr(dx.shape()),
                    " does not match logits ", shapeStr(x.shape())));
  const Layout L = diceLayout(level, x, t);
  const int64_t C = L.c, S = L.s;
  if (x.numel() == 0)
    return;
  const LevelSums<A> sums = diceLevelSums<T>(level, x, t, L, p.ignoreIndex);

  // α, β per (n, c), in double from the sums as the forward kernel forms dc.
  std::vector<A> alpha(static_cast<size_t>(L.n * C), A(0)), beta(alpha);
  const int64_t c0 = p.includeBackground ? 0 : 1;
  const int64_t kept = std::max<int64_t>(0, C - c0) * (p.batchDice ? 1 : L.n);
  if (kept > 0) {
    const double f = w * p.diceWeight / static_cast<double>(kept);
    auto coef = [&](A tpv, A spv, A syv, A &a, A &b) {
      const A raw = spv + syv + A(p.smooth);
      const double den = static_cast<double>(std::max(raw, A(1e-8)));
      const double num = static_cast<double>(A(2) * tpv + A(p.smooth));
      a = static_cast<A>(-f * 2.0 / den);
      b = raw >= A(1e-8) ? static_cast<A>(f * num / (den * den)) : A(0);
    };
    for (int64_t c = c0; c < C; ++c) {
      if (p.batchDice) {
        A tpv = A(0), spv = A(0), syv = A(0);
        for (int64_t n = 0; n < L.n; ++n) {
          tpv += sums.tp[n * C + c];
          spv += sums.sp[n * C + c];
          syv += sums.sy[n * C + c];
        }
        A a, b;
        coef(tpv, spv, syv, a, b);
        for (int64_t n = 0; n < L.n; ++n) {
          alpha[n * C + c] = a;
          beta[n * C + c] = b;
        }
      } else {
        for (int64_t n = 0; n < L.n; ++n)
          coef(sums.tp[n * C + c], sums.sp[n * C + c], sums.sy[n * C + c], alpha[n * C + c],
               beta[n * C + c]);
      }
    }
  }
  const int64_t voxels = p.ignoreIndex ? sums.counted : L.n * S;
  const A ceCoef = p.ignoreIndex && voxels == 0
                       ? A(0)
                       : static_cast<A>(w * p.ceWeight / static_cast<double>(voxels));

  const T *xp = ptr<T>(x);
  T *dp = ptr<T>(dx);
  constexpr int64_t piece = kDicePiece, block = kDiceBlock;
  const int64_t per = numChunks(S, piece), tasks = L.n * per;
  std::vector<int64_t> bad(static_cast<size_t>(tasks), -1);
  parallelFor(tasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<A> pr(static_cast<size_t>(C * block));
    A mx[block], se[block], sg[block];
    int64_t cls[block];
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t n = task / per, pb = (task % per) * piece, pe = std::min(S, pb + piece);
      const A *al = alpha.data() + n * C, *be = beta.data() + n * C;
      for (int64_t b0 = pb; b0 < pe; b0 += block) {
        const int64_t len = std::min(block, pe - b0);
        int64_t first = readClasses(t, n * S + b0, n * S + b0 + len, C, p.ignoreIndex, cls);
        if (first >= 0) {
          bad[task] = first;
          break;
        }
        const T *xb = xp + n * C * S + b0;
        T *db = dp + n * C * S + b0;
        softmaxBlock(xb, C, S, len, pr.data(), mx, se);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < len; ++i)
            pr[c * block + i] /= se[i];
        // Σ_j g_j·p_j = α_t·p_t + Σ_j β_j·p_j.
        for (int64_t i = 0; i < len; ++i)
          sg[i] = cls[i] >= 0 ? al[cls[i]] * pr[cls[i] * block + i] : A(0);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < len; ++i)
            sg[i] += be[c] * pr[c * block + i];
        for (int64_t c = 0; c < C; ++c) {
          const A *pc = pr.data() + c * block;
          for (int64_t i = 0; i < len; ++i) {
            if (cls[i] < 0) { // the ignore label: in no sum, no gradient
              db[c * S + i] = store<T>(A(0));
              continue;
            }
            const bool hit = cls[i] == c;
            const A g = (hit ? al[c] : A(0)) + be[c];
            db[c * S + i] = store<T>(pc[i] * (g - sg[i]) + ceCoef * (hit ? pc[i] - A(1) : pc[i]));
          }
        }
      }
    }
  });
  for (int64_t task = 0; task < tasks; ++task)
    if (bad[task] >= 0)
      badTarget(level, t, bad[task], C, p.ignoreIndex);
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

void bceWithLogitsGrad(const Tensor &logits, const Tensor &target, const Tensor *mask,
                       const Tensor *posWeight, const Tensor &dloss, const BceParams &p,
                       Tensor &dlogits) {
  dispatchFloat(logits.dtype(), "bce_with_logits_grad", [&](auto tag) {
    bceGradImpl<decltype(tag)>(logits, target, mask, posWeight, dloss, p, dlogits);
  });
}

void diceCEGrad(const std::vector<const Tensor *> &logits,
                const std::vector<const Tensor *> &targets, const Tensor &dloss,
                const DiceCEParams &p, const std::vector<Tensor *> &dlogits) {
  if (logits.size() != targets.size() || logits.size() != p.weights.size() ||
      logits.size() != dlogits.size())
    throw Error(str("med kernel dice_ce_grad: ", logits.size(), " logits, ", targets.size(),
                    " targets, ", p.weights.size(), " weights and ", dlogits.size(), " results"));
  if (dloss.numel() != 1)
    throw Error(str("med kernel dice_ce_grad: the upstream gradient must be a scalar, got ",
                    shapeStr(dloss.shape())));
  const double g = dloss.at(0);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (i > 0)
      requireDType("dice_ce_grad", "logits", *logits[i], logits[0]->dtype());
    dispatchFloat(logits[i]->dtype(), "dice_ce_grad", [&](auto tag) {
      diceCEGradLevel<decltype(tag)>(i, *logits[i], *targets[i], p, p.weights[i] * g,
                                     *dlogits[i]);
    });
  }
}

} // namespace medrun::cpu
