//===- Dropout.cpp - Dropout, and the recipe's dropout rate --------------------------===//
//
// An ONNX Dropout node (opset 12 on: data, ratio, training_mode; output, mask) becomes
// med.dropout with the node's ratio, keyed by the step's key: the network function's last
// argument (a tensor<i64>, added with the first Dropout), stream = the Dropout's place among
// the network's dropouts. Train-mode semantics come from the recipe (DESIGN.md §12): the
// training step drops, @infer and the evaluations do not (med::toEvalForm), whatever the
// node's training_mode says; it and the ratio must be known at import time. A ratio of 0 is
// the identity and makes no op. `applyDropoutRate` is the recipe's `model.dropout`.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"
#include "med/Import/Onnx.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

namespace {
double shortestDecimal(float f) {
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (static_cast<float>(std::strtod(buf, nullptr)) == f)
      break;
  }
  return std::strtod(buf, nullptr);
}

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
} // namespace

Value Importer::stepKey() {
  if (!key) {
    Block &body = function.getBody().front();
    key = body.addArgument(RankedTensorType::get({}, builder.getI64Type()),
                           FileLineColLoc::get(&ctx, path, 0, 0));
  }
  return key;
}

llvm::Error Importer::convertDropout(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  // The mask output: medc does not make it (its gradient draws the mask again).
  if (node.output_size() > 1 && !node.output(1).empty() &&
      (readers.lookup(node.output(1)) > 0 || graphOutputs.count(node.output(1))))
    return nodeError(node,
                     "its mask (output 1, '" + node.output(1) +
                         "') is read; medc's dropout keeps no mask (export nn.Dropout, whose "
                         "mask no other node reads)",
                     node.input(0));
  double ratio = 0.5; // ONNX's default
  if (hasInput(node, 1)) {
    llvm::Expected<Constant> r = constantInput(node, 1);
    if (!r)
      return r.takeError();
    if (!r->isFloat || r->numElements() != 1)
      return nodeError(node, "the ratio must be one float number", node.input(1));
    ratio = r->floats.at(0);
    // A float32 ratio (torch writes p so) as the shortest decimal that is that float: 0.3f is
    // p = 0.3, as nn.Dropout(0.3) has it, not 0.30000001192092896.
    if (static_cast<double>(static_cast<float>(ratio)) == ratio)
      ratio = shortestDecimal(static_cast<float>(ratio));
  }
  if (!(ratio >= 0 && ratio < 1))
    return nodeError(node, "the ratio must be in [0, 1), got " + number(ratio),
                     hasInput(node, 1) ? llvm::StringRef(node.input(1)) : llvm::StringRef());
  if (hasInput(node, 2)) { // read only to be sure it is not data: the recipe trains
    llvm::Expected<Constant> mode = constantInput(node, 2);
    if (!mode)
      return mode.takeError();
    if (mode->numElements() != 1)
      return nodeError(node, "training_mode must be one boolean", node.input(2));
  }
  if (ratio == 0) { // nothing dropped: the identity
    define(node, 0, *x);
    return llvm::Error::success();
  }
  auto y = create<DropoutOp>(node, *x, stepKey(), builder.getF64FloatAttr(ratio),
                             builder.getI64IntegerAttr(dropouts));
  if (!y)
    return y.takeError();
  ++dropouts;
  define(node, 0, y->getResult());
  return llvm::Error::success();
}

llvm::Error mlir::med::applyDropoutRate(ModuleOp module, double p, llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "model.dropout: " + message.str());
  };
  if (!(p >= 0 && p < 1))
    return fail("expected a rate in [0, 1), got " + number(p));
  SmallVector<DropoutOp> dropouts;
  module.walk([&](DropoutOp op) { dropouts.push_back(op); });
  if (dropouts.empty()) {
    if (p == 0)
      return llvm::Error::success();
    return fail(
        number(p) + " asks for dropout, but " + path.str() +
        " has no dropout layer (no Dropout node, no med.dropout); medc does not train without "
        "it. torch.onnx.export leaves nn.Dropout out of a network exported in eval mode (the "
        "default, training=torch.onnx.TrainingMode.EVAL, and PRESERVE of net.eval()): export "
        "it with training=torch.onnx.TrainingMode.TRAINING (nn.Dropout, not nn.Dropout3d), "
        "or set model.dropout: 0");
  }
  llvm::SmallPtrSet<Operation *, 4> functions;
  for (DropoutOp op : dropouts) {
    if (p > 0) {
      op.setPAttr(FloatAttr::get(Float64Type::get(module.getContext()), p));
      continue;
    }
    functions.insert(op->getParentOp());
    op.getResult().replaceAllUsesWith(op.getInput());
    op.erase();
  }
  // Disabled: the networks take no key any more.
  for (Operation *f : functions) {
    auto fn = dyn_cast<func::FuncOp>(f);
    if (!fn || fn.isExternal())
      continue;
    llvm::BitVector erase(fn.getNumArguments());
    for (BlockArgument arg : fn.getArguments()) {
      auto t = dyn_cast<RankedTensorType>(arg.getType());
      if (t && t.getRank() == 0 && t.getElementType().isInteger(64) && arg.use_empty())
        erase.set(arg.getArgNumber());
    }
    // Only where no call passes it (an imported network is called by nothing).
    if (erase.any() && SymbolTable::symbolKnownUseEmpty(fn, module))
      fn.eraseArguments(erase);
  }
  return llvm::Error::success();
}
