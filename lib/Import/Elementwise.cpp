//===- Elementwise.cpp - Add/Sub/Mul/Div, Sigmoid, GELU --------------------------===//
//
// ONNX and the med dialect broadcast alike (NumPy rules). Constant operands (a scalar from a
// Constant node) become med.constant; initializers become parameters. GELU arrives as a
// pattern of Erf arithmetic (Patterns.cpp) and becomes med.gelu.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

llvm::Error Importer::convertBinary(const onnx::NodeProto &node) {
  if (node.input_size() != 2)
    return nodeError(node, "needs two inputs");
  llvm::Expected<Value> lhs = operand(node, 0);
  if (!lhs)
    return lhs.takeError();
  llvm::Expected<Value> rhs = operand(node, 1);
  if (!rhs)
    return rhs.takeError();
  const std::string &op = node.op_type();
  llvm::Expected<Value> result = [&]() -> llvm::Expected<Value> {
    if (op == "Add") {
      auto r = create<AddOp>(node, *lhs, *rhs);
      return r ? llvm::Expected<Value>(r->getResult()) : r.takeError();
    }
    if (op == "Sub") {
      auto r = create<SubOp>(node, *lhs, *rhs);
      return r ? llvm::Expected<Value>(r->getResult()) : r.takeError();
    }
    if (op == "Mul") {
      auto r = create<MulOp>(node, *lhs, *rhs);
      return r ? llvm::Expected<Value>(r->getResult()) : r.takeError();
    }
    auto r = create<DivOp>(node, *lhs, *rhs);
    return r ? llvm::Expected<Value>(r->getResult()) : r.takeError();
  }();
  if (!result)
    return result.takeError();
  define(node, 0, *result);
  return llvm::Error::success();
}

llvm::Error Importer::convertSigmoid(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  auto r = create<SigmoidOp>(node, *x);
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertGelu(const onnx::NodeProto &node, const PatternMatch &m) {
  const Entry *in = lookup(m.input);
  if (!in || !in->value)
    return nodeError(node, "GELU of a tensor that is not computed by the network", m.input);
  auto r = create<GeluOp>(node, in->value);
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}
