//===- Pool.cpp - AveragePool, MaxPool -------------------------------------------===//
//
// ONNX AveragePool as med.avg_pool and MaxPool as med.max_pool: 3-D pooling whose stride is
// its window, without padding and rounding down (torch's AvgPool3d(k) / MaxPool3d(k), as
// nnU-Net's residual blocks pool their strided skip and MONAI's BasicUNet its down path).
// Other strides, padding, ceil_mode and dilations are refused naming the attribute: the
// dialect pools non-overlapping windows only.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"

#include <string>

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

namespace {
std::string listStr(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
} // namespace

// The window of a pooling node that med's pooling ops pool the same way, or an error naming
// the attribute that differs.
llvm::Expected<std::vector<int64_t>> Importer::poolWindow(const onnx::NodeProto &node,
                                                          llvm::StringRef medOp) {
  llvm::Expected<std::vector<int64_t>> kernel = intsAttr(node, "kernel_shape", {});
  if (!kernel)
    return kernel.takeError();
  if (kernel->size() != 3)
    return nodeError(node, "kernel_shape " + listStr(*kernel) +
                               ": only 3-D pooling (an N x C x D x H x W input) is imported");
  llvm::Expected<std::vector<int64_t>> strides = intsAttr(node, "strides", {1, 1, 1});
  if (!strides)
    return strides.takeError();
  if (*strides != *kernel)
    return nodeError(node, "strides " + listStr(*strides) + " differ from kernel_shape " +
                               listStr(*kernel) +
                               ": " + medOp.str() + " pools non-overlapping windows (stride = window)");
  llvm::Expected<std::vector<int64_t>> pads = intsAttr(node, "pads", {0, 0, 0, 0, 0, 0});
  if (!pads)
    return pads.takeError();
  for (int64_t p : *pads)
    if (p != 0)
      return nodeError(node, "pads " + listStr(*pads) + ": padded pooling is not imported");
  llvm::Expected<std::string> autoPad = stringAttr(node, "auto_pad", "NOTSET");
  if (!autoPad)
    return autoPad.takeError();
  if (*autoPad != "NOTSET" && *autoPad != "VALID")
    return nodeError(node, "auto_pad " + *autoPad + ": padded pooling is not imported");
  llvm::Expected<int64_t> ceilMode = intAttr(node, "ceil_mode", 0);
  if (!ceilMode)
    return ceilMode.takeError();
  if (*ceilMode != 0)
    return nodeError(node, "ceil_mode 1: a partial last window is not imported (" + medOp.str() +
                           " rounds down, as ceil_mode 0)");
  llvm::Expected<std::vector<int64_t>> dilations = intsAttr(node, "dilations", {1, 1, 1});
  if (!dilations)
    return dilations.takeError();
  for (int64_t d : *dilations)
    if (d != 1)
      return nodeError(node, "dilations " + listStr(*dilations) + ": dilated pooling is not imported");
  // count_include_pad only matters with padding, which is refused above.
  return *kernel;
}

llvm::Error Importer::convertAveragePool(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<std::vector<int64_t>> kernel = poolWindow(node, "med.avg_pool");
  if (!kernel)
    return kernel.takeError();
  auto r = create<AvgPoolOp>(node, *x, builder.getDenseI64ArrayAttr(*kernel));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertMaxPool(const onnx::NodeProto &node) {
  if (node.output_size() > 1 && !node.output(1).empty())
    return nodeError(node, "MaxPool's Indices output is not imported");
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<std::vector<int64_t>> kernel = poolWindow(node, "med.max_pool");
  if (!kernel)
    return kernel.takeError();
  auto r = create<MaxPoolOp>(node, *x, builder.getDenseI64ArrayAttr(*kernel));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}
