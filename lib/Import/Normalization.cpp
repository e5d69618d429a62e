//===- Normalization.cpp - instance and group normalization -> med.group_norm ----===//
//
// Train-mode semantics, whatever mode the graph was exported in: InstanceNorm3d and GroupNorm
// normalize with the statistics of the current sample in both modes, so med.group_norm (with
// groups = channels for InstanceNormalization) is the layer. BatchNormalization's training
// form (batch statistics, running statistics as state) is not converted yet: refused by
// name in Importer.cpp.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

namespace {

// The channel count of a network value N x C x ..., or an error.
llvm::Expected<int64_t> channelsOf(Importer &im, const onnx::NodeProto &node, Value x,
                                   llvm::StringRef name) {
  auto type = dyn_cast<RankedTensorType>(x.getType());
  if (!type || type.getRank() != 5 || type.isDynamicDim(1))
    return im.nodeError(node, "normalizes a tensor that is not N x C x D x H x W with C fixed",
                        name);
  return type.getDimSize(1);
}

// A per-channel vector (norm weight or bias) of `channels` elements: the parameter it is a
// view of, or a constant; `fill` when absent.
llvm::Expected<Value> channelVector(Importer &im, const onnx::NodeProto &node,
                                    llvm::StringRef name, int64_t channels, float fill) {
  auto type = RankedTensorType::get({channels}, im.builder.getF32Type());
  if (name.empty()) {
    auto op = im.create<ConstantOp>(node, DenseElementsAttr::get(type, fill));
    if (!op)
      return op.takeError();
    return op->getResult();
  }
  const Entry *e = im.lookup(name);
  if (!e)
    return im.nodeError(node, "no node produces this tensor before it is read", name);
  if (e->constant && e->constant->isFloat) {
    if (e->constant->numElements() != channels)
      return im.nodeError(node, "has " + llvm::Twine(e->constant->numElements()) +
                                    " elements for " + llvm::Twine(channels) + " channels",
                          name);
    if (!e->constant->parameter.empty())
      return im.parameterValue(node, *e->constant, {channels}, name);
    Constant c = *e->constant;
    if (llvm::Error err = im.decodeValues(c, name))
      return std::move(err);
    std::vector<float> data(c.floats.begin(), c.floats.end());
    auto op = im.create<ConstantOp>(node, DenseElementsAttr::get(type, llvm::ArrayRef<float>(data)));
    if (!op)
      return op.takeError();
    return op->getResult();
  }
  return im.nodeError(node, "a norm's weight and bias must be initializers or constants, not "
                            "computed by the network",
                      name);
}

} // namespace

llvm::Error Importer::convertInstanceNormalization(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<int64_t> channels = channelsOf(*this, node, *x, node.input(0));
  if (!channels)
    return channels.takeError();
  if (!hasInput(node, 1) || !hasInput(node, 2))
    return nodeError(node, "needs its scale and bias inputs");
  llvm::Expected<Value> gamma = channelVector(*this, node, node.input(1), *channels, 1);
  if (!gamma)
    return gamma.takeError();
  llvm::Expected<Value> beta = channelVector(*this, node, node.input(2), *channels, 0);
  if (!beta)
    return beta.takeError();
  llvm::Expected<double> eps = floatAttr(node, "epsilon", 1e-5);
  if (!eps)
    return eps.takeError();
  auto norm = create<GroupNormOp>(node, *x, *gamma, *beta, builder.getI64IntegerAttr(*channels),
                                  builder.getF64FloatAttr(*eps), UnitAttr());
  if (!norm)
    return norm.takeError();
  define(node, 0, norm->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertGroupNorm(const onnx::NodeProto &node, const PatternMatch &m) {
  const Entry *in = lookup(m.input);
  if (!in || !in->value)
    return nodeError(node, "GroupNorm of a tensor that is not computed by the network", m.input);
  llvm::Expected<int64_t> channels = channelsOf(*this, node, in->value, m.input);
  if (!channels)
    return channels.takeError();
  if (*channels % m.groups != 0)
    return nodeError(node, "GroupNorm of " + llvm::Twine(*channels) + " channels in " +
                               llvm::Twine(m.groups) + " groups",
                     m.input);
  llvm::Expected<Value> gamma = channelVector(*this, node, m.gamma, *channels, 1);
  if (!gamma)
    return gamma.takeError();
  llvm::Expected<Value> beta = channelVector(*this, node, m.beta, *channels, 0);
  if (!beta)
    return beta.takeError();
  auto norm = create<GroupNormOp>(node, in->value, *gamma, *beta,
                                  builder.getI64IntegerAttr(m.groups),
                                  builder.getF64FloatAttr(m.epsilon), UnitAttr());
  if (!norm)
    return norm.takeError();
  define(node, 0, norm->getResult());
  return llvm::Error::success();
}
