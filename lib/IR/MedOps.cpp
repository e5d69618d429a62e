//===- MedOps.cpp - shape rules and verifiers of the med ops -------------------===//
//
// Each op's inferShapes is its shape rule and its verifier (see Med_ShapedOp in MedOps.td).
// The rules themselves live in med/ShapeRules.h, free of MLIR, so that the runtime re-checks
// compiled plans with the same rules; inferShapes converts the operand types and attributes,
// calls the rule and reports its message (naming the operand or attribute and the expected vs
// actual value) at the op's location.
//
//===----------------------------------------------------------------------------------===//

#include "med/IR/MedOps.h"
#include "med/ShapeRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::med;
namespace shape = ::med::shape;

static_assert(shape::kDynamic == ShapedType::kDynamic, "the rules' unknown size is MLIR's `?`");

//===----------------------------------------------------------------------------------===//
// Running the rules of med/ShapeRules.h
//===----------------------------------------------------------------------------------===//

namespace {

bool sameShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y)
      return false;
  return true;
}

// Converts operand types to the rules' plain types and the rule's results back, and reports
// a rule's message prefixed like the verifier's own ("'med.conv3d' op ...").
struct Rule {
  MLIRContext *ctx;
  std::optional<Location> loc;
  StringRef opName;
  SmallVector<std::pair<std::string, Type>, 4> elements; ///< spelling -> element type seen

  shape::TensorType type(Value v) { return type(v.getType()); }
  shape::TensorType type(Type tensor) {
    auto t = cast<RankedTensorType>(tensor);
    std::string name;
    llvm::raw_string_ostream(name) << t.getElementType();
    if (llvm::none_of(elements, [&](auto &e) { return e.first == name; }))
      elements.emplace_back(name, t.getElementType());
    return {dims(t.getShape()), name};
  }
  shape::Types types(ValueRange vs) {
    shape::Types out;
    for (Value v : vs)
      out.push_back(type(v));
    return out;
  }
  std::optional<shape::TensorType> optional(Value v) {
    return v ? std::optional(type(v)) : std::nullopt;
  }
  static const shape::TensorType *ptr(const std::optional<shape::TensorType> &t) {
    return t ? &*t : nullptr;
  }
  static shape::Dims dims(ArrayRef<int64_t> a) { return shape::Dims(a.begin(), a.end()); }

  // The rule's verdict: its message at `loc`, or the inferred types in `out`.
  LogicalResult verdict(const shape::Error &error, const shape::Types &types,
                        SmallVectorImpl<Type> &out) {
    if (!error.empty())
      return emitOptionalError(loc, "'", opName, "' op ", error);
    for (const shape::TensorType &t : types) {
      Type element = Float32Type::get(ctx); // the rules' own results (losses) are f32
      for (auto &[name, type] : elements)
        if (name == t.element)
          element = type;
      out.push_back(RankedTensorType::get(t.shape, element));
    }
    return success();
  }
};

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

/// The type of the state tensor `name` (a med.parameter or a med.flat_buffer), or null.
static Type stateType(SymbolTableCollection &symbols, Operation *user, FlatSymbolRefAttr name) {
  Operation *decl = symbols.lookupNearestSymbolFrom(user, name);
  if (auto p = dyn_cast_or_null<ParameterOp>(decl))
    return p.getType();
  if (auto f = dyn_cast_or_null<FlatBufferOp>(decl))
    return f.getType();
  return {};
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Type declared = stateType(symbols, *this, getNameAttr());
  if (!declared)
    return emitOpError("parameter ") << getNameAttr()
                                     << " is not declared (no med.parameter or med.flat_buffer "
                                        "of that name)";
  if (declared != getType())
    return emitOpError("result type ")
           << getType() << " differs from the declared type " << declared << " of parameter "
           << getNameAttr();
  return success();
}

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Type declared = stateType(symbols, *this, getNameAttr());
  if (!declared)
    return emitOpError("parameter ") << getNameAttr()
                                     << " is not declared (no med.parameter or med.flat_buffer "
                                        "of that name)";
  if (declared != getValue().getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from the declared type " << declared
           << " of parameter " << getNameAttr();
  return success();
}

LogicalResult FlatBufferOp::verifySymbolUses(SymbolTableCollection &symbols) {
  RankedTensorType type = getTensorType();
  if (type.getRank() != 1 || !type.hasStaticShape() || !type.getElementType().isF32())
    return emitOpError("type must be a 1-D f32 tensor of static size, got ") << type;
  if (getAlignment() < 1)
    return emitOpError("alignment must be positive, got ") << getAlignment();
  ArrayRef<int64_t> offsets = getOffsets();
  if (offsets.size() != getMembers().size())
    return emitOpError("needs one offset per member (") << getMembers().size() << "), got "
                                                        << offsets.size();
  int64_t end = 0;
  for (auto [attr, offset] : llvm::zip(getMembers(), offsets)) {
    auto name = cast<FlatSymbolRefAttr>(attr);
    auto member = symbols.lookupNearestSymbolFrom<ParameterOp>(*this, name);
    if (!member)
      return emitOpError("member ") << name << " is not a med.parameter";
    if (!member.getTensorType().getElementType().isF32())
      return emitOpError("member ") << name << " must have f32 elements, got "
                                    << member.getType();
    if (offset < end || offset % getAlignment() != 0)
      return emitOpError("member ") << name << " at offset " << offset
                                    << ": expected a multiple of " << getAlignment()
                                    << " at or after " << end << " (the end of the one before)";
    end = offset + member.getTensorType().getNumElements();
    if (end > type.getNumElements())
      return emitOpError("member ") << name << " ends at " << end << ", beyond the size "
                                    << type.getNumElements();
  }
  // A tensor lives in one place: no member is in a flat buffer declared before this one.
  llvm::DenseSet<Attribute> mine(getMembers().begin(), getMembers().end());
  for (auto other : (*this)->getParentOp()->getRegion(0).getOps<FlatBufferOp>()) {
    if (other == *this)
      break;
    for (Attribute m : other.getMembers())
      if (mine.contains(m))
        return emitOpError("member ")
               << m << " is also a member of " << FlatSymbolRefAttr::get(other.getSymNameAttr());
  }
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

LogicalResult Conv3dOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                    Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  auto bias = r.optional(adaptor.getBias());
  return r.verdict(shape::conv3d(r.type(adaptor.getInput()), r.type(adaptor.getWeight()),
                                 r.ptr(bias), r.dims(adaptor.getStride()),
                                 r.dims(adaptor.getPadding()), r.dims(adaptor.getDilation()),
                                 {0, 0, 0}, static_cast<int64_t>(adaptor.getGroups()),
                                 /*transposed=*/false, types),
                   types, out);
}

LogicalResult Conv3dTransposeOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  auto bias = r.optional(adaptor.getBias());
  return r.verdict(shape::conv3d(r.type(adaptor.getInput()), r.type(adaptor.getWeight()),
                                 r.ptr(bias), r.dims(adaptor.getStride()),
                                 r.dims(adaptor.getPadding()), r.dims(adaptor.getDilation()),
                                 r.dims(adaptor.getOutputPadding()),
                                 static_cast<int64_t>(adaptor.getGroups()),
                                 /*transposed=*/true, types),
                   types, out);
}

LogicalResult ShiftSumOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  auto bias = r.optional(adaptor.getBias());
  return r.verdict(shape::shiftSum(r.type(adaptor.getInput()), r.type(adaptor.getWeight()),
                                   r.ptr(bias), adaptor.getMirrored(), types),
                   types, out);
}

//===----------------------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------------------===//

LogicalResult GroupNormOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::groupNorm(r.type(adaptor.getInput()), r.type(adaptor.getGamma()),
                                    r.type(adaptor.getBeta()),
                                    static_cast<int64_t>(adaptor.getGroups()),
                                    adaptor.getEpsilon().convertToDouble(),
                                    adaptor.getSaveStatistics(), types),
                   types, out);
}

LogicalResult ChannelLayerNormOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::channelLayerNorm(r.type(adaptor.getInput()), r.type(adaptor.getGamma()),
                                           r.type(adaptor.getBeta()),
                                           adaptor.getEpsilon().convertToDouble(), types),
                   types, out);
}

LogicalResult GRNOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
                                 SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::grn(r.type(adaptor.getInput()), r.type(adaptor.getGamma()),
                              r.type(adaptor.getBeta()), types),
                   types, out);
}

//===----------------------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------------------===//

LogicalResult mlir::med::inferBroadcastType(std::optional<Location> loc, StringRef opName,
                                            Type lhsType, Type rhsType,
                                            SmallVectorImpl<Type> &out) {
  Rule r{lhsType.getContext(), loc, opName};
  shape::Types types;
  return r.verdict(shape::broadcastBinary(r.type(lhsType), r.type(rhsType), types), types, out);
}

//===----------------------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------------------===//

LogicalResult PadOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
                                 SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::pad(r.type(adaptor.getInput()), r.dims(adaptor.getLow()),
                              r.dims(adaptor.getHigh()), types),
                   types, out);
}

LogicalResult SliceOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                   Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  std::optional<shape::Dims> strides;
  if (auto s = adaptor.getStrides())
    strides = r.dims(*s);
  return r.verdict(shape::slice(r.type(adaptor.getInput()), r.dims(adaptor.getOffsets()),
                                r.dims(adaptor.getSizes()), strides ? &*strides : nullptr,
                                types),
                   types, out);
}

LogicalResult ConcatOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                    Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::concat(r.types(adaptor.getInputs()),
                                 static_cast<int64_t>(adaptor.getAxis()), types),
                   types, out);
}

LogicalResult PackOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
                                  SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::pack(r.types(adaptor.getInputs()), Rule::dims(adaptor.getOffsets()),
                               adaptor.getSize(), types),
                   types, out);
}

LogicalResult AllReduceOp::verify() {
  Rule r{getContext(), getLoc(), getOperationName()};
  shape::Types types;
  SmallVector<Type> out;
  if (failed(r.verdict(shape::allReduce(r.types(getInputs()), Rule::dims(getOffsets()),
                                        getSize(), types),
                       types, out)))
    return failure();
  if (static_cast<int64_t>(getBucket()) < 0)
    return emitOpError("bucket must be non-negative, got ") << static_cast<int64_t>(getBucket());
  return verifyResultTypes(getOperation(), out);
}

//===----------------------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------------------===//

LogicalResult ReduceOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                    Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::reduce(r.type(adaptor.getInput()), r.dims(adaptor.getAxes()),
                                 adaptor.getKeepdims(), types),
                   types, out);
}

//===----------------------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------------------===//

namespace {
// bce_with_logits and its gradient (`gradLoss` given) share one rule.
template <typename Adaptor>
LogicalResult inferBCE(Rule &r, Adaptor adaptor, Value gradLoss, SmallVectorImpl<Type> &out) {
  shape::Types types;
  auto mask = r.optional(adaptor.getMask()), posWeight = r.optional(adaptor.getPosWeight()),
       grad = r.optional(gradLoss);
  return r.verdict(shape::bceWithLogits(r.type(adaptor.getLogits()), r.type(adaptor.getTarget()),
                                        r.ptr(mask), r.ptr(posWeight),
                                        adaptor.getReduction() == LossReduction::none,
                                        adaptor.getAutoPosWeight(),
                                        adaptor.getMaxPosWeight().convertToDouble(),
                                        r.ptr(grad), types),
                   types, out);
}

template <typename Adaptor>
LogicalResult inferDiceCE(Rule &r, Adaptor adaptor, Value gradLoss, SmallVectorImpl<Type> &out) {
  shape::Types types;
  auto grad = r.optional(gradLoss);
  return r.verdict(shape::diceCE(r.types(adaptor.getLogits()), r.types(adaptor.getTargets()),
                                 std::vector<double>(adaptor.getWeights().begin(), adaptor.getWeights().end()), r.ptr(grad), types),
                   types, out);
}
} // namespace

LogicalResult BCEWithLogitsOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  return inferBCE(r, adaptor, Value(), out);
}

LogicalResult DiceCEOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                    Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  return inferDiceCE(r, adaptor, Value(), out);
}

//===----------------------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------------------===//

LogicalResult AdamWOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
                                   SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::adamw(r.type(adaptor.getParam()), r.type(adaptor.getGrad()),
                                r.type(adaptor.getExpAvg()), r.type(adaptor.getExpAvgSq()),
                                r.type(adaptor.getLr()), r.type(adaptor.getStep()),
                                adaptor.getBeta1().convertToDouble(),
                                adaptor.getBeta2().convertToDouble(),
                                adaptor.getEpsilon().convertToDouble(), types),
                   types, out);
}

LogicalResult SGDOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
                                 SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::sgd(r.type(adaptor.getParam()), r.type(adaptor.getGrad()),
                              r.type(adaptor.getMomentumBuffer()), r.type(adaptor.getLr()),
                              adaptor.getMomentum().convertToDouble(), adaptor.getNesterov(),
                              types),
                   types, out);
}

//===----------------------------------------------------------------------------------===//
// Mixed precision
//===----------------------------------------------------------------------------------===//

LogicalResult AnyNonFiniteOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::anyNonFinite(r.types(adaptor.getInputs()), types), types, out);
}

LogicalResult SumSquaresOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::sumSquares(r.types(adaptor.getInputs()), types), types, out);
}

LogicalResult RandomOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                    Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  if (adaptor.getStream() > UINT32_MAX)
    return emitOptionalError(loc, "'", getOperationName(),
                             "' op 'stream' must be a 32-bit counter word, got ",
                             static_cast<int64_t>(adaptor.getStream()));
  if (double p = adaptor.getProbability().convertToDouble(); !(p >= 0 && p <= 1))
    return emitOptionalError(loc, "'", getOperationName(),
                             "' op 'probability' must be in [0, 1], got ", p);
  shape::Types types;
  std::optional<shape::Dims> sampleShape;
  if (auto given = adaptor.getSampleShape())
    sampleShape = Rule::dims(*given);
  return r.verdict(shape::random(r.type(adaptor.getKey()), r.type(adaptor.getLike()),
                                 sampleShape ? &*sampleShape : nullptr, types),
                   types, out);
}

LogicalResult GaussianBlurOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::sampleTransform("sigma", r.type(adaptor.getInput()),
                                          r.type(adaptor.getSigma()), true, types),
                   types, out);
}

LogicalResult SimulateLowResolutionOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::sampleTransform("scale", r.type(adaptor.getInput()),
                                          r.type(adaptor.getScale()), true, types),
                   types, out);
}

LogicalResult MirrorOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                    Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::sampleTransform("flip", r.type(adaptor.getInput()),
                                          r.type(adaptor.getFlip()), false, types),
                   types, out);
}

LogicalResult AffineMatrixOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  std::optional<shape::TensorType> shear = r.optional(adaptor.getShear());
  return r.verdict(shape::affineMatrix(r.type(adaptor.getAngles()), r.type(adaptor.getScales()),
                                       Rule::ptr(shear), types),
                   types, out);
}

LogicalResult OrientationMatrixOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::orientationMatrix(r.type(adaptor.getU()), types), types, out);
}

LogicalResult ShiftSlicesOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(
      shape::shiftSlices(r.type(adaptor.getInput()), r.type(adaptor.getShift()), types), types,
      out);
}

LogicalResult SelectOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
                                    SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::select(r.type(adaptor.getCond()), r.type(adaptor.getOnTrue()),
                                 r.type(adaptor.getOnFalse()), types),
                   types, out);
}

LogicalResult UpdateLossScaleOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::updateLossScale(r.type(adaptor.getScale()),
                                          r.type(adaptor.getGrowthTracker()),
                                          r.type(adaptor.getFoundInf()),
                                          adaptor.getGrowthFactor().convertToDouble(),
                                          adaptor.getBackoffFactor().convertToDouble(),
                                          adaptor.getGrowthInterval(), types),
                   types, out);
}

//===----------------------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                     Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::reshape(r.type(adaptor.getInput()), r.dims(adaptor.getShape()), types),
                   types, out);
}

LogicalResult BroadcastOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::broadcastTo(r.type(adaptor.getInput()), r.dims(adaptor.getShape()),
                                      types),
                   types, out);
}

//===----------------------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------------------===//

LogicalResult Conv3dGradWeightOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::conv3dGradWeight(r.type(adaptor.getInput()),
                                           r.type(adaptor.getGradOutput()),
                                           r.dims(adaptor.getKernel()), r.dims(adaptor.getStride()),
                                           r.dims(adaptor.getPadding()),
                                           r.dims(adaptor.getDilation()),
                                           static_cast<int64_t>(adaptor.getGroups()), types),
                   types, out);
}

LogicalResult ShiftSumGradWeightOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::shiftSumGradWeight(r.type(adaptor.getInput()),
                                             r.type(adaptor.getGradOutput()),
                                             r.dims(adaptor.getKernel()), types),
                   types, out);
}

LogicalResult GroupNormStatsOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::groupNormStats(r.type(adaptor.getInput()),
                                         static_cast<int64_t>(adaptor.getGroups()),
                                         adaptor.getEpsilon().convertToDouble(), types),
                   types, out);
}

LogicalResult GroupNormApplyOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::groupNormApply(r.type(adaptor.getInput()), r.type(adaptor.getMean()),
                                         r.type(adaptor.getRstd()), r.type(adaptor.getGamma()),
                                         r.type(adaptor.getBeta()),
                                         static_cast<int64_t>(adaptor.getGroups()), types),
                   types, out);
}

LogicalResult GroupNormGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::groupNormGrad(r.type(adaptor.getInput()), r.type(adaptor.getGamma()),
                                        r.type(adaptor.getMean()), r.type(adaptor.getRstd()),
                                        r.type(adaptor.getGradOutput()),
                                        static_cast<int64_t>(adaptor.getGroups()), types),
                   types, out);
}

LogicalResult ChannelLayerNormGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::channelLayerNormGrad(r.type(adaptor.getInput()),
                                               r.type(adaptor.getGamma()),
                                               r.type(adaptor.getGradOutput()), types),
                   types, out);
}

LogicalResult GRNGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                     Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::grnGrad(r.type(adaptor.getInput()), r.type(adaptor.getGamma()),
                                  r.type(adaptor.getGradOutput()), types),
                   types, out);
}

LogicalResult GeluGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::geluGrad(r.type(adaptor.getInput()), r.type(adaptor.getGradOutput()),
                                   types),
                   types, out);
}

LogicalResult ExtremumGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::extremumGrad(r.type(adaptor.getLhs()), r.type(adaptor.getRhs()),
                                       r.type(adaptor.getGradOutput()), types),
                   types, out);
}

LogicalResult ReduceExtremumGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::reduceExtremumGrad(r.type(adaptor.getInput()),
                                             r.type(adaptor.getExtremum()),
                                             r.type(adaptor.getGradOutput()),
                                             r.dims(adaptor.getAxes()), adaptor.getKeepdims(),
                                             types),
                   types, out);
}

LogicalResult SliceGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::sliceGrad(r.type(adaptor.getGradOutput()), r.dims(adaptor.getOffsets()),
                                    r.dims(adaptor.getStrides()), r.dims(adaptor.getShape()),
                                    types),
                   types, out);
}

LogicalResult BCEWithLogitsGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  return inferBCE(r, adaptor, adaptor.getGradLoss(), out);
}

LogicalResult DiceCEGradOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  return inferDiceCE(r, adaptor, adaptor.getGradLoss(), out);
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

/// A reshape shares its input's buffer (the executors alias it), so it is a view of it.
Value ReshapeOp::getViewSource() { return getInput(); }

//===----------------------------------------------------------------------------------===//
// Normalizations under mixed precision: the operands read in f32 (NormalizationOpInterface)
//===----------------------------------------------------------------------------------===//

bool GroupNormOp::readsF32Operand(unsigned index) {
  return index == getGammaMutable().getOperandNumber() ||
         index == getBetaMutable().getOperandNumber();
}
bool GroupNormStatsOp::readsF32Operand(unsigned) { return false; }
bool GroupNormStatsOp::keepsF32Result(unsigned) { return true; } // both are statistics
bool GroupNormApplyOp::readsF32Operand(unsigned index) {
  return index != getInputMutable().getOperandNumber();
}
bool ChannelLayerNormOp::readsF32Operand(unsigned index) {
  return index == getGammaMutable().getOperandNumber() ||
         index == getBetaMutable().getOperandNumber();
}
bool GRNOp::readsF32Operand(unsigned index) {
  return index == getGammaMutable().getOperandNumber() ||
         index == getBetaMutable().getOperandNumber();
}
bool GroupNormGradOp::readsF32Operand(unsigned index) {
  return index == getGammaMutable().getOperandNumber() ||
         index == getMeanMutable().getOperandNumber() ||
         index == getRstdMutable().getOperandNumber();
}
bool ChannelLayerNormGradOp::readsF32Operand(unsigned index) {
  return index == getGammaMutable().getOperandNumber();
}
bool GRNGradOp::readsF32Operand(unsigned index) {
  return index == getGammaMutable().getOperandNumber();
}

//===----------------------------------------------------------------------------------===//
// Label transforms (MedLabelOps.td)
//===----------------------------------------------------------------------------------===//

LogicalResult AffinitiesOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  std::optional<shape::Dims> low, size;
  if (auto a = adaptor.getCropLow())
    low = r.dims(*a);
  if (auto a = adaptor.getCropSize())
    size = r.dims(*a);
  return r.verdict(shape::affinities(r.type(adaptor.getSeg()), r.dims(adaptor.getOffsets()),
                                     low ? &*low : nullptr, size ? &*size : nullptr, types),
                   types, out);
}

LogicalResult RemoveLabelOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::removeLabel(r.type(adaptor.getInput()),
                                      static_cast<int64_t>(adaptor.getLabel()),
                                      static_cast<int64_t>(adaptor.getReplaceWith()), types),
                   types, out);
}

LogicalResult LabelRegionsOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  std::vector<shape::Dims> regions;
  for (Attribute a : adaptor.getRegions())
    regions.push_back(r.dims(cast<DenseI64ArrayAttr>(a).asArrayRef()));
  return r.verdict(shape::labelRegions(r.type(adaptor.getInput()), regions, types), types, out);
}

LogicalResult DownsampleNearestOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  return r.verdict(shape::downsampleNearest(r.type(adaptor.getInput()),
                                            r.dims(adaptor.getSize()), types),
                   types, out);
}

LogicalResult SpatialTransformOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  shape::Dims labels;
  if (auto l = adaptor.getLabels())
    labels.assign(l->begin(), l->end());
  return r.verdict(shape::spatialTransform(
                       r.type(adaptor.getInput()), r.type(adaptor.getMatrix()),
                       Rule::dims(adaptor.getShape()),
                       stringifyResampleMode(adaptor.getMode()).str(),
                       stringifyBorderMode(adaptor.getBorder()).str(),
                       adaptor.getValue().convertToDouble(), labels, types),
                   types, out);
}

#define GET_OP_CLASSES
#include "med/IR/MedOps.cpp.inc"
