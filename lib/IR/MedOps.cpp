//===- MedOps.cpp - shape rules and verifiers of the med ops -------------------===//
//
// Each op's inferShapes is its shape rule and its verifier (see Med_ShapedOp in MedOps.td).
// The rules themselves live in med/ShapeRules.h, free of MLIR, so that the runtime re-checks
// compiled plans with the same rules; inferShapes converts the operand types and attributes,
// calls the rule and reports its message (naming the operand or attribute and the expected vs
// actual value) at the op's location. Most ops name their rule in ODS (`shapeRule`): their
// inferShapes is generated (med/OpDefinitions.inc), as is the plan verifier's call.
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

#include <cmath>
#include <limits>

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
  template <typename T> static const T *ptr(const std::optional<T> &t) {
    return t ? &*t : nullptr;
  }
  static shape::Dims dims(ArrayRef<int64_t> a) { return shape::Dims(a.begin(), a.end()); }
  static std::optional<shape::Dims> optionalDims(std::optional<ArrayRef<int64_t>> a) {
    return a ? std::optional(dims(*a)) : std::nullopt;
  }

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
  if (getInit() == InitKind::constant) {
    FloatAttr value = getValueAttr();
    if (!value)
      return emitOpError("init constant needs its value, e.g. `init constant value 2.5e-01`");
    double v = value.getValueAsDouble();
    if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
      return emitOpError("init constant value must be finite in f32, got ") << v;
  } else if (getValueAttr()) {
    return emitOpError("init ") << stringifyInitKind(getInit()) << " takes no value";
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
// The shape rules written in ODS (`shapeRule`), and the rules written here
//===----------------------------------------------------------------------------------===//

#include "med/OpDefinitions.inc"

// all_reduce verifies its declared results (one per input), and its bucket index.
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

// The statistics keep f32 (the operands read in f32 come from ODS `wideOperands`).
bool GroupNormStatsOp::keepsF32Result(unsigned) { return true; } // both are statistics

// label_regions' regions are a list of lists, which no `shapeRule` argument converts.
LogicalResult LabelRegionsOp::inferShapes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Rule r{ctx, loc, getOperationName()};
  shape::Types types;
  std::vector<shape::Dims> regions;
  for (Attribute a : adaptor.getRegions())
    regions.push_back(r.dims(cast<DenseI64ArrayAttr>(a).asArrayRef()));
  return r.verdict(shape::labelRegions(r.type(adaptor.getInput()), regions, types), types, out);
}

#define GET_OP_CLASSES
#include "med/IR/MedOps.cpp.inc"
