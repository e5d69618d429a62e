//===- Conv.cpp - Conv and ConvTranspose -> med.conv3d / med.conv3d_transpose ----===//
//
// 3D only (inputs N x C x D x H x W). ONNX pads are [begin..., end...]; the med ops pad
// symmetrically, so an asymmetric Conv pad becomes a med.pad of the difference first.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

namespace {

struct ConvAttributes {
  std::vector<int64_t> strides, dilations, pads, outputPadding;
  int64_t group = 1;
};

llvm::Expected<ConvAttributes> readConvAttributes(Importer &im, const onnx::NodeProto &node,
                                                  Value weight) {
  ConvAttributes a;
  auto wType = cast<RankedTensorType>(weight.getType());
  if (wType.getRank() != 5)
    return im.nodeError(node, "the weight has rank " + llvm::Twine(wType.getRank()) +
                                  "; only 3D convolutions (rank-5 weights) are supported",
                        node.input(1));
  llvm::Expected<std::string> autoPad = im.stringAttr(node, "auto_pad", "NOTSET");
  if (!autoPad)
    return autoPad.takeError();
  if (*autoPad != "NOTSET" && *autoPad != "VALID")
    return im.nodeError(node, "auto_pad " + *autoPad +
                                  " is not supported (explicit pads are; torch.onnx.export "
                                  "writes them)");
  llvm::Expected<std::vector<int64_t>> kernel = im.intsAttr(node, "kernel_shape", {});
  llvm::Expected<std::vector<int64_t>> strides = im.intsAttr(node, "strides", {1, 1, 1});
  llvm::Expected<std::vector<int64_t>> dilations = im.intsAttr(node, "dilations", {1, 1, 1});
  llvm::Expected<std::vector<int64_t>> pads = im.intsAttr(node, "pads", {0, 0, 0, 0, 0, 0});
  llvm::Expected<std::vector<int64_t>> outPad = im.intsAttr(node, "output_padding", {0, 0, 0});
  llvm::Expected<int64_t> group = im.intAttr(node, "group", 1);
  if (!kernel)
    return kernel.takeError();
  if (!strides)
    return strides.takeError();
  if (!dilations)
    return dilations.takeError();
  if (!pads)
    return pads.takeError();
  if (!outPad)
    return outPad.takeError();
  if (!group)
    return group.takeError();
  if (!kernel->empty() && llvm::ArrayRef<int64_t>(*kernel) != wType.getShape().drop_front(2))
    return im.nodeError(node, "kernel_shape does not match the weight's shape", node.input(1));
  if (strides->size() != 3 || dilations->size() != 3 || pads->size() != 6 || outPad->size() != 3)
    return im.nodeError(node, "strides, dilations and output_padding need 3 values and pads 6");
  if (*autoPad == "VALID")
    *pads = {0, 0, 0, 0, 0, 0};
  if (im.attribute(node, "output_shape"))
    return im.nodeError(node, "output_shape is not supported (pads and output_padding are)");
  a.strides = *strides, a.dilations = *dilations, a.pads = *pads, a.outputPadding = *outPad;
  a.group = *group;
  for (int64_t v : a.pads)
    if (v < 0 || v > (int64_t(1) << 20))
      return im.nodeError(node, "pads must be between 0 and 2^20");
  return a;
}

/// A Conv or ConvTranspose node's input, weight, optional bias and attributes.
struct ConvNode {
  Value x, w, b;
  ConvAttributes attrs;
};

llvm::Expected<ConvNode> readConvNode(Importer &im, const onnx::NodeProto &node) {
  ConvNode c;
  Value *slots[] = {&c.x, &c.w, &c.b};
  for (int i = 0; i < 3 && (i < 2 || im.hasInput(node, i)); ++i) {
    llvm::Expected<Value> v = im.operand(node, i);
    if (!v)
      return v.takeError();
    *slots[i] = *v;
  }
  llvm::Expected<ConvAttributes> a = readConvAttributes(im, node, c.w);
  if (!a)
    return a.takeError();
  c.attrs = std::move(*a);
  return c;
}

} // namespace

llvm::Error Importer::convertConv(const onnx::NodeProto &node) {
  llvm::Expected<ConvNode> c = readConvNode(*this, node);
  if (!c)
    return c.takeError();
  Value x = c->x, w = c->w, b = c->b;
  const ConvAttributes *a = &c->attrs;
  SmallVector<int64_t> padding(3);
  bool symmetric = true;
  for (int i = 0; i < 3; ++i) {
    padding[i] = std::min(a->pads[i], a->pads[i + 3]);
    symmetric &= a->pads[i] == a->pads[i + 3];
  }
  Value in = x;
  if (!symmetric) { // the part beyond the symmetric padding, as zeros before the conv
    SmallVector<int64_t> low(5, 0), high(5, 0);
    for (int i = 0; i < 3; ++i)
      low[i + 2] = a->pads[i] - padding[i], high[i + 2] = a->pads[i + 3] - padding[i];
    auto pad = create<PadOp>(node, in, builder.getDenseI64ArrayAttr(low),
                             builder.getDenseI64ArrayAttr(high), builder.getF64FloatAttr(0));
    if (!pad)
      return pad.takeError();
    in = pad->getResult();
  }
  auto conv = create<Conv3dOp>(node, in, w, b, builder.getDenseI64ArrayAttr(a->strides),
                               builder.getDenseI64ArrayAttr(padding),
                               builder.getDenseI64ArrayAttr(a->dilations),
                               builder.getI64IntegerAttr(a->group));
  if (!conv)
    return conv.takeError();
  define(node, 0, conv->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertConvTranspose(const onnx::NodeProto &node) {
  llvm::Expected<ConvNode> c = readConvNode(*this, node);
  if (!c)
    return c.takeError();
  Value x = c->x, w = c->w, b = c->b;
  const ConvAttributes *a = &c->attrs;
  SmallVector<int64_t> padding(3);
  for (int i = 0; i < 3; ++i) {
    if (a->pads[i] != a->pads[i + 3])
      return nodeError(node, "asymmetric pads of a transposed convolution are not supported");
    padding[i] = a->pads[i];
  }
  auto conv = create<Conv3dTransposeOp>(
      node, x, w, b, builder.getDenseI64ArrayAttr(a->strides),
      builder.getDenseI64ArrayAttr(padding), builder.getDenseI64ArrayAttr(a->outputPadding),
      builder.getDenseI64ArrayAttr(a->dilations), builder.getI64IntegerAttr(a->group));
  if (!conv)
    return conv.takeError();
  define(node, 0, conv->getResult());
  return llvm::Error::success();
}
