//===- Activation.cpp - Relu, LeakyRelu, PRelu, Softmax --------------------------===//
//
// One med op each (med.relu, med.leaky_relu with ONNX's alpha as negative_slope, med.prelu
// with the slope as a parameter, med.softmax along the ONNX axis).
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

llvm::Error Importer::convertRelu(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  auto r = create<ReluOp>(node, *x);
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertLeakyRelu(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<double> alpha = floatAttr(node, "alpha", 0.01);
  if (!alpha)
    return alpha.takeError();
  auto r = create<LeakyReluOp>(node, *x, builder.getF64FloatAttr(*alpha));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertPRelu(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<Value> slope = operand(node, 1);
  if (!slope)
    return slope.takeError();
  auto r = create<PReluOp>(node, *x, *slope);
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertSoftmax(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<int64_t> axis = intAttr(node, "axis", -1);
  if (!axis)
    return axis.takeError();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank)
    return nodeError(node, "axis " + llvm::Twine(*axis) + " is out of range", node.input(0));
  auto r = create<SoftmaxOp>(node, *x, builder.getI64IntegerAttr(a));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}
