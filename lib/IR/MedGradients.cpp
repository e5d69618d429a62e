//===- MedGradients.cpp - reverse-mode gradient rules of the med ops ------------===//
//
// One buildGradients per differentiable op (GradientOpInterface). Rules need static
// shapes (med-autodiff runs after med-specialize). Heavy backward work is emitted as the
// dedicated gradient ops (conv3d_grad_weight, *_norm_grad, gelu_grad, extremum_grad,
// reduce_extremum_grad, slice_grad, loss gradients) that the backends implement; the rest is
// expressed with forward ops.
//
//===----------------------------------------------------------------------------------===//

#include "med/IR/MedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <numeric>

using namespace mlir;
using namespace mlir::med;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value scalar(OpBuilder &b, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(
                                       type, b.getFloatAttr(elementType, value).getValue()));
}

// Sums a broadcast gradient back to the shape of the operand it came from.
Value sumTo(OpBuilder &b, Location loc, Value grad, RankedTensorType target) {
  RankedTensorType type = typeOf(grad);
  if (type.getShape() == target.getShape())
    return grad;
  int64_t extra = type.getRank() - target.getRank();
  if (extra > 0) {
    SmallVector<int64_t> leading(extra);
    std::iota(leading.begin(), leading.end(), 0);
    grad = b.create<ReduceOp>(loc, ReduceKind::sum, grad, leading, /*keepdims=*/false);
    type = typeOf(grad);
  }
  SmallVector<int64_t> ones;
  for (int64_t i = 0; i < target.getRank(); ++i)
    if (target.getDimSize(i) == 1 && type.getDimSize(i) != 1)
      ones.push_back(i);
  if (!ones.empty())
    grad = b.create<ReduceOp>(loc, ReduceKind::sum, grad, ones, /*keepdims=*/true);
  return grad;
}

LogicalResult requireStatic(Operation *op) {
  for (Type t : op->getOperandTypes())
    if (auto r = dyn_cast<RankedTensorType>(t); r && !r.hasStaticShape())
      return op->emitOpError("gradient needs static shapes (run med-specialize first)");
  return success();
}

Value biasGrad(OpBuilder &b, Location loc, Value dy) {
  return b.create<ReduceOp>(loc, ReduceKind::sum, dy, ArrayRef<int64_t>{0, 2, 3, 4}, false);
}

} // namespace

//===----------------------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------------------===//

LogicalResult Conv3dOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  if (failed(requireStatic(*this)))
    return failure();
  Location loc = getLoc();
  RankedTensorType x = typeOf(getInput()), w = typeOf(getWeight()), y = typeOf(dy);
  // The transposed convolution of dy restores x's size up to the remainder the strided
  // convolution dropped; output_padding adds it back.
  SmallVector<int64_t> outputPadding;
  for (int i = 0; i < 3; ++i) {
    int64_t k = w.getDimSize(2 + i);
    int64_t restored = (y.getDimSize(2 + i) - 1) * getStride()[i] - 2 * getPadding()[i] +
                       getDilation()[i] * (k - 1) + 1;
    outputPadding.push_back(x.getDimSize(2 + i) - restored);
  }
  Value dx = b.create<Conv3dTransposeOp>(loc, dy, getWeight(), Value(), getStride(), getPadding(),
                                         outputPadding, getDilation(), getGroups());
  Value dw = b.create<Conv3dGradWeightOp>(loc, getInput(), dy, w.getShape().drop_front(2),
                                          getStride(), getPadding(), getDilation(), getGroups());
  operandGrads.assign({dx, dw});
  if (getBias())
    operandGrads.push_back(biasGrad(b, loc, dy));
  return success();
}

LogicalResult Conv3dTransposeOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                                SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  if (failed(requireStatic(*this)))
    return failure();
  Location loc = getLoc();
  RankedTensorType w = typeOf(getWeight());
  auto dx = b.create<Conv3dOp>(loc, dy, getWeight(), Value(), getStride(), getPadding(),
                               getDilation(), getGroups());
  if (typeOf(dx).getShape() != typeOf(getInput()).getShape())
    return emitOpError("gradient: output_padding not smaller than the stride is not supported");
  // The weight gradient is a convolution's with the roles of input and output swapped.
  Value dw = b.create<Conv3dGradWeightOp>(loc, dy, getInput(), w.getShape().drop_front(2),
                                          getStride(), getPadding(), getDilation(), getGroups());
  operandGrads.assign({dx, dw});
  if (getBias())
    operandGrads.push_back(biasGrad(b, loc, dy));
  return success();
}

// out = Σ_t w[t]·x[· + t − p]: the input gradient sends each dy back along the same taps,
// dx[i] = Σ_t w[t]·dy[i − t + p] = Σ_t w[k − 1 − t]·dy[i + t − p] (k − 1 = 2p), the mirrored
// shift-sum of dy; the weight gradient is one reduction per tap; the bias gradient dy's sum.
LogicalResult ShiftSumOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  Location loc = getLoc();
  RankedTensorType w = typeOf(getWeight());
  Value dx = b.create<ShiftSumOp>(loc, dy, getWeight(), Value(), !getMirrored());
  Value dw = b.create<ShiftSumGradWeightOp>(loc, getMirrored() ? dy : getInput(),
                                            getMirrored() ? getInput() : dy,
                                            w.getShape().drop_front(2));
  operandGrads.assign({dx, dw});
  if (getBias())
    operandGrads.push_back(biasGrad(b, loc, dy));
  return success();
}

//===----------------------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------------------===//

// The statistics are computed once: med-autodiff first turns the forward group_norm into one
// that saves them (saveForGradient), and the backward op reads them.
Operation *GroupNormOp::saveForGradient(OpBuilder &b) {
  if (getSaveStatistics())
    return nullptr;
  auto saving = b.create<GroupNormOp>(getLoc(), getInput(), getGamma(), getBeta(), getGroups(),
                                      getEpsilon(), /*save_statistics=*/true);
  // Marks the op does not define (med.instance_norm, med.fp32) carry over.
  for (NamedAttribute a : (*this)->getDiscardableAttrs())
    saving->setAttr(a.getName(), a.getValue());
  return saving;
}

LogicalResult GroupNormOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  if (!getSaveStatistics())
    return emitOpError("gradient needs the statistics of the forward pass (save_statistics, "
                       "which med-autodiff sets)");
  if (resultGrads[1] || resultGrads[2])
    return emitOpError("gradient through the saved statistics (mean, rstd) is not supported");
  auto g = b.create<GroupNormGradOp>(getLoc(), getInput(), getGamma(), getStatistics()[0],
                                     getStatistics()[1], resultGrads[0], getGroups());
  operandGrads.assign({g.getGradInput(), g.getGradGamma(), g.getGradBeta()});
  return success();
}

// From forward ops: batch normalization's statistics span the whole batch, so the rule
// recomputes them per channel (as torch's batch_norm_backward reuses save_mean/save_invstd)
// rather than a kernel of its own. The eval form's statistics are the running ones.
LogicalResult BatchNormOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  if (resultGrads[1] || resultGrads[2])
    return emitOpError("gradient through the new running statistics is not supported (they "
                       "are state the step assigns, not a term of the loss)");
  if (failed(requireStatic(*this)))
    return failure();
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.assign(getOperation()->getNumOperands(), Value());
    return success();
  }
  Location loc = getLoc();
  Value x = getInput();
  RankedTensorType type = typeOf(x);
  Type element = type.getElementType();
  SmallVector<int64_t> axes, perChannel(type.getRank(), 1);
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d != 1)
      axes.push_back(d);
  perChannel[1] = type.getDimSize(1);
  auto channelwise = [&](Value v) -> Value { return b.create<ReshapeOp>(loc, v, perChannel); };
  auto meanOver = [&](Value v) -> Value {
    return b.create<ReduceOp>(loc, ReduceKind::mean, v, axes, /*keepdims=*/true);
  };
  auto inverseRoot = [&](Value var) -> Value {
    Value shifted = b.create<AddOp>(loc, var, scalar(b, loc, element, getEpsilon().convertToDouble()));
    return b.create<DivOp>(loc, scalar(b, loc, element, 1.0), b.create<SqrtOp>(loc, shifted));
  };
  Value mean, rstd;
  if (getTraining()) {
    mean = meanOver(x);
    Value centred = b.create<SubOp>(loc, x, mean);
    rstd = inverseRoot(meanOver(b.create<MulOp>(loc, centred, centred))); // biased variance
  } else {
    mean = channelwise(getRunningMean());
    rstd = inverseRoot(channelwise(getRunningVar()));
  }
  Value xhat = b.create<MulOp>(loc, b.create<SubOp>(loc, x, mean), rstd);
  Value dgamma = b.create<ReduceOp>(loc, ReduceKind::sum, b.create<MulOp>(loc, dy, xhat), axes,
                                    /*keepdims=*/false);
  Value dbeta = b.create<ReduceOp>(loc, ReduceKind::sum, dy, axes, /*keepdims=*/false);
  Value g = b.create<MulOp>(loc, dy, channelwise(getGamma()));
  Value dx;
  if (getTraining()) { // rstd·(g − mean(g) − x̂·mean(g·x̂)), as for group_norm_grad
    Value gxhat = meanOver(b.create<MulOp>(loc, g, xhat));
    Value centred = b.create<SubOp>(loc, b.create<SubOp>(loc, g, meanOver(g)),
                                    b.create<MulOp>(loc, xhat, gxhat));
    dx = b.create<MulOp>(loc, centred, rstd);
  } else {
    dx = b.create<MulOp>(loc, g, rstd);
  }
  operandGrads.assign({dx, dgamma, dbeta, Value(), Value()});
  return success();
}

LogicalResult ChannelLayerNormOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                                 SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<ChannelLayerNormGradOp>(getLoc(), getInput(), getGamma(), resultGrads[0],
                                            getEpsilon());
  operandGrads.assign({g.getGradInput(), g.getGradGamma(), g.getGradBeta()});
  return success();
}

LogicalResult GRNOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<GRNGradOp>(getLoc(), getInput(), getGamma(), resultGrads[0], getEpsilon());
  operandGrads.assign({g.getGradInput(), g.getGradGamma(), g.getGradBeta()});
  return success();
}

//===----------------------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------------------===//

LogicalResult GeluOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({b.create<GeluGradOp>(getLoc(), getInput(), resultGrads[0])});
  return success();
}

LogicalResult SigmoidOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // σ' = σ (1 − σ), from the forward result.
  Location loc = getLoc();
  Value y = getResult(), one = scalar(b, loc, typeOf(y).getElementType(), 1.0);
  Value dyy = b.create<MulOp>(loc, resultGrads[0], y);
  operandGrads.assign({b.create<MulOp>(loc, dyy, b.create<SubOp>(loc, one, y))});
  return success();
}

// The rectifiers' input gradient is one op, med.prelu_grad: dy where x > 0, else slope·dy
// (torch's backward takes the slope's side at 0 too); relu's slope is 0, leaky_relu's its
// attribute as a scalar of the input's element type.
LogicalResult ReluOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value zero = scalar(b, loc, typeOf(getInput()).getElementType(), 0.0);
  operandGrads.assign({b.create<PReluGradOp>(loc, getInput(), zero, resultGrads[0])});
  return success();
}

LogicalResult LeakyReluOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value slope = scalar(b, loc, typeOf(getInput()).getElementType(),
                       getNegativeSlope().convertToDouble());
  operandGrads.assign({b.create<PReluGradOp>(loc, getInput(), slope, resultGrads[0])});
  return success();
}

// d/dslope of (x > 0 ? x : slope·x) is min(x, 0) (0 where x > 0), summed back to the
// slope's shape.
LogicalResult PReluOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value dx = b.create<PReluGradOp>(loc, getInput(), getSlope(), dy);
  Value zero = scalar(b, loc, typeOf(getInput()).getElementType(), 0.0);
  Value negative = b.create<MinOp>(loc, getInput(), zero);
  Value dslope = sumTo(b, loc, b.create<MulOp>(loc, dy, negative), typeOf(getSlope()));
  operandGrads.assign({dx, dslope});
  return success();
}

// y = softmax(x): dx = y·(dy − Σ_axis dy·y), from the forward result.
LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value y = getResult();
  Value dyy = b.create<MulOp>(loc, resultGrads[0], y);
  Value sum = b.create<ReduceOp>(loc, ReduceKind::sum, dyy, ArrayRef<int64_t>{static_cast<int64_t>(getAxis())},
                                 /*keepdims=*/true);
  Value centred = b.create<SubOp>(loc, resultGrads[0], sum);
  operandGrads.assign({b.create<MulOp>(loc, y, centred)});
  return success();
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({b.create<NegOp>(getLoc(), resultGrads[0])});
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({b.create<MulOp>(getLoc(), resultGrads[0], getResult())});
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({b.create<DivOp>(getLoc(), resultGrads[0], getInput())});
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value half = scalar(b, loc, typeOf(getResult()).getElementType(), 0.5);
  Value scaled = b.create<MulOp>(loc, resultGrads[0], half);
  operandGrads.assign({b.create<DivOp>(loc, scaled, getResult())});
  return success();
}

LogicalResult AddOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads.assign({sumTo(b, getLoc(), dy, typeOf(getLhs())),
                       sumTo(b, getLoc(), dy, typeOf(getRhs()))});
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  Value negated = b.create<NegOp>(getLoc(), dy);
  operandGrads.assign({sumTo(b, getLoc(), dy, typeOf(getLhs())),
                       sumTo(b, getLoc(), negated, typeOf(getRhs()))});
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.assign({sumTo(b, loc, b.create<MulOp>(loc, dy, getRhs()), typeOf(getLhs())),
                       sumTo(b, loc, b.create<MulOp>(loc, dy, getLhs()), typeOf(getRhs()))});
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // d(a/b)/da = 1/b; d(a/b)/db = −(a/b)/b.
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Value da = b.create<DivOp>(loc, dy, getRhs());
  Value db = b.create<NegOp>(loc, b.create<DivOp>(loc, b.create<MulOp>(loc, dy, getResult()),
                                                  getRhs()));
  operandGrads.assign({sumTo(b, loc, da, typeOf(getLhs())), sumTo(b, loc, db, typeOf(getRhs()))});
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // d(a^b)/da = b·a^(b−1); d(a^b)/db = a^b·log a.
  Location loc = getLoc();
  Value dy = resultGrads[0];
  Type rhsElement = typeOf(getRhs()).getElementType();
  Value less = b.create<SubOp>(loc, getRhs(), scalar(b, loc, rhsElement, 1.0));
  Value da = b.create<MulOp>(loc, dy, b.create<MulOp>(loc, getRhs(),
                                                      b.create<PowOp>(loc, getLhs(), less)));
  Value db = b.create<MulOp>(loc, b.create<MulOp>(loc, dy, getResult()),
                             b.create<LogOp>(loc, getLhs()));
  operandGrads.assign({sumTo(b, loc, da, typeOf(getLhs())), sumTo(b, loc, db, typeOf(getRhs()))});
  return success();
}

// torch.maximum / minimum: the larger (smaller) side gets the gradient, ties half each
// (med.extremum_grad); broadcast operands sum theirs back.
template <typename BinaryOp>
void extremumGradients(BinaryOp op, ExtremumKind kind, OpBuilder &b, Value dy,
                       SmallVectorImpl<Value> &operandGrads) {
  Location loc = op.getLoc();
  auto g = b.create<ExtremumGradOp>(loc, kind, op.getLhs(), op.getRhs(), dy);
  operandGrads.assign({sumTo(b, loc, g.getGradLhs(), typeOf(op.getLhs())),
                       sumTo(b, loc, g.getGradRhs(), typeOf(op.getRhs()))});
}

LogicalResult MaxOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  extremumGradients(*this, ExtremumKind::max, b, resultGrads[0], operandGrads);
  return success();
}

LogicalResult MinOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  extremumGradients(*this, ExtremumKind::min, b, resultGrads[0], operandGrads);
  return success();
}

//===----------------------------------------------------------------------------------===//
// Data movement and shapes
//===----------------------------------------------------------------------------------===//

LogicalResult PadOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({b.create<SliceOp>(getLoc(), resultGrads[0], getLow(),
                                         typeOf(getInput()).getShape(), DenseI64ArrayAttr())});
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (failed(requireStatic(*this)))
    return failure();
  ArrayRef<int64_t> in = typeOf(getInput()).getShape();
  // A strided box scatters into zeros; a unit-stride one is a plain zero padding.
  if (auto strides = getStrides();
      strides && llvm::any_of(*strides, [](int64_t s) { return s != 1; })) {
    operandGrads.assign(
        {b.create<SliceGradOp>(getLoc(), resultGrads[0], getOffsets(), *strides, in)});
    return success();
  }
  SmallVector<int64_t> high;
  for (size_t i = 0; i < in.size(); ++i)
    high.push_back(in[i] - getOffsets()[i] - getSizes()[i]);
  operandGrads.assign({b.create<PadOp>(getLoc(), resultGrads[0], getOffsets(), high,
                                       llvm::APFloat(0.0))});
  return success();
}

// y = transpose(x, p) moves x's axis p[i] to axis i, so dx = transpose(dy, p⁻¹), where
// p⁻¹[p[i]] = i.
LogicalResult TransposeOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  operandGrads.assign({b.create<TransposeOp>(getLoc(), resultGrads[0], inverse)});
  return success();
}

LogicalResult AvgPoolOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (failed(requireStatic(*this)))
    return failure();
  ArrayRef<int64_t> in = typeOf(getInput()).getShape();
  operandGrads.assign(
      {b.create<AvgPoolGradOp>(getLoc(), resultGrads[0], getKernel(), in.drop_front(2))});
  return success();
}

LogicalResult MaxPoolOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(
      {b.create<MaxPoolGradOp>(getLoc(), getInput(), resultGrads[0], getKernel())});
  return success();
}

// Dropout is linear in its input: dx = dy · mask · s, the same op on dy with the same key,
// stream and p, which draws the mask again instead of keeping it (MedRandomOps.td).
LogicalResult DropoutOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({b.create<DropoutOp>(getLoc(), resultGrads[0], getKey(), getPAttr(),
                                           getStreamAttr()),
                       Value()});
  return success();
}

LogicalResult ResizeOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (failed(requireStatic(*this)))
    return failure();
  ArrayRef<int64_t> in = typeOf(getInput()).getShape();
  operandGrads.assign({b.create<ResizeGradOp>(getLoc(), getMode(), resultGrads[0],
                                              in.drop_front(2), getAlignCorners())});
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  int64_t axis = getAxis(), offset = 0;
  for (Value input : getInputs()) {
    RankedTensorType t = typeOf(input);
    SmallVector<int64_t> offsets(t.getRank(), 0);
    offsets[axis] = offset;
    offset += t.getDimSize(axis);
    operandGrads.push_back(b.create<SliceOp>(getLoc(), resultGrads[0], offsets, t.getShape(),
                                             DenseI64ArrayAttr()));
  }
  return success();
}

LogicalResult ReduceOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (failed(requireStatic(*this)))
    return failure();
  Location loc = getLoc();
  RankedTensorType in = typeOf(getInput());
  Value dy = resultGrads[0];
  // max / min: to the elements equal to the result, ties sharing evenly (torch.amax).
  if (getKind() == ReduceKind::max || getKind() == ReduceKind::min) {
    ExtremumKind kind = getKind() == ReduceKind::max ? ExtremumKind::max : ExtremumKind::min;
    operandGrads.assign({b.create<ReduceExtremumGradOp>(loc, kind, getInput(), getResult(), dy,
                                                        getAxes(), getKeepdims())});
    return success();
  }
  SmallVector<int64_t> kept(in.getShape());
  int64_t count = 1;
  for (int64_t a : getAxes()) {
    kept[a] = 1;
    count *= in.getDimSize(a);
  }
  if (!getKeepdims())
    dy = b.create<ReshapeOp>(loc, dy, kept);
  Value dx = b.create<BroadcastOp>(loc, dy, in.getShape());
  // Divide by the count (exact in any float type) rather than multiply by its rounded
  // reciprocal, so f64 runs of an f32 program stay exact.
  if (getKind() == ReduceKind::mean)
    dx = b.create<DivOp>(loc, dx, scalar(b, loc, in.getElementType(), double(count)));
  operandGrads.assign({dx});
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(
      {b.create<ReshapeOp>(getLoc(), resultGrads[0], typeOf(getInput()).getShape())});
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({sumTo(b, getLoc(), resultGrads[0], typeOf(getInput()))});
  return success();
}

//===----------------------------------------------------------------------------------===//
// Losses: only the logits get a gradient; targets, masks and weights are data.
//===----------------------------------------------------------------------------------===//

LogicalResult BCEWithLogitsOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                              SmallVectorImpl<Value> &operandGrads) {
  Value dlogits = b.create<BCEWithLogitsGradOp>(
      getLoc(), getLogits(), getTarget(), getMask(), getPosWeight(), resultGrads[0],
      getReduction(), getAutoPosWeight(), getMaxPosWeight());
  operandGrads.assign({dlogits, Value()});
  if (getMask())
    operandGrads.push_back(Value());
  if (getPosWeight())
    operandGrads.push_back(Value());
  return success();
}

LogicalResult DiceCEOp::buildGradients(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Type> types(getLogits().getTypes());
  auto g = b.create<DiceCEGradOp>(getLoc(), types, getLogits(), getTargets(), resultGrads[0],
                                  getWeights(), getSmooth(), getCeWeight(), getDiceWeight(),
                                  getBatchDice(), getIncludeBackground(),
                                  getIgnoreIndexAttr());
  operandGrads.assign(g.getResults().begin(), g.getResults().end());
  operandGrads.append(getTargets().size(), Value());
  return success();
}
