//===- MedOps.cpp - shape rules and verifiers of the med ops -------------------===//
//
// Each op's inferShapes is its shape rule and its verifier (see Med_ShapedOp in MedOps.td):
// it reports every inconsistency with a message that names the operand or attribute and the
// expected vs actual value.
//
//===----------------------------------------------------------------------------------===//

#include "med/IR/MedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::med;

//===----------------------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------------------===//

namespace {

std::string shapeStr(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(
      shape, os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << "?";
        else
          os << d;
      },
      "x");
  return s;
}

std::string listStr(ArrayRef<int64_t> values) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

bool isDyn(int64_t d) { return ShapedType::isDynamic(d); }

// Two sizes agree when equal or when either is unknown.
bool sameDim(int64_t a, int64_t b) { return isDyn(a) || isDyn(b) || a == b; }

bool sameShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!sameDim(x, y))
      return false;
  return true;
}

// Emits diagnostics for one op, prefixed like the verifier's own ("'med.conv3d' op ...").
struct Checker {
  std::optional<Location> loc;
  StringRef opName;

  LogicalResult fail(const Twine &msg) const {
    return emitOptionalError(loc, "'", opName, "' op ", msg);
  }

  LogicalResult sameElementType(StringRef what, Type actual, Type expected,
                                StringRef expectedFrom) const {
    if (actual == expected)
      return success();
    std::string a, e;
    llvm::raw_string_ostream(a) << actual;
    llvm::raw_string_ostream(e) << expected;
    return fail(what + ": expected element type " + e + " (that of " + expectedFrom +
                "), got " + a);
  }

  // A per-axis attribute: exactly `rank` entries (one per `axisKind`), each >= `minValue`.
  LogicalResult axisList(StringRef name, ArrayRef<int64_t> values, size_t rank, int64_t minValue,
                         StringRef axisKind = "axis") const {
    if (values.size() != rank)
      return fail("'" + name + "' needs " + Twine(rank) + " entries (one per " + axisKind +
                  "), got " + listStr(values));
    for (int64_t v : values)
      if (v < minValue)
        return fail("'" + name + "' entries must be " +
                    (minValue == 0 ? "non-negative" : "at least " + Twine(minValue)) + ", got " +
                    listStr(values));
    return success();
  }

  LogicalResult rank(StringRef what, Value v, int64_t expected, StringRef layout) const {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() == expected)
      return success();
    return fail(what + ": expected " + Twine(expected) +
                (expected == 1 ? " dimension (" : " dimensions (") + layout + "), got " +
                shapeStr(t.getShape()));
  }

  LogicalResult vectorOf(StringRef what, Value v, int64_t expected, StringRef meaning) const {
    if (failed(rank(what, v, 1, meaning)))
      return failure();
    int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(0);
    if (sameDim(n, expected))
      return success();
    return fail(what + ": expected " + Twine(expected) + " elements (" + meaning + "), got " +
                Twine(n));
  }
};

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

// Shared rule of conv3d and conv3d_transpose; `transposed` selects the output-size formula
// and the weight layout (Cin×Cout/g×k³ instead of Cout×Cin/g×k³).
template <typename Adaptor>
LogicalResult inferConv(const Checker &c, Adaptor adaptor, bool transposed,
                        ArrayRef<int64_t> outputPadding, SmallVectorImpl<Type> &out) {
  if (failed(c.rank("input", adaptor.getInput(), 5, "N x C x D x H x W")) ||
      failed(c.rank("weight", adaptor.getWeight(), 5,
                    transposed ? "Cin x Cout/groups x kD x kH x kW"
                               : "Cout x Cin/groups x kD x kH x kW")))
    return failure();
  RankedTensorType in = tensorType(adaptor.getInput());
  RankedTensorType w = tensorType(adaptor.getWeight());
  ArrayRef<int64_t> stride = adaptor.getStride(), padding = adaptor.getPadding(),
                    dilation = adaptor.getDilation();
  StringRef spatial = "spatial axis";
  if (failed(c.axisList("stride", stride, 3, 1, spatial)) ||
      failed(c.axisList("padding", padding, 3, 0, spatial)) ||
      failed(c.axisList("dilation", dilation, 3, 1, spatial)) ||
      failed(c.axisList("output_padding", outputPadding, 3, 0, spatial)))
    return failure();
  int64_t groups = static_cast<int64_t>(adaptor.getGroups());
  if (groups < 1)
    return c.fail("'groups' must be at least 1, got " + Twine(groups));
  if (failed(c.sameElementType("weight", w.getElementType(), in.getElementType(), "input")))
    return failure();

  int64_t cin = in.getDimSize(1);
  if (!isDyn(cin) && cin % groups != 0)
    return c.fail("input: " + Twine(cin) + " channels are not divisible by groups = " +
                  Twine(groups));
  // Expected weight shape, from the input channels and groups.
  int64_t cout;
  if (transposed) {
    if (!sameDim(w.getDimSize(0), cin))
      return c.fail("weight: expected shape " + Twine(cin) + "xCout/groups x kD x kH x kW " +
                    "(input channels first), got " + shapeStr(w.getShape()));
    cout = isDyn(w.getDimSize(1)) ? ShapedType::kDynamic : w.getDimSize(1) * groups;
  } else {
    cout = w.getDimSize(0);
    int64_t perGroup = isDyn(cin) ? ShapedType::kDynamic : cin / groups;
    if (!sameDim(w.getDimSize(1), perGroup))
      return c.fail("weight: expected shape Cout x " + Twine(perGroup) +
                    " x kD x kH x kW (input channels " + Twine(cin) + " / groups " +
                    Twine(groups) + "), got " + shapeStr(w.getShape()));
    if (!isDyn(cout) && cout % groups != 0)
      return c.fail("weight: " + Twine(cout) + " output channels are not divisible by groups = " +
                    Twine(groups));
  }
  if (Value bias = adaptor.getBias()) {
    if (failed(c.sameElementType("bias", tensorType(bias).getElementType(), in.getElementType(),
                                 "input")) ||
        failed(c.vectorOf("bias", bias, cout, "one per output channel")))
      return failure();
  }
  if (transposed)
    for (int i = 0; i < 3; ++i)
      if (outputPadding[i] >= stride[i] && outputPadding[i] >= dilation[i])
        return c.fail("'output_padding' must be smaller than stride or dilation on each axis, got " +
                      listStr(outputPadding) + " with stride " + listStr(stride) +
                      " and dilation " + listStr(dilation));

  SmallVector<int64_t, 5> shape = {in.getDimSize(0), cout};
  for (int i = 0; i < 3; ++i) {
    int64_t n = in.getDimSize(2 + i), k = w.getDimSize(2 + i);
    if (isDyn(n) || isDyn(k)) {
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    int64_t extent = dilation[i] * (k - 1) + 1;
    int64_t size = transposed
                       ? (n - 1) * stride[i] - 2 * padding[i] + extent + outputPadding[i]
                       : (n + 2 * padding[i] - extent) / stride[i] + 1;
    if (!transposed && n + 2 * padding[i] < extent)
      size = 0;
    if (size < 1)
      return c.fail("input: spatial size " + Twine(n) + " on axis " + Twine(i) +
                    " is too small for kernel " + Twine(k) + " (dilation " + Twine(dilation[i]) +
                    ", padding " + Twine(padding[i]) + "); the output would be empty");
    shape.push_back(size);
  }
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

// Normalizations with per-channel affine vectors on axis 1.
LogicalResult inferChannelAffine(const Checker &c, Value input, Value gamma, Value beta,
                                 SmallVectorImpl<Type> &out) {
  RankedTensorType in = tensorType(input);
  if (in.getRank() < 2)
    return c.fail("input: expected at least 2 dimensions (N x C x ...), got " +
                  shapeStr(in.getShape()));
  int64_t channels = in.getDimSize(1);
  for (auto [name, v] : {std::pair<StringRef, Value>{"gamma", gamma}, {"beta", beta}})
    if (failed(c.sameElementType(name, tensorType(v).getElementType(), in.getElementType(),
                                 "input")) ||
        failed(c.vectorOf(name, v, channels, "one per input channel")))
      return failure();
  out.push_back(in);
  return success();
}

// group_norm and its gradient: at least one group, dividing the channels.
LogicalResult checkNormGroups(const Checker &c, Value input, uint64_t groupsAttr) {
  int64_t groups = static_cast<int64_t>(groupsAttr);
  int64_t channels = tensorType(input).getDimSize(1);
  if (groups < 1)
    return c.fail("'groups' must be at least 1, got " + Twine(groups));
  if (!isDyn(channels) && channels % groups != 0)
    return c.fail("input: " + Twine(channels) + " channels are not divisible by groups = " +
                  Twine(groups));
  return success();
}

// The mean and rstd group_norm saves: N × groups in the input's element type.
RankedTensorType statisticsType(Value input, uint64_t groups) {
  RankedTensorType in = tensorType(input);
  return RankedTensorType::get({in.getDimSize(0), static_cast<int64_t>(groups)},
                               in.getElementType());
}

// The result shape of reducing `in` over `axes` (distinct, in range).
LogicalResult reducedShape(const Checker &c, RankedTensorType in, ArrayRef<int64_t> axesAttr,
                           bool keepdims, SmallVectorImpl<int64_t> &shape) {
  llvm::SmallSet<int64_t, 8> axes;
  for (int64_t a : axesAttr) {
    if (a < 0 || a >= in.getRank())
      return c.fail("'axes' entries must be in [0, " + Twine(in.getRank()) + "), got " +
                    listStr(axesAttr));
    if (!axes.insert(a).second)
      return c.fail("'axes' must not repeat an axis, got " + listStr(axesAttr));
  }
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (!axes.contains(d))
      shape.push_back(in.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  return success();
}

// An operand that must have `expected`'s shape (described by `of`) and element type (that of
// the operand `elementOf`).
LogicalResult sameTypeAs(const Checker &c, StringRef name, Value v, RankedTensorType expected,
                         StringRef of, StringRef elementOf = "input") {
  RankedTensorType t = tensorType(v);
  if (failed(c.sameElementType(name, t.getElementType(), expected.getElementType(), elementOf)))
    return failure();
  if (!sameShape(t.getShape(), expected.getShape()))
    return c.fail(name + ": expected shape " + shapeStr(expected.getShape()) + " (" + of +
                  "), got " + shapeStr(t.getShape()));
  return success();
}

} // namespace

//===----------------------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  std::optional<uint64_t> fanIn = getFanIn();
  if (getInit() == InitKind::uniform) {
    if (!fanIn)
      return emitOpError("init uniform needs the fan-in, e.g. `init uniform(27)`");
    if (static_cast<int64_t>(*fanIn) < 1)
      return emitOpError("fan-in must be positive, got ") << static_cast<int64_t>(*fanIn);
  } else if (fanIn) {
    return emitOpError("init ") << stringifyInitKind(getInit()) << " takes no fan-in";
  }
  if (getInit() == InitKind::copy) {
    if (!getSource())
      return emitOpError("init copy needs the parameter to copy, e.g. `init copy from @\"w\"`");
    auto source = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(*this, getSourceAttr());
    if (!source)
      return emitOpError("copies ") << getSourceAttr() << ", which is not declared";
    if (source.getType() != getType())
      return emitOpError("copies ") << getSourceAttr() << " of type " << source.getType()
                                    << ", but has type " << getType();
    if (source.getInit() == InitKind::copy)
      return emitOpError("copies ") << getSourceAttr() << ", which is itself a copy";
  } else if (getSource()) {
    return emitOpError("init ") << stringifyInitKind(getInit()) << " copies nothing; remove `from`";
  }
  if (!getTensorType().hasStaticShape())
    return emitOpError("parameter ") << getSymName() << " must have a static shape, got "
                                     << getType();
  return success();
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto decl = symbols.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!decl)
    return emitOpError("parameter ") << getNameAttr()
                                     << " is not declared (no med.parameter of that name)";
  if (decl.getType() != getType())
    return emitOpError("result type ")
           << getType() << " differs from the declared type " << decl.getType()
           << " of parameter " << getNameAttr();
  return success();
}

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto decl = symbols.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!decl)
    return emitOpError("parameter ") << getNameAttr()
                                     << " is not declared (no med.parameter of that name)";
  if (decl.getType() != getValue().getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from the declared type " << decl.getType()
           << " of parameter " << getNameAttr();
  return success();
}

LogicalResult ConstantOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &out) {
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type)
    return emitOptionalError(loc, "'med.constant' op value must be a ranked tensor");
  out.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------------------===//

LogicalResult Conv3dOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &out) {
  static const int64_t zeros[3] = {0, 0, 0};
  return inferConv(Checker{loc, getOperationName()}, adaptor, /*transposed=*/false, zeros, out);
}

LogicalResult Conv3dTransposeOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type> &out) {
  return inferConv(Checker{loc, getOperationName()}, adaptor, /*transposed=*/true,
                   adaptor.getOutputPadding(), out);
}

//===----------------------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------------------===//

LogicalResult GroupNormOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(inferChannelAffine(c, adaptor.getInput(), adaptor.getGamma(), adaptor.getBeta(),
                                out)))
    return failure();
  if (failed(checkNormGroups(c, adaptor.getInput(), adaptor.getGroups())))
    return failure();
  if (adaptor.getEpsilon().convertToDouble() <= 0)
    return c.fail("'epsilon' must be positive");
  if (adaptor.getSaveStatistics())
    out.append(2, statisticsType(adaptor.getInput(), adaptor.getGroups()));
  return success();
}

LogicalResult ChannelLayerNormOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (adaptor.getEpsilon().convertToDouble() <= 0)
    return c.fail("'epsilon' must be positive");
  return inferChannelAffine(c, adaptor.getInput(), adaptor.getGamma(), adaptor.getBeta(), out);
}

LogicalResult GRNOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(c.rank("input", adaptor.getInput(), 5, "N x C x D x H x W")))
    return failure();
  RankedTensorType in = tensorType(adaptor.getInput());
  SmallVector<int64_t> expected = {1, in.getDimSize(1), 1, 1, 1};
  for (auto [name, v] : {std::pair<StringRef, Value>{"gamma", adaptor.getGamma()},
                         {"beta", adaptor.getBeta()}}) {
    RankedTensorType t = tensorType(v);
    if (failed(c.sameElementType(name, t.getElementType(), in.getElementType(), "input")))
      return failure();
    if (!sameShape(t.getShape(), expected))
      return c.fail(name + ": expected shape " + shapeStr(expected) + ", got " +
                    shapeStr(t.getShape()));
  }
  out.push_back(in);
  return success();
}

//===----------------------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------------------===//

LogicalResult mlir::med::inferBroadcastType(std::optional<Location> loc, StringRef opName,
                                            Type lhsType, Type rhsType,
                                            SmallVectorImpl<Type> &out) {
  Checker c{loc, opName};
  auto lhs = cast<RankedTensorType>(lhsType), rhs = cast<RankedTensorType>(rhsType);
  if (failed(c.sameElementType("rhs", rhs.getElementType(), lhs.getElementType(), "lhs")))
    return failure();
  int64_t rank = std::max(lhs.getRank(), rhs.getRank());
  SmallVector<int64_t> shape(rank);
  for (int64_t i = 0; i < rank; ++i) {
    // Align at the trailing axis; a missing leading axis acts as size 1.
    int64_t li = i - (rank - lhs.getRank()), ri = i - (rank - rhs.getRank());
    int64_t a = li < 0 ? 1 : lhs.getDimSize(li), b = ri < 0 ? 1 : rhs.getDimSize(ri);
    if (a == 1)
      shape[i] = b;
    else if (b == 1)
      shape[i] = a;
    else if (isDyn(a))
      shape[i] = b;
    else if (isDyn(b) || a == b)
      shape[i] = a;
    else
      return c.fail("operands do not broadcast: lhs " + shapeStr(lhs.getShape()) + " and rhs " +
                    shapeStr(rhs.getShape()) + " differ on axis " + Twine(i) + " (" + Twine(a) +
                    " vs " + Twine(b) + "; sizes must be equal or 1)");
  }
  out.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------------------===//

LogicalResult PadOp::inferShapes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                      SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  RankedTensorType in = tensorType(adaptor.getInput());
  size_t rank = in.getRank();
  if (failed(c.axisList("low", adaptor.getLow(), rank, 0)) ||
      failed(c.axisList("high", adaptor.getHigh(), rank, 0)))
    return failure();
  SmallVector<int64_t> shape;
  for (size_t i = 0; i < rank; ++i) {
    int64_t n = in.getDimSize(i);
    shape.push_back(isDyn(n) ? n : n + adaptor.getLow()[i] + adaptor.getHigh()[i]);
  }
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult SliceOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  RankedTensorType in = tensorType(adaptor.getInput());
  size_t rank = in.getRank();
  SmallVector<int64_t> strides(rank, 1);
  if (auto s = adaptor.getStrides())
    strides.assign(s->begin(), s->end());
  if (failed(c.axisList("offsets", adaptor.getOffsets(), rank, 0)) ||
      failed(c.axisList("sizes", adaptor.getSizes(), rank, 1)) ||
      failed(c.axisList("strides", strides, rank, 1)))
    return failure();
  for (size_t i = 0; i < rank; ++i) {
    int64_t n = in.getDimSize(i);
    int64_t last = adaptor.getOffsets()[i] + (adaptor.getSizes()[i] - 1) * strides[i];
    if (!isDyn(n) && last >= n)
      return c.fail("input: the box reaches index " + Twine(last) + " on axis " + Twine(i) +
                    ", but the input has only " + Twine(n) + " elements there (shape " +
                    shapeStr(in.getShape()) + ")");
  }
  out.push_back(RankedTensorType::get(adaptor.getSizes(), in.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return c.fail("needs at least one input");
  RankedTensorType first = tensorType(inputs.front());
  int64_t rank = first.getRank(), axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < 0 || axis >= rank)
    return c.fail("'axis' must be in [0, " + Twine(rank) + "), got " + Twine(axis));
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(inputs.drop_front())) {
    RankedTensorType t = tensorType(v);
    std::string name = ("input " + Twine(i + 1)).str();
    if (failed(c.sameElementType(name, t.getElementType(), first.getElementType(), "input 0")))
      return failure();
    bool ok = t.getRank() == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      if (d != axis && !sameDim(t.getDimSize(d), shape[d]))
        ok = false;
    if (!ok)
      return c.fail(name + ": expected shape " + shapeStr(shape) + " except on axis " +
                    Twine(axis) + ", got " + shapeStr(t.getShape()));
    int64_t n = t.getDimSize(axis);
    shape[axis] = isDyn(n) || isDyn(shape[axis]) ? ShapedType::kDynamic : shape[axis] + n;
  }
  out.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------------------===//

LogicalResult ReduceOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  RankedTensorType in = tensorType(adaptor.getInput());
  SmallVector<int64_t> shape;
  if (failed(reducedShape(c, in, adaptor.getAxes(), adaptor.getKeepdims(), shape)))
    return failure();
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------------------===//

namespace {
// The operand checks of bce_with_logits, shared with its gradient op.
template <typename Adaptor> LogicalResult checkBCE(const Checker &c, Adaptor adaptor) {
  RankedTensorType logits = tensorType(adaptor.getLogits());
  if (logits.getRank() < 2)
    return c.fail("logits: expected at least 2 dimensions (N x C x ...), got " +
                  shapeStr(logits.getShape()));
  auto sameAsLogits = [&](StringRef name, Value v) -> LogicalResult {
    RankedTensorType t = tensorType(v);
    if (failed(c.sameElementType(name, t.getElementType(), logits.getElementType(), "logits")))
      return failure();
    if (!sameShape(t.getShape(), logits.getShape()))
      return c.fail(name + ": expected shape " + shapeStr(logits.getShape()) +
                    " (that of logits), got " + shapeStr(t.getShape()));
    return success();
  };
  if (failed(sameAsLogits("target", adaptor.getTarget())))
    return failure();
  if (Value mask = adaptor.getMask(); mask && failed(sameAsLogits("mask", mask)))
    return failure();
  if (Value pw = adaptor.getPosWeight()) {
    if (adaptor.getAutoPosWeight())
      return c.fail("pos_weight: give either the operand or 'auto_pos_weight', not both");
    if (failed(c.sameElementType("pos_weight", tensorType(pw).getElementType(),
                                 logits.getElementType(), "logits")) ||
        failed(c.vectorOf("pos_weight", pw, logits.getDimSize(1), "one per channel")))
      return failure();
  }
  if (adaptor.getAutoPosWeight() && adaptor.getMaxPosWeight().convertToDouble() <= 0)
    return c.fail("'max_pos_weight' must be positive");
  return success();
}

// The loss's result type: the elementwise loss for reduction none, else an f32 scalar.
Type bceResultType(MLIRContext *ctx, Value logits, LossReduction reduction) {
  if (reduction == LossReduction::none)
    return logits.getType();
  return RankedTensorType::get({}, Float32Type::get(ctx));
}

template <typename Adaptor> LogicalResult checkDiceCE(const Checker &c, Adaptor adaptor) {
  ValueRange logits = adaptor.getLogits(), targets = adaptor.getTargets();
  ArrayRef<double> weights = adaptor.getWeights();
  if (logits.empty())
    return c.fail("needs at least one logits operand");
  if (targets.size() != logits.size())
    return c.fail("expected one target per logits operand (" + Twine(logits.size()) + "), got " +
                  Twine(targets.size()));
  if (weights.size() != logits.size())
    return c.fail("'weights' needs one entry per logits operand (" + Twine(logits.size()) +
                  "), got " + Twine(weights.size()));
  for (double w : weights)
    if (w < 0)
      return c.fail("'weights' must be non-negative");
  for (size_t i = 0; i < logits.size(); ++i) {
    RankedTensorType x = tensorType(logits[i]), t = tensorType(targets[i]);
    if (x.getRank() < 3)
      return c.fail("logits " + Twine(i) + ": expected at least 3 dimensions (N x C x spatial), got " +
                    shapeStr(x.getShape()));
    if (x.getDimSize(1) == 1)
      return c.fail("logits " + Twine(i) + ": needs at least 2 classes on axis 1, got shape " +
                    shapeStr(x.getShape()));
    SmallVector<int64_t> expected(x.getShape());
    expected[1] = 1;
    if (!sameShape(t.getShape(), expected))
      return c.fail("target " + Twine(i) + ": expected shape " + shapeStr(expected) +
                    " (class indices for logits " + Twine(i) + "), got " +
                    shapeStr(t.getShape()));
  }
  return success();
}

// The upstream gradient of a loss: a scalar, or `expected` for an unreduced loss.
LogicalResult checkLossGrad(const Checker &c, Value grad, Type expected) {
  if (grad.getType() == expected)
    return success();
  auto t = tensorType(grad), e = cast<RankedTensorType>(expected);
  if (t.getElementType().isF32() && e.getElementType().isF32() && sameShape(t.getShape(), e.getShape()))
    return success();
  std::string a, b;
  llvm::raw_string_ostream(a) << grad.getType();
  llvm::raw_string_ostream(b) << expected;
  return c.fail("grad_loss: expected " + b + " (the type of the loss), got " + a);
}
} // namespace

LogicalResult BCEWithLogitsOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &out) {
  if (failed(checkBCE(Checker{loc, getOperationName()}, adaptor)))
    return failure();
  out.push_back(bceResultType(ctx, adaptor.getLogits(), adaptor.getReduction()));
  return success();
}

LogicalResult DiceCEOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                    Adaptor adaptor, SmallVectorImpl<Type> &out) {
  if (failed(checkDiceCE(Checker{loc, getOperationName()}, adaptor)))
    return failure();
  out.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

//===----------------------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------------------===//

namespace {
// Optimizer state tensors have the parameter's type; the schedule inputs are scalars.
LogicalResult checkOptimizer(const Checker &c, Value param, ArrayRef<std::pair<StringRef, Value>> like,
                             ArrayRef<std::pair<StringRef, Value>> scalars) {
  for (auto [name, v] : like)
    if (v.getType() != param.getType()) {
      std::string a, e;
      llvm::raw_string_ostream(a) << v.getType();
      llvm::raw_string_ostream(e) << param.getType();
      return c.fail(name + ": expected " + e + " (the type of param), got " + a);
    }
  for (auto [name, v] : scalars) {
    RankedTensorType t = tensorType(v);
    if (t.getRank() != 0)
      return c.fail(name + ": expected a scalar (rank 0), got shape " + shapeStr(t.getShape()));
  }
  return success();
}
} // namespace

LogicalResult AdamWOp::inferShapes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                   SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(checkOptimizer(c, adaptor.getParam(),
                            {{"grad", adaptor.getGrad()},
                             {"exp_avg", adaptor.getExpAvg()},
                             {"exp_avg_sq", adaptor.getExpAvgSq()}},
                            {{"lr", adaptor.getLr()}, {"step", adaptor.getStep()}})))
    return failure();
  for (double beta : {adaptor.getBeta1().convertToDouble(), adaptor.getBeta2().convertToDouble()})
    if (beta < 0 || beta >= 1)
      return c.fail("betas must be in [0, 1), got " + std::to_string(beta));
  if (adaptor.getEpsilon().convertToDouble() <= 0)
    return c.fail("'epsilon' must be positive");
  out.assign(3, adaptor.getParam().getType());
  return success();
}

LogicalResult SGDOp::inferShapes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                 SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(checkOptimizer(c, adaptor.getParam(),
                            {{"grad", adaptor.getGrad()},
                             {"momentum_buffer", adaptor.getMomentumBuffer()}},
                            {{"lr", adaptor.getLr()}})))
    return failure();
  if (adaptor.getMomentum().convertToDouble() < 0)
    return c.fail("'momentum' must be non-negative");
  if (adaptor.getNesterov() && adaptor.getMomentum().convertToDouble() <= 0)
    return c.fail("Nesterov momentum needs a positive 'momentum'");
  out.assign(2, adaptor.getParam().getType());
  return success();
}

//===----------------------------------------------------------------------------------===//
// Mixed precision
//===----------------------------------------------------------------------------------===//

namespace {
LogicalResult requireScalar(const Checker &c, StringRef name, Value v) {
  RankedTensorType t = tensorType(v);
  if (t.getRank() != 0)
    return c.fail(name + ": expected a scalar (rank 0), got shape " + shapeStr(t.getShape()));
  return success();
}
} // namespace

LogicalResult AnyNonFiniteOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  if (adaptor.getInputs().empty())
    return Checker{loc, getOperationName()}.fail("needs at least one input");
  out.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

LogicalResult SelectOp::inferShapes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                    SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(requireScalar(c, "cond", adaptor.getCond())))
    return failure();
  Type a = adaptor.getOnTrue().getType(), b = adaptor.getOnFalse().getType();
  if (a != b) {
    std::string as, bs;
    llvm::raw_string_ostream(as) << a;
    llvm::raw_string_ostream(bs) << b;
    return c.fail("on_false: expected " + as + " (the type of on_true), got " + bs);
  }
  out.push_back(a);
  return success();
}

LogicalResult UpdateLossScaleOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(requireScalar(c, "scale", adaptor.getScale())) ||
      failed(requireScalar(c, "growth_tracker", adaptor.getGrowthTracker())) ||
      failed(requireScalar(c, "found_inf", adaptor.getFoundInf())))
    return failure();
  double growth = adaptor.getGrowthFactor().convertToDouble();
  double backoff = adaptor.getBackoffFactor().convertToDouble();
  if (!(growth > 1) || !std::isfinite(growth))
    return c.fail("'growth_factor' must be a finite number > 1, got " + std::to_string(growth));
  if (!(backoff > 0 && backoff < 1))
    return c.fail("'backoff_factor' must be in (0, 1), got " + std::to_string(backoff));
  if (adaptor.getGrowthInterval() < 1)
    return c.fail("'growth_interval' must be at least 1, got " +
                  Twine(adaptor.getGrowthInterval()));
  out.push_back(adaptor.getScale().getType());
  out.push_back(adaptor.getGrowthTracker().getType());
  return success();
}

//===----------------------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferShapes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                     SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  RankedTensorType in = tensorType(adaptor.getInput());
  ArrayRef<int64_t> shape = adaptor.getShape();
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return c.fail("'shape' sizes must be non-negative, got " + listStr(shape));
    n *= d;
  }
  if (in.hasStaticShape() && in.getNumElements() != n)
    return c.fail("'shape' " + shapeStr(shape) + " has " + Twine(n) + " elements, the input " +
                  shapeStr(in.getShape()) + " has " + Twine(in.getNumElements()));
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult BroadcastOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  RankedTensorType in = tensorType(adaptor.getInput());
  ArrayRef<int64_t> shape = adaptor.getShape();
  int64_t offset = static_cast<int64_t>(shape.size()) - in.getRank();
  bool ok = offset >= 0;
  for (int64_t i = 0; ok && i < in.getRank(); ++i) {
    int64_t d = in.getDimSize(i);
    ok = d == 1 || isDyn(d) || d == shape[offset + i];
  }
  if (!ok)
    return c.fail("input " + shapeStr(in.getShape()) + " does not broadcast to " +
                  shapeStr(shape) + " (trailing axes must be equal or 1)");
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------------------===//

LogicalResult Conv3dGradWeightOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  StringRef spatial = "spatial axis";
  if (failed(c.rank("input", adaptor.getInput(), 5, "N x C x D x H x W")) ||
      failed(c.rank("grad_output", adaptor.getGradOutput(), 5, "N x C x D x H x W")) ||
      failed(c.axisList("kernel", adaptor.getKernel(), 3, 1, spatial)) ||
      failed(c.axisList("stride", adaptor.getStride(), 3, 1, spatial)) ||
      failed(c.axisList("padding", adaptor.getPadding(), 3, 0, spatial)) ||
      failed(c.axisList("dilation", adaptor.getDilation(), 3, 1, spatial)))
    return failure();
  RankedTensorType in = tensorType(adaptor.getInput()), dy = tensorType(adaptor.getGradOutput());
  if (failed(c.sameElementType("grad_output", dy.getElementType(), in.getElementType(), "input")))
    return failure();
  int64_t groups = static_cast<int64_t>(adaptor.getGroups());
  if (groups < 1)
    return c.fail("'groups' must be at least 1, got " + Twine(groups));
  int64_t cin = in.getDimSize(1), cout = dy.getDimSize(1);
  if (!isDyn(cin) && cin % groups != 0)
    return c.fail("input: " + Twine(cin) + " channels are not divisible by groups = " +
                  Twine(groups));
  if (!isDyn(cout) && cout % groups != 0)
    return c.fail("grad_output: " + Twine(cout) + " channels are not divisible by groups = " +
                  Twine(groups));
  if (!sameDim(in.getDimSize(0), dy.getDimSize(0)))
    return c.fail("grad_output: batch " + Twine(dy.getDimSize(0)) + " differs from the input's " +
                  Twine(in.getDimSize(0)));
  SmallVector<int64_t> shape = {cout, isDyn(cin) ? ShapedType::kDynamic : cin / groups};
  llvm::append_range(shape, adaptor.getKernel());
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

namespace {
// Shared by the normalization gradients: dy like the input; results input, gamma, gamma.
LogicalResult inferNormGrad(const Checker &c, Value input, Value gamma, Value dy,
                            SmallVectorImpl<Type> &out) {
  RankedTensorType in = tensorType(input), g = tensorType(dy);
  if (failed(c.sameElementType("grad_output", g.getElementType(), in.getElementType(), "input")))
    return failure();
  if (!sameShape(g.getShape(), in.getShape()))
    return c.fail("grad_output: expected shape " + shapeStr(in.getShape()) +
                  " (that of the input), got " + shapeStr(g.getShape()));
  out.assign({input.getType(), gamma.getType(), gamma.getType()});
  return success();
}
} // namespace

LogicalResult GroupNormGradOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  SmallVector<Type> ignored;
  if (failed(inferChannelAffine(c, adaptor.getInput(), adaptor.getGamma(), adaptor.getGamma(),
                                ignored)))
    return failure();
  if (failed(checkNormGroups(c, adaptor.getInput(), adaptor.getGroups())))
    return failure();
  RankedTensorType stats = statisticsType(adaptor.getInput(), adaptor.getGroups());
  StringRef of = "N x groups, as group_norm saves them";
  if (failed(sameTypeAs(c, "mean", adaptor.getMean(), stats, of)) ||
      failed(sameTypeAs(c, "rstd", adaptor.getRstd(), stats, of)))
    return failure();
  return inferNormGrad(c, adaptor.getInput(), adaptor.getGamma(), adaptor.getGradOutput(), out);
}

LogicalResult ChannelLayerNormGradOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  SmallVector<Type> ignored;
  if (failed(inferChannelAffine(c, adaptor.getInput(), adaptor.getGamma(), adaptor.getGamma(),
                                ignored)))
    return failure();
  return inferNormGrad(c, adaptor.getInput(), adaptor.getGamma(), adaptor.getGradOutput(), out);
}

LogicalResult GRNGradOp::inferShapes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                     SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(c.rank("input", adaptor.getInput(), 5, "N x C x D x H x W")))
    return failure();
  RankedTensorType in = tensorType(adaptor.getInput()), g = tensorType(adaptor.getGamma());
  SmallVector<int64_t> expected = {1, in.getDimSize(1), 1, 1, 1};
  if (!sameShape(g.getShape(), expected))
    return c.fail("gamma: expected shape " + shapeStr(expected) + ", got " + shapeStr(g.getShape()));
  return inferNormGrad(c, adaptor.getInput(), adaptor.getGamma(), adaptor.getGradOutput(), out);
}

LogicalResult GeluGradOp::inferShapes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                      SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  return inferNormGrad(c, adaptor.getInput(), adaptor.getInput(), adaptor.getGradOutput(), out)
             .succeeded()
             ? (out.resize(1), success())
             : failure();
}

LogicalResult ExtremumGradOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  SmallVector<Type> forward;
  if (failed(inferBroadcastType(loc, getOperationName(), adaptor.getLhs().getType(),
                                adaptor.getRhs().getType(), forward)))
    return failure();
  Checker c{loc, getOperationName()};
  if (failed(sameTypeAs(c, "grad_output", adaptor.getGradOutput(),
                        cast<RankedTensorType>(forward[0]), "lhs and rhs broadcast", "lhs")))
    return failure();
  out.assign(2, adaptor.getGradOutput().getType());
  return success();
}

LogicalResult ReduceExtremumGradOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  RankedTensorType in = tensorType(adaptor.getInput());
  SmallVector<int64_t> shape;
  if (failed(reducedShape(c, in, adaptor.getAxes(), adaptor.getKeepdims(), shape)))
    return failure();
  auto reduced = RankedTensorType::get(shape, in.getElementType());
  StringRef of = "the input reduced over 'axes'";
  if (failed(sameTypeAs(c, "extremum", adaptor.getExtremum(), reduced, of)) ||
      failed(sameTypeAs(c, "grad_output", adaptor.getGradOutput(), reduced, of)))
    return failure();
  out.push_back(in);
  return success();
}

LogicalResult SliceGradOp::inferShapes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  RankedTensorType dy = tensorType(adaptor.getGradOutput());
  size_t rank = dy.getRank();
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), strides = adaptor.getStrides(),
                    shape = adaptor.getShape();
  if (failed(c.axisList("offsets", offsets, rank, 0)) ||
      failed(c.axisList("strides", strides, rank, 1)) ||
      failed(c.axisList("shape", shape, rank, 0)))
    return failure();
  for (size_t i = 0; i < rank; ++i) {
    int64_t n = dy.getDimSize(i);
    if (isDyn(n) || n == 0)
      continue;
    int64_t last = offsets[i] + (n - 1) * strides[i];
    if (last >= shape[i])
      return c.fail("grad_output: the box reaches index " + Twine(last) + " on axis " +
                    Twine(i) + ", but 'shape' has only " + Twine(shape[i]) +
                    " elements there (" + shapeStr(shape) + ")");
  }
  out.push_back(RankedTensorType::get(shape, dy.getElementType()));
  return success();
}

LogicalResult BCEWithLogitsGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(checkBCE(c, adaptor)) ||
      failed(checkLossGrad(c, adaptor.getGradLoss(),
                           bceResultType(ctx, adaptor.getLogits(), adaptor.getReduction()))))
    return failure();
  out.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult DiceCEGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Checker c{loc, getOperationName()};
  if (failed(checkDiceCE(c, adaptor)) ||
      failed(checkLossGrad(c, adaptor.getGradLoss(),
                           RankedTensorType::get({}, Float32Type::get(ctx)))))
    return failure();
  for (Value l : adaptor.getLogits())
    out.push_back(l.getType());
  return success();
}

//===----------------------------------------------------------------------------------===//
// Result-type compatibility: a declared `?` accepts any inferred size.
//===----------------------------------------------------------------------------------===//

bool mlir::med::areCompatibleResultTypes(TypeRange inferred, TypeRange declared) {
  if (inferred.size() != declared.size())
    return false;
  for (auto [a, b] : llvm::zip(inferred, declared)) {
    // Inference failed silently; the op's verifier reports why.
    if (isa<UnrankedTensorType>(a))
      continue;
    auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
    if (!ta || !tb) {
      if (a != b)
        return false;
      continue;
    }
    if (ta.getElementType() != tb.getElementType() || !sameShape(ta.getShape(), tb.getShape()))
      return false;
  }
  return true;
}

LogicalResult mlir::med::verifyResultTypes(Operation *op, TypeRange inferred) {
  if (areCompatibleResultTypes(inferred, op->getResultTypes()))
    return success();
  InFlightDiagnostic diag = op->emitOpError("result: expected type ");
  llvm::interleaveComma(inferred, diag);
  diag << " (inferred from the operands), got ";
  llvm::interleaveComma(op->getResultTypes(), diag);
  return diag;
}

#define GET_OP_CLASSES
#include "med/IR/MedOps.cpp.inc"
