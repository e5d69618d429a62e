//===- MedFolds.cpp - folds of the med ops (what `canonicalize` simplifies) ---------===//
//
// med-autodiff gives a parameter that does not influence the loss a zero gradient (a
// constant), and clipping, the gradient norm and the optimizer then carry it around. These
// folds, applied by the upstream `canonicalize` pass at the head of medc's optimizing
// pipeline, remove what flows from such zeros and a few identities:
//
//  * x + 0, 0 + x, x − 0, x · 1, 1 · x, x / 1 → x (only where x already has the result's
//    type: an identity never stands in for a broadcast);
//  * x · 0, 0 · x → zeros; a reduction (sum, mean, max, min) of zeros → zeros;
//  * a reshape or broadcast to the type it already has → its input; a reshape of a reshape
//    and a broadcast of a broadcast → one; either of a splat constant → a splat constant.
//
// Float semantics: zero is absorbing, as for a gradient that is zero by construction (x · 0
// is 0 even where x could be infinite or NaN, as with fast-math's no-NaNs), and the sign of
// a zero is not kept (x + 0 is x also for x = −0). Every other value is computed exactly as
// before.
//
//===------------------------------------------------------------------------------===//

#include "med/IR/MedDialect.h"
#include "med/IR/MedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::med;

namespace {
/// The value of a splat float constant, if `a` (a folded operand) is one.
std::optional<APFloat> splat(Attribute a) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(a);
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>();
}

bool isZero(Attribute a) {
  std::optional<APFloat> v = splat(a);
  return v && v->isZero();
}

bool isOne(Attribute a) {
  std::optional<APFloat> v = splat(a);
  return v && v->isExactlyValue(1.0);
}

/// `v` in place of `result` where the types agree (else no fold).
OpFoldResult ifSameType(Value v, Value result) {
  return v.getType() == result.getType() ? OpFoldResult(v) : OpFoldResult();
}

/// Zeros of `result`'s type (static shapes only: a constant has one).
OpFoldResult zerosOf(Value result) {
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!type || !type.hasStaticShape() || !isa<FloatType>(type.getElementType()))
    return {};
  return DenseElementsAttr::get(
      type, APFloat::getZero(cast<FloatType>(type.getElementType()).getFloatSemantics()));
}

/// A splat constant `a` given `result`'s shape (reshape and broadcast of a splat).
OpFoldResult resizedSplat(Attribute a, Value result) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(a);
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!dense || !dense.isSplat() || !type || !type.hasStaticShape())
    return {};
  return dense.resizeSplat(type);
}
} // namespace

Operation *MedDialect::materializeConstant(OpBuilder &b, Attribute value, Type type,
                                           Location loc) {
  auto elements = dyn_cast<DenseElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return b.create<ConstantOp>(loc, elements);
}

OpFoldResult AddOp::fold(FoldAdaptor a) {
  if (isZero(a.getRhs()))
    return ifSameType(getLhs(), getResult());
  if (isZero(a.getLhs()))
    return ifSameType(getRhs(), getResult());
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor a) {
  return isZero(a.getRhs()) ? ifSameType(getLhs(), getResult()) : OpFoldResult();
}

OpFoldResult MulOp::fold(FoldAdaptor a) {
  if (isZero(a.getLhs()) || isZero(a.getRhs()))
    return zerosOf(getResult());
  if (isOne(a.getRhs()))
    return ifSameType(getLhs(), getResult());
  if (isOne(a.getLhs()))
    return ifSameType(getRhs(), getResult());
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor a) {
  return isOne(a.getRhs()) ? ifSameType(getLhs(), getResult()) : OpFoldResult();
}

OpFoldResult ReduceOp::fold(FoldAdaptor a) {
  // Not over no elements: a mean of nothing is NaN, not 0.
  auto in = cast<RankedTensorType>(getInput().getType());
  if (isZero(a.getInput()) && in.hasStaticShape() && in.getNumElements() > 0)
    return zerosOf(getResult());
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor a) {
  if (OpFoldResult same = ifSameType(getInput(), getResult()))
    return same;
  if (OpFoldResult c = resizedSplat(a.getInput(), getResult()))
    return c;
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor a) {
  if (OpFoldResult same = ifSameType(getInput(), getResult()))
    return same;
  if (OpFoldResult c = resizedSplat(a.getInput(), getResult()))
    return c;
  // Broadcasting to s1, then to s2, is broadcasting to s2: each axis of the input is 1 or
  // equals s1's, which is 1 or equals s2's.
  if (auto inner = getInput().getDefiningOp<BroadcastOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}
