//===- Normalization.cpp - instance, group and batch normalization ------------===//
//
// Train-mode semantics, whatever mode the graph was exported in: InstanceNorm3d and GroupNorm
// normalize with the statistics of the current sample in both modes, so med.group_norm (with
// groups = channels for InstanceNormalization) is the layer. BatchNormalization becomes
// med.batch_norm in its training form (the batch's statistics), with its running statistics
// as frozen state that the network function assigns (docs/import.md): the forward of a
// training step updates them as PyTorch's train mode does, and the evaluation functions
// (@infer, @eval_step) take the eval form and change no state (med::toEvalForm).
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
  // An instance norm, not a GroupNorm(C, C): the same math, another autocast policy
  // (med.instance_norm, docs/dialect.md). A GroupNorm's simulation (Patterns.cpp) is not one.
  (*norm)->setAttr(kInstanceNormAttr, builder.getUnitAttr());
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

// Frozen state of the network (a BatchNorm's running statistics and its batch counter):
// declared once under its state_dict name, started as PyTorch starts the buffer, read with
// med.param. Never a parameter the optimizer trains.
llvm::Expected<Value> Importer::stateValue(const onnx::NodeProto &node, llvm::StringRef name,
                                           llvm::ArrayRef<int64_t> dims, InitKind init) {
  auto type = RankedTensorType::get(dims, builder.getF32Type());
  Value &param = parameters[name];
  if (param) {
    if (param.getType() != type || !module.lookupSymbol<ParameterOp>(name) ||
        !module.lookupSymbol<ParameterOp>(name).getFrozen())
      return nodeError(node, "is read as running statistics here and as another tensor "
                             "elsewhere (a BatchNorm's buffers must be its own)",
                       name);
    return param;
  }
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.restoreInsertionPoint(parameterPoint);
    builder.create<ParameterOp>(FileLineColLoc::get(&ctx, path, 0, 0),
                                builder.getStringAttr(name), TypeAttr::get(type),
                                InitKindAttr::get(&ctx, init), IntegerAttr(),
                                FlatSymbolRefAttr(), builder.getUnitAttr(), FloatAttr());
    parameterPoint = builder.saveInsertionPoint();
  }
  param = builder.create<ParamOp>(FileLineColLoc::get(&ctx, path, 0, 0), type,
                                  FlatSymbolRefAttr::get(&ctx, name));
  return param;
}

// BatchNormalization (opset 9 and later, as torch.onnx.export writes it for an eval-mode
// BatchNorm3d with training=TrainingMode.PRESERVE, or for a train-mode one with TRAINING,
// whose running-statistics outputs nothing reads): X, scale, B, input_mean, input_var, all
// but X initializers named by the state_dict. ONNX's momentum weighs the old running value
// (running = momentum·running + (1 − momentum)·batch); med.batch_norm's is PyTorch's, the
// weight of the batch: 1 − ONNX's.
llvm::Error Importer::convertBatchNormalization(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<int64_t> channels = channelsOf(*this, node, *x, node.input(0));
  if (!channels)
    return channels.takeError();
  for (int i = 1; i <= 4; ++i)
    if (!hasInput(node, i))
      return nodeError(node, "needs its scale, B, input_mean and input_var inputs");
  // A training-mode export (training_mode 1, as TrainingMode.TRAINING writes it, which a
  // network with Dropout needs) also returns the running statistics; nothing reads them there,
  // and med.batch_norm's training form updates them as state, as it does for PRESERVE's node.
  for (int i = 1; i < node.output_size(); ++i)
    if (!node.output(i).empty() &&
        (readers.lookup(node.output(i)) > 0 || graphOutputs.count(node.output(i))))
      return nodeError(node, "its running statistics (output " + llvm::Twine(i) + ", '" +
                                 node.output(i) +
                                 "') are read by the graph; medc keeps them as state that "
                                 "the training step updates (med.batch_norm), not as values");
  llvm::Expected<Value> gamma = channelVector(*this, node, node.input(1), *channels, 1);
  if (!gamma)
    return gamma.takeError();
  llvm::Expected<Value> beta = channelVector(*this, node, node.input(2), *channels, 0);
  if (!beta)
    return beta.takeError();
  // The running statistics: initializers named by the state_dict (…running_mean, …running_var).
  std::string stats[2];
  for (int i = 0; i < 2; ++i) {
    const std::string &name = node.input(3 + i);
    const Entry *e = lookup(name);
    if (!e || !e->constant || !e->constant->isFloat || e->constant->parameter.empty() ||
        e->constant->numElements() != *channels)
      return nodeError(node, "the running statistics must be initializers of " +
                                 llvm::Twine(*channels) + " floats (the BatchNorm's buffers)",
                       name);
    stats[i] = e->constant->parameter;
  }
  llvm::Expected<Value> mean = stateValue(node, stats[0], {*channels}, InitKind::zeros);
  if (!mean)
    return mean.takeError();
  llvm::Expected<Value> var = stateValue(node, stats[1], {*channels}, InitKind::ones);
  if (!var)
    return var.takeError();
  llvm::Expected<double> eps = floatAttr(node, "epsilon", 1e-5);
  if (!eps)
    return eps.takeError();
  llvm::Expected<double> onnxMomentum = floatAttr(node, "momentum", 0.9);
  if (!onnxMomentum)
    return onnxMomentum.takeError();
  if (!(*onnxMomentum >= 0 && *onnxMomentum <= 1))
    return nodeError(node, "momentum " + std::to_string(*onnxMomentum) +
                               " is outside [0, 1] (ONNX's convention: the old running "
                               "value's weight)");
  auto norm = create<BatchNormOp>(node, *x, *gamma, *beta, *mean, *var,
                                  builder.getF64FloatAttr(*eps),
                                  builder.getF64FloatAttr(1.0 - *onnxMomentum),
                                  builder.getUnitAttr());
  if (!norm)
    return norm.takeError();
  Location at = loc(node);
  // Per rank under data parallel: each rank's statistics are those of its own batch.
  auto perRank = [&](AssignOp a) { a->setAttr("med.per_rank", builder.getUnitAttr()); };
  perRank(builder.create<AssignOp>(at, FlatSymbolRefAttr::get(&ctx, stats[0]),
                                   norm->getNewRunningMean()));
  perRank(builder.create<AssignOp>(at, FlatSymbolRefAttr::get(&ctx, stats[1]),
                                   norm->getNewRunningVar()));
  // num_batches_tracked, when the buffers are named as a BatchNorm module's: counted per
  // training step (f32, exact to 2^24 steps), in the state_dict beside them.
  llvm::StringRef prefix(stats[0]);
  if (prefix.consume_back("running_mean")) {
    std::string counter = (prefix + "num_batches_tracked").str();
    llvm::Expected<Value> count = stateValue(node, counter, {}, InitKind::zeros);
    if (!count)
      return count.takeError();
    auto one = builder.create<ConstantOp>(
        at, DenseElementsAttr::get(RankedTensorType::get({}, builder.getF32Type()), 1.0f));
    auto next = builder.create<AddOp>(at, *count, one);
    perRank(builder.create<AssignOp>(at, FlatSymbolRefAttr::get(&ctx, counter), next.getResult()));
  }
  define(node, 0, norm->getResult());
  return llvm::Error::success();
}
