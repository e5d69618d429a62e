//===- TorchReference.cpp - the op-level plan of an artifact, run with LibTorch -----===//
//
// One function per med op family. Semantics are those of docs/dialect.md; where torch has
// the op itself (conv3d, conv_transpose3d, group_norm, layer_norm, gelu, cross_entropy,
// binary_cross_entropy_with_logits, constant_pad_nd, ...) it is used as is, so that the
// reference does not share our kernels' reading of the spec.
//
//===----------------------------------------------------------------------------------===//
#include "TorchReference.h"

#include "medrun/Error.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <variant>

using medrun::Error;
using medrun::str;

namespace medcheck {

torch::ScalarType torchType(medrun::DType t) {
  switch (t) {
  case medrun::DType::F32: return torch::kFloat;
  case medrun::DType::F64: return torch::kDouble;
  case medrun::DType::BF16: return torch::kBFloat16;
  case medrun::DType::F16: return torch::kHalf;
  case medrun::DType::I8: return torch::kChar;
  case medrun::DType::I16: return torch::kShort;
  case medrun::DType::I32: return torch::kInt;
  case medrun::DType::I64: return torch::kLong;
  case medrun::DType::U8: return torch::kByte;
  case medrun::DType::Bool: return torch::kBool;
  }
  throw Error("unknown medrun dtype");
}

medrun::DType medrunType(torch::ScalarType t) {
  switch (t) {
  case torch::kFloat: return medrun::DType::F32;
  case torch::kDouble: return medrun::DType::F64;
  case torch::kBFloat16: return medrun::DType::BF16;
  case torch::kHalf: return medrun::DType::F16;
  case torch::kChar: return medrun::DType::I8;
  case torch::kShort: return medrun::DType::I16;
  case torch::kInt: return medrun::DType::I32;
  case torch::kLong: return medrun::DType::I64;
  case torch::kByte: return medrun::DType::U8;
  case torch::kBool: return medrun::DType::Bool;
  default: break;
  }
  throw Error(str("torch dtype ", c10::toString(t), " has no medrun counterpart"));
}

torch::Tensor toTorch(const medrun::Tensor &t, torch::Device device) {
  std::vector<int64_t> sizes(t.shape().begin(), t.shape().end());
  auto options = torch::TensorOptions().dtype(torchType(t.dtype()));
  if (t.numel() == 0)
    return torch::empty(sizes, options.device(device));
  torch::Tensor host = torch::from_blob(const_cast<void *>(t.raw()), sizes, options);
  return device.is_cpu() ? host.clone() : host.to(device);
}

medrun::Tensor fromTorch(const torch::Tensor &t) {
  torch::Tensor c = t.contiguous().cpu();
  medrun::Shape shape(c.sizes().begin(), c.sizes().end());
  medrun::Tensor out(medrunType(c.scalar_type()), shape);
  if (out.nbytes())
    std::memcpy(out.raw(), c.data_ptr(), out.nbytes());
  return out;
}

namespace {

using medrun::OpInfo;

/// Everything an op needs: the values computed so far and the function's types.
struct Env {
  const medrun::Function &fn;
  std::vector<torch::Tensor> values;
  torch::ScalarType floatType;
  torch::Device device; ///< where every value lives (that of the inputs)
  /// Under torch autocast to this type (bf16 or f16): a float result keeps the type the op
  /// computed it in (the autocast type from autocast's lower-precision ops, f32 from the
  /// others), as in a PyTorch model.
  std::optional<torch::ScalarType> autocast;
  /// Where a function's med.assign ops put their values (state a forward pass sets, such as
  /// BatchNorm's running statistics), by state name; null: an assign is an error.
  std::map<std::string, torch::Tensor> *assigned = nullptr;
  /// Under autocast, where to count the types of the 5-D float results (AutocastTypes).
  AutocastTypes *types = nullptr;

  const torch::Tensor &get(int id, const OpInfo &op) const {
    if (id < 0 || id >= static_cast<int>(values.size()) || !values[id].defined())
      throw Error(str(op.describe(), ": operand %", id, " has no value yet"));
    return values[id];
  }
  const torch::Tensor &in(const OpInfo &op, const std::string &name) const {
    return get(op.single(name), op);
  }
  torch::Tensor opt(const OpInfo &op, const std::string &name) const {
    auto id = op.optional(name);
    return id ? get(*id, op) : torch::Tensor();
  }
  std::vector<torch::Tensor> group(const OpInfo &op, const std::string &name) const {
    std::vector<torch::Tensor> out;
    for (int id : op.operand(name))
      out.push_back(get(id, op));
    return out;
  }
  /// Options of a float value the mapping creates itself.
  torch::TensorOptions floatOptions() const {
    return torch::TensorOptions().dtype(floatType).device(device);
  }
  /// The torch type a value of the function is held in.
  torch::ScalarType typeOf(int id) const {
    medrun::DType t = fn.values.at(id).dtype;
    return medrun::isFloat(t) ? floatType : torchType(t);
  }
};

// Attribute readers that accept either JSON number kind (an integral-valued float list may
// be read back as integers, an empty list as either).
const medrun::AttrValue &attr(const OpInfo &op, const std::string &name) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end())
    throw Error(str(op.describe(), ": missing attribute '", name, "'"));
  return it->second;
}

double num(const OpInfo &op, const std::string &name) {
  const medrun::AttrValue &v = attr(op, name);
  if (auto *d = std::get_if<double>(&v))
    return *d;
  if (auto *i = std::get_if<int64_t>(&v))
    return static_cast<double>(*i);
  throw Error(str(op.describe(), ": attribute '", name, "' is not a number"));
}

std::vector<double> nums(const OpInfo &op, const std::string &name) {
  const medrun::AttrValue &v = attr(op, name);
  if (auto *d = std::get_if<std::vector<double>>(&v))
    return *d;
  if (auto *i = std::get_if<std::vector<int64_t>>(&v))
    return std::vector<double>(i->begin(), i->end());
  if (std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v))
    return {num(op, name)};
  throw Error(str(op.describe(), ": attribute '", name, "' is not a list of numbers"));
}

std::vector<int64_t> ints(const OpInfo &op, const std::string &name) {
  const medrun::AttrValue &v = attr(op, name);
  if (auto *i = std::get_if<std::vector<int64_t>>(&v))
    return *i;
  if (auto *d = std::get_if<std::vector<double>>(&v)) {
    std::vector<int64_t> out;
    for (double x : *d) {
      if (x != std::floor(x))
        throw Error(str(op.describe(), ": attribute '", name, "' holds a non-integer"));
      out.push_back(static_cast<int64_t>(x));
    }
    return out;
  }
  throw Error(str(op.describe(), ": attribute '", name, "' is not a list of integers"));
}

int64_t integer(const OpInfo &op, const std::string &name) {
  const medrun::AttrValue &v = attr(op, name);
  if (auto *i = std::get_if<int64_t>(&v))
    return *i;
  if (auto *d = std::get_if<double>(&v); d && *d == std::floor(*d))
    return static_cast<int64_t>(*d);
  throw Error(str(op.describe(), ": attribute '", name, "' is not an integer"));
}

/// A unit or bool attribute; absent means false.
bool flag(const OpInfo &op, const std::string &name) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end())
    return false;
  if (auto *b = std::get_if<bool>(&it->second))
    return *b;
  throw Error(str(op.describe(), ": attribute '", name, "' is not a bool"));
}

std::vector<int64_t> ints3(const OpInfo &op, const std::string &name) {
  std::vector<int64_t> v = ints(op, name);
  if (v.size() != 3)
    throw Error(str(op.describe(), ": attribute '", name, "' has ", v.size(),
                    " values, expected 3"));
  return v;
}

/// `t` viewed as 1×C×1×…×1 so that it broadcasts along axis 1 of a rank-`rank` tensor.
torch::Tensor alongChannels(const torch::Tensor &t, int64_t rank) {
  std::vector<int64_t> shape(std::max<int64_t>(rank, 2), 1);
  shape[1] = t.numel();
  return t.reshape(shape);
}

/// Every axis of a rank-`rank` tensor but `except` (or all if except < 0).
std::vector<int64_t> axesBut(int64_t rank, int64_t except) {
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < rank; ++a)
    if (a != except)
      axes.push_back(a);
  return axes;
}

torch::Tensor sumOver(const torch::Tensor &t, const std::vector<int64_t> &axes,
                      bool keepdim = false) {
  if (axes.empty())
    return t.clone();
  return t.sum(axes, keepdim);
}

// ---- forward ops ----------------------------------------------------------------------
//
// Each op family is a function of torch tensors and the op's attributes, so that the
// gradient ops below can differentiate the very same mapping with torch autograd.

torch::Tensor conv(const OpInfo &op, const torch::Tensor &x, const torch::Tensor &w,
                   const torch::Tensor &b, bool transposed) {
  auto stride = ints3(op, "stride"), padding = ints3(op, "padding"),
       dilation = ints3(op, "dilation");
  int64_t groups = integer(op, "groups");
  if (!transposed)
    return torch::conv3d(x, w, b, stride, padding, dilation, groups);
  auto outputPadding = ints3(op, "output_padding");
  return torch::conv_transpose3d(x, w, b, stride, padding, outputPadding, groups, dilation);
}

/// med.shift_sum: as its definition reads, torch's depthwise conv3d (groups = C, stride 1,
/// padding k/2) with the taps reversed when `mirrored`.
torch::Tensor shiftSum(const OpInfo &op, const torch::Tensor &x, const torch::Tensor &w,
                       const torch::Tensor &b) {
  if (x.dim() != 5 || w.dim() != 5)
    throw Error(str(op.describe(), ": expected rank-5 input and weight"));
  std::vector<int64_t> padding{w.size(2) / 2, w.size(3) / 2, w.size(4) / 2};
  torch::Tensor taps = op.boolAttr("mirrored") ? w.flip({2, 3, 4}) : w;
  return torch::conv3d(x, taps, b, {1, 1, 1}, padding, {1, 1, 1}, x.size(1));
}

torch::Tensor channelLayerNorm(const torch::Tensor &x, const torch::Tensor &g,
                               const torch::Tensor &b, double eps) {
  int64_t c = x.size(1);
  // torch's own layer norm over the last axis, with channels moved there and back.
  torch::Tensor last = x.movedim(1, -1);
  torch::Tensor y = torch::layer_norm(last, {c}, g.reshape({c}), b.reshape({c}), eps);
  return y.movedim(-1, 1).contiguous();
}

torch::Tensor grn(const torch::Tensor &x, const torch::Tensor &g, const torch::Tensor &b,
                  double eps) {
  std::vector<int64_t> spatial;
  for (int64_t a = 2; a < x.dim(); ++a)
    spatial.push_back(a);
  // MedNeXt: gx = torch.norm(x, p=2, dim=(-3,-2,-1), keepdim=True);
  //          nx = gx / (gx.mean(dim=1, keepdim=True) + eps); y = gamma*(x*nx) + beta + x
  torch::Tensor gx = torch::linalg_vector_norm(x, 2, spatial, /*keepdim=*/true);
  torch::Tensor nx = gx / (gx.mean(std::vector<int64_t>{1}, /*keepdim=*/true) + eps);
  return g * (x * nx) + b + x;
}

/// med.prelu: torch's own prelu where the slope is one value or one per channel (axis 1 of
/// an input of rank 2 or more; torch.nn.PReLU's weight), else its definition, where(x > 0,
/// x, slope·x), with NumPy broadcasting as ONNX PRelu has it.
torch::Tensor preluReference(const torch::Tensor &x, const torch::Tensor &slope) {
  const int64_t lead = x.dim() - slope.dim();
  bool perChannel = x.dim() >= 2;
  for (int64_t i = 0; perChannel && i < slope.dim(); ++i)
    perChannel = slope.size(i) == 1 || i + lead == 1;
  if (perChannel)
    return torch::prelu(x, slope.reshape({-1}));
  return torch::where(x > 0, x, slope * x);
}

/// med.resize to `size`: torch's upsample_trilinear3d / upsample_nearest3d (interpolate's
/// linear and nearest modes), positions computed from the sizes.
torch::Tensor resizeReference(const OpInfo &op, const torch::Tensor &x,
                              const std::vector<int64_t> &size) {
  const std::string &mode = std::get<std::string>(attr(op, "mode"));
  if (mode == "nearest")
    return torch::upsample_nearest3d(x, size);
  return torch::upsample_trilinear3d(x, size, flag(op, "align_corners"));
}

/// med.resize by whole factors: interpolate(scale_factor=...), which computes the output size
/// from the factors and the positions from 1/factor (not from the sizes, as the size form).
torch::Tensor resizeByScale(const OpInfo &op, const torch::Tensor &x,
                            const std::vector<int64_t> &scale) {
  const std::string &mode = std::get<std::string>(attr(op, "mode"));
  const std::vector<double> factors(scale.begin(), scale.end());
  if (mode == "nearest")
    return torch::upsample_nearest3d(x, c10::nullopt, factors);
  return torch::upsample_trilinear3d(x, c10::nullopt, flag(op, "align_corners"), factors);
}

torch::Tensor pad(const OpInfo &op, const torch::Tensor &x) {
  std::vector<int64_t> low = ints(op, "low"), high = ints(op, "high");
  if (static_cast<int64_t>(low.size()) != x.dim() || static_cast<int64_t>(high.size()) != x.dim())
    throw Error(str(op.describe(), ": low/high need one entry per axis"));
  // constant_pad_nd takes (low, high) pairs starting at the last axis.
  std::vector<int64_t> pads;
  for (int64_t a = x.dim() - 1; a >= 0; --a) {
    pads.push_back(low[a]);
    pads.push_back(high[a]);
  }
  return torch::constant_pad_nd(x, pads, num(op, "value"));
}

/// The box of `sizes` elements from `offsets` stepping by `strides` (empty: 1) of y.
torch::Tensor sliceBox(torch::Tensor y, const std::vector<int64_t> &offsets,
                       const std::vector<int64_t> &sizes, const std::vector<int64_t> &strides) {
  for (int64_t a = 0; a < y.dim(); ++a) {
    int64_t step = a < static_cast<int64_t>(strides.size()) ? strides[a] : 1;
    int64_t size = sizes.at(a);
    if (size == 0)
      y = y.narrow(a, 0, 0);
    else
      y = y.slice(a, offsets.at(a), offsets.at(a) + (size - 1) * step + 1, step);
  }
  return y.contiguous();
}

/// med.spatial_transform by torch's grid_sample (align_corners=False) on the grid
/// (2p + 1)/n − 1 of the op's positions p = M[:, :3]·(o − c_out) + M[:, 3] + c_in, flipped to
/// (x, y, z); all in f64 and rounded once, so that the reference's own rounding does not
/// blur the check (nearest and labels are compared exactly). Border constant is zeros plus
/// `value` times (1 − the sampled mask of ones); linear_argmax is nnU-Net's composition: the
/// one-hot masks of the labels resampled, argmax over them (torch takes the first of equal
/// maxima: the lowest label), and `value` where the grid coordinate on some axis lies
/// outside [−1 + 1/n, 1 − 1/n].
torch::Tensor spatialTransform(const OpInfo &op, const torch::Tensor &x,
                               const torch::Tensor &matrix) {
  const std::vector<int64_t> out = ints3(op, "shape");
  const std::string &mode = op.strAttr("mode"), &border = op.strAttr("border");
  const double value = num(op, "value");
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(x.device());
  const int64_t B = x.size(0);
  std::vector<torch::Tensor> axes;
  for (int a = 0; a < 3; ++a)
    axes.push_back(torch::arange(out[a], f64) - (out[a] - 1) / 2.0);
  std::vector<torch::Tensor> o = torch::meshgrid(axes, "ij");
  const torch::Tensor offsets = torch::stack(o, -1).reshape({1, -1, 3}); // o − c_out, [1, P, 3]
  const torch::Tensor m = matrix.to(torch::kFloat64);
  const torch::Tensor n = torch::tensor({x.size(2), x.size(3), x.size(4)}, f64);
  const torch::Tensor p = torch::matmul(offsets, m.narrow(2, 0, 3).transpose(1, 2)) +
                          m.select(2, 3).unsqueeze(1) + (n - 1) / 2; // [B, P, 3]
  const torch::Tensor g = (2 * p + 1) / n - 1;
  // Nearest rounds half to even (nearbyint), as grid_sample does on CUDA and from PyTorch 2
  // on; LibTorch 1.13's CPU kernel rounds 3-D halves away from zero (std::round). So the
  // positions are rounded here first (torch::round: half to even) and sampled where no tie
  // is left. With reflection the rounding follows the reflection: grid_sample rounds there.
  const torch::Tensor snapped =
      mode == "nearest" && border != "reflection" ? (2 * p.round() + 1) / n - 1 : g;
  const torch::Tensor grid = snapped.flip({-1}).reshape({B, out[0], out[1], out[2], 3});
  const torch::Tensor xd = x.to(torch::kFloat64);
  auto sample = [&](const torch::Tensor &t, int64_t interpolation, int64_t padding) {
    return torch::grid_sampler(t, grid, interpolation, padding, /*align_corners=*/false);
  };
  torch::Tensor y;
  if (mode == "linear_argmax") {
    const std::vector<int64_t> labels = ints(op, "labels");
    std::vector<torch::Tensor> onehot;
    for (int64_t l : labels)
      onehot.push_back((xd == static_cast<double>(l)).to(torch::kFloat64));
    const int64_t C = x.size(1), L = static_cast<int64_t>(labels.size());
    const torch::Tensor s =
        sample(torch::stack(onehot, 2).reshape({B, C * L, x.size(2), x.size(3), x.size(4)}), 0, 0)
            .reshape({B, C, L, out[0], out[1], out[2]});
    const torch::Tensor label = torch::tensor(labels, f64).index_select(0, s.argmax(2).flatten())
                                    .reshape({B, C, out[0], out[1], out[2]});
    const torch::Tensor outside = ((g < -1 + 1 / n) | (g > 1 - 1 / n)).any(-1).reshape(
        {B, 1, out[0], out[1], out[2]});
    y = torch::where(outside, torch::full_like(label, value), label);
  } else {
    const int64_t interpolation = mode == "nearest" ? 1 : 0;
    y = sample(xd, interpolation, border == "reflection" ? 2 : 0);
    if (border == "constant")
      y = y + value * (1 - sample(torch::ones_like(xd.narrow(1, 0, 1)), interpolation, 0));
  }
  return y.to(x.scalar_type());
}

torch::Tensor slice(const OpInfo &op, const torch::Tensor &y) {
  std::vector<int64_t> strides; // optional in the dialect: absent means 1 on every axis
  if (op.attrs.count("strides"))
    strides = ints(op, "strides");
  return sliceBox(y, ints(op, "offsets"), ints(op, "sizes"), strides);
}

// ---- label transforms ---------------------------------------------------------------

/// med.affinities composed from indexing: the labels of the output box, and those at
/// v + offset gathered along each axis with index_select (indices clamped, an inside mask
/// beside them); then BANIS's comparisons.
std::vector<torch::Tensor> affinities(const Env &env, const OpInfo &op, const torch::Tensor &seg) {
  std::vector<int64_t> offsets = ints(op, "offsets"), low = ints(op, "crop_low"),
                       size = ints(op, "crop_size");
  const int64_t unlabelled = integer(op, "unlabelled_below");
  if (seg.dim() != 5 || offsets.size() % 3 != 0 || low.size() != 3 || size.size() != 3)
    throw Error(str(op.describe(), ": cannot map labels of rank ", seg.dim()));
  const torch::Tensor s = seg.select(1, 0); // N x D x H x W
  torch::Tensor here = s;
  for (int64_t a = 0; a < 3; ++a)
    here = here.narrow(1 + a, low[a], size[a]);
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(seg.device());
  std::vector<torch::Tensor> affs, masks;
  for (size_t k = 0; k < offsets.size(); k += 3) {
    torch::Tensor there = s, inside = torch::ones({1, 1, 1, 1}, longs).to(torch::kBool);
    for (int64_t a = 0; a < 3; ++a) {
      const int64_t n = s.size(1 + a);
      torch::Tensor idx = torch::arange(low[a], low[a] + size[a], longs) + offsets[k + a];
      std::vector<int64_t> view{1, 1, 1, 1};
      view[1 + a] = size[a];
      inside = inside & ((idx >= 0) & (idx < n)).view(view);
      there = there.index_select(1 + a, idx.clamp(0, n - 1));
    }
    torch::Tensor mask = inside & (here >= unlabelled) & (there >= unlabelled);
    affs.push_back(mask & (here == there) & (here != 0));
    masks.push_back(mask);
  }
  return {torch::stack(affs, 1).to(env.typeOf(op.results.at(0))),
          torch::stack(masks, 1).to(env.typeOf(op.results.at(1)))};
}

/// med.label_regions: torch.isin per region, as nnU-Net's transform, as 0/1 floats.
torch::Tensor labelRegions(const Env &env, const OpInfo &op, const torch::Tensor &x) {
  std::vector<int64_t> labels = ints(op, "regions"), sizes = ints(op, "region_sizes");
  std::vector<torch::Tensor> channels;
  size_t at = 0;
  for (int64_t n : sizes) {
    std::vector<int64_t> region(labels.begin() + at, labels.begin() + at + n);
    at += n;
    torch::Tensor list = torch::tensor(region, torch::kLong).to(x.device(), x.scalar_type());
    channels.push_back(torch::isin(x.select(1, 0), list));
  }
  return torch::stack(channels, 1).to(env.typeOf(op.results.at(0)));
}

/// med.downsample_nearest: the op behind interpolate(x, size, mode='nearest-exact'), in
/// f64 (exact for every label) and back to the labels' type, as nnU-Net calls it on
/// seg.float().
torch::Tensor downsampleNearest(const OpInfo &op, const torch::Tensor &x) {
  return torch::_upsample_nearest_exact3d(x.to(torch::kDouble), ints(op, "size"))
      .to(x.scalar_type());
}

torch::Tensor reduce(const OpInfo &op, const torch::Tensor &x) {
  const std::string &kind = op.strAttr("kind");
  std::vector<int64_t> axes = ints(op, "axes");
  bool keep = flag(op, "keepdims");
  if (axes.empty())
    return x.clone();
  if (kind == "sum")
    return x.sum(axes, keep);
  if (kind == "mean")
    return x.mean(axes, keep);
  if (kind == "max")
    return torch::amax(x, axes, keep);
  if (kind == "min")
    return torch::amin(x, axes, keep);
  throw Error(str(op.describe(), ": unknown reduce kind '", kind, "'"));
}

/// med.bce_with_logits: torch's elementwise BCE-with-logits, then the mask rule (an element
/// counts iff mask != 0), the auto pos_weight and the reductions composed around it.
/// Target, mask and pos_weight are data (docs/dialect.md: they get no gradient), so they
/// are detached: torch autograd then differentiates exactly what med-autodiff does.
torch::Tensor bce(const OpInfo &op, const torch::Tensor &x, torch::Tensor y, torch::Tensor mask,
                  torch::Tensor pw) {
  y = y.detach();
  if (mask.defined())
    mask = mask.detach();
  if (pw.defined())
    pw = pw.detach();
  const std::string &reduction = op.strAttr("reduction");
  bool autoPw = flag(op, "auto_pos_weight");
  double maxPw = num(op, "max_pos_weight");
  int64_t rank = x.dim();
  int64_t chAxis = rank >= 2 ? 1 : -1;

  torch::Tensor counted = mask.defined() ? mask.ne(0).expand(x.sizes())
                                         : torch::ones(x.sizes(), x.options().dtype(torch::kBool));
  torch::Tensor countedF = counted.to(x.scalar_type());

  torch::Tensor posWeight; // broadcastable against x
  if (autoPw) {
    std::vector<int64_t> axes = axesBut(rank, chAxis);
    torch::Tensor pos = sumOver(y * countedF, axes);
    torch::Tensor neg = sumOver((1 - y) * countedF, axes);
    torch::Tensor capped = torch::clamp_max(neg / pos, maxPw);
    torch::Tensor p = torch::where(pos.eq(0), torch::full_like(pos, maxPw), capped);
    posWeight = chAxis >= 0 ? alongChannels(p, rank) : p;
  } else if (pw.defined()) {
    posWeight = chAxis >= 0 ? alongChannels(pw, rank) : pw;
  }

  namespace F = torch::nn::functional;
  auto options = F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone);
  if (posWeight.defined())
    options.pos_weight(posWeight);
  torch::Tensor l = F::binary_cross_entropy_with_logits(x, y, options);
  l = torch::where(counted, l, torch::zeros_like(l));

  auto safeDiv = [](const torch::Tensor &s, const torch::Tensor &n) {
    return torch::where(n.eq(0), torch::zeros_like(s), s / torch::clamp_min(n, 1));
  };
  if (reduction == "none")
    return l;
  if (reduction == "sum")
    return l.sum();
  if (reduction == "mean")
    return safeDiv(l.sum(), countedF.sum());
  if (reduction == "per_channel") {
    std::vector<int64_t> axes = axesBut(rank, chAxis);
    return safeDiv(sumOver(l, axes), sumOver(countedF, axes)).sum();
  }
  throw Error(str(op.describe(), ": unknown reduction '", reduction, "'"));
}

/// med.dice_ce: nnU-Net's DC_and_CE_loss per level (RobustCrossEntropyLoss = torch's
/// cross_entropy on target[:, 0].long(); soft Dice on softmax(logits) with one-hot targets,
/// (2·tp + smooth) / (2·tp + fp + fn + smooth) per class and sample, or per class over the
/// batch when batch_dice, averaged, background left out unless include_background; the loss
/// is −Dice), weighted and summed over levels. Targets are class indices: no gradient.
/// With ignore_index, as nnU-Net's DC_and_CE_loss with an ignore label: cross_entropy with
/// ignore_index (skipped when a level has no annotated voxel), and the soft Dice's sums
/// multiplied by the mask target != ignore, the target set to 0 under it.
torch::Tensor diceCE(const OpInfo &op, const std::vector<torch::Tensor> &logits,
                     const std::vector<torch::Tensor> &targets,
                     const torch::TensorOptions &floatOptions) {
  std::vector<double> weights = nums(op, "weights");
  if (logits.size() != targets.size() || logits.size() != weights.size())
    throw Error(str(op.describe(), ": ", logits.size(), " logits, ", targets.size(),
                    " targets and ", weights.size(), " weights"));
  double smooth = num(op, "smooth"), ceWeight = num(op, "ce_weight"),
         diceWeight = num(op, "dice_weight");
  bool batchDice = flag(op, "batch_dice"), includeBg = flag(op, "include_background");
  std::optional<int64_t> ignore;
  if (op.attrs.count("ignore_index"))
    ignore = op.intAttr("ignore_index");

  torch::Tensor total;
  for (size_t i = 0; i < logits.size(); ++i) {
    const torch::Tensor &x = logits[i];
    int64_t classes = x.size(1);
    torch::Tensor t = targets[i].detach().select(1, 0).to(torch::kLong);

    torch::Tensor ce, mask;
    if (ignore) {
      mask = (t != *ignore).unsqueeze(1).to(x.scalar_type());
      ce = mask.sum().item<double>() > 0
               ? torch::nn::functional::cross_entropy(
                     x, t, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(*ignore))
               : x.sum() * 0;
      t = torch::where(t == *ignore, torch::zeros_like(t), t);
    } else {
      ce = torch::nn::functional::cross_entropy(x, t);
    }

    torch::Tensor p = torch::softmax(x, 1);
    torch::Tensor onehot = torch::one_hot(t, classes).movedim(-1, 1).to(x.scalar_type());
    if (!includeBg) {
      p = p.slice(1, 1, classes);
      onehot = onehot.slice(1, 1, classes);
    }
    if (mask.defined()) { // nnU-Net: the intersection, Σpred and Σgt times the mask
      p = p * mask;
      onehot = onehot * mask;
    }
    std::vector<int64_t> spatial;
    for (int64_t a = 2; a < x.dim(); ++a)
      spatial.push_back(a);
    torch::Tensor tp = sumOver(p * onehot, spatial);
    torch::Tensor sumPred = sumOver(p, spatial), sumGt = sumOver(onehot, spatial);
    if (batchDice) {
      tp = tp.sum(0);
      sumPred = sumPred.sum(0);
      sumGt = sumGt.sum(0);
    }
    // 2·tp + fp + fn = sum of predictions + sum of ground truth.
    torch::Tensor dice = (2 * tp + smooth) / (sumPred + sumGt + smooth);
    torch::Tensor level = ceWeight * ce - diceWeight * dice.mean();
    torch::Tensor weighted = weights[i] * level;
    total = total.defined() ? total + weighted : weighted;
  }
  if (!total.defined())
    total = torch::zeros({}, floatOptions);
  return total;
}

torch::Tensor constant(const Env &env, const OpInfo &op) {
  std::vector<double> value = nums(op, "value");
  int id = op.results.at(0);
  const medrun::Shape &shape = env.fn.values.at(id).shape;
  int64_t n = medrun::numElements(shape);
  torch::Tensor v = torch::tensor(std::vector<double>(value.begin(), value.end()),
                                  torch::TensorOptions().dtype(torch::kDouble));
  if (v.numel() == 1 && n != 1)
    v = v.expand({n});
  else if (v.numel() != n)
    throw Error(str(op.describe(), ": ", v.numel(), " values for ", n, " elements"));
  return v.reshape(std::vector<int64_t>(shape.begin(), shape.end()))
      .to(env.device, env.typeOf(id))
      .clone();
}

/// med.gaussian_blur from its definition: per sample, channel and axis, the weighted sum of
/// reflected copies (index_select of the reflected indices, found by folding step by step),
/// in the checker's float type.
torch::Tensor gaussianBlur(const torch::Tensor &input, const torch::Tensor &sigma) {
  torch::Tensor y = input.clone();
  const torch::Tensor s = sigma.to(torch::kCPU, torch::kFloat64);
  for (int64_t n = 0; n < y.size(0); ++n)
    for (int64_t c = 0; c < y.size(1); ++c)
      for (int64_t axis = 0; axis < 3; ++axis) {
        const double sg = s[n][c][axis].item<double>();
        if (!(sg > 0) || !std::isfinite(sg))
          continue;
        const double t = 6 * sg + 0.5; // the odd tap count nearest to t
        double k = std::nearbyint(t);
        if (std::fmod(k, 2.0) == 0)
          k += t >= k ? 1 : -1;
        const int64_t size = y.size(2 + axis);
        const int64_t r = t > 4.0 * size + 1 ? 2 * size : static_cast<int64_t>(k - 1) / 2;
        if (r == 0)
          continue;
        torch::Tensor v = y[n][c], acc = torch::zeros_like(v);
        std::vector<double> w;
        for (int64_t j = -r; j <= r; ++j)
          w.push_back(std::exp(-0.5 * (j / sg) * (j / sg)));
        const double total = std::accumulate(w.begin(), w.end(), 0.0);
        for (int64_t j = -r; j <= r; ++j) {
          std::vector<int64_t> idx;
          for (int64_t i = 0; i < size; ++i) {
            int64_t at = i + j;
            while (size > 1 && (at < 0 || at >= size))
              at = at < 0 ? -at : 2 * (size - 1) - at;
            idx.push_back(size > 1 ? at : 0);
          }
          torch::Tensor index = torch::tensor(idx, torch::TensorOptions().dtype(torch::kInt64))
                                    .to(v.device());
          acc = acc + v.index_select(axis, index) * (w[static_cast<size_t>(j + r)] / total);
        }
        y[n][c] = acc;
      }
  return y;
}

/// med.simulate_low_resolution as nnU-Net writes it: per sample and channel, torch's
/// nearest-exact interpolation to round(n·s) voxels and trilinear interpolation back
/// (align_corners=False).
torch::Tensor simulateLowResolution(const torch::Tensor &input, const torch::Tensor &scale) {
  torch::Tensor y = input.clone();
  const torch::Tensor s = scale.to(torch::kCPU, torch::kFloat64);
  for (int64_t n = 0; n < y.size(0); ++n)
    for (int64_t c = 0; c < y.size(1); ++c) {
      std::vector<int64_t> low, full;
      for (int64_t a = 0; a < 3; ++a) {
        full.push_back(y.size(2 + a));
        const double sa = s[n][c][a].item<double>(), m = std::nearbyint(y.size(2 + a) * sa);
        low.push_back(!std::isfinite(sa) ? y.size(2 + a)
                                         : std::clamp<int64_t>(m < 1 ? 1 : static_cast<int64_t>(std::min(m, 1e18)), 1, y.size(2 + a)));
      }
      torch::Tensor v = input.slice(0, n, n + 1).slice(1, c, c + 1);
      torch::Tensor down = torch::_upsample_nearest_exact3d(v, low);
      y.slice(0, n, n + 1).slice(1, c, c + 1).copy_(torch::upsample_trilinear3d(down, full, false));
    }
  return y;
}

/// med.mirror: torch::flip of each sample along the axes its flags select.
torch::Tensor mirror(const torch::Tensor &input, const torch::Tensor &flip) {
  torch::Tensor y = input.clone();
  const torch::Tensor f = flip.to(torch::kCPU, torch::kFloat64);
  for (int64_t n = 0; n < y.size(0); ++n) {
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < 3; ++a)
      if (f[n][a].item<double>() != 0)
        axes.push_back(a + 1); // of the sample's C×D×H×W
    if (!axes.empty())
      y[n] = torch::flip(input[n], axes);
  }
  return y;
}

/// med.affine_matrix: MONAI's rotations R_D·R_H·R_W, shear and scale as f64 torch matrices.
torch::Tensor affineMatrix(const torch::Tensor &angles, const torch::Tensor &scales,
                           const torch::Tensor &shear) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor a = angles.to(torch::kCPU, torch::kFloat64),
                      k = scales.to(torch::kCPU, torch::kFloat64);
  std::vector<torch::Tensor> out;
  for (int64_t n = 0; n < a.size(0); ++n) {
    auto rot = [&](int axis) { // the rotation keeping `axis`, MONAI's create_rotate
      const double c = std::cos(a[n][axis].item<double>()), s = std::sin(a[n][axis].item<double>());
      torch::Tensor r = torch::eye(3, f64);
      const int p = axis == 0 ? 1 : 0, q = axis == 2 ? 1 : 2;
      const double sign = axis == 1 ? -1 : 1; // R_H = [[c, 0, s], [0, 1, 0], [-s, 0, c]]
      r[p][p] = c;
      r[q][q] = c;
      r[p][q] = -sign * s;
      r[q][p] = sign * s;
      return r;
    };
    torch::Tensor sh = torch::eye(3, f64);
    if (shear.defined()) {
      const torch::Tensor s = shear.to(torch::kCPU, torch::kFloat64)[n];
      sh[0][1] = s[0], sh[0][2] = s[1], sh[1][0] = s[2], sh[1][2] = s[3], sh[2][0] = s[4],
      sh[2][1] = s[5];
    }
    torch::Tensor m = rot(0).matmul(rot(1)).matmul(rot(2)).matmul(sh).matmul(torch::diag(k[n]));
    out.push_back(torch::cat({m, torch::zeros({3, 1}, f64)}, 1));
  }
  return torch::stack(out).to(angles.device(), angles.scalar_type());
}

/// med.orientation_matrix: element ⌊48 u⌋ enumerated again, as a permuted, signed identity
/// (std::next_permutation gives the lexicographic order).
torch::Tensor orientationMatrix(const torch::Tensor &u) {
  const torch::Tensor v = u.to(torch::kCPU, torch::kFloat32);
  std::vector<torch::Tensor> out;
  for (int64_t n = 0; n < v.size(0); ++n) {
    const float scaled = v[n].item<float>() * 48.0f;
    const int64_t e = std::clamp<int64_t>(scaled > 0 ? static_cast<int64_t>(scaled) : 0, 0, 47);
    std::vector<int64_t> perm{0, 1, 2};
    for (int64_t q = 0; q < e / 8; ++q)
      std::next_permutation(perm.begin(), perm.end());
    torch::Tensor m = torch::zeros({3, 4}, torch::kFloat64);
    for (int64_t i = 0; i < 3; ++i)
      m[i][perm[static_cast<size_t>(i)]] = ((e % 8) >> i) & 1 ? -1.0 : 1.0;
    out.push_back(m);
  }
  return torch::stack(out).to(u.device(), u.scalar_type());
}

/// med.shift_slices: torch::roll of each D-slice by the floored shifts (np.roll's sense).
torch::Tensor shiftSlices(const torch::Tensor &input, const torch::Tensor &shift) {
  torch::Tensor y = input.clone();
  const torch::Tensor s = shift.to(torch::kCPU, torch::kFloat64).floor().to(torch::kInt64);
  for (int64_t n = 0; n < y.size(0); ++n)
    for (int64_t d = 0; d < y.size(2); ++d)
      y.select(0, n).select(1, d).copy_(torch::roll(input.select(0, n).select(1, d),
                                                    {s[n][d][0].item<int64_t>(),
                                                     s[n][d][1].item<int64_t>()},
                                                    {1, 2}));
  return y;
}

/// Philox 4x32-10 (Salmon et al., SC'11) written again in torch's int64 arithmetic, every
/// element's counter (index in its sample, sample, stream, word3) a lane, so that the
/// backends' numbers are checked against a second definition: the first two words of the n
/// elements of `per` elements a sample. The 32 x 32-bit products are taken in 16-bit halves
/// to stay below 2^63.
std::pair<torch::Tensor, torch::Tensor> philoxWords(uint64_t k, int64_t n, int64_t per,
                                                    int64_t stream, int64_t word3,
                                                    torch::Device device) {
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const int64_t mask = 0xffffffffLL;
  auto mulHiLo = [&](int64_t m, const torch::Tensor &c) {
    torch::Tensor lo = torch::bitwise_and(c, 0xffff) * m, hi = torch::div(c, 65536, "floor") * m;
    torch::Tensor low = torch::bitwise_and(torch::bitwise_and(hi, 0xffff) * 65536 + lo, mask);
    torch::Tensor high = torch::div(hi + torch::div(lo, 65536, "floor"), 65536, "floor");
    return std::pair{high, low};
  };
  torch::Tensor index = torch::arange(n, i64);
  torch::Tensor c0 = torch::remainder(index, per), c1 = torch::div(index, per, "floor");
  torch::Tensor c2 = torch::full({n}, stream, i64), c3 = torch::full({n}, word3, i64);
  int64_t k0 = static_cast<int64_t>(k & 0xffffffffu), k1 = static_cast<int64_t>(k >> 32);
  for (int round = 0; round < 10; ++round) {
    auto [hi0, lo0] = mulHiLo(0xD2511F53LL, c0);
    auto [hi1, lo1] = mulHiLo(0xCD9E8D57LL, c2);
    c0 = torch::bitwise_xor(torch::bitwise_xor(hi1, c1), k0);
    c2 = torch::bitwise_xor(torch::bitwise_xor(hi0, c3), k1);
    c1 = lo1;
    c3 = lo0;
    k0 = (k0 + 0x9E3779B9LL) & mask;
    k1 = (k1 + 0xBB67AE85LL) & mask;
  }
  return {c0, c1};
}

/// med.random: its words from philoxWords (counter word 3 is 0).
torch::Tensor random(const Env &env, const OpInfo &op) {
  const torch::Tensor key = env.in(op, "key").to(torch::kCPU);
  const uint64_t k = static_cast<uint64_t>(key.item<int64_t>());
  const int id = op.results.at(0);
  const medrun::Shape &shape = env.fn.values.at(id).shape;
  const int64_t n = medrun::numElements(shape), samples = shape.at(0);
  const int64_t per = samples ? n / samples : 1;
  auto [c0, c1] = philoxWords(k, n, per, op.intAttr("stream"), 0, env.device);
  const double grid = 1.0 / 16777216.0; // 2^-24
  torch::Tensor y;
  if (op.strAttr("distribution") == "normal") {
    torch::Tensor u1 = (torch::div(c0, 256, "floor") + 1).to(torch::kFloat64) * grid;
    torch::Tensor u2 = torch::div(c1, 256, "floor").to(torch::kFloat64) * grid;
    y = torch::sqrt(-2.0 * torch::log(u1)) * torch::cos(2.0 * M_PI * u2);
  } else {
    y = torch::div(c0, 256, "floor").to(torch::kFloat64) * grid;
    if (op.strAttr("distribution") == "bernoulli")
      y = (y < op.floatAttr("probability")).to(torch::kFloat64);
  }
  return y.reshape(std::vector<int64_t>(shape.begin(), shape.end())).to(env.typeOf(id));
}

/// med.dropout's mask times its scale, as torch's dropout forms it (bernoulli(1 − p) / (1 −
/// p)) but with our mask: kept where the uniform number of the counter (index, sample,
/// stream, 1) is at least p (philoxWords), and 1/(1 − p) rounded to f32 (in f64 under f64).
/// The result is input · this, which torch autograd differentiates.
torch::Tensor dropoutNoise(const Env &env, const OpInfo &op, const torch::Tensor &input) {
  const torch::Tensor key = env.in(op, "key").to(torch::kCPU);
  const uint64_t k = static_cast<uint64_t>(key.item<int64_t>());
  const int64_t n = input.numel(), samples = input.size(0);
  const int64_t per = samples ? n / samples : 1;
  auto words = philoxWords(k, n, per, op.intAttr("stream"), 1, env.device);
  const double p = op.floatAttr("p");
  torch::Tensor u = torch::div(words.first, 256, "floor").to(torch::kFloat64) / 16777216.0;
  const double scale = input.scalar_type() == torch::kFloat64
                           ? 1.0 / (1.0 - p)
                           : static_cast<double>(static_cast<float>(1.0 / (1.0 - p)));
  return ((u >= p).to(torch::kFloat64) * scale).reshape(input.sizes()).to(input.scalar_type());
}

std::vector<int64_t> shapeAttr(const OpInfo &op) { return ints(op, "shape"); }

/// The `kind` of the extremum gradient ops: "max" or "min".
const std::string &extremum(const OpInfo &op) {
  const std::string &k = op.strAttr("kind");
  if (k != "max" && k != "min")
    throw Error(str(op.describe(), ": unknown extremum kind '", k, "'"));
  return k;
}

// ---- gradient ops ---------------------------------------------------------------------
//
// Each gradient op is the vector-Jacobian product of its forward mapping above, taken by
// torch autograd: leaves are fresh detached copies of the primal operands, and the
// upstream gradient is fed as grad_outputs. Nothing of our gradient rules or kernels is
// used. Gradients torch finds unused come back as zeros.

using Primals = std::vector<torch::Tensor>;

std::vector<torch::Tensor> vjp(const std::function<torch::Tensor(const Primals &)> &forward,
                               const Primals &primals, const torch::Tensor &upstream,
                               const OpInfo &op) {
  torch::AutoGradMode enable(true);
  Primals leaves;
  for (const torch::Tensor &p : primals)
    leaves.push_back(p.detach().clone().requires_grad_(true));
  torch::Tensor y = forward(leaves);
  torch::Tensor dy = upstream.detach().to(y.scalar_type());
  if (dy.sizes() != y.sizes()) {
    if (dy.numel() != y.numel())
      throw Error(str(op.describe(), ": upstream gradient ",
                      medrun::shapeStr(medrun::Shape(dy.sizes().begin(), dy.sizes().end())),
                      " does not match the forward result ",
                      medrun::shapeStr(medrun::Shape(y.sizes().begin(), y.sizes().end()))));
    dy = dy.reshape(y.sizes());
  }
  std::vector<torch::Tensor> grads;
  if (y.requires_grad())
    grads = torch::autograd::grad({y}, leaves, {dy}, /*retain_graph=*/false,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  else
    grads.resize(leaves.size());
  for (size_t i = 0; i < grads.size(); ++i)
    grads[i] = grads[i].defined() ? grads[i].detach() : torch::zeros_like(leaves[i]).detach();
  return grads;
}

/// med.conv3d_grad_weight: d/dW of Σ conv3d(input, W) · grad_output, W a leaf of the
/// weight's shape Cout × Cin/groups × kernel. For a transposed convolution med-autodiff
/// swaps the roles (input = its output gradient, grad_output = its input), which is the
/// same product.
torch::Tensor conv3dGradWeight(const OpInfo &op, const torch::Tensor &x, const torch::Tensor &dy,
                               const std::vector<int64_t> &kernel,
                               const std::vector<int64_t> &stride,
                               const std::vector<int64_t> &padding,
                               const std::vector<int64_t> &dilation, int64_t groups) {
  if (x.dim() != 5 || dy.dim() != 5 || groups < 1 || x.size(1) % groups != 0)
    throw Error(str(op.describe(), ": cannot map input ",
                    medrun::shapeStr(medrun::Shape(x.sizes().begin(), x.sizes().end())),
                    " and grad_output ",
                    medrun::shapeStr(medrun::Shape(dy.sizes().begin(), dy.sizes().end())),
                    " with groups ", groups));
  torch::Tensor w0 =
      torch::zeros({dy.size(1), x.size(1) / groups, kernel[0], kernel[1], kernel[2]}, x.options());
  auto forward = [&](const Primals &w) {
    torch::Tensor y = torch::conv3d(x.detach(), w[0], {}, stride, padding, dilation, groups);
    // Positions of the convolution that grad_output does not cover get no gradient.
    for (int64_t a = 2; a < 5; ++a) {
      if (y.size(a) < dy.size(a))
        throw Error(str(op.describe(), ": grad_output is larger than the convolution "
                                       "output on axis ",
                        a));
      y = y.narrow(a, 0, dy.size(a));
    }
    return y;
  };
  return vjp(forward, {w0}, dy, op)[0];
}

// ---- one op ---------------------------------------------------------------------------

std::vector<torch::Tensor> execute(Env &env, const std::map<std::string, torch::Tensor> &params);

std::vector<torch::Tensor> runOp(const Env &env, const OpInfo &op,
                                 const std::map<std::string, torch::Tensor> &params) {
  const std::string &k = op.kind;
  using med::ops::OpKind;
  // Every op of the table has a case: the build (-Werror=switch) fails on a missing one.
  switch (op.op()) {
  case OpKind::Fusion: {
    // The body op by op, every value in the checker's float type (as our executors keep
    // values inside a fusion in f32); under autocast the results are f32 as well.
    const medrun::Function &body = *op.body;
    Env inner{body, std::vector<torch::Tensor>(body.values.size()), env.floatType, env.device};
    const std::vector<int> &inputs = op.operand("inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const torch::Tensor &v = env.get(inputs[i], op);
      inner.values[body.inputs[i]] = v.is_floating_point() ? v.to(env.floatType) : v;
    }
    return execute(inner, params);
  }
  case OpKind::Param: {
    const std::string &name = op.strAttr("name");
    auto it = params.find(name);
    if (it == params.end())
      throw Error(str(op.describe(), ": no parameter '", name, "'"));
    return {it->second.to(env.typeOf(op.results.at(0))).clone()};
  }
  case OpKind::Constant:
    return {constant(env, op)};
  case OpKind::Conv3d: case OpKind::Conv3dTranspose:
    return {conv(op, env.in(op, "input"), env.in(op, "weight"), env.opt(op, "bias"),
                 k == "conv3d_transpose")};
  case OpKind::ShiftSum:
    return {shiftSum(op, env.in(op, "input"), env.in(op, "weight"), env.opt(op, "bias"))};
  case OpKind::GroupNorm: {
    const torch::Tensor &x = env.in(op, "input");
    int64_t groups = integer(op, "groups");
    if (op.results.size() == 1)
      return {torch::group_norm(x, groups, env.in(op, "gamma"), env.in(op, "beta"),
                                num(op, "epsilon"))};
    // save_statistics: torch's own op that returns the mean and rstd, N × groups.
    auto [y, mean, rstd] =
        torch::native_group_norm(x, env.in(op, "gamma"), env.in(op, "beta"), x.size(0),
                                 x.size(1), x.numel() / std::max<int64_t>(1, x.size(0) * x.size(1)),
                                 groups, num(op, "epsilon"));
    return {y, mean, rstd};
  }
  case OpKind::BatchNorm: {
    // torch's batch_norm on copies of the running statistics, which its train mode updates
    // in place (momentum: PyTorch's convention, as med.batch_norm's).
    torch::Tensor mean = env.in(op, "running_mean").detach().clone(),
                  var = env.in(op, "running_var").detach().clone();
    torch::Tensor y = torch::batch_norm(env.in(op, "input"), env.in(op, "gamma"),
                                        env.in(op, "beta"), mean, var, op.boolAttr("training"),
                                        num(op, "momentum"), num(op, "epsilon"),
                                        /*cudnn_enabled=*/false);
    return {y, mean, var};
  }
  case OpKind::GroupNormStats: {
    // The statistics of torch's group norm of the same values, computed in f64 and rounded
    // once: a reference that its own f32 summation errors do not blur.
    const torch::Tensor &x = env.in(op, "input");
    auto [y, mean, rstd] = torch::native_group_norm(
        x.to(torch::kFloat64), {}, {}, x.size(0), x.size(1),
        x.numel() / std::max<int64_t>(1, x.size(0) * x.size(1)), integer(op, "groups"),
        num(op, "epsilon"));
    const auto t = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    return {mean.to(t), rstd.to(t)};
  }
  case OpKind::GroupNormApply: { // (x − mean)·rstd·gamma + beta per (sample, group)
    const torch::Tensor &x = env.in(op, "input");
    const int64_t groups = integer(op, "groups");
    std::vector<int64_t> affine(x.dim(), 1);
    affine[1] = x.size(1);
    const torch::Tensor g = x.reshape({x.size(0), groups, -1});
    const torch::Tensor n = (g - env.in(op, "mean").unsqueeze(-1)) * env.in(op, "rstd").unsqueeze(-1);
    return {n.reshape(x.sizes()) * env.in(op, "gamma").reshape(affine) +
            env.in(op, "beta").reshape(affine)};
  }
  case OpKind::ChannelLayerNorm:
    return {channelLayerNorm(env.in(op, "input"), env.in(op, "gamma"), env.in(op, "beta"),
                             num(op, "epsilon"))};
  case OpKind::GRN:
    return {grn(env.in(op, "input"), env.in(op, "gamma"), env.in(op, "beta"), num(op, "epsilon"))};
  case OpKind::Gelu:
    return {torch::gelu(env.in(op, "input"))};
  case OpKind::Sigmoid:
    return {torch::sigmoid(env.in(op, "input"))};
  case OpKind::Neg:
    return {torch::neg(env.in(op, "input"))};
  case OpKind::Exp:
    return {torch::exp(env.in(op, "input"))};
  case OpKind::Log:
    return {torch::log(env.in(op, "input"))};
  case OpKind::Sqrt:
    return {torch::sqrt(env.in(op, "input"))};
  case OpKind::Resize:
    if (op.attrs.count("scale"))
      return {resizeByScale(op, env.in(op, "input"), ints3(op, "scale"))};
    return {resizeReference(op, env.in(op, "input"), ints3(op, "size"))};
  case OpKind::MaxPool: { // stride = kernel, no padding, floor
    const std::vector<int64_t> k = ints3(op, "kernel");
    return {torch::max_pool3d(env.in(op, "input"), k, k)};
  }
  case OpKind::AvgPool: { // stride = kernel, no padding, floor
    const std::vector<int64_t> k = ints3(op, "kernel");
    return {torch::avg_pool3d(env.in(op, "input"), k, k)};
  }
  case OpKind::Softmax:
    return {torch::softmax(env.in(op, "input"), integer(op, "axis"))};
  case OpKind::Relu:
    return {torch::relu(env.in(op, "input"))};
  case OpKind::LeakyRelu:
    return {torch::leaky_relu(env.in(op, "input"), num(op, "negative_slope"))};
  case OpKind::PRelu:
    return {preluReference(env.in(op, "input"), env.in(op, "slope"))};
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min: case OpKind::Pow: {
    const torch::Tensor &a = env.in(op, "lhs"), &b = env.in(op, "rhs");
    if (k == "add")
      return {torch::add(a, b)};
    if (k == "sub")
      return {torch::sub(a, b)};
    if (k == "mul")
      return {torch::mul(a, b)};
    if (k == "div")
      return {torch::div(a, b)};
    if (k == "max")
      return {torch::maximum(a, b)};
    if (k == "pow")
      return {torch::pow(a, b)};
    return {torch::minimum(a, b)};
  }
  case OpKind::Pad:
    return {pad(op, env.in(op, "input"))};
  case OpKind::Slice:
    return {slice(op, env.in(op, "input"))};
  case OpKind::Concat:
    return {torch::cat(env.group(op, "inputs"), integer(op, "axis"))};
  case OpKind::Transpose: {
    torch::Tensor x = env.in(op, "input");
    // permute's backward hands on the gradient as a view in the permuted layout; LibTorch's
    // f32 GELU backward on the CPU gives wrong values for a gradient laid out otherwise than
    // its input (1.13: up to 3.5 off for gelu -> permute(0, 4, 1, 2, 3); f64 and sigmoid are
    // right), so the gradient that reaches the input is made contiguous first.
    if (torch::GradMode::is_enabled() && x.requires_grad()) {
      x = x.view_as(x);
      x.register_hook([](torch::Tensor g) { return g.contiguous(); });
    }
    return {x.permute(ints(op, "permutation")).contiguous()};
  }
  case OpKind::SpatialTransform:
    return {spatialTransform(op, env.in(op, "input"), env.in(op, "matrix"))};
  case OpKind::Reduce:
    return {reduce(op, env.in(op, "input"))};
  case OpKind::Affinities:
    return affinities(env, op, env.in(op, "seg"));
  case OpKind::RemoveLabel: {
    const torch::Tensor &x = env.in(op, "input");
    return {torch::where(x == integer(op, "label"),
                         torch::full_like(x, integer(op, "replace_with")), x)};
  }
  case OpKind::LabelRegions:
    return {labelRegions(env, op, env.in(op, "input"))};
  case OpKind::DownsampleNearest:
    return {downsampleNearest(op, env.in(op, "input"))};
  case OpKind::Reshape:
    return {env.in(op, "input").reshape(shapeAttr(op))};
  case OpKind::Broadcast:
    return {env.in(op, "input").expand(shapeAttr(op)).contiguous()};
  case OpKind::BCEWithLogits:
    return {bce(op, env.in(op, "logits"), env.in(op, "target"), env.opt(op, "mask"),
                env.opt(op, "pos_weight"))};
  case OpKind::DiceCE:
    return {diceCE(op, env.group(op, "logits"), env.group(op, "targets"), env.floatOptions())};

  // Dynamic loss scaling, written from torch.amp.GradScaler's documented behaviour.
  case OpKind::AnyNonFinite: {
    bool found = false;
    for (const torch::Tensor &x : env.group(op, "inputs"))
      found |= (~torch::isfinite(x)).any().item<bool>();
    return {torch::full({}, found ? 1.0 : 0.0, env.floatOptions())};
  }
  case OpKind::Random:
    return {random(env, op)};
  case OpKind::Dropout: {
    const torch::Tensor &x = env.in(op, "input");
    return {x * dropoutNoise(env, op, x)};
  }
  case OpKind::GaussianBlur:
    return {gaussianBlur(env.in(op, "input"), env.in(op, "sigma"))};
  case OpKind::SimulateLowResolution:
    return {simulateLowResolution(env.in(op, "input"), env.in(op, "scale"))};
  case OpKind::Mirror:
    return {mirror(env.in(op, "input"), env.in(op, "flip"))};
  case OpKind::AffineMatrix:
    return {affineMatrix(env.in(op, "angles"), env.in(op, "scales"), env.opt(op, "shear"))};
  case OpKind::OrientationMatrix:
    return {orientationMatrix(env.in(op, "u"))};
  case OpKind::ShiftSlices:
    return {shiftSlices(env.in(op, "input"), env.in(op, "shift"))};
  case OpKind::SumSquares: {
    torch::Tensor total = torch::zeros({}, env.floatOptions().dtype(torch::kFloat64));
    for (const torch::Tensor &x : env.group(op, "inputs"))
      total = total + x.to(torch::kFloat64).square().sum();
    return {total.to(env.typeOf(op.results.at(0)))};
  }
  case OpKind::Pack: {
    const std::vector<int64_t> offsets = op.intsAttr("offsets");
    torch::Tensor y = torch::zeros({op.intAttr("size")}, env.floatOptions());
    const std::vector<torch::Tensor> xs = env.group(op, "inputs");
    for (size_t i = 0; i < xs.size(); ++i)
      y.narrow(0, offsets.at(i), xs[i].numel()).copy_(xs[i].reshape({-1}));
    return {y};
  }
  case OpKind::AllReduce: // the sum over the ranks of a job of one: the gradients themselves
    return env.group(op, "inputs");
  case OpKind::AdamW: {
    // torch.optim.AdamW's single-tensor step, written out with torch ops (the training
    // check compares whole steps with torch.optim itself).
    const double lr = env.in(op, "lr").item<double>(), t = env.in(op, "step").item<double>();
    const double b1 = num(op, "beta1"), b2 = num(op, "beta2");
    const torch::Tensor &g = env.in(op, "grad");
    torch::Tensor p = env.in(op, "param") * (1 - lr * num(op, "weight_decay"));
    torch::Tensor m = env.in(op, "exp_avg").lerp(g, 1 - b1);
    torch::Tensor v = env.in(op, "exp_avg_sq") * b2 + (1 - b2) * g * g;
    torch::Tensor denom = v.sqrt() / std::sqrt(1 - std::pow(b2, t)) + num(op, "epsilon");
    return {p.addcdiv(m, denom, -lr / (1 - std::pow(b1, t))), m, v};
  }
  case OpKind::SGD: {
    // torch.optim.SGD's step (no dampening): the buffer starts at zero, as its first copy.
    const double lr = env.in(op, "lr").item<double>(), mu = num(op, "momentum");
    const torch::Tensor &p = env.in(op, "param");
    torch::Tensor d = env.in(op, "grad") + num(op, "weight_decay") * p;
    torch::Tensor b = mu * env.in(op, "momentum_buffer") + d;
    d = flag(op, "nesterov") ? d + mu * b : b;
    return {p - lr * d, b};
  }
  case OpKind::Select: {
    bool cond = env.in(op, "cond").item<double>() != 0;
    return {(cond ? env.in(op, "on_true") : env.in(op, "on_false")).clone()};
  }
  case OpKind::UpdateLossScale: {
    // torch._amp_update_scale_: float scale, int tracker, double factors.
    float scale = env.in(op, "scale").item<float>();
    int64_t tracker = static_cast<int64_t>(env.in(op, "growth_tracker").item<double>());
    if (env.in(op, "found_inf").item<double>() != 0) {
      scale = static_cast<float>(scale * num(op, "backoff_factor"));
      tracker = 0;
    } else if (tracker + 1 == integer(op, "growth_interval")) {
      float grown = static_cast<float>(scale * num(op, "growth_factor"));
      if (std::isfinite(grown))
        scale = grown;
      tracker = 0;
    } else {
      ++tracker;
    }
    auto options = env.floatOptions();
    return {torch::full({}, static_cast<double>(scale), options),
            torch::full({}, static_cast<double>(tracker), options)};
  }

  // Gradient ops: autograd of the forward mappings above.
  case OpKind::Conv3dGradWeight:
    return {conv3dGradWeight(op, env.in(op, "input"), env.in(op, "grad_output"),
                             ints3(op, "kernel"), ints3(op, "stride"), ints3(op, "padding"),
                             ints3(op, "dilation"), integer(op, "groups"))};
  case OpKind::ShiftSumGradWeight: { // that of the depthwise conv3d: groups C, padding k/2
    std::vector<int64_t> kernel = ints3(op, "kernel"), padding;
    for (int64_t kk : kernel)
      padding.push_back(kk / 2);
    const torch::Tensor &x = env.in(op, "input");
    return {conv3dGradWeight(op, x, env.in(op, "grad_output"), kernel, {1, 1, 1}, padding,
                             {1, 1, 1}, x.dim() == 5 ? x.size(1) : 1)};
  }
  case OpKind::GroupNormGrad: {
    // torch's backward from the saved statistics (those torch's native_group_norm returned
    // for the forward op of this plan).
    const torch::Tensor &x = env.in(op, "input"), &dy = env.in(op, "grad_output");
    auto [dx, dgamma, dbeta] = torch::native_group_norm_backward(
        dy, x, env.in(op, "mean"), env.in(op, "rstd"), env.in(op, "gamma"), x.size(0),
        x.size(1), x.numel() / std::max<int64_t>(1, x.size(0) * x.size(1)),
        integer(op, "groups"), {true, true, true});
    return {dx, dgamma, dbeta};
  }
  case OpKind::ChannelLayerNormGrad: case OpKind::GRNGrad: {
    const torch::Tensor &x = env.in(op, "input"), &gamma = env.in(op, "gamma");
    double eps = num(op, "epsilon");
    std::function<torch::Tensor(const Primals &)> forward;
    if (k == "channel_layer_norm_grad") {
      forward = [&](const Primals &p) { return channelLayerNorm(p[0], p[1], p[2], eps); };
    } else {
      forward = [&](const Primals &p) { return grn(p[0], p[1], p[2], eps); };
    }
    // beta's value does not change any gradient; its own gradient is Σ grad_output.
    return vjp(forward, {x, gamma, torch::zeros_like(gamma)}, env.in(op, "grad_output"), op);
  }
  case OpKind::ExtremumGrad: {
    // Autograd of torch.maximum / minimum with both operands expanded to the result's
    // shape as leaves: the per-element gradients, before any sum over broadcast axes.
    const torch::Tensor &dy = env.in(op, "grad_output");
    bool isMax = extremum(op) == "max";
    return vjp([&](const Primals &p) { return isMax ? torch::maximum(p[0], p[1])
                                                    : torch::minimum(p[0], p[1]); },
               {env.in(op, "lhs").expand(dy.sizes()).contiguous(),
                env.in(op, "rhs").expand(dy.sizes()).contiguous()},
               dy, op);
  }
  case OpKind::ReduceExtremumGrad: {
    // Autograd of torch.amax / amin (the extremum operand is not used: torch's backward
    // finds the ties itself).
    std::vector<int64_t> axes = ints(op, "axes");
    bool keep = flag(op, "keepdims"), isMax = extremum(op) == "max";
    return vjp([&](const Primals &p) { return isMax ? torch::amax(p[0], axes, keep)
                                                    : torch::amin(p[0], axes, keep); },
               {env.in(op, "input")}, env.in(op, "grad_output"), op);
  }
  case OpKind::SliceGrad: {
    // Autograd of the slice it inverts: the gradient of a leaf of the input's shape.
    const torch::Tensor &dy = env.in(op, "grad_output");
    std::vector<int64_t> offsets = ints(op, "offsets"), strides = ints(op, "strides");
    std::vector<int64_t> sizes(dy.sizes().begin(), dy.sizes().end());
    return vjp([&](const Primals &p) { return sliceBox(p[0], offsets, sizes, strides); },
               {torch::zeros(ints(op, "shape"), dy.options())}, dy, op);
  }
  case OpKind::GeluGrad:
    return vjp([](const Primals &p) { return torch::gelu(p[0]); }, {env.in(op, "input")},
               env.in(op, "grad_output"), op);
  case OpKind::ResizeGrad: { // autograd of the resize from a leaf of the input's shape
    const torch::Tensor &dy = env.in(op, "grad_output");
    const std::vector<int64_t> size = ints3(op, "size"),
                               out(dy.sizes().begin() + 2, dy.sizes().end());
    return vjp([&](const Primals &p) { return resizeReference(op, p[0], out); },
               {torch::zeros({dy.size(0), dy.size(1), size[0], size[1], size[2]}, dy.options())},
               dy, op);
  }
  case OpKind::MaxPoolGrad: { // the input's part of max_pool3d's autograd
    const std::vector<int64_t> k = ints3(op, "kernel");
    return vjp([&](const Primals &p) { return torch::max_pool3d(p[0], k, k); },
               {env.in(op, "input")}, env.in(op, "grad_output"), op);
  }
  case OpKind::AvgPoolGrad: { // autograd of avg_pool3d from a leaf of the input's shape
    const torch::Tensor &dy = env.in(op, "grad_output");
    const std::vector<int64_t> k = ints3(op, "kernel"), size = ints3(op, "size");
    return vjp([&](const Primals &p) { return torch::avg_pool3d(p[0], k, k); },
               {torch::zeros({dy.size(0), dy.size(1), size[0], size[1], size[2]}, dy.options())},
               dy, op);
  }
  case OpKind::PReluGrad: { // the input's part of prelu's autograd
    const torch::Tensor &slope = env.in(op, "slope");
    return vjp([&](const Primals &p) { return preluReference(p[0], slope); }, {env.in(op, "input")},
               env.in(op, "grad_output"), op);
  }
  case OpKind::BCEWithLogitsGrad: {
    torch::Tensor y = env.in(op, "target"), mask = env.opt(op, "mask"),
                  pw = env.opt(op, "pos_weight");
    return vjp([&](const Primals &p) { return bce(op, p[0], y, mask, pw); },
               {env.in(op, "logits")}, env.in(op, "grad_loss"), op);
  }
  case OpKind::DiceCEGrad: {
    std::vector<torch::Tensor> targets = env.group(op, "targets");
    return vjp([&](const Primals &p) { return diceCE(op, p, targets, env.floatOptions()); },
               env.group(op, "logits"), env.in(op, "grad_loss"), op);
  }
  case OpKind::Assign:
    // State a loss function's forward sets (BatchNorm's running statistics): recorded for
    // --train-steps, which compares it with ours after the step. A step's parameter updates
    // are checked against torch::optim's own, never by replaying the step's assigns.
    if (env.assigned) {
      (*env.assigned)[op.strAttr("name")] = env.in(op, "value").detach().clone();
      return {};
    }
    throw Error(str(op.describe(), ": medcheck checks parameter updates with torch::optim "
                                   "(--train-steps), not op by op"));
  }
  throw Error(str(op.describe(), ": medcheck has no torch mapping for op '", k, "'"));
}

/// Under autocast, CUDA autocast's policy on every device, so that a check on the CPU
/// judges what the GPU check judges:
/// - its float32 list, for the ops that map onto it (group_norm, layer_norm, norm,
///   binary_cross_entropy_with_logits, log_softmax, exp, log; group_norm_stats and
///   group_norm_apply as group_norm):
///   their float operands are converted to f32 first. LibTorch 1.13's CPU autocast has no policy for the norms (a
///   bf16 input with f32 affine parameters is an error there);
/// - its lower-precision list beyond the CPU's: conv_transpose3d reads bf16 operands
///   (the CPU list has conv3d only).
/// Any other op whose float operands mix types (bf16 or f16 and f32) reads them in f32, as autocast's
/// promote policy does. The converted operands' values are put into `env` for the op,
/// their own values into `saved` (the caller puts them back).
/// An instance norm (`med.instance_norm` on group_norm or group_norm_apply: ONNX's
/// InstanceNormalization, torch's instance_norm) computes as group_norm does, in f32, but
/// its result then takes its input's type (instanceNormType): torch's instance_norm (it runs
/// batch_norm) is on none of autocast's lists, and returns its input's type.
void autocastOperands(Env &env, const OpInfo &op, std::map<int, torch::Tensor> &saved) {
  static const std::set<std::string> fp32{
      "group_norm", "group_norm_stats", "group_norm_apply", "channel_layer_norm", "grn",
      "bce_with_logits", "dice_ce", "exp", "log"};
  if (op.kind == "conv3d_transpose" && env.device.is_cpu()) {
    for (const auto &group : op.operands)
      for (int id : group.second) {
        const torch::Tensor &v = env.get(id, op);
        if (!saved.count(id) && v.is_floating_point() && v.scalar_type() != *env.autocast) {
          saved[id] = v;
          env.values[id] = v.to(*env.autocast);
        }
      }
    return;
  }
  std::set<torch::ScalarType> types;
  for (const auto &group : op.operands)
    for (int id : group.second)
      if (id >= 0 && id < static_cast<int>(env.values.size()) && env.values[id].defined() &&
          env.values[id].is_floating_point())
        types.insert(env.values[id].scalar_type());
  if (!fp32.count(op.kind) && types.size() <= 1)
    return;
  for (const auto &group : op.operands)
    for (int id : group.second) {
      if (id < 0 || id >= static_cast<int>(env.values.size()) || saved.count(id))
        continue;
      const torch::Tensor &v = env.values[id];
      if (v.defined() && v.is_floating_point() && v.scalar_type() != env.floatType) {
        saved[id] = v;
        env.values[id] = v.to(env.floatType);
      }
    }
}

/// Under autocast, the type an instance norm's result takes: its input's float type, as torch
/// autocast's instance_norm returns it (bf16 after a bf16 convolution, f32 after an f32 op).
/// Unmarked group norms (nn.GroupNorm, on autocast's float32 list) keep their f32 result.
std::optional<torch::ScalarType> instanceNormType(const Env &env, const OpInfo &op) {
  if (!env.autocast || !op.instanceNorm ||
      (op.op() != med::ops::OpKind::GroupNorm && op.op() != med::ops::OpKind::GroupNormApply))
    return std::nullopt;
  const torch::Tensor &x = env.get(op.single("input"), op);
  if (!x.is_floating_point())
    return std::nullopt;
  return x.scalar_type();
}

/// The index of the last op that reads each value of `fn`; the function's outputs get
/// fn.ops.size() (never dropped).
std::vector<size_t> lastUses(const medrun::Function &fn) {
  std::vector<size_t> lastUse(fn.values.size(), 0);
  for (size_t i = 0; i < fn.ops.size(); ++i)
    for (const auto &group : fn.ops[i].operands)
      for (int id : group.second)
        if (id >= 0 && id < static_cast<int>(lastUse.size()))
          lastUse[id] = std::max(lastUse[id], i);
  for (int id : fn.outputs)
    lastUse.at(id) = fn.ops.size();
  return lastUse;
}

/// Runs ops [begin, end) of the plan with the values already in `env`. Values are dropped
/// after their last use (outputs never), as our executor does, so that whole networks at
/// large patches fit in memory. Under autograd when the caller enabled it: every mapping
/// is differentiable.
void runOps(Env &env, const std::map<std::string, torch::Tensor> &params, size_t begin,
            size_t end, const std::vector<size_t> &lastUse) {
  const medrun::Function &fn = env.fn;
  for (size_t i = begin; i < end; ++i) {
    const OpInfo &op = fn.ops[i];
    std::vector<torch::Tensor> rs;
    std::map<int, torch::Tensor> lowered; // autocast: operands this op reads in f32 instead
    // Before the operands are converted: the input's own type.
    const std::optional<torch::ScalarType> instanceType = instanceNormType(env, op);
    if (env.autocast)
      autocastOperands(env, op, lowered);
    try {
      rs = runOp(env, op, params);
    } catch (const c10::Error &e) { // name the op: a torch error alone does not
      throw Error(str(op.describe(), ": torch: ", e.what_without_backtrace()));
    }
    for (auto &[id, v] : lowered)
      env.values[id] = v;
    if (op.results.size() != rs.size())
      throw Error(str(op.describe(), ": torch computes ", rs.size(), " results, the plan has ",
                      op.results.size()));
    for (size_t j = 0; j < rs.size(); ++j) {
      const torch::Tensor &r = rs[j];
      int id = op.results[j];
      const medrun::ValueInfo &info = fn.values.at(id);
      std::vector<int64_t> declared(info.shape.begin(), info.shape.end());
      if (r.numel() != medrun::numElements(info.shape))
        throw Error(str(op.describe(), ": torch computes shape ",
                        medrun::shapeStr(medrun::Shape(r.sizes().begin(), r.sizes().end())),
                        " for result ", j, ", the plan declares ", medrun::shapeStr(info.shape)));
      torch::ScalarType type = env.typeOf(id);
      if (env.autocast && medrun::isFloat(info.dtype) && r.is_floating_point())
        type = r.scalar_type();
      if (instanceType && j == 0 && r.is_floating_point()) // the normalized value, not statistics
        type = *instanceType;
      env.values[id] = r.reshape(declared).to(type).contiguous();
      if (env.types && r.dim() == 5 && r.is_floating_point()) {
        std::string what = op.kind;
        if (op.op() == med::ops::OpKind::Fusion)
          what += str("[", op.strAttr("template"), "]");
        if (op.instanceNorm)
          what += " instance_norm";
        ++(*env.types)[what][c10::toString(type)];
      }
    }
    for (const auto &group : op.operands)
      for (int used : group.second)
        if (lastUse[used] == i)
          env.values[used] = torch::Tensor();
  }
}

std::vector<torch::Tensor> outputsOf(const Env &env) {
  std::vector<torch::Tensor> outputs;
  for (int id : env.fn.outputs)
    outputs.push_back(env.get(id, OpInfo{"return", {}, {}, {}, ""}));
  return outputs;
}

/// Runs the plan with the values already in `env` (the arguments); returns the outputs.
std::vector<torch::Tensor> execute(Env &env, const std::map<std::string, torch::Tensor> &params) {
  runOps(env, params, 0, env.fn.ops.size(), lastUses(env.fn));
  return outputsOf(env);
}

/// The device the mapping computes on: that of the first input, else of the first
/// parameter, else the CPU.
torch::Device deviceOf(const std::vector<torch::Tensor> &inputs,
                       const std::map<std::string, torch::Tensor> &params) {
  for (const torch::Tensor &t : inputs)
    if (t.defined())
      return t.device();
  for (const auto &[name, t] : params)
    if (t.defined())
      return t.device();
  return torch::kCPU;
}

void setInputs(Env &env, const std::vector<torch::Tensor> &inputs) {
  const medrun::Function &fn = env.fn;
  if (inputs.size() != fn.inputs.size())
    throw Error(str("function '", fn.name, "' takes ", fn.inputs.size(), " arguments, got ",
                    inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    env.values.at(fn.inputs[i]) = inputs[i].to(env.typeOf(fn.inputs[i]));
}

/// Torch autocast to `dtype` (bf16 or f16) on `device`'s type for the guard's lifetime, as
/// `with torch.autocast(device_type, dtype=...)`: enabled (the autocast dispatch
/// key), the dtype, one nesting level (whose end clears autocast's cache of cast weights);
/// the previous settings come back at the end. LibTorch 2.4 made the API take the device
/// type; 1.x and early 2.x have a function per device.
class AutocastGuard {
public:
  AutocastGuard(torch::Device device, torch::ScalarType dtype) : type(device.type()) {
    if (type != c10::DeviceType::CPU && type != c10::DeviceType::CUDA)
      throw Error(str("torch autocast: no autocast for device ", device.str()));
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    wasEnabled = at::autocast::is_autocast_enabled(type);
    wasType = at::autocast::get_autocast_dtype(type);
    at::autocast::set_autocast_dtype(type, dtype);
    at::autocast::set_autocast_enabled(type, true);
#else
    bool cpu = type == c10::DeviceType::CPU;
    wasEnabled = cpu ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
    wasType = cpu ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
    if (cpu) {
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(true);
    } else {
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(true);
    }
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0)
      at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(type, wasEnabled);
    at::autocast::set_autocast_dtype(type, wasType);
#else
    if (type == c10::DeviceType::CPU) {
      at::autocast::set_cpu_enabled(wasEnabled);
      at::autocast::set_autocast_cpu_dtype(wasType);
    } else {
      at::autocast::set_enabled(wasEnabled);
      at::autocast::set_autocast_gpu_dtype(wasType);
    }
#endif
  }
  AutocastGuard(const AutocastGuard &) = delete;
  AutocastGuard &operator=(const AutocastGuard &) = delete;

private:
  c10::DeviceType type;
  bool wasEnabled = false;
  at::ScalarType wasType = at::kBFloat16;
};

// ---- running the reference in parts (gradTorch's recompute) ------------------------

/// "152.0 GiB", "3.2 MiB", "0.6 KiB".
std::string gibText(double bytes) {
  char b[32];
  const double k = 1024;
  if (bytes >= k * k * k)
    std::snprintf(b, sizeof b, "%.1f GiB", bytes / (k * k * k));
  else if (bytes >= k * k)
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / (k * k));
  else
    std::snprintf(b, sizeof b, "%.1f KiB", bytes / k);
  return b;
}

/// Bytes of a value of `values` as the reference holds it (floats in `floatType`).
double valueBytes(const medrun::Function &fn, int id, torch::ScalarType floatType) {
  if (id < 0 || id >= static_cast<int>(fn.values.size()))
    return 0;
  const medrun::ValueInfo &v = fn.values[id];
  const size_t element = medrun::isFloat(v.dtype) ? c10::elementSize(floatType)
                                                  : medrun::dtypeSize(v.dtype);
  return double(medrun::numElements(v.shape)) * double(element);
}

/// What autograd keeps of one op, estimated: its results, a fusion's body op by op, and
/// the norms' full-size intermediates (group_norm_stats' f64 copy of its input,
/// group_norm_apply's centred and normalised input).
double opBytes(const medrun::Function &fn, const OpInfo &op, torch::ScalarType floatType) {
  double bytes = 0;
  for (int id : op.results)
    bytes += valueBytes(fn, id, floatType);
  switch (op.op()) {
  case med::ops::OpKind::Fusion:
    for (const OpInfo &inner : op.body->ops)
      bytes += opBytes(*op.body, inner, floatType);
    break;
  case med::ops::OpKind::GroupNormStats:
    bytes += valueBytes(fn, op.single("input"), floatType) * 8.0 /
             double(c10::elementSize(floatType));
    break;
  case med::ops::OpKind::GroupNormApply:
    bytes += 2 * valueBytes(fn, op.single("input"), floatType);
    break;
  default:
    break;
  }
  return bytes;
}

/// The segments [begin, end) of the loss function's ops, and what the plan estimates.
struct SegmentPlan {
  std::vector<std::pair<size_t, size_t>> segments;
  double total = 0;      ///< estimated bytes of the unsegmented reference
  double checkpoint = 0; ///< bytes of the values kept for later segments
  double largest = 0;    ///< estimated bytes of the largest segment
};

/// Cuts `fn` into segments of about `total / want` estimated bytes each (want = 0: the
/// largest of sixteen and the largest single op). A cut is placed, among the places after
/// the segment has reached half its target, where the fewest new bytes cross it (values
/// computed before it and read after it that no earlier cut keeps already); the latest
/// such place on a tie.
SegmentPlan planSegments(const medrun::Function &fn, torch::ScalarType floatType,
                         int64_t want) {
  SegmentPlan plan;
  const size_t n = fn.ops.size();
  std::vector<double> cost(n);
  double largestOp = 0;
  for (size_t i = 0; i < n; ++i) {
    cost[i] = opBytes(fn, fn.ops[i], floatType);
    plan.total += cost[i];
    largestOp = std::max(largestOp, cost[i]);
  }
  const double target =
      want > 0 ? plan.total / double(want) : std::max(plan.total / 16, largestOp);
  const std::vector<size_t> lastUse = lastUses(fn);
  std::vector<int64_t> defined(fn.values.size(), -1); // op index; -1: argument or none
  for (size_t i = 0; i < n; ++i)
    for (int id : fn.ops[i].results)
      defined.at(id) = static_cast<int64_t>(i);
  std::vector<bool> kept(fn.values.size(), false);
  // New bytes crossing a cut before op p (values computed by ops, not yet kept).
  auto crossing = [&](size_t p, bool keep) {
    double bytes = 0;
    for (size_t id = 0; id < fn.values.size(); ++id)
      if (defined[id] >= 0 && size_t(defined[id]) < p && lastUse[id] >= p && !kept[id]) {
        bytes += valueBytes(fn, static_cast<int>(id), floatType);
        if (keep)
          kept[id] = true;
      }
    return bytes;
  };
  size_t begin = 0, best = 0;
  double acc = 0, bestBytes = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += cost[i];
    const size_t p = i + 1;
    if (p < n && acc >= target / 2) {
      double x = crossing(p, false);
      if (best == 0 || x <= bestBytes)
        best = p, bestBytes = x;
    }
    if (acc >= target && best != 0) {
      plan.segments.emplace_back(begin, best);
      crossing(best, true);
      begin = best;
      best = 0;
      acc = 0;
      for (size_t k = begin; k <= i; ++k)
        acc += cost[k];
    }
  }
  plan.segments.emplace_back(begin, n);
  for (const auto &[b, e] : plan.segments) {
    double bytes = 0;
    for (size_t k = b; k < e; ++k)
      bytes += cost[k];
    plan.largest = std::max(plan.largest, bytes);
  }
  for (size_t id = 0; id < fn.values.size(); ++id)
    if (kept[id])
      plan.checkpoint += valueBytes(fn, static_cast<int>(id), floatType);
  return plan;
}

/// Every value that can carry a gradient: float arguments, float parameters, and the float
/// results of ops that read one.
std::vector<bool> differentiableValues(const medrun::Function &fn) {
  std::vector<bool> d(fn.values.size(), false);
  for (int id : fn.inputs)
    d.at(id) = medrun::isFloat(fn.values.at(id).dtype);
  for (const OpInfo &op : fn.ops) {
    bool reads = op.kind == "param";
    for (const auto &group : op.operands)
      for (int id : group.second)
        reads = reads || (id >= 0 && d.at(id));
    for (int id : op.results)
      d.at(id) = reads && medrun::isFloat(fn.values.at(id).dtype);
  }
  return d;
}

/// torch autocast around a segment when `type` is set.
struct MaybeAutocast {
  MaybeAutocast(torch::Device device, std::optional<torch::ScalarType> type) {
    if (type)
      guard.emplace(device, *type);
  }
  std::optional<AutocastGuard> guard;
};

} // namespace

void checkAutocast(torch::Device device, torch::ScalarType dtype) {
  std::string why;
  try {
    AutocastGuard guard(device, dtype);
    torch::Tensor x = torch::ones({1, 1, 1, 1, 1}, torch::TensorOptions().device(device));
    torch::ScalarType got = torch::conv3d(x, x).scalar_type();
    if (got == dtype)
      return;
    why = str("conv3d computes in ", c10::toString(got));
  } catch (const c10::Error &e) {
    why = e.what_without_backtrace();
    why = why.substr(0, why.find('\n'));
  }
  throw Error(str("torch autocast to ", dtype == torch::kHalf ? "float16" : "bfloat16", " on ",
                  device.str(),
                  " is not available in this LibTorch (", TORCH_VERSION, "): ", why));
}

std::vector<torch::Tensor> runTorch(const medrun::Artifact &artifact, const medrun::Function &fn,
                                    const std::vector<torch::Tensor> &inputs,
                                    const std::map<std::string, torch::Tensor> &params,
                                    torch::ScalarType floatType,
                                    std::map<std::string, torch::Tensor> *assigned) {
  (void)artifact;
  torch::NoGradGuard noGrad;
  Env env{fn, std::vector<torch::Tensor>(fn.values.size()), floatType, deviceOf(inputs, params)};
  env.assigned = assigned;
  setInputs(env, inputs);
  return execute(env, params);
}

TorchGradients gradTorch(const medrun::Artifact &artifact, const medrun::Function &fn,
                         const std::vector<torch::Tensor> &inputs,
                         const std::map<std::string, torch::Tensor> &params,
                         torch::ScalarType floatType, const torch::Tensor &seed,
                         std::optional<torch::ScalarType> autocast,
                         const Recompute &recompute) {
  if (fn.outputs.empty())
    throw Error(str("function '", fn.name, "' has no result to differentiate"));
  const medrun::ValueInfo &loss = fn.values.at(fn.outputs[0]);
  if (!loss.shape.empty() || !medrun::isFloat(loss.dtype))
    throw Error(str("function '", fn.name, "': out0 is ", medrun::shapeStr(loss.shape), " ",
                    medrun::dtypeName(loss.dtype), ", not a scalar float loss"));
  torch::AutoGradMode enable(true);
  Env env{fn, std::vector<torch::Tensor>(fn.values.size()), floatType, deviceOf(inputs, params)};
  TorchGradients result;
  env.assigned = &result.assigned;

  // Leaves: the float parameters the function reads (declaration order) and float inputs.
  std::vector<torch::Tensor> leaves;
  std::vector<std::string> paramNames;
  std::map<std::string, torch::Tensor> leafParams = params;
  std::set<std::string> read;
  for (const medrun::OpInfo &op : fn.ops)
    if (op.kind == "param" && medrun::isFloat(fn.values.at(op.results.at(0)).dtype))
      read.insert(op.strAttr("name"));
  for (const medrun::ParameterInfo &p : artifact.parameters) {
    if (!read.count(p.name))
      continue;
    auto it = params.find(p.name);
    if (it == params.end())
      throw Error(str("function '", fn.name, "' reads parameter '", p.name,
                      "', which has no value"));
    torch::Tensor leaf = it->second.to(floatType).detach().clone().requires_grad_(true);
    leafParams[p.name] = leaf;
    paramNames.push_back(p.name);
    leaves.push_back(leaf);
  }
  std::vector<torch::Tensor> leafInputs;
  std::vector<int> inputLeaf(inputs.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!medrun::isFloat(fn.values.at(fn.inputs[i]).dtype)) {
      leafInputs.push_back(inputs[i]);
      continue;
    }
    torch::Tensor leaf = inputs[i].to(floatType).detach().clone().requires_grad_(true);
    inputLeaf[i] = static_cast<int>(leaves.size());
    leaves.push_back(leaf);
    leafInputs.push_back(leaf);
  }
  setInputs(env, leafInputs);

  // In one piece, or in segments (Recompute).
  std::optional<SegmentPlan> plan;
  std::string why;
  if (recompute.mode != Recompute::Mode::Off) {
    const double estimate = estimateReferenceBytes(fn, floatType);
    if (recompute.mode == Recompute::Mode::On)
      why = "asked for";
    else if (recompute.availableBytes > 0 && estimate > double(recompute.availableBytes))
      why = str("the estimate exceeds the ", gibText(double(recompute.availableBytes)),
                " free on ", env.device.str());
    if (!why.empty())
      plan = planSegments(fn, floatType, recompute.segments);
  }

  std::vector<torch::Tensor> outputs;
  std::vector<torch::Tensor> grads(leaves.size());
  if (!plan) {
    if (autocast) {
      // The forward pass only, as PyTorch recommends: the backward ops run in the types
      // their forward ops chose.
      AutocastGuard guard(env.device, *autocast);
      env.autocast = autocast;
      env.types = &result.autocastTypes;
      outputs = execute(env, leafParams);
    } else {
      outputs = execute(env, leafParams);
    }
    if (!leaves.empty() && outputs[0].requires_grad())
      grads = torch::autograd::grad({outputs[0]}, leaves,
                                    seed.defined()
                                        ? torch::autograd::variable_list{seed.to(
                                              outputs[0].device(), outputs[0].scalar_type())}
                                        : torch::autograd::variable_list{},
                                    /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
  } else {
    const medrun::Function &f = fn;
    const size_t segments = plan->segments.size();
    const std::vector<size_t> lastUse = lastUses(f);
    const std::vector<bool> differentiable = differentiableValues(f);
    std::map<std::string, size_t> paramLeaf; // leaf index of each float parameter read
    for (size_t i = 0; i < paramNames.size(); ++i)
      paramLeaf[paramNames[i]] = i;
    // Which segment computes each value (-1: an argument), and the values each segment
    // reads from earlier ones (its checkpoints), each once.
    std::vector<int64_t> segmentOf(f.values.size(), -1);
    for (size_t s = 0; s < segments; ++s)
      for (size_t i = plan->segments[s].first; i < plan->segments[s].second; ++i)
        for (int id : f.ops[i].results)
          segmentOf.at(id) = static_cast<int64_t>(s);
    std::vector<std::vector<int>> reads(segments);
    std::vector<int64_t> firstReader(f.values.size(), int64_t(segments));
    for (size_t s = 0; s < segments; ++s) {
      std::set<int> seen;
      for (size_t i = plan->segments[s].first; i < plan->segments[s].second; ++i)
        for (const auto &group : f.ops[i].operands)
          for (int id : group.second)
            if (id >= 0 && segmentOf.at(id) < static_cast<int64_t>(s) && seen.insert(id).second) {
              reads[s].push_back(id);
              firstReader[id] = std::min(firstReader[id], static_cast<int64_t>(s));
            }
    }

    // The forward pass without autograd, keeping what later segments read.
    std::vector<torch::Tensor> kept(f.values.size());
    {
      torch::NoGradGuard noGrad;
      MaybeAutocast guard(env.device, autocast);
      env.autocast = autocast;
      if (autocast)
        env.types = &result.autocastTypes;
      for (size_t s = 0; s < segments; ++s) {
        for (int id : reads[s])
          kept[id] = env.get(id, f.ops[plan->segments[s].first]);
        runOps(env, leafParams, plan->segments[s].first, plan->segments[s].second, lastUse);
      }
      outputs = outputsOf(env);
      env.values.assign(f.values.size(), torch::Tensor());
    }

    // Backward, last segment first: each segment again under autograd from its checkpoints,
    // then torch::autograd::grad of the gradients that reach its results. `pending` holds
    // the gradient summed so far of each value (of each parameter leaf): a value read by
    // several segments gets the later segments' sum as a gradient of its leaf here, which
    // autograd adds to this segment's before the earlier ones', as in one graph.
    std::vector<torch::Tensor> pending(f.values.size());
    std::vector<torch::Tensor> pendingParam(paramNames.size());
    const int loss = f.outputs[0];
    if (!leaves.empty() && differentiable.at(loss))
      pending[loss] = seed.defined() ? seed.to(outputs[0].device(), outputs[0].scalar_type())
                                     : torch::ones_like(outputs[0]);
    for (size_t s = segments; s-- > 0;) {
      const auto [begin, end] = plan->segments[s];
      bool flows = false; // a gradient reaches a result of this segment
      for (size_t i = begin; i < end && !flows; ++i)
        for (int id : f.ops[i].results)
          flows = flows || pending[id].defined();
      if (flows) {
        Env seg{f, std::vector<torch::Tensor>(f.values.size()), floatType, env.device};
        seg.autocast = autocast;
        std::map<std::string, torch::Tensor> again; // the forward pass recorded them
        seg.assigned = &again;
        std::vector<torch::Tensor> inputsOf;   // d/d these: checkpoint leaves, then parameters
        std::vector<int> inputIds;             // value id, or -1 - leaf index of a parameter
        for (int id : reads[s]) {
          torch::Tensor v = kept[id];
          if (differentiable.at(id) && v.is_floating_point()) {
            v = v.detach().requires_grad_(true);
            inputsOf.push_back(v);
            inputIds.push_back(id);
          }
          seg.values[id] = v;
        }
        std::set<size_t> segmentParams;
        for (size_t i = begin; i < end; ++i)
          if (f.ops[i].kind == "param") {
            auto it = paramLeaf.find(f.ops[i].strAttr("name"));
            if (it != paramLeaf.end() && segmentParams.insert(it->second).second) {
              inputsOf.push_back(leaves[it->second]);
              inputIds.push_back(-1 - static_cast<int>(it->second));
            }
          }
        {
          torch::AutoGradMode grad(true);
          MaybeAutocast guard(env.device, autocast);
          runOps(seg, leafParams, begin, end, lastUse);
        }
        std::vector<torch::Tensor> roots, rootGrads;
        for (size_t i = begin; i < end; ++i)
          for (int id : f.ops[i].results)
            if (pending[id].defined() && seg.values[id].defined() &&
                seg.values[id].requires_grad()) {
              roots.push_back(seg.values[id]);
              rootGrads.push_back(pending[id]);
            }
        if (!roots.empty()) {
          if (!recompute.fault)
            for (size_t k = 0; k < inputsOf.size(); ++k) {
              const torch::Tensor &p =
                  inputIds[k] >= 0 ? pending[inputIds[k]] : pendingParam[-1 - inputIds[k]];
              if (p.defined()) {
                roots.push_back(inputsOf[k]);
                rootGrads.push_back(p);
              }
            }
          std::vector<torch::Tensor> g;
          if (!inputsOf.empty())
            g = torch::autograd::grad(roots, inputsOf, rootGrads, /*retain_graph=*/false,
                                      /*create_graph=*/false, /*allow_unused=*/true);
          for (size_t k = 0; k < g.size(); ++k) {
            if (!g[k].defined())
              continue;
            (inputIds[k] >= 0 ? pending[inputIds[k]] : pendingParam[-1 - inputIds[k]]) =
                g[k].detach();
          }
        }
      }
      // This segment's results have passed their gradients on; its checkpoints that no
      // earlier segment reads are done with.
      for (size_t i = begin; i < end; ++i)
        for (int id : f.ops[i].results)
          pending[id] = torch::Tensor();
      for (int id : reads[s])
        if (firstReader[id] == static_cast<int64_t>(s))
          kept[id] = torch::Tensor();
    }
    for (size_t i = 0; i < paramNames.size(); ++i)
      grads[i] = pendingParam[i];
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputLeaf[i] >= 0)
        grads[inputLeaf[i]] = pending[fn.inputs[i]];
    result.recompute = str(fn.name, " in ", segments, " segments of ", fn.ops.size(),
                           " ops (", why, "); estimated ", gibText(plan->total),
                           " unsegmented, checkpoints ", gibText(plan->checkpoint),
                           ", largest segment ", gibText(plan->largest));
  }
  std::vector<bool> reached(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    reached[i] = grads[i].defined();
    grads[i] = grads[i].defined() ? grads[i].detach() : torch::zeros_like(leaves[i]).detach();
  }
  for (torch::Tensor &o : outputs)
    result.outputs.push_back(o.detach());
  for (size_t i = 0; i < paramNames.size(); ++i) {
    result.params[paramNames[i]] = grads[i];
    result.paramReached[paramNames[i]] = reached[i];
  }
  result.inputs.resize(inputs.size());
  result.inputReached.assign(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputLeaf[i] >= 0) {
      result.inputs[i] = grads[inputLeaf[i]];
      result.inputReached[i] = reached[inputLeaf[i]];
    }
  if (plan && recompute.verify) {
    Recompute whole;
    whole.mode = Recompute::Mode::Off;
    const TorchGradients one =
        gradTorch(artifact, fn, inputs, params, floatType, seed, autocast, whole);
    size_t compared = 0, differing = 0;
    std::string first;
    auto same = [&](const std::string &what, const torch::Tensor &a, const torch::Tensor &b,
                    bool reachedA, bool reachedB) {
      ++compared;
      bool equal = reachedA == reachedB && a.defined() == b.defined();
      if (equal && a.defined())
        equal = a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
                a.eq(b).logical_or(a.isnan().logical_and(b.isnan())).all().item<bool>();
      if (!equal && differing++ == 0)
        first = what;
    };
    for (size_t i = 0; i < result.outputs.size(); ++i)
      same(str("out", i), result.outputs[i], one.outputs.at(i), true, true);
    for (const auto &[name, g] : result.params)
      same(str("grad.", name), g, one.params.at(name), result.paramReached.at(name),
           one.paramReached.at(name));
    for (size_t i = 0; i < result.inputs.size(); ++i)
      same(str("grad.arg", i), result.inputs[i], one.inputs.at(i), result.inputReached[i],
           one.inputReached.at(i));
    if (differing)
      throw Error(str("torch recompute: ", differing, " of ", compared,
                      " results differ from the unsegmented reference (the first: ", first,
                      "); ", result.recompute));
    result.recompute += str("; equal bit for bit to the unsegmented reference (", compared,
                            " tensors)");
  }
  return result;
}

double estimateReferenceBytes(const medrun::Function &fn, torch::ScalarType floatType) {
  double bytes = 0;
  for (const medrun::OpInfo &op : fn.ops)
    bytes += opBytes(fn, op, floatType);
  return bytes;
}

} // namespace medcheck
