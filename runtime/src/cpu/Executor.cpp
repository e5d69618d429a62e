//===- Executor.cpp - running a function of an artifact on the CPU --------------===//
//
// Walks the op-level plan in order: checks each op's operands against the plan's types,
// allocates results, calls the op's reference kernel and frees every value after its last
// use. Float values are stored in the precision's storage type.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Executor.h"
#include "medrun/ConvView.h"
#include "medrun/Error.h"
#include "medrun/Kernels.h"
#include "medrun/Parallel.h"
#include "medrun/Random.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <set>
#include <unordered_map>

namespace medrun {

Precision parsePrecision(const std::string &name) {
  if (name == "f32" || name == "fp32")
    return Precision::F32;
  if (name == "f64" || name == "fp64")
    return Precision::F64;
  if (name == "bf16" || name == "bf16-mixed")
    return Precision::BF16;
  if (name == "f16" || name == "fp16" || name == "fp16-mixed")
    return Precision::F16;
  throw Error(str("unknown precision '", name, "' (expected f32, f64, bf16 or f16)"));
}

DType storageType(Precision p) {
  switch (p) {
  case Precision::F32: return DType::F32;
  case Precision::F64: return DType::F64;
  case Precision::BF16: return DType::BF16;
  case Precision::F16: return DType::F32; // holding binary16 values (rounded after each op)
  }
  return DType::F32;
}

Precision precisionOf(const Function &fn) {
  if (fn.precision == "bf16-mixed")
    return Precision::BF16;
  if (fn.precision == "fp16-mixed")
    return Precision::F16;
  return Precision::F32;
}

TensorMap initParameters(const Artifact &artifact, uint64_t seed) {
  TensorMap params;
  PhiloxKey key = philoxKey(seed);
  for (const ParameterInfo &p : artifact.parameters) {
    Tensor t(DType::F32, p.shape);
    float *data = t.data<float>();
    if (p.init == "ones") {
      std::fill(data, data + t.numel(), 1.0f);
    } else if (p.init == "constant") {
      std::fill(data, data + t.numel(), p.value);
    } else if (p.init == "uniform") {
      // Counter: (element / 4, name hash); four numbers per Philox call.
      float bound = 1.0f / std::sqrt(static_cast<float>(p.fanIn));
      uint64_t stream = fnv1a(p.name);
      for (int64_t i = 0; i < t.numel(); i += 4) {
        uint64_t block = static_cast<uint64_t>(i / 4);
        PhiloxCounter r = philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                      static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                                     key);
        for (int64_t j = 0; j < 4 && i + j < t.numel(); ++j)
          data[i + j] = bound * (2.0f * uniform01(r[j]) - 1.0f);
      }
    }
    if (p.dtype != DType::F32)
      t = t.to(p.dtype);
    params.emplace(p.name, std::move(t));
  }
  for (const ParameterInfo &p : artifact.parameters)
    if (p.init == "copy")
      params[p.name] = params.at(p.source).clone();
  return params;
}

void checkParameters(const Artifact &artifact, const TensorMap &params, const Function *fn) {
  std::set<std::string> needed; // with `fn`: the parameters its `param` ops read
  if (fn)
    for (const OpInfo &op : fn->ops)
      if (op.kind == "param") {
        needed.insert(op.strAttr("name"));
        if (const FlatBuffer *f = artifact.flatBuffer(op.strAttr("name")))
          for (const FlatBuffer::Member &m : f->members)
            needed.insert(m.name);
      }
  for (const ParameterInfo &p : artifact.parameters) {
    auto it = params.find(p.name);
    if (it == params.end() && fn && !needed.count(p.name))
      continue;
    if (it == params.end())
      throw Error(str("parameter '", p.name, "' (", shapeStr(p.shape), " ", dtypeName(p.dtype),
                      ") is missing", fn ? fmt::format(" (function '{}' reads it)", fn->name) : ""));
    const Tensor &t = it->second;
    if (t.shape() != p.shape || !isFloat(t.dtype()))
      throw Error(str("parameter '", p.name, "': expected ", shapeStr(p.shape), " ",
                      dtypeName(p.dtype), ", got ", shapeStr(t.shape()), " ", dtypeName(t.dtype())));
  }
  for (auto &[name, t] : params)
    if (!artifact.parameter(name))
      throw Error(str("unknown parameter '", name, "' (", shapeStr(t.shape()), " ",
                      dtypeName(t.dtype()), "): the model declares no such key"));
}

namespace {

using cpu::Binary;
using cpu::Unary;

cpu::ConvParams convParams(const OpInfo &op, const ConvView &v) {
  auto three = [&](const Shape &s, const char *name) {
    if (s.size() != 3)
      throw Error(str(op.describe(), ": '", name, "' needs 3 entries"));
    return std::array<int64_t, 3>{s[0], s[1], s[2]};
  };
  cpu::ConvParams p;
  p.stride = three(v.stride, "stride");
  p.padding = three(v.padding, "padding");
  p.dilation = three(v.dilation, "dilation");
  p.outputPadding = three(v.outputPadding, "output_padding");
  p.groups = v.groups;
  return p;
}

// The CPU kernels' formula of an elementwise op.
Unary unaryOf(med::ops::OpKind k) {
  using med::ops::OpKind;
  switch (k) {
  case OpKind::Gelu: return Unary::Gelu;
  case OpKind::Sigmoid: return Unary::Sigmoid;
  case OpKind::Neg: return Unary::Neg;
  case OpKind::Exp: return Unary::Exp;
  case OpKind::Log: return Unary::Log;
  case OpKind::Sqrt: return Unary::Sqrt;
  case OpKind::Relu: return Unary::Relu;
  default: throw Error(str("'", med::ops::schema(k).name, "' has no elementwise formula"));
  }
}
Binary binaryOf(med::ops::OpKind k) {
  using med::ops::OpKind;
  switch (k) {
  case OpKind::Add: return Binary::Add;
  case OpKind::Sub: return Binary::Sub;
  case OpKind::Mul: return Binary::Mul;
  case OpKind::Div: return Binary::Div;
  case OpKind::Max: return Binary::Max;
  case OpKind::Min: return Binary::Min;
  case OpKind::Pow: return Binary::Pow;
  case OpKind::PRelu: return Binary::PRelu;
  default: throw Error(str("'", med::ops::schema(k).name, "' has no elementwise formula"));
  }
}

cpu::Reduce reduceKind(const OpInfo &op) {
  const std::string &k = op.strAttr("kind");
  if (k == "sum") return cpu::Reduce::Sum;
  if (k == "mean") return cpu::Reduce::Mean;
  if (k == "max") return cpu::Reduce::Max;
  if (k == "min") return cpu::Reduce::Min;
  throw Error(str(op.describe(), ": unknown reduction kind '", k, "'"));
}

cpu::Extremum extremumKind(const OpInfo &op) {
  const std::string &k = op.strAttr("kind");
  if (k == "max") return cpu::Extremum::Max;
  if (k == "min") return cpu::Extremum::Min;
  throw Error(str(op.describe(), ": unknown extremum kind '", k, "' (expected max or min)"));
}

cpu::LossReduction lossReduction(const OpInfo &op) {
  const std::string &r = op.strAttr("reduction");
  if (r == "mean") return cpu::LossReduction::Mean;
  if (r == "sum") return cpu::LossReduction::Sum;
  if (r == "none") return cpu::LossReduction::None;
  if (r == "per_channel") return cpu::LossReduction::PerChannel;
  throw Error(str(op.describe(), ": unknown loss reduction '", r, "'"));
}

cpu::BceParams bceParams(const OpInfo &op) {
  cpu::BceParams p;
  p.reduction = lossReduction(op);
  p.autoPosWeight = op.boolAttr("auto_pos_weight");
  p.maxPosWeight = op.floatAttr("max_pos_weight");
  return p;
}

cpu::DiceCEParams diceParams(const OpInfo &op) {
  cpu::DiceCEParams p;
  p.weights = op.floatsAttr("weights");
  p.smooth = op.floatAttr("smooth");
  p.ceWeight = op.floatAttr("ce_weight");
  p.diceWeight = op.floatAttr("dice_weight");
  p.batchDice = op.boolAttr("batch_dice");
  p.includeBackground = op.boolAttr("include_background");
  if (op.attrs.count("ignore_index"))
    p.ignoreIndex = op.intAttr("ignore_index");
  return p;
}

// An integer scalar argument given as a float holding an integer (medrun --input NAME=3).
Tensor integerScalar(const Tensor &t, DType dtype) {
  double v = t.at(0);
  if (!std::isfinite(v) || v != std::floor(v) || std::abs(v) > 9007199254740992.0)
    throw Error(str("expected an integer, got ", v));
  Tensor out(dtype, {});
  switch (dtype) {
  case DType::I64: out.data<int64_t>()[0] = static_cast<int64_t>(v); break;
  case DType::I32: out.data<int32_t>()[0] = static_cast<int32_t>(v); break;
  case DType::I16: out.data<int16_t>()[0] = static_cast<int16_t>(v); break;
  case DType::I8: out.data<int8_t>()[0] = static_cast<int8_t>(v); break;
  case DType::U8: out.data<uint8_t>()[0] = static_cast<uint8_t>(v); break;
  default: throw Error(str("cannot make a ", dtypeName(dtype), " scalar"));
  }
  if (out.at(0) != v)
    throw Error(str(v, " does not fit ", dtypeName(dtype)));
  return out;
}

// State of one run: the live values and how they are stored.
//
// Under mixed precision (BF16, F16) each value is stored as the plan says (ValueInfo::storage,
// decided by medc's med-assign-storage): activations in bf16, or for F16 in f32 rounded to
// binary16 after every op; the rest (scalars, master-weight math, the norms' statistics and
// affine gradients) in f32. An op with a result stored in the low type computes in that
// type, any other in f32; operands of another float type are converted for it (exactly,
// when widening).
class Run {
public:
  Run(const Function &fn, const TensorMap &params, Precision precision, TensorMap *updates,
      const std::vector<FlatBuffer> &flats)
      : fn(fn), params(params), updates(updates), flats(flats), storage(storageType(precision)),
        mixed(precision == Precision::BF16 || precision == Precision::F16),
        half(precision == Precision::F16), values(fn.values.size()) {
    if (mixed && (fn.precision.empty() || fn.precision == "fp32"))
      throw Error(str("function '", fn.name, "' was compiled for fp32: it has no storage types "
                      "for a ", precision == Precision::BF16 ? "bf16" : "f16",
                      " run (compile it with precision=bf16-mixed or fp16-mixed, or run it "
                      "in f32 or f64)"));
    std::vector<size_t> last(fn.values.size(), 0);
    for (size_t i = 0; i < fn.ops.size(); ++i)
      for (auto &[name, ids] : fn.ops[i].operands)
        for (int id : ids)
          last[id] = i;
    for (int id : fn.outputs)
      last[id] = fn.ops.size();
    frees.resize(fn.ops.size());
    for (size_t id = 0; id < last.size(); ++id)
      if (last[id] < fn.ops.size())
        frees[last[id]].push_back(static_cast<int>(id));
  }

  GradientReducer *reducer = &singleRankReducer(); ///< sums med.all_reduce's buckets

  void setInput(size_t index, const Tensor &t) {
    int id = fn.inputs[index];
    const ValueInfo &info = fn.values[id];
    bool integerScalarAsFloat = !isFloat(info.dtype) && info.shape.empty() &&
                                t.shape().empty() && isFloat(t.dtype());
    if (t.shape() != info.shape ||
        (!integerScalarAsFloat && ((isFloat(info.dtype) != isFloat(t.dtype())) ||
                                   (!isFloat(info.dtype) && t.dtype() != info.dtype))))
      throw Error(str("function '", fn.name, "' argument arg", index, describeInput(index),
                      ": expected ", shapeStr(info.shape), " ", dtypeName(info.dtype), ", got ",
                      shapeStr(t.shape()), " ", dtypeName(t.dtype())));
    if (integerScalarAsFloat) {
      try {
        values[id] = integerScalar(t, info.dtype);
      } catch (const Error &e) {
        throw Error(str("function '", fn.name, "' argument arg", index, describeInput(index),
                        ": ", e.what()));
      }
      return;
    }
    if (!isFloat(t.dtype())) {
      values[id] = t;
      return;
    }
    bool activation = !mixed || lowStored(id);
    values[id] = half && activation ? owned(t, storage) : convert(t, activation ? storage : wide());
    if (half && activation)
      roundToHalf(values[id]);
  }

  void execute(const OpInfo &op, size_t index) {
    activation = !mixed || computesLow(op);
    compute = activation ? storage : wide();
    try {
      dispatch(op);
      if (mixed) // each result as the plan stores it
        for (int id : op.results) {
          Tensor &v = values[id];
          if (!v.defined() || !isFloat(v.dtype()))
            continue;
          const DType stored = lowStored(id) ? storage : DType::F32;
          if (v.dtype() != stored)
            v = v.to(stored);
          if (half && lowStored(id))
            roundToHalf(v);
        }
    } catch (const Error &e) {
      scratch.clear();
      throw Error(str(op.describe(), ": ", e.what()));
    }
    scratch.clear();
    for (int id : frees[index])
      if (!isOutput(id))
        values[id] = Tensor();
  }

  std::vector<Tensor> outputs() const {
    std::vector<Tensor> out;
    for (int id : fn.outputs)
      out.push_back(values[id]);
    return out;
  }

private:
  bool isOutput(int id) const {
    return std::find(fn.outputs.begin(), fn.outputs.end(), id) != fn.outputs.end();
  }

  std::string describeInput(size_t index) const {
    if (index < fn.inputNames.size() && fn.inputNames[index] != str("arg", index))
      return str(" '", fn.inputNames[index], "'");
    return "";
  }

  // The type of f32 math: f32 under mixed precision, the storage type otherwise (f64 runs
  // keep everything in f64).
  DType wide() const { return mixed ? DType::F32 : storage; }

  // Is value `id` stored in the low type (bf16 or f16 in the plan: this run's precision's)?
  bool lowStored(int id) const {
    DType d = fn.values[id].storage;
    return d == DType::BF16 || d == DType::F16;
  }
  // Under mixed precision: does `op` compute in the low type (see the class comment)?
  bool computesLow(const OpInfo &op) const {
    // A fusion of master-weight math (or augmentation) computes in f32 even where a result
    // leaves it in the 16-bit type (med-assign-storage).
    if (op.fp32)
      return false;
    return std::any_of(op.results.begin(), op.results.end(),
                       [&](int id) { return lowStored(id); });
  }

  static Tensor convert(const Tensor &t, DType dtype) {
    return isFloat(t.dtype()) && t.dtype() != dtype ? t.to(dtype) : t;
  }
  // As convert, but never sharing the buffer (the caller rounds it in place).
  static Tensor owned(const Tensor &t, DType dtype) {
    return t.dtype() != dtype ? t.to(dtype) : t.clone();
  }

  // Rounds an f32 tensor to binary16 values in place (F16 precision).
  static void roundToHalf(Tensor &t) {
    float *p = t.data<float>();
    parallelFor(t.numel(), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        p[i] = roundToF16(p[i]);
    });
  }

  // The value as stored, whatever its type.
  const Tensor &raw(int id) const {
    if (!values[id].defined())
      throw Error(str("value ", id, " is used after it was freed or before it was defined"));
    return values[id];
  }
  const Tensor &raw(const OpInfo &op, const std::string &name) const {
    return raw(op.single(name));
  }
  // The value in the op's compute type (a converted copy lives until the op is done).
  const Tensor &in(int id) {
    const Tensor &t = raw(id);
    if (!isFloat(t.dtype()) || t.dtype() == compute)
      return t;
    scratch.push_back(t.to(compute));
    return scratch.back();
  }
  // Operand `name` of `op`: in the f32 math type where the op table says the op reads it
  // wide (a norm's gamma and beta, saved statistics), else in the op's compute type.
  const Tensor &in(const OpInfo &op, const std::string &name) {
    const med::ops::OperandSpec *spec = op.schema->operand(name);
    return spec && spec->wide ? wideIn(op.single(name)) : in(op.single(name));
  }
  // A factor of a convolution's products: inside a fusion of a mixed-precision function,
  // rounded to the 16-bit storage type, as the tensor-core templates multiply it (and as
  // the unfused convolution reads it from memory); elsewhere as in().
  const Tensor &product(const OpInfo &op, const std::string &name) {
    const Tensor &t = in(op, name);
    if (!factorType || t.dtype() != DType::F32)
      return t;
    scratch.push_back(*factorType == DType::BF16 ? t.to(DType::BF16).to(DType::F32)
                                                 : owned(t, DType::F32));
    if (*factorType == DType::F16)
      roundToHalf(scratch.back());
    return scratch.back();
  }
  // Value `id` in the f32 math type (never through the compute type: under bf16 that would
  // round it; saved statistics stay the forward's own numbers).
  const Tensor &wideIn(int id) {
    const Tensor &t = raw(id);
    if (t.dtype() == wide())
      return t;
    scratch.push_back(t.to(wide()));
    return scratch.back();
  }
  const Tensor *optionalIn(const OpInfo &op, const std::string &name) {
    std::optional<int> id = op.optional(name);
    return id ? &in(*id) : nullptr;
  }

  // The result tensor with the plan's shape; floats in `dtype` (default: the compute type).
  Tensor &result(const OpInfo &op, size_t i = 0, std::optional<DType> dtype = std::nullopt) {
    if (i >= op.results.size())
      throw Error(str("the plan gives ", op.results.size(), " results"));
    const ValueInfo &info = fn.values[op.results[i]];
    DType t = isFloat(info.dtype) ? dtype.value_or(compute) : info.dtype;
    values[op.results[i]] = Tensor(t, info.shape);
    return values[op.results[i]];
  }

  const FlatBuffer *flat(const std::string &name) const {
    for (const FlatBuffer &f : flats)
      if (f.name == name)
        return &f;
    return nullptr;
  }

  void dispatch(const OpInfo &op) {
    using med::ops::OpKind;
    // Every op of the table has a case: the build (-Werror=switch) fails on a missing one.
    switch (op.op()) {
    case OpKind::Param: {
      if (flat(op.strAttr("name"))) {
        // A flat buffer is read as its members laid out (zeros between them).
        Tensor &y = result(op);
        y = gatherFlat(*flat(op.strAttr("name")), params, y.dtype());
        break;
      }
      const std::string &name = op.strAttr("name");
      auto it = params.find(name);
      if (it == params.end())
        throw Error(str("parameter '", name, "' is missing"));
      const ValueInfo &info = fn.values[op.results.at(0)];
      if (it->second.shape() != info.shape)
        throw Error(str("parameter '", name, "': expected ", shapeStr(info.shape), ", got ",
                        shapeStr(it->second.shape())));
      // (F16 rounds activations in place: the parameter's own buffer must not be shared)
      values[op.results.at(0)] =
          half && activation ? owned(it->second, compute) : convert(it->second, compute);
      break;
    }
    case OpKind::Constant: {
      const ValueInfo &info = fn.values[op.results.at(0)];
      if (!isFloat(info.dtype))
        throw Error("integer constants are not supported by the CPU backend");
      std::vector<double> v = op.floatsAttr("value");
      Tensor f64(DType::F64, info.shape);
      if (static_cast<int64_t>(v.size()) != f64.numel() && v.size() != 1)
        throw Error(str("constant has ", v.size(), " values for shape ", shapeStr(info.shape)));
      for (int64_t i = 0; i < f64.numel(); ++i)
        f64.data<double>()[i] = v[v.size() == 1 ? 0 : i];
      values[op.results[0]] = f64.to(compute);
      break;
    }
    case OpKind::Conv3d: case OpKind::Conv3dTranspose: case OpKind::ShiftSum: {
      // A shift-sum is the depthwise convolution of medrun/ConvView.h: the same kernel.
      const ConvView view = *convView(fn, op);
      const Tensor &x = product(op, "input"), &w = product(op, "weight");
      const Tensor *b = optionalIn(op, "bias");
      Tensor &y = result(op);
      if (view.kind == "conv3d_transpose")
        cpu::conv3dTranspose(x, w, b, convParams(op, view), y);
      else
        cpu::conv3d(x, w, b, convParams(op, view), y);
      break;
    }
    case OpKind::GroupNorm: {
      // With save_statistics the plan has three results: y, mean and rstd.
      Tensor &y = result(op);
      Tensor *mean = nullptr, *rstd = nullptr;
      if (op.results.size() == 3) {
        mean = &result(op, 1, wide());
        rstd = &result(op, 2, wide());
      } else if (op.results.size() != 1) {
        throw Error(str("the plan gives ", op.results.size(), " results (expected 1, or 3 with "
                        "the saved statistics)"));
      }
      cpu::groupNorm(in(op, "input"), in(op, "gamma"), in(op, "beta"), op.intAttr("groups"),
                     op.floatAttr("epsilon"), y, mean, rstd);
      break;
    }
    case OpKind::BatchNorm: {
      cpu::batchNorm(in(op, "input"), in(op, "gamma"), in(op, "beta"), in(op, "running_mean"),
                     in(op, "running_var"), op.floatAttr("epsilon"), op.floatAttr("momentum"),
                     op.boolAttr("training"), result(op), result(op, 1, wide()),
                     result(op, 2, wide()));
      break;
    }
    case OpKind::GroupNormStats: {
      cpu::groupNormStats(in(op, "input"), op.intAttr("groups"), op.floatAttr("epsilon"),
                          result(op, 0, wide()), result(op, 1, wide()));
      break;
    }
    case OpKind::GroupNormApply: {
      const Tensor &mean = in(op, "mean"), &rstd = in(op, "rstd");
      cpu::groupNormApply(in(op, "input"), mean, rstd, in(op, "gamma"), in(op, "beta"),
                          op.intAttr("groups"), result(op));
      break;
    }
    case OpKind::ChannelLayerNorm: {
      cpu::channelLayerNorm(in(op, "input"), in(op, "gamma"), in(op, "beta"),
                            op.floatAttr("epsilon"), result(op));
      break;
    }
    case OpKind::GRN: {
      cpu::grn(in(op, "input"), in(op, "gamma"), in(op, "beta"), op.floatAttr("epsilon"),
               result(op));
      break;
    }
    case OpKind::Gelu: case OpKind::Sigmoid: case OpKind::Neg: case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt: case OpKind::Relu: {
      cpu::unary(unaryOf(op.op()), in(op, "input"), result(op));
      break;
    }
    case OpKind::Softmax: {
      cpu::softmax(in(op, "input"), op.intAttr("axis"), result(op));
      break;
    }
    case OpKind::Resize: {
      cpu::resize(in(op, "input"), op.strAttr("mode") == "linear", op.boolAttr("align_corners"),
                  result(op));
      break;
    }
    case OpKind::ResizeGrad: {
      cpu::resizeGrad(in(op, "grad_output"), op.strAttr("mode") == "linear",
                      op.boolAttr("align_corners"), result(op));
      break;
    }
    case OpKind::AvgPool: {
      cpu::avgPool(in(op, "input"), op.intsAttr("kernel"), result(op));
      break;
    }
    case OpKind::AvgPoolGrad: {
      cpu::avgPoolGrad(in(op, "grad_output"), op.intsAttr("kernel"), result(op));
      break;
    }
    case OpKind::MaxPool: {
      cpu::maxPool(in(op, "input"), op.intsAttr("kernel"), result(op));
      break;
    }
    case OpKind::MaxPoolGrad: {
      cpu::maxPoolGrad(in(op, "input"), in(op, "grad_output"), op.intsAttr("kernel"), result(op));
      break;
    }
    case OpKind::LeakyRelu: {
      cpu::leakyRelu(in(op, "input"), op.floatAttr("negative_slope"), result(op));
      break;
    }
    case OpKind::PRelu: {
      cpu::binary(Binary::PRelu, in(op, "input"), in(op, "slope"), result(op));
      break;
    }
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min: case OpKind::Pow: {
      cpu::binary(binaryOf(op.op()), in(op, "lhs"), in(op, "rhs"), result(op));
      break;
    }
    case OpKind::Pad: {
      cpu::pad(in(op, "input"), op.intsAttr("low"), op.intsAttr("high"), op.floatAttr("value"),
               result(op));
      break;
    }
    case OpKind::Slice: {
      cpu::slice(in(op, "input"), op.intsAttr("offsets"), op.intsAttr("strides"), result(op));
      break;
    }
    case OpKind::Concat: {
      std::vector<const Tensor *> inputs;
      for (int id : op.operand("inputs"))
        inputs.push_back(&in(id));
      cpu::concat(inputs, op.intAttr("axis"), result(op));
      break;
    }
    case OpKind::Transpose: {
      cpu::transpose(in(op, "input"), op.intsAttr("permutation"), result(op));
      break;
    }
    case OpKind::SpatialTransform: {
      cpu::SpatialParams p;
      const std::string &mode = op.strAttr("mode"), &border = op.strAttr("border");
      p.mode = mode == "nearest"         ? cpu::SpatialMode::Nearest
               : mode == "linear_argmax" ? cpu::SpatialMode::LinearArgmax
                                         : cpu::SpatialMode::Linear;
      p.border = border == "constant"     ? cpu::SpatialBorder::Constant
                 : border == "reflection" ? cpu::SpatialBorder::Reflection
                                          : cpu::SpatialBorder::Zeros;
      p.value = op.floatAttr("value");
      p.labels = op.intsAttr("labels");
      // The matrix in the f32 math type (f64 runs: f64), whatever it is stored as.
      const Tensor &m = raw(op, "matrix");
      scratch.push_back(m.dtype() == wide() ? m : m.to(wide()));
      const Tensor &matrix = scratch.back();
      cpu::spatialTransform(in(op, "input"), matrix, p, result(op));
      break;
    }
    case OpKind::Reduce: {
      // Inside a mixed-precision fusion its operand is rounded like a product's factor: the
      // templates sum a bias gradient as one more column of a weight gradient's product.
      cpu::reduce(reduceKind(op), product(op, "input"), op.intsAttr("axes"), result(op));
      break;
    }
    case OpKind::BCEWithLogits: {
      cpu::BceParams p = bceParams(op);
      Tensor &y = result(op);
      cpu::bceWithLogits(in(op, "logits"), in(op, "target"), optionalIn(op, "mask"),
                         optionalIn(op, "pos_weight"), p, y);
      break;
    }
    case OpKind::DiceCE: {
      cpu::DiceCEParams p = diceParams(op);
      std::vector<const Tensor *> logits, targets;
      for (int id : op.operand("logits"))
        logits.push_back(&in(id));
      for (int id : op.operand("targets"))
        targets.push_back(&in(id));
      cpu::diceCE(logits, targets, p, result(op));
      break;
    }
    case OpKind::Affinities: {
      // Labels are read as stored (an f32 id never goes through the compute type).
      std::vector<int64_t> low = op.intsAttr("crop_low");
      if (low.size() != 3)
        throw Error("'crop_low' needs 3 entries");
      cpu::affinities(raw(op, "seg"), op.intsAttr("offsets"), {low[0], low[1], low[2]},
                      op.intAttr("unlabelled_below"), result(op, 0), result(op, 1));
      break;
    }
    case OpKind::RemoveLabel: {
      const Tensor &x = raw(op, "input");
      cpu::removeLabel(x, op.intAttr("label"), op.intAttr("replace_with"),
                       result(op, 0, x.dtype()));
      break;
    }
    case OpKind::LabelRegions: {
      std::vector<int64_t> labels = op.intsAttr("regions");
      std::vector<std::vector<int64_t>> regions;
      size_t at = 0;
      for (int64_t n : op.intsAttr("region_sizes")) { // the plan verifier checked the sums
        regions.emplace_back(labels.begin() + at, labels.begin() + at + n);
        at += n;
      }
      cpu::labelRegions(raw(op, "input"), regions, result(op));
      break;
    }
    case OpKind::DownsampleNearest: {
      const Tensor &x = raw(op, "input");
      cpu::downsampleNearest(x, result(op, 0, x.dtype()));
      break;
    }
    case OpKind::Reshape: {
      const Tensor &x = in(op, "input");
      Tensor &y = result(op, 0, x.dtype());
      std::memcpy(y.raw(), x.raw(), x.nbytes());
      break;
    }
    case OpKind::Broadcast: {
      cpu::broadcast(in(op, "input"), result(op));
      break;
    }
    case OpKind::Conv3dGradWeight: case OpKind::ShiftSumGradWeight: {
      cpu::conv3dGradWeight(product(op, "input"), product(op, "grad_output"),
                            convParams(op, *convView(fn, op)), result(op));
      break;
    }
    case OpKind::GroupNormGrad: {
      const Tensor &mean = in(op, "mean"), &rstd = in(op, "rstd");
      cpu::groupNormGrad(in(op, "input"), in(op, "gamma"), mean, rstd, in(op, "grad_output"),
                         op.intAttr("groups"), result(op, 0), result(op, 1, wide()),
                         result(op, 2, wide()));
      break;
    }
    case OpKind::ChannelLayerNormGrad: case OpKind::GRNGrad: {
      const Tensor &x = in(op, "input"), &gamma = in(op, "gamma"), &dy = in(op, "grad_output");
      Tensor &dx = result(op, 0), &dgamma = result(op, 1, wide()), &dbeta = result(op, 2, wide());
      double eps = op.floatAttr("epsilon");
      if (op.op() == OpKind::ChannelLayerNormGrad)
        cpu::channelLayerNormGrad(x, gamma, dy, eps, dx, dgamma, dbeta);
      else
        cpu::grnGrad(x, gamma, dy, eps, dx, dgamma, dbeta);
      break;
    }
    case OpKind::ExtremumGrad: {
      cpu::extremumGrad(extremumKind(op), in(op, "lhs"), in(op, "rhs"), in(op, "grad_output"),
                        result(op, 0), result(op, 1));
      break;
    }
    case OpKind::ReduceExtremumGrad: {
      extremumKind(op); // validates the plan; the kernel compares with the extremum itself
      cpu::reduceExtremumGrad(in(op, "input"), in(op, "extremum"), in(op, "grad_output"),
                              op.intsAttr("axes"), result(op));
      break;
    }
    case OpKind::SliceGrad: {
      cpu::sliceGrad(in(op, "grad_output"), op.intsAttr("offsets"), op.intsAttr("strides"),
                     result(op));
      break;
    }
    case OpKind::GeluGrad: {
      cpu::geluGrad(in(op, "input"), in(op, "grad_output"), result(op));
      break;
    }
    case OpKind::PReluGrad: {
      cpu::preluGrad(in(op, "input"), in(op, "slope"), in(op, "grad_output"), result(op));
      break;
    }
    case OpKind::BCEWithLogitsGrad: {
      cpu::BceParams p = bceParams(op);
      const Tensor &dloss = raw(op, "grad_loss"); // any float type: a loss-type scalar
      cpu::bceWithLogitsGrad(in(op, "logits"), in(op, "target"), optionalIn(op, "mask"),
                             optionalIn(op, "pos_weight"), dloss, p, result(op));
      break;
    }
    case OpKind::DiceCEGrad: {
      std::vector<const Tensor *> logits, targets;
      for (int id : op.operand("logits"))
        logits.push_back(&in(id));
      for (int id : op.operand("targets"))
        targets.push_back(&in(id));
      std::vector<Tensor *> dlogits;
      for (size_t i = 0; i < op.results.size(); ++i)
        dlogits.push_back(&result(op, i));
      const Tensor &dloss = raw(op, "grad_loss");
      cpu::diceCEGrad(logits, targets, dloss, diceParams(op), dlogits);
      break;
    }
    case OpKind::AdamW: {
      cpu::AdamWParams p;
      p.beta1 = op.floatAttr("beta1");
      p.beta2 = op.floatAttr("beta2");
      p.eps = op.floatAttr("epsilon");
      p.weightDecay = op.floatAttr("weight_decay");
      cpu::adamw(in(op, "param"), in(op, "grad"), in(op, "exp_avg"), in(op, "exp_avg_sq"),
                 in(op, "lr"), in(op, "step"), p, result(op, 0), result(op, 1), result(op, 2));
      break;
    }
    case OpKind::SGD: {
      cpu::SGDParams p;
      p.momentum = op.floatAttr("momentum");
      p.weightDecay = op.floatAttr("weight_decay");
      p.nesterov = op.boolAttr("nesterov");
      cpu::sgd(in(op, "param"), in(op, "grad"), in(op, "momentum_buffer"), in(op, "lr"), p,
               result(op, 0), result(op, 1));
      break;
    }
    case OpKind::SumSquares: {
      std::vector<const Tensor *> inputs;
      for (int id : op.operand("inputs"))
        inputs.push_back(&in(id));
      cpu::sumSquares(inputs, result(op));
      break;
    }
    case OpKind::Pack: {
      std::vector<const Tensor *> inputs;
      for (int id : op.operand("inputs"))
        inputs.push_back(&in(id));
      cpu::pack(inputs, op.intsAttr("offsets"), result(op));
      break;
    }
    case OpKind::AllReduce: {
      // The bucket laid out as in the packed gradients, reduced with one call.
      const std::vector<int> &ids = op.operand("inputs");
      const std::vector<int64_t> offsets = op.intsAttr("offsets");
      std::vector<const Tensor *> inputs;
      for (int id : ids)
        inputs.push_back(&in(id));
      const DType t = inputs.at(0)->dtype();
      Tensor bucket(t, {op.intAttr("size")});
      cpu::pack(inputs, offsets, bucket);
      reducer->allReduceSum(bucket.raw(), static_cast<size_t>(bucket.numel()), t, nullptr);
      const std::byte *from = static_cast<const std::byte *>(bucket.raw());
      for (size_t i = 0; i < ids.size(); ++i) {
        Tensor &y = result(op, i, t);
        std::memcpy(y.raw(), from + offsets[i] * dtypeSize(t), y.nbytes());
      }
      break;
    }
    case OpKind::AnyNonFinite: {
      std::vector<const Tensor *> inputs;
      for (int id : op.operand("inputs"))
        inputs.push_back(&raw(id));
      cpu::anyNonFinite(inputs, result(op));
      break;
    }
    case OpKind::GaussianBlur: {
      cpu::gaussianBlur(in(op, "input"), raw(op, "sigma"), result(op));
      break;
    }
    case OpKind::SimulateLowResolution: {
      cpu::simulateLowResolution(in(op, "input"), raw(op, "scale"), result(op));
      break;
    }
    case OpKind::Mirror: {
      const Tensor &x = in(op, "input");
      cpu::mirror(x, raw(op, "flip"), result(op, 0, x.dtype()));
      break;
    }
    case OpKind::AffineMatrix: {
      auto shear = op.optional("shear");
      cpu::affineMatrix(raw(op, "angles"), raw(op, "scales"), shear ? &raw(*shear) : nullptr,
                        result(op));
      break;
    }
    case OpKind::OrientationMatrix: {
      cpu::orientationMatrix(raw(op, "u"), result(op));
      break;
    }
    case OpKind::ShiftSlices: {
      const Tensor &x = in(op, "input");
      cpu::shiftSlices(x, raw(op, "shift"), result(op, 0, x.dtype()));
      break;
    }
    case OpKind::Random: {
      const std::string &d = op.strAttr("distribution");
      const cpu::Distribution dist = d == "normal"      ? cpu::Distribution::Normal
                                     : d == "bernoulli" ? cpu::Distribution::Bernoulli
                                     : d == "uniform"   ? cpu::Distribution::Uniform
                                     : throw Error(str("random: unknown distribution '", d,
                                                       "' (expected uniform, normal or bernoulli)"));
      cpu::random(raw(op, "key"), op.intAttr("stream"), dist, op.floatAttr("probability"),
                  result(op));
      break;
    }
    case OpKind::Dropout: {
      const Tensor &x = in(op, "input");
      cpu::dropout(x, raw(op, "key"), op.intAttr("stream"), op.floatAttr("p"),
                   result(op, 0, x.dtype()));
      break;
    }
    case OpKind::Select: {
      cpu::select(raw(op, "cond"), in(op, "on_true"), in(op, "on_false"), result(op));
      break;
    }
    case OpKind::UpdateLossScale: {
      cpu::LossScaleParams p;
      p.growthFactor = op.floatAttr("growth_factor");
      p.backoffFactor = op.floatAttr("backoff_factor");
      p.growthInterval = op.intAttr("growth_interval");
      cpu::updateLossScale(raw(op, "scale"), raw(op, "growth_tracker"), raw(op, "found_inf"), p,
                           result(op, 0), result(op, 1));
      break;
    }
    case OpKind::Fusion: {
      fusion(op);
      break;
    }
    case OpKind::Assign: {
      const std::string &name = op.strAttr("name");
      if (!updates)
        throw Error(str("assigns parameter '", name,
                        "', but the caller takes no parameter updates"));
      if (const FlatBuffer *f = flat(name)) { // each member its slice
        scatterFlat(*f, raw(op, "value"), *updates);
      } else {
        (*updates)[name] = raw(op, "value").clone();
      }
      break;
    }
    }
  }

  /// A fusion runs its body op by op: the inputs read as the op's kind reads them, every
  /// value inside in f32 (f64 in f64 runs) and never rounded — except the factors of a
  /// convolution's products and the operands of reductions under mixed precision, rounded
  /// to the 16-bit type as tensor cores take them — the results stored as the op's kind
  /// stores them (docs/dialect.md, med.fusion).
  void fusion(const OpInfo &op) {
    const Function &body = *op.body;
    Run inner(body, params, wide() == DType::F64 ? Precision::F64 : Precision::F32, nullptr, flats);
    if (mixed && !op.fp32) // master-weight math and augmentation stay in f32
      inner.factorType = half ? DType::F16 : DType::BF16;
    const std::vector<int> &inputs = op.operand("inputs");
    for (size_t i = 0; i < inputs.size(); ++i)
      inner.setInput(i, convert(in(inputs[i]), wide()));
    for (size_t i = 0; i < body.ops.size(); ++i)
      inner.execute(body.ops[i], i);
    std::vector<Tensor> outs = inner.outputs();
    for (size_t i = 0; i < outs.size(); ++i) { // a result stored in f32 (statistics) is not rounded
      const int id = op.results.at(i);
      values[id] = convert(outs[i], !mixed || lowStored(id) ? compute : wide());
    }
  }

  const Function &fn;
  const TensorMap &params;
  TensorMap *updates; ///< where med.assign puts new parameter values
  const std::vector<FlatBuffer> &flats;
  DType storage;      ///< of activations
  bool mixed;         ///< BF16 or F16: scalars and fp32 ops in f32
  bool half;          ///< F16: activations rounded to binary16
  /// Inside a fusion of a mixed-precision function: the 16-bit type convolutions round
  /// their factors to (product()).
  std::optional<DType> factorType;
  bool activation = true;        ///< of the op being executed
  DType compute = DType::F32;    ///< float type the op being executed computes in
  std::deque<Tensor> scratch;    ///< operands converted for the op being executed
  std::vector<Tensor> values;
  std::vector<std::vector<int>> frees; ///< values whose last use is op i
};

} // namespace

std::vector<Tensor> runCpu(const Artifact &artifact, const Function &fn,
                           const std::vector<Tensor> &inputs, const TensorMap &params,
                           Precision precision, std::map<std::string, double> *profile,
                           TensorMap *updates, GradientReducer *reducer) {
  if (inputs.size() != fn.inputs.size())
    throw Error(str(artifact.path, ": function '", fn.name, "' takes ", fn.inputs.size(),
                    " inputs, got ", inputs.size()));
  Run run(fn, params, precision, updates, artifact.flatBuffers);
  run.reducer = reducer ? reducer : &singleRankReducer();
  for (size_t i = 0; i < inputs.size(); ++i)
    run.setInput(i, inputs[i]);
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    auto start = std::chrono::steady_clock::now();
    run.execute(fn.ops[i], i);
    if (profile)
      (*profile)[fn.ops[i].kind] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return run.outputs();
}

} // namespace medrun
