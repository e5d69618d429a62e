//===- ShapeRules.cpp - the shape rules of the med ops, without MLIR -------------===//
//
// The messages are the verifier's (test/Dialect/*-invalid.mlir pins them); the MLIR
// verifier prefixes them with "'med.<op>' op ", the runtime with the function and op.
//
//===----------------------------------------------------------------------------------===//
#include "med/ShapeRules.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

namespace med::shape {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

bool isDyn(int64_t d) { return d == kDynamic; }

// Two sizes agree when equal or when either is unknown.
bool sameDim(int64_t a, int64_t b) { return isDyn(a) || isDyn(b) || a == b; }

bool sameShape(const Dims &a, const Dims &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!sameDim(a[i], b[i]))
      return false;
  return true;
}

int64_t rankOf(const TensorType &t) { return static_cast<int64_t>(t.shape.size()); }

// Checked size arithmetic: false when the result does not fit int64 (or is kDynamic's value).
bool add(int64_t a, int64_t b, int64_t &r) {
  return !__builtin_add_overflow(a, b, &r) && !isDyn(r);
}
bool mul(int64_t a, int64_t b, int64_t &r) {
  return !__builtin_mul_overflow(a, b, &r) && !isDyn(r);
}

Error overflow(const std::string &what) { return what + ": sizes overflow 64-bit integers"; }

Error sameElementType(const std::string &what, const std::string &actual,
                      const std::string &expected, const std::string &expectedFrom) {
  if (actual == expected)
    return {};
  return what + ": expected element type " + expected + " (that of " + expectedFrom + "), got " +
         actual;
}

// A per-axis attribute: exactly `rank` entries (one per `axisKind`), each >= `minValue`.
Error axisList(const std::string &name, const Dims &values, size_t rank, int64_t minValue,
               const std::string &axisKind = "axis") {
  if (values.size() != rank)
    return "'" + name + "' needs " + std::to_string(rank) + " entries (one per " + axisKind +
           "), got " + listStr(values);
  for (int64_t v : values)
    if (v < minValue)
      return "'" + name + "' entries must be " +
             (minValue == 0 ? std::string("non-negative") : "at least " + num(minValue)) +
             ", got " + listStr(values);
  return {};
}

Error rank(const std::string &what, const TensorType &t, int64_t expected,
           const std::string &layout) {
  if (rankOf(t) == expected)
    return {};
  return what + ": expected " + num(expected) + (expected == 1 ? " dimension (" : " dimensions (") +
         layout + "), got " + shapeStr(t.shape);
}

Error vectorOf(const std::string &what, const TensorType &t, int64_t expected,
               const std::string &meaning) {
  if (Error e = rank(what, t, 1, meaning); !e.empty())
    return e;
  if (sameDim(t.shape[0], expected))
    return {};
  return what + ": expected " + num(expected) + " elements (" + meaning + "), got " +
         num(t.shape[0]);
}

// An operand that must have `expected`'s shape (described by `of`) and element type (that of
// the operand `elementOf`).
Error sameTypeAs(const std::string &name, const TensorType &t, const TensorType &expected,
                 const std::string &of, const std::string &elementOf = "input") {
  if (Error e = sameElementType(name, t.element, expected.element, elementOf); !e.empty())
    return e;
  if (!sameShape(t.shape, expected.shape))
    return name + ": expected shape " + shapeStr(expected.shape) + " (" + of + "), got " +
           shapeStr(t.shape);
  return {};
}

Error requireScalar(const std::string &name, const TensorType &t) {
  if (rankOf(t) != 0)
    return name + ": expected a scalar (rank 0), got shape " + shapeStr(t.shape);
  return {};
}

TensorType f32Scalar() { return {{}, "f32"}; }

// Normalizations with per-channel affine vectors on axis 1.
Error channelAffine(const TensorType &in, const TensorType &gamma, const TensorType &beta) {
  if (rankOf(in) < 2)
    return "input: expected at least 2 dimensions (N x C x ...), got " + shapeStr(in.shape);
  int64_t channels = in.shape[1];
  for (auto [name, t] : {std::pair<const char *, const TensorType *>{"gamma", &gamma},
                         {"beta", &beta}}) {
    if (Error e = sameElementType(name, t->element, in.element, "input"); !e.empty())
      return e;
    if (Error e = vectorOf(name, *t, channels, "one per input channel"); !e.empty())
      return e;
  }
  return {};
}

// group_norm and its gradient: at least one group, dividing the channels.
Error normGroups(const TensorType &in, int64_t groups) {
  int64_t channels = in.shape[1];
  if (groups < 1)
    return "'groups' must be at least 1, got " + num(groups);
  if (!isDyn(channels) && channels % groups != 0)
    return "input: " + num(channels) + " channels are not divisible by groups = " + num(groups);
  return {};
}

// The mean and rstd group_norm saves: N × groups in the input's element type.
TensorType statistics(const TensorType &in, int64_t groups) {
  return {{in.shape[0], groups}, in.element};
}

// The result shape of reducing `in` over `axes` (distinct, in range).
Error reducedShape(const TensorType &in, const Dims &axes, bool keepdims, Dims &shape) {
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    if (a < 0 || a >= rankOf(in))
      return "'axes' entries must be in [0, " + num(rankOf(in)) + "), got " + listStr(axes);
    if (!seen.insert(a).second)
      return "'axes' must not repeat an axis, got " + listStr(axes);
  }
  for (int64_t d = 0; d < rankOf(in); ++d) {
    if (!seen.count(d))
      shape.push_back(in.shape[d]);
    else if (keepdims)
      shape.push_back(1);
  }
  return {};
}

// Shared by the normalization gradients: dy like the input; results input, gamma, gamma.
Error normGrad(const TensorType &in, const TensorType &gamma, const TensorType &dy, Types &out) {
  if (Error e = sameElementType("grad_output", dy.element, in.element, "input"); !e.empty())
    return e;
  if (!sameShape(dy.shape, in.shape))
    return "grad_output: expected shape " + shapeStr(in.shape) + " (that of the input), got " +
           shapeStr(dy.shape);
  out = {in, gamma, gamma};
  return {};
}

// The upstream gradient of a loss: a scalar, or `expected` for an unreduced loss.
Error lossGrad(const TensorType &grad, const TensorType &expected) {
  if (grad == expected)
    return {};
  if (grad.element == "f32" && expected.element == "f32" && sameShape(grad.shape, expected.shape))
    return {};
  return "grad_loss: expected " + typeStr(expected) + " (the type of the loss), got " +
         typeStr(grad);
}

// Optimizer state tensors have the parameter's type; the schedule inputs are scalars.
Error optimizer(const TensorType &param,
                std::initializer_list<std::pair<const char *, const TensorType *>> like,
                std::initializer_list<std::pair<const char *, const TensorType *>> scalars) {
  for (auto [name, t] : like)
    if (*t != param)
      return std::string(name) + ": expected " + typeStr(param) + " (the type of param), got " +
             typeStr(*t);
  for (auto [name, t] : scalars)
    if (Error e = requireScalar(name, *t); !e.empty())
      return e;
  return {};
}

} // namespace

std::string shapeStr(const Dims &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + (isDyn(shape[i]) ? std::string("?") : num(shape[i]));
  return s;
}

std::string listStr(const std::vector<int64_t> &values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i)
    s += (i ? ", " : "") + num(values[i]);
  return s + "]";
}

std::string typeStr(const TensorType &t) {
  std::string s = "tensor<";
  for (int64_t d : t.shape)
    s += (isDyn(d) ? std::string("?") : num(d)) + "x";
  return s + t.element + ">";
}

//===----------------------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------------------===//

Error conv3d(const TensorType &in, const TensorType &w, const TensorType *bias,
             const Dims &stride, const Dims &padding, const Dims &dilation,
             const Dims &outputPadding, int64_t groups, bool transposed, Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if (Error e = rank("weight", w, 5,
                     transposed ? "Cin x Cout/groups x kD x kH x kW"
                                : "Cout x Cin/groups x kD x kH x kW");
      !e.empty())
    return e;
  const char *spatial = "spatial axis";
  for (Error e : {axisList("stride", stride, 3, 1, spatial),
                  axisList("padding", padding, 3, 0, spatial),
                  axisList("dilation", dilation, 3, 1, spatial),
                  axisList("output_padding", outputPadding, 3, 0, spatial)})
    if (!e.empty())
      return e;
  if (groups < 1)
    return "'groups' must be at least 1, got " + num(groups);
  if (Error e = sameElementType("weight", w.element, in.element, "input"); !e.empty())
    return e;

  int64_t cin = in.shape[1];
  if (!isDyn(cin) && cin % groups != 0)
    return "input: " + num(cin) + " channels are not divisible by groups = " + num(groups);
  // Expected weight shape, from the input channels and groups.
  int64_t cout;
  if (transposed) {
    if (!sameDim(w.shape[0], cin))
      return "weight: expected shape " + num(cin) + "xCout/groups x kD x kH x kW " +
             "(input channels first), got " + shapeStr(w.shape);
    cout = kDynamic;
    if (!isDyn(w.shape[1]) && !mul(w.shape[1], groups, cout))
      return overflow("weight");
  } else {
    cout = w.shape[0];
    int64_t perGroup = isDyn(cin) ? kDynamic : cin / groups;
    if (!sameDim(w.shape[1], perGroup))
      return "weight: expected shape Cout x " + num(perGroup) + " x kD x kH x kW (input channels " +
             num(cin) + " / groups " + num(groups) + "), got " + shapeStr(w.shape);
    if (!isDyn(cout) && cout % groups != 0)
      return "weight: " + num(cout) + " output channels are not divisible by groups = " +
             num(groups);
  }
  if (bias) {
    if (Error e = sameElementType("bias", bias->element, in.element, "input"); !e.empty())
      return e;
    if (Error e = vectorOf("bias", *bias, cout, "one per output channel"); !e.empty())
      return e;
  }
  if (transposed)
    for (int i = 0; i < 3; ++i)
      if (outputPadding[i] >= stride[i] && outputPadding[i] >= dilation[i])
        return "'output_padding' must be smaller than stride or dilation on each axis, got " +
               listStr(outputPadding) + " with stride " + listStr(stride) + " and dilation " +
               listStr(dilation);

  Dims shape = {in.shape[0], cout};
  for (int i = 0; i < 3; ++i) {
    int64_t n = in.shape[2 + i], k = w.shape[2 + i];
    if (isDyn(n) || isDyn(k)) {
      shape.push_back(kDynamic);
      continue;
    }
    // extent = dilation·(k−1) + 1; conv: (n + 2·padding − extent) / stride + 1;
    // transposed: (n − 1)·stride − 2·padding + extent + output_padding.
    int64_t extent, twoPad, size, t;
    if (!mul(dilation[i], k - 1, extent) || !add(extent, 1, extent) ||
        !mul(padding[i], 2, twoPad))
      return overflow("input");
    if (transposed) {
      if (!mul(n - 1, stride[i], t) || !add(t, -twoPad, t) || !add(t, extent, t) ||
          !add(t, outputPadding[i], size))
        return overflow("input");
    } else {
      if (!add(n, twoPad, t))
        return overflow("input");
      size = t < extent ? 0 : (t - extent) / stride[i] + 1;
    }
    if (size < 1)
      return "input: spatial size " + num(n) + " on axis " + num(i) + " is too small for kernel " +
             num(k) + " (dilation " + num(dilation[i]) + ", padding " + num(padding[i]) +
             "); the output would be empty";
    shape.push_back(size);
  }
  out.push_back({shape, in.element});
  return {};
}

Error conv3dGradWeight(const TensorType &in, const TensorType &dy, const Dims &kernel,
                       const Dims &stride, const Dims &padding, const Dims &dilation,
                       int64_t groups, Types &out) {
  const char *spatial = "spatial axis";
  for (Error e : {rank("input", in, 5, "N x C x D x H x W"),
                  rank("grad_output", dy, 5, "N x C x D x H x W"),
                  axisList("kernel", kernel, 3, 1, spatial),
                  axisList("stride", stride, 3, 1, spatial),
                  axisList("padding", padding, 3, 0, spatial),
                  axisList("dilation", dilation, 3, 1, spatial)})
    if (!e.empty())
      return e;
  if (Error e = sameElementType("grad_output", dy.element, in.element, "input"); !e.empty())
    return e;
  if (groups < 1)
    return "'groups' must be at least 1, got " + num(groups);
  int64_t cin = in.shape[1], cout = dy.shape[1];
  if (!isDyn(cin) && cin % groups != 0)
    return "input: " + num(cin) + " channels are not divisible by groups = " + num(groups);
  if (!isDyn(cout) && cout % groups != 0)
    return "grad_output: " + num(cout) + " channels are not divisible by groups = " + num(groups);
  if (!sameDim(in.shape[0], dy.shape[0]))
    return "grad_output: batch " + num(dy.shape[0]) + " differs from the input's " +
           num(in.shape[0]);
  // grad_output is the convolution of the input: its output size o, or (the weight gradient of
  // a transposed convolution, whose output_padding may reach dilation − 1) down to
  // o − (dilation − 1) / stride.
  for (int i = 0; i < 3; ++i) {
    int64_t n = in.shape[2 + i], m = dy.shape[2 + i], extent, t;
    if (isDyn(n) || isDyn(m))
      continue;
    if (!mul(dilation[i], kernel[i] - 1, extent) || !add(extent, 1, extent) ||
        !mul(padding[i], 2, t) || !add(t, n, t))
      return overflow("input");
    int64_t o = t < extent ? 0 : (t - extent) / stride[i] + 1;
    if (m > o || m < o - (dilation[i] - 1) / stride[i])
      return "grad_output: spatial size " + num(m) + " on axis " + num(i) +
             " does not fit the convolution of the input (size " + num(n) + ", kernel " +
             num(kernel[i]) + ", stride " + num(stride[i]) + ", padding " + num(padding[i]) +
             ", dilation " + num(dilation[i]) + " gives " + num(o) + ")";
  }
  Dims shape = {cout, isDyn(cin) ? kDynamic : cin / groups};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  out.push_back({shape, in.element});
  return {};
}

namespace {
// Every kernel size odd, so that padding k/2 keeps the size and the taps centre on the voxel.
Error oddKernel(const std::string &what, const Dims &kernel) {
  for (int64_t k : kernel)
    if (!isDyn(k) && k % 2 == 0)
      return what + ": every kernel size must be odd (taps centred on the voxel), got " +
             shapeStr(kernel);
  return {};
}
Dims halves(const Dims &kernel) {
  Dims p;
  for (int64_t k : kernel)
    p.push_back(isDyn(k) ? 0 : k / 2);
  return p;
}
} // namespace

Error shiftSum(const TensorType &in, const TensorType &w, const TensorType *bias, bool mirrored,
               Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if (Error e = rank("weight", w, 5, "C x 1 x kD x kH x kW"); !e.empty())
    return e;
  const int64_t c = in.shape[1];
  if (!sameDim(w.shape[0], c) || !sameDim(w.shape[1], 1))
    return "weight: expected shape " + (isDyn(c) ? std::string("C") : num(c)) +
           " x 1 x kD x kH x kW (one tap set per input channel), got " + shapeStr(w.shape);
  Dims kernel(w.shape.begin() + 2, w.shape.end());
  if (Error e = oddKernel("weight", kernel); !e.empty())
    return e;
  if (isDyn(c))
    return "input: the channel count must be known (it is the number of groups)";
  return conv3d(in, w, bias, {1, 1, 1}, halves(kernel), {1, 1, 1}, {0, 0, 0}, c, mirrored, out);
}

Error shiftSumGradWeight(const TensorType &in, const TensorType &dy, const Dims &kernel,
                         Types &out) {
  if (Error e = axisList("kernel", kernel, 3, 1, "spatial axis"); !e.empty())
    return e;
  if (Error e = oddKernel("'kernel'", kernel); !e.empty())
    return e;
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if (Error e = rank("grad_output", dy, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if (!sameDim(in.shape[1], dy.shape[1]) || !sameDim(in.shape[2], dy.shape[2]) ||
      !sameDim(in.shape[3], dy.shape[3]) || !sameDim(in.shape[4], dy.shape[4]))
    return "grad_output: expected the input's channels and spatial sizes " + shapeStr(in.shape) +
           " (batch aside), got " + shapeStr(dy.shape);
  if (isDyn(in.shape[1]))
    return "input: the channel count must be known (it is the number of groups)";
  return conv3dGradWeight(in, dy, kernel, {1, 1, 1}, halves(kernel), {1, 1, 1}, in.shape[1], out);
}

//===----------------------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------------------===//

Error groupNorm(const TensorType &in, const TensorType &gamma, const TensorType &beta,
                int64_t groups, double epsilon, bool saveStatistics, Types &out) {
  if (Error e = channelAffine(in, gamma, beta); !e.empty())
    return e;
  if (Error e = normGroups(in, groups); !e.empty())
    return e;
  if (!(epsilon > 0))
    return "'epsilon' must be positive";
  out.push_back(in);
  if (saveStatistics)
    out.insert(out.end(), 2, statistics(in, groups));
  return {};
}

Error batchNorm(const TensorType &in, const TensorType &gamma, const TensorType &beta,
                const TensorType &runningMean, const TensorType &runningVar, double epsilon,
                double momentum, bool training, Types &out) {
  if (Error e = channelAffine(in, gamma, beta); !e.empty())
    return e;
  for (auto [name, t] : {std::pair<const char *, const TensorType *>{"running_mean", &runningMean},
                         {"running_var", &runningVar}}) {
    if (Error e = sameElementType(name, t->element, in.element, "input"); !e.empty())
      return e;
    if (Error e = vectorOf(name, *t, in.shape[1], "one per input channel"); !e.empty())
      return e;
  }
  if (!(epsilon > 0))
    return "'epsilon' must be positive";
  if (!(momentum >= 0 && momentum <= 1))
    return "'momentum' must be in [0, 1] (PyTorch's convention: the weight of the batch's "
           "statistics), got " + std::to_string(momentum);
  if (training) {
    bool known = !isDyn(in.shape[0]);
    int64_t values = known ? in.shape[0] : 1;
    for (size_t d = 2; d < in.shape.size(); ++d) {
      known = known && !isDyn(in.shape[d]);
      if (!isDyn(in.shape[d]))
        values *= in.shape[d];
    }
    if (known && values < 2)
      return "input: the training form needs more than one value per channel (the unbiased "
             "variance divides by n - 1), got " + shapeStr(in.shape);
  }
  out.push_back(in);
  TensorType stats{{in.shape[1]}, in.element};
  out.insert(out.end(), 2, stats);
  return {};
}

Error groupNormStats(const TensorType &in, int64_t groups, double epsilon, Types &out) {
  if (rankOf(in) < 2)
    return "input: expected at least 2 dimensions (N x C x ...), got " + shapeStr(in.shape);
  if (Error e = normGroups(in, groups); !e.empty())
    return e;
  if (!(epsilon > 0))
    return "'epsilon' must be positive";
  out.insert(out.end(), 2, statistics(in, groups));
  return {};
}

Error groupNormApply(const TensorType &in, const TensorType &mean, const TensorType &rstd,
                     const TensorType &gamma, const TensorType &beta, int64_t groups, Types &out) {
  if (Error e = channelAffine(in, gamma, beta); !e.empty())
    return e;
  if (Error e = normGroups(in, groups); !e.empty())
    return e;
  TensorType stats = statistics(in, groups);
  const char *of = "N x groups, as group_norm_stats returns them";
  if (Error e = sameTypeAs("mean", mean, stats, of); !e.empty())
    return e;
  if (Error e = sameTypeAs("rstd", rstd, stats, of); !e.empty())
    return e;
  out.push_back(in);
  return {};
}

Error channelLayerNorm(const TensorType &in, const TensorType &gamma, const TensorType &beta,
                       double epsilon, Types &out) {
  if (!(epsilon > 0))
    return "'epsilon' must be positive";
  if (Error e = channelAffine(in, gamma, beta); !e.empty())
    return e;
  out.push_back(in);
  return {};
}

Error grn(const TensorType &in, const TensorType &gamma, const TensorType &beta, Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  Dims expected = {1, in.shape[1], 1, 1, 1};
  for (auto [name, t] : {std::pair<const char *, const TensorType *>{"gamma", &gamma},
                         {"beta", &beta}}) {
    if (Error e = sameElementType(name, t->element, in.element, "input"); !e.empty())
      return e;
    if (!sameShape(t->shape, expected))
      return std::string(name) + ": expected shape " + shapeStr(expected) + ", got " +
             shapeStr(t->shape);
  }
  out.push_back(in);
  return {};
}

Error groupNormGrad(const TensorType &in, const TensorType &gamma, const TensorType &mean,
                    const TensorType &rstd, const TensorType &dy, int64_t groups, Types &out) {
  if (Error e = channelAffine(in, gamma, gamma); !e.empty())
    return e;
  if (Error e = normGroups(in, groups); !e.empty())
    return e;
  TensorType stats = statistics(in, groups);
  const char *of = "N x groups, as group_norm saves them";
  if (Error e = sameTypeAs("mean", mean, stats, of); !e.empty())
    return e;
  if (Error e = sameTypeAs("rstd", rstd, stats, of); !e.empty())
    return e;
  return normGrad(in, gamma, dy, out);
}

Error channelLayerNormGrad(const TensorType &in, const TensorType &gamma, const TensorType &dy,
                           Types &out) {
  if (Error e = channelAffine(in, gamma, gamma); !e.empty())
    return e;
  return normGrad(in, gamma, dy, out);
}

Error grnGrad(const TensorType &in, const TensorType &gamma, const TensorType &dy, Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  Dims expected = {1, in.shape[1], 1, 1, 1};
  if (!sameShape(gamma.shape, expected))
    return "gamma: expected shape " + shapeStr(expected) + ", got " + shapeStr(gamma.shape);
  return normGrad(in, gamma, dy, out);
}

//===----------------------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------------------===//

Error unary(const TensorType &in, Types &out) {
  out.push_back(in);
  return {};
}

Error broadcastBinary(const TensorType &lhs, const TensorType &rhs, Types &out) {
  if (Error e = sameElementType("rhs", rhs.element, lhs.element, "lhs"); !e.empty())
    return e;
  int64_t r = std::max(rankOf(lhs), rankOf(rhs));
  Dims shape(r);
  for (int64_t i = 0; i < r; ++i) {
    // Align at the trailing axis; a missing leading axis acts as size 1.
    int64_t li = i - (r - rankOf(lhs)), ri = i - (r - rankOf(rhs));
    int64_t a = li < 0 ? 1 : lhs.shape[li], b = ri < 0 ? 1 : rhs.shape[ri];
    if (a == 1)
      shape[i] = b;
    else if (b == 1)
      shape[i] = a;
    else if (isDyn(a))
      shape[i] = b;
    else if (isDyn(b) || a == b)
      shape[i] = a;
    else
      return "operands do not broadcast: lhs " + shapeStr(lhs.shape) + " and rhs " +
             shapeStr(rhs.shape) + " differ on axis " + num(i) + " (" + num(a) + " vs " + num(b) +
             "; sizes must be equal or 1)";
  }
  out.push_back({shape, lhs.element});
  return {};
}

Error geluGrad(const TensorType &in, const TensorType &dy, Types &out) {
  if (Error e = normGrad(in, in, dy, out); !e.empty())
    return e;
  out.resize(1);
  return {};
}

Error prelu(const TensorType &in, const TensorType &slope, Types &out) {
  if (Error e = sameElementType("slope", slope.element, in.element, "input"); !e.empty())
    return e;
  bool fits = rankOf(slope) <= rankOf(in);
  for (int64_t i = 0; fits && i < rankOf(slope); ++i) {
    int64_t s = slope.shape[i], n = in.shape[i + rankOf(in) - rankOf(slope)];
    fits = s == 1 || isDyn(s) || isDyn(n) || s == n;
  }
  if (!fits)
    return "slope: shape " + shapeStr(slope.shape) + " does not broadcast to the input's " +
           shapeStr(in.shape) + " (trailing axes aligned, sizes equal or 1; a per-channel "
           "slope of an N x C x ... input is C x 1 x ...)";
  out.push_back(in);
  return {};
}

Error softmax(const TensorType &in, int64_t axis, Types &out) {
  if (axis < 0 || axis >= rankOf(in))
    return "axis: expected an axis of the input (0 to " + num(rankOf(in) - 1) + " for shape " +
           shapeStr(in.shape) + "), got " + num(axis);
  out.push_back(in);
  return {};
}

Error preluGrad(const TensorType &in, const TensorType &slope, const TensorType &dy, Types &out) {
  if (Error e = prelu(in, slope, out); !e.empty())
    return e;
  return sameTypeAs("grad_output", dy, in, "that of the input", "input");
}

Error extremumGrad(const TensorType &lhs, const TensorType &rhs, const TensorType &dy,
                   Types &out) {
  Types forward;
  if (Error e = broadcastBinary(lhs, rhs, forward); !e.empty())
    return e;
  if (Error e = sameTypeAs("grad_output", dy, forward[0], "lhs and rhs broadcast", "lhs");
      !e.empty())
    return e;
  out.assign(2, dy);
  return {};
}

//===----------------------------------------------------------------------------------===//
// Data movement and shapes
//===----------------------------------------------------------------------------------===//

Error pad(const TensorType &in, const Dims &low, const Dims &high, Types &out) {
  size_t r = in.shape.size();
  if (Error e = axisList("low", low, r, 0); !e.empty())
    return e;
  if (Error e = axisList("high", high, r, 0); !e.empty())
    return e;
  Dims shape;
  for (size_t i = 0; i < r; ++i) {
    int64_t n = in.shape[i], size = n;
    if (!isDyn(n) && (!add(n, low[i], size) || !add(size, high[i], size)))
      return overflow("input");
    shape.push_back(size);
  }
  out.push_back({shape, in.element});
  return {};
}

Error slice(const TensorType &in, const Dims &offsets, const Dims &sizes, const Dims *stridesAttr,
            Types &out) {
  size_t r = in.shape.size();
  Dims strides = stridesAttr ? *stridesAttr : Dims(r, 1);
  for (Error e : {axisList("offsets", offsets, r, 0), axisList("sizes", sizes, r, 1),
                  axisList("strides", strides, r, 1)})
    if (!e.empty())
      return e;
  for (size_t i = 0; i < r; ++i) {
    int64_t n = in.shape[i], last;
    if (!mul(sizes[i] - 1, strides[i], last) || !add(last, offsets[i], last))
      return overflow("input");
    if (!isDyn(n) && last >= n)
      return "input: the box reaches index " + num(last) + " on axis " + num(i) +
             ", but the input has only " + num(n) + " elements there (shape " +
             shapeStr(in.shape) + ")";
  }
  out.push_back({sizes, in.element});
  return {};
}

Error sliceGrad(const TensorType &dy, const Dims &offsets, const Dims &strides,
                const Dims &shape, Types &out) {
  size_t r = dy.shape.size();
  for (Error e : {axisList("offsets", offsets, r, 0), axisList("strides", strides, r, 1),
                  axisList("shape", shape, r, 0)})
    if (!e.empty())
      return e;
  for (size_t i = 0; i < r; ++i) {
    int64_t n = dy.shape[i], last;
    if (isDyn(n) || n == 0)
      continue;
    if (!mul(n - 1, strides[i], last) || !add(last, offsets[i], last))
      return overflow("grad_output");
    if (last >= shape[i])
      return "grad_output: the box reaches index " + num(last) + " on axis " + num(i) +
             ", but 'shape' has only " + num(shape[i]) + " elements there (" + shapeStr(shape) +
             ")";
  }
  out.push_back({shape, dy.element});
  return {};
}

Error concat(const Types &inputs, int64_t axis, Types &out) {
  if (inputs.empty())
    return "needs at least one input";
  const TensorType &first = inputs.front();
  int64_t r = rankOf(first);
  if (axis < 0 || axis >= r)
    return "'axis' must be in [0, " + num(r) + "), got " + num(axis);
  Dims shape = first.shape;
  for (size_t i = 1; i < inputs.size(); ++i) {
    const TensorType &t = inputs[i];
    std::string name = "input " + std::to_string(i);
    if (Error e = sameElementType(name, t.element, first.element, "input 0"); !e.empty())
      return e;
    bool ok = rankOf(t) == r;
    for (int64_t d = 0; ok && d < r; ++d)
      if (d != axis && !sameDim(t.shape[d], shape[d]))
        ok = false;
    if (!ok)
      return name + ": expected shape " + shapeStr(shape) + " except on axis " + num(axis) +
             ", got " + shapeStr(t.shape);
    int64_t n = t.shape[axis];
    if (isDyn(n) || isDyn(shape[axis]))
      shape[axis] = kDynamic;
    else if (!add(shape[axis], n, shape[axis]))
      return overflow(name);
  }
  out.push_back({shape, first.element});
  return {};
}

Error transpose(const TensorType &in, const Dims &permutation, Types &out) {
  const int64_t r = rankOf(in);
  if (r < 1)
    return "input: expected a tensor of rank >= 1, got a scalar";
  if (static_cast<int64_t>(permutation.size()) != r)
    return "'permutation' needs " + num(r) + " entries (one per axis of the input, shape " +
           shapeStr(in.shape) + "), got " + listStr(permutation);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int64_t p : permutation) {
    if (p < 0 || p >= r)
      return "'permutation' entries must be axes of the input (0 to " + num(r - 1) +
             "), got " + listStr(permutation);
    if (seen[static_cast<size_t>(p)])
      return "'permutation' must name each axis once, but axis " + num(p) + " appears twice in " +
             listStr(permutation);
    seen[static_cast<size_t>(p)] = true;
  }
  Dims shape;
  for (int64_t p : permutation)
    shape.push_back(in.shape[static_cast<size_t>(p)]);
  out.push_back({shape, in.element});
  return {};
}

Error reshape(const TensorType &in, const Dims &shape, Types &out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return "'shape' sizes must be non-negative, got " + listStr(shape);
    if (!mul(n, d, n))
      return overflow("'shape'");
  }
  bool isStatic = std::none_of(in.shape.begin(), in.shape.end(), isDyn);
  if (isStatic) {
    int64_t m = 1;
    for (int64_t d : in.shape)
      if (!mul(m, d, m))
        return overflow("input");
    if (m != n)
      return "'shape' " + shapeStr(shape) + " has " + num(n) + " elements, the input " +
             shapeStr(in.shape) + " has " + num(m);
  }
  out.push_back({shape, in.element});
  return {};
}

Error broadcastTo(const TensorType &in, const Dims &shape, Types &out) {
  int64_t offset = static_cast<int64_t>(shape.size()) - rankOf(in);
  bool ok = offset >= 0 && std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
  for (int64_t i = 0; ok && i < rankOf(in); ++i) {
    int64_t d = in.shape[i];
    ok = d == 1 || isDyn(d) || d == shape[offset + i];
  }
  if (!ok)
    return "input " + shapeStr(in.shape) + " does not broadcast to " + shapeStr(shape) +
           " (trailing axes must be equal or 1)";
  out.push_back({shape, in.element});
  return {};
}

//===----------------------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------------------===//

Error reduce(const TensorType &in, const Dims &axes, bool keepdims, Types &out) {
  Dims shape;
  if (Error e = reducedShape(in, axes, keepdims, shape); !e.empty())
    return e;
  out.push_back({shape, in.element});
  return {};
}

Error reduceExtremumGrad(const TensorType &in, const TensorType &extremum, const TensorType &dy,
                         const Dims &axes, bool keepdims, Types &out) {
  Dims shape;
  if (Error e = reducedShape(in, axes, keepdims, shape); !e.empty())
    return e;
  TensorType reduced{shape, in.element};
  const char *of = "the input reduced over 'axes'";
  if (Error e = sameTypeAs("extremum", extremum, reduced, of); !e.empty())
    return e;
  if (Error e = sameTypeAs("grad_output", dy, reduced, of); !e.empty())
    return e;
  out.push_back(in);
  return {};
}

//===----------------------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------------------===//

Error bceWithLogits(const TensorType &logits, const TensorType &target, const TensorType *mask,
                    const TensorType *posWeight, bool reductionNone, bool autoPosWeight,
                    double maxPosWeight, const TensorType *gradLoss, Types &out) {
  if (rankOf(logits) < 2)
    return "logits: expected at least 2 dimensions (N x C x ...), got " + shapeStr(logits.shape);
  auto sameAsLogits = [&](const char *name, const TensorType &t) -> Error {
    if (Error e = sameElementType(name, t.element, logits.element, "logits"); !e.empty())
      return e;
    if (!sameShape(t.shape, logits.shape))
      return std::string(name) + ": expected shape " + shapeStr(logits.shape) +
             " (that of logits), got " + shapeStr(t.shape);
    return {};
  };
  if (Error e = sameAsLogits("target", target); !e.empty())
    return e;
  if (mask)
    if (Error e = sameAsLogits("mask", *mask); !e.empty())
      return e;
  if (posWeight) {
    if (autoPosWeight)
      return "pos_weight: give either the operand or 'auto_pos_weight', not both";
    if (Error e = sameElementType("pos_weight", posWeight->element, logits.element, "logits");
        !e.empty())
      return e;
    if (Error e = vectorOf("pos_weight", *posWeight, logits.shape[1], "one per channel");
        !e.empty())
      return e;
  }
  if (autoPosWeight && !(maxPosWeight > 0))
    return "'max_pos_weight' must be positive";
  // The loss: the elementwise loss for reduction none, else an f32 scalar.
  TensorType loss = reductionNone ? logits : f32Scalar();
  if (!gradLoss) {
    out.push_back(loss);
    return {};
  }
  if (Error e = lossGrad(*gradLoss, loss); !e.empty())
    return e;
  out.push_back(logits);
  return {};
}

Error diceCE(const Types &logits, const Types &targets, const std::vector<double> &weights,
             const TensorType *gradLoss, Types &out) {
  if (logits.empty())
    return "needs at least one logits operand";
  if (targets.size() != logits.size())
    return "expected one target per logits operand (" + std::to_string(logits.size()) +
           "), got " + std::to_string(targets.size());
  if (weights.size() != logits.size())
    return "'weights' needs one entry per logits operand (" + std::to_string(logits.size()) +
           "), got " + std::to_string(weights.size());
  for (double w : weights)
    if (!(w >= 0))
      return "'weights' must be non-negative";
  for (size_t i = 0; i < logits.size(); ++i) {
    const TensorType &x = logits[i], &t = targets[i];
    std::string n = std::to_string(i);
    if (rankOf(x) < 3)
      return "logits " + n + ": expected at least 3 dimensions (N x C x spatial), got " +
             shapeStr(x.shape);
    if (x.shape[1] == 1)
      return "logits " + n + ": needs at least 2 classes on axis 1, got shape " +
             shapeStr(x.shape);
    Dims expected = x.shape;
    expected[1] = 1;
    if (!sameShape(t.shape, expected))
      return "target " + n + ": expected shape " + shapeStr(expected) +
             " (class indices for logits " + n + "), got " + shapeStr(t.shape);
  }
  if (!gradLoss) {
    out.push_back(f32Scalar());
    return {};
  }
  if (Error e = lossGrad(*gradLoss, f32Scalar()); !e.empty())
    return e;
  out = logits;
  return {};
}

//===----------------------------------------------------------------------------------===//
// Optimizers and mixed precision
//===----------------------------------------------------------------------------------===//

Error adamw(const TensorType &param, const TensorType &grad, const TensorType &expAvg,
            const TensorType &expAvgSq, const TensorType &lr, const TensorType &step,
            double beta1, double beta2, double epsilon, Types &out) {
  if (Error e = optimizer(param, {{"grad", &grad}, {"exp_avg", &expAvg}, {"exp_avg_sq", &expAvgSq}},
                          {{"lr", &lr}, {"step", &step}});
      !e.empty())
    return e;
  for (double beta : {beta1, beta2})
    if (!(beta >= 0 && beta < 1))
      return "betas must be in [0, 1), got " + std::to_string(beta);
  if (!(epsilon > 0))
    return "'epsilon' must be positive";
  out.assign(3, param);
  return {};
}

Error sgd(const TensorType &param, const TensorType &grad, const TensorType &momentumBuffer,
          const TensorType &lr, double momentum, bool nesterov, Types &out) {
  if (Error e = optimizer(param, {{"grad", &grad}, {"momentum_buffer", &momentumBuffer}},
                          {{"lr", &lr}});
      !e.empty())
    return e;
  if (!(momentum >= 0))
    return "'momentum' must be non-negative";
  if (nesterov && momentum <= 0)
    return "Nesterov momentum needs a positive 'momentum'";
  out.assign(2, param);
  return {};
}

Error anyNonFinite(const Types &inputs, Types &out) {
  if (inputs.empty())
    return "needs at least one input";
  out.push_back(f32Scalar());
  return {};
}

Error sumSquares(const Types &inputs, Types &out) {
  if (inputs.empty())
    return "needs at least one input";
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].element != "f32")
      return "input " + std::to_string(i) + ": expected f32 elements, got " + inputs[i].element;
  out.push_back(f32Scalar());
  return {};
}

Error random(const TensorType &key, const TensorType &like, int64_t stream, double probability,
             const Dims *sampleShape, Types &out) {
  if (stream < 0 || stream > int64_t(UINT32_MAX))
    return "'stream' must be a 32-bit counter word, got " + std::to_string(stream);
  if (!(probability >= 0 && probability <= 1)) {
    std::ostringstream os; // as the verifier prints a double: 1.5, -0.1
    os << probability;
    return "'probability' must be in [0, 1], got " + os.str();
  }
  if (key.element != "i64" || !key.shape.empty())
    return "key: expected an i64 scalar (the step's key), got " + typeStr(key);
  if (like.shape.empty())
    return "like: expected at least one dimension (the first indexes the samples), got a scalar";
  Dims shape = like.shape;
  if (sampleShape) {
    if (Error e = axisList("sample_shape", *sampleShape, sampleShape->size(), 1, "dimension");
        !e.empty())
      return e;
    shape.resize(1);
    shape.insert(shape.end(), sampleShape->begin(), sampleShape->end());
  }
  // The element's index within its sample is one 32-bit counter word.
  int64_t perSample = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (isDyn(shape[i])) {
      perSample = kDynamic;
      break;
    }
    if (!mul(perSample, shape[i], perSample))
      return overflow("result");
  }
  if (!isDyn(perSample) && perSample > (int64_t(1) << 32))
    return "a sample of " + shapeStr(shape) + " has " + num(perSample) +
           " elements; at most 2^32 (one counter word)";
  out.push_back({shape, "f32"});
  return {};
}

Error dropout(const TensorType &input, const TensorType &key, int64_t stream, double p,
              Types &out) {
  if (stream < 0 || stream > int64_t(UINT32_MAX))
    return "'stream' must be a 32-bit counter word, got " + std::to_string(stream);
  if (!(p >= 0 && p < 1)) {
    std::ostringstream os; // as the verifier prints a double: 1, -0.1
    os << p;
    return "'p' must be in [0, 1) (the probability of dropping an element), got " + os.str();
  }
  if (key.element != "i64" || !key.shape.empty())
    return "key: expected an i64 scalar (the step's key), got " + typeStr(key);
  if (input.shape.empty())
    return "input: expected at least one dimension (the first indexes the samples), got a "
           "scalar";
  int64_t perSample = 1;
  for (size_t i = 1; i < input.shape.size(); ++i) {
    if (isDyn(input.shape[i])) {
      perSample = kDynamic;
      break;
    }
    if (!mul(perSample, input.shape[i], perSample))
      return overflow("input");
  }
  if (!isDyn(perSample) && perSample > (int64_t(1) << 32))
    return "a sample of " + shapeStr(input.shape) + " has " + num(perSample) +
           " elements; at most 2^32 (one counter word)";
  out.push_back(input);
  return {};
}

Error sampleTransform(const std::string &paramName, const TensorType &input,
                      const TensorType &param, bool perChannel, Types &out) {
  if (Error e = rank("input", input, 5, "N×C×D×H×W"); !e.empty())
    return e;
  if (param.element != "f32")
    return paramName + ": expected f32 elements, got " + param.element;
  const Dims expected = perChannel ? Dims{input.shape[0], input.shape[1], 3}
                                   : Dims{input.shape[0], 3};
  if (!sameShape(param.shape, expected))
    return paramName + ": expected " + shapeStr(expected) +
           (perChannel ? " (a value per sample, channel and axis D, H, W)"
                       : " (a value per sample and axis D, H, W)") +
           ", got " + shapeStr(param.shape);
  out.push_back(input);
  return {};
}

Error affineMatrix(const TensorType &angles, const TensorType &scales, const TensorType *shear,
                   Types &out) {
  auto perSample = [&](const std::string &name, const TensorType &t, int64_t k) -> Error {
    if (t.element != "f32")
      return name + ": expected f32 elements, got " + t.element;
    if (t.shape.size() != 2 || !sameDim(t.shape[0], angles.shape.empty() ? kDynamic : angles.shape[0]) ||
        !sameDim(t.shape[1], k))
      return name + ": expected N×" + num(k) + " (N the samples of angles), got " + shapeStr(t.shape);
    return {};
  };
  if (angles.shape.size() != 2)
    return "angles: expected N×3, got " + shapeStr(angles.shape);
  for (Error e : {perSample("angles", angles, 3), perSample("scales", scales, 3),
                  shear ? perSample("shear", *shear, 6) : Error()})
    if (!e.empty())
      return e;
  out.push_back({{angles.shape[0], 3, 4}, "f32"});
  return {};
}

Error orientationMatrix(const TensorType &u, Types &out) {
  if (u.element != "f32" || u.shape.size() != 1)
    return "u: expected an f32 vector of N (a uniform number per sample), got " + typeStr(u);
  out.push_back({{u.shape[0], 3, 4}, "f32"});
  return {};
}

Error shiftSlices(const TensorType &input, const TensorType &shift, Types &out) {
  if (Error e = rank("input", input, 5, "N×C×D×H×W"); !e.empty())
    return e;
  if (shift.element != "f32")
    return "shift: expected f32 elements, got " + shift.element;
  const Dims expected{input.shape[0], input.shape[2], 2};
  if (!sameShape(shift.shape, expected))
    return "shift: expected " + shapeStr(expected) +
           " (a shift along H and W per sample and D-slice), got " + shapeStr(shift.shape);
  out.push_back(input);
  return {};
}

Error pack(const Types &inputs, const Dims &offsets, int64_t size, Types &out) {
  if (inputs.empty())
    return "needs at least one input";
  if (offsets.size() != inputs.size())
    return "'offsets' needs one offset per input (" + num(int64_t(inputs.size())) + "), got " +
           num(int64_t(offsets.size()));
  if (size < 0)
    return "'size' must be non-negative, got " + num(size);
  int64_t end = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "input " + std::to_string(i);
    if (inputs[i].element != "f32")
      return name + ": expected f32 elements, got " + inputs[i].element;
    int64_t n = 1;
    for (int64_t d : inputs[i].shape) {
      if (isDyn(d))
        return name + ": expected a static shape, got " + shapeStr(inputs[i].shape);
      if (!mul(n, d, n))
        return overflow(name);
    }
    if (offsets[i] < end)
      return "'offsets': input " + std::to_string(i) + " at " + num(offsets[i]) +
             " overlaps the one before it (which ends at " + num(end) + ")";
    if (!add(offsets[i], n, end) || end > size)
      return name + " (" + num(n) + " elements at offset " + num(offsets[i]) +
             ") does not fit in 'size' " + num(size);
  }
  out.push_back({{size}, "f32"});
  return {};
}

Error allReduce(const Types &inputs, const Dims &offsets, int64_t size, Types &out) {
  Types packed;
  if (Error e = pack(inputs, offsets, size, packed); !e.empty())
    return e;
  out.insert(out.end(), inputs.begin(), inputs.end());
  return {};
}

Error select(const TensorType &cond, const TensorType &onTrue, const TensorType &onFalse,
             Types &out) {
  if (Error e = requireScalar("cond", cond); !e.empty())
    return e;
  if (onTrue != onFalse)
    return "on_false: expected " + typeStr(onTrue) + " (the type of on_true), got " +
           typeStr(onFalse);
  out.push_back(onTrue);
  return {};
}

Error updateLossScale(const TensorType &scale, const TensorType &growthTracker,
                      const TensorType &foundInf, double growth, double backoff,
                      int64_t growthInterval, Types &out) {
  for (Error e : {requireScalar("scale", scale), requireScalar("growth_tracker", growthTracker),
                  requireScalar("found_inf", foundInf)})
    if (!e.empty())
      return e;
  if (!(growth > 1) || !std::isfinite(growth))
    return "'growth_factor' must be a finite number > 1, got " + std::to_string(growth);
  if (!(backoff > 0 && backoff < 1))
    return "'backoff_factor' must be in (0, 1), got " + std::to_string(backoff);
  if (growthInterval < 1)
    return "'growth_interval' must be at least 1, got " + num(growthInterval);
  out = {scale, growthTracker};
  return {};
}

// ---- label transforms ------------------------------------------------------------------

Error affinities(const TensorType &seg, const Dims &offsets, const Dims *cropLow,
                 const Dims *cropSize, Types &out) {
  if (Error e = rank("seg", seg, 5, "N x 1 x D x H x W instance ids"); !e.empty())
    return e;
  if (!sameDim(seg.shape[1], 1))
    return "seg: expected 1 channel (N x 1 x D x H x W instance ids), got " + num(seg.shape[1]);
  if (offsets.empty() || offsets.size() % 3 != 0)
    return "'offsets' needs 3 entries (along D, H, W) per affinity, got " + listStr(offsets);
  for (size_t k = 0; k < offsets.size(); k += 3) {
    const std::string which = "'offsets': affinity " + num(static_cast<int64_t>(k / 3));
    if (offsets[k] == 0 && offsets[k + 1] == 0 && offsets[k + 2] == 0)
      return which + " has offset (0, 0, 0); each affinity needs a non-zero offset";
    for (size_t i = 0; i < 3; ++i) {
      const int64_t n = seg.shape[2 + i], o = offsets[k + i];
      if (!isDyn(n) && (o >= n || o <= -n))
        return which + " reaches " + num(o) + " voxels along axis " +
               num(static_cast<int64_t>(2 + i)) + ", which has " + num(n) +
               ": its mask would be 0 everywhere";
    }
  }
  Dims low = cropLow ? *cropLow : Dims(3, 0);
  if (Error e = axisList("crop_low", low, 3, 0, "spatial axis"); !e.empty())
    return e;
  if (cropSize)
    if (Error e = axisList("crop_size", *cropSize, 3, 1, "spatial axis"); !e.empty())
      return e;
  TensorType result{{seg.shape[0], static_cast<int64_t>(offsets.size() / 3)}, "f32"};
  for (size_t i = 0; i < 3; ++i) {
    int64_t n = seg.shape[2 + i], size = kDynamic, end;
    if (cropSize)
      size = (*cropSize)[i];
    else if (!isDyn(n))
      size = n - low[i];
    if (!isDyn(size) && !add(low[i], size, end))
      return overflow("crop");
    if (!isDyn(n) && (low[i] >= n || (!isDyn(size) && end > n)))
      return "crop: the box from " + listStr(low) + (cropSize ? " of size " + listStr(*cropSize)
                                                              : std::string()) +
             " does not lie inside the labels' spatial size " +
             shapeStr(Dims(seg.shape.begin() + 2, seg.shape.end()));
    result.shape.push_back(size);
  }
  out = {result, result};
  return {};
}

Error removeLabel(const TensorType &in, int64_t label, int64_t replaceWith, Types &out) {
  if (label == replaceWith)
    return "'label' and 'replace_with' are both " + num(label) + ": the op would change nothing";
  // Integer labels: both values must be of the type (a wrapped replacement is another label).
  int bits = 0;
  if (in.element.size() > 1 && in.element[0] == 'i')
    bits = std::atoi(in.element.c_str() + 1);
  if (bits > 1 && bits < 64) {
    const int64_t hi = (int64_t{1} << (bits - 1)) - 1, lo = -hi - 1;
    for (auto [name, v] : {std::pair<const char *, int64_t>{"label", label},
                           {"replace_with", replaceWith}})
      if (v < lo || v > hi)
        return "'" + std::string(name) + "' is " + num(v) + ", outside the range of the " +
               in.element + " labels [" + num(lo) + ", " + num(hi) + "]";
  }
  out.push_back(in);
  return {};
}

Error labelRegions(const TensorType &in, const std::vector<Dims> &regions, Types &out) {
  if (rankOf(in) < 2)
    return "input: expected at least 2 dimensions (N x 1 x ... labels), got " + shapeStr(in.shape);
  if (!sameDim(in.shape[1], 1))
    return "input: expected 1 channel (N x 1 x ... labels), got " + num(in.shape[1]);
  if (regions.empty())
    return "'regions' needs at least one region (a list of labels)";
  for (size_t r = 0; r < regions.size(); ++r)
    if (regions[r].empty())
      return "'regions': region " + num(static_cast<int64_t>(r)) + " lists no labels";
  TensorType result{in.shape, "f32"};
  result.shape[1] = static_cast<int64_t>(regions.size());
  out.push_back(result);
  return {};
}

Error downsampleNearest(const TensorType &in, const Dims &size, Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if (Error e = axisList("size", size, 3, 1, "spatial axis"); !e.empty())
    return e;
  out.push_back({{in.shape[0], in.shape[1], size[0], size[1], size[2]}, in.element});
  return {};
}

Error resize(const TensorType &in, const Dims *size, const Dims *scale, const std::string &mode,
             bool alignCorners, Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if ((size != nullptr) == (scale != nullptr))
    return size ? "give either 'size' or 'scale', not both"
                : "needs 'size' (the output's spatial size) or 'scale' (whole factors)";
  if (mode != "linear" && mode != "nearest")
    return "'mode' must be linear or nearest, got '" + mode + "'";
  if (alignCorners && mode != "linear")
    return "align_corners: only linear resizing has corners to align (mode " + mode + ")";
  TensorType result{{in.shape[0], in.shape[1], 0, 0, 0}, in.element};
  if (size) {
    if (Error e = axisList("size", *size, 3, 1, "spatial axis"); !e.empty())
      return e;
    std::copy(size->begin(), size->end(), result.shape.begin() + 2);
  } else {
    if (Error e = axisList("scale", *scale, 3, 1, "spatial axis"); !e.empty())
      return e;
    for (int d = 0; d < 3; ++d) {
      const int64_t n = in.shape[2 + d];
      if (isDyn(n))
        result.shape[2 + d] = kDynamic;
      else if (!mul(n, (*scale)[d], result.shape[2 + d]))
        return overflow("input");
    }
  }
  out.push_back(result);
  return {};
}

Error resizeGrad(const TensorType &dy, const Dims &size, const std::string &mode,
                 bool alignCorners, Types &out) {
  if (Error e = rank("grad_output", dy, 5, "N x C x D x H x W"); !e.empty())
    return e;
  return resize(dy, &size, nullptr, mode, alignCorners, out);
}

Error avgPool(const TensorType &in, const Dims &kernel, Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if (Error e = axisList("kernel", kernel, 3, 1, "spatial axis"); !e.empty())
    return e;
  TensorType result{{in.shape[0], in.shape[1], 0, 0, 0}, in.element};
  for (int d = 0; d < 3; ++d) {
    const int64_t n = in.shape[2 + d];
    if (!isDyn(n) && n < kernel[d])
      return "kernel: window " + listStr(kernel) + " is larger than the input's spatial size " +
             shapeStr(in.shape) + " along axis " + num(2 + d);
    result.shape[2 + d] = isDyn(n) ? n : n / kernel[d];
  }
  out.push_back(result);
  return {};
}

Error maxPoolGrad(const TensorType &in, const TensorType &dy, const Dims &kernel, Types &out) {
  Types pooled;
  if (Error e = avgPool(in, kernel, pooled); !e.empty())
    return e;
  if (Error e = sameTypeAs("grad_output", dy, pooled[0], "the input pooled by kernel", "input"); !e.empty())
    return e;
  out.push_back(in);
  return {};
}

Error avgPoolGrad(const TensorType &dy, const Dims &kernel, const Dims &size, Types &out) {
  if (Error e = rank("grad_output", dy, 5, "N x C x D x H x W"); !e.empty())
    return e;
  if (Error e = axisList("kernel", kernel, 3, 1, "spatial axis"); !e.empty())
    return e;
  if (Error e = axisList("size", size, 3, 1, "spatial axis"); !e.empty())
    return e;
  for (int d = 0; d < 3; ++d)
    if (!isDyn(dy.shape[2 + d]) && size[d] / kernel[d] != dy.shape[2 + d])
      return "size: an input of spatial size " + listStr(size) + " pooled by " +
             listStr(kernel) + " does not give grad_output's " + shapeStr(dy.shape);
  out.push_back({{dy.shape[0], dy.shape[1], size[0], size[1], size[2]}, dy.element});
  return {};
}

//===----------------------------------------------------------------------------------===//
// Spatial augmentation
//===----------------------------------------------------------------------------------===//

Error spatialTransform(const TensorType &in, const TensorType &matrix, const Dims &shape,
                       const std::string &mode, const std::string &border, double value,
                       const Dims &labels, Types &out) {
  if (Error e = rank("input", in, 5, "N x C x D x H x W"); !e.empty())
    return e;
  const bool isInt = in.element.size() > 1 && in.element[0] == 'i';
  if (isInt && in.element != "i32")
    return "input: integer labels must be i32, got " + in.element;
  if (mode != "linear" && mode != "nearest" && mode != "linear_argmax")
    return "'mode' must be linear, nearest or linear_argmax, got '" + mode + "'";
  if (mode == "linear" && isInt)
    return "input: mode linear interpolates floats, got " + in.element +
           " (labels take nearest or linear_argmax)";
  if (matrix.element != "f32")
    return "matrix: expected element type f32, got " + matrix.element;
  if (rankOf(matrix) != 3 || !sameDim(matrix.shape[1], 3) || !sameDim(matrix.shape[2], 4))
    return "matrix: expected shape N x 3 x 4 (one affine matrix per sample), got " +
           shapeStr(matrix.shape);
  if (!sameDim(matrix.shape[0], in.shape[0]))
    return "matrix: expected " + num(in.shape[0]) + " matrices (one per sample of input), got " +
           num(matrix.shape[0]);
  if (Error e = axisList("shape", shape, 3, 1, "spatial axis D, H, W of the result"); !e.empty())
    return e;
  if (border != "zeros" && border != "constant" && border != "reflection")
    return "'border' must be zeros, constant or reflection, got '" + border + "'";
  if (mode == "linear_argmax") {
    if (border != "zeros")
      return "'border' does not apply to mode linear_argmax (a voxel sampled outside the "
             "input is 'value'), got " + border;
    if (labels.empty())
      return "'labels' must list the labels that mode linear_argmax resamples";
    for (size_t i = 1; i < labels.size(); ++i)
      if (labels[i] <= labels[i - 1])
        return "'labels' must ascend strictly (ties go to the first), got " + listStr(labels);
  } else if (!labels.empty()) {
    return "'labels' applies to mode linear_argmax only, got " + listStr(labels);
  }
  if (mode != "linear_argmax" && border != "constant" && value != 0)
    return "'value' applies to border constant and mode linear_argmax only, got " +
           std::to_string(value);
  if (!std::isfinite(value))
    return "'value' must be finite";
  if (isInt && (value != std::nearbyint(value) || std::fabs(value) > 2147483647.0))
    return "'value' must be an i32 for i32 labels, got " + std::to_string(value);
  out.push_back({{in.shape[0], in.shape[1], shape[0], shape[1], shape[2]}, in.element});
  return {};
}

} // namespace med::shape
