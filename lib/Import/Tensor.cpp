//===- Tensor.cpp - Concat, Pad, Slice, Reshape, Transpose, Identity of tensors ----===//
//
// The same ops on constants are evaluated at import time (Constants.cpp); here they move
// network tensors. Sizes that would depend on the batch or spatial sizes med-specialize
// chooses later are refused: the error says the shape cannot be specialised.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

namespace {
int64_t rankOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t ? t.getRank() : -1;
}
} // namespace

llvm::Error Importer::convertConcat(const onnx::NodeProto &node) {
  if (node.input_size() == 0)
    return nodeError(node, "needs at least one input");
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    llvm::Expected<Value> v = operand(node, i);
    if (!v)
      return v.takeError();
    inputs.push_back(*v);
  }
  llvm::Expected<int64_t> axis = intAttr(node, "axis", 1);
  if (!axis)
    return axis.takeError();
  int64_t rank = rankOf(inputs[0]);
  int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank)
    return nodeError(node, "axis " + llvm::Twine(*axis) + " is out of range", node.input(0));
  auto r = create<ConcatOp>(node, inputs, builder.getI64IntegerAttr(a));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertPad(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<std::string> mode = stringAttr(node, "mode", "constant");
  if (!mode)
    return mode.takeError();
  if (*mode != "constant" && *mode != "reflect" && *mode != "edge" && *mode != "wrap")
    return nodeError(node, "Pad mode '" + *mode +
                               "' is not an ONNX mode (constant, reflect, edge, wrap)",
                     node.input(0));
  llvm::Expected<Constant> pads = constantInput(node, 1);
  if (!pads)
    return pads.takeError();
  int64_t rank = rankOf(*x);
  std::vector<int64_t> axes;
  if (hasInput(node, 3)) {
    llvm::Expected<Constant> a = constantInput(node, 3);
    if (!a)
      return a.takeError();
    for (int64_t ax : a->ints)
      axes.push_back(ax < 0 ? ax + rank : ax);
  } else {
    for (int64_t k = 0; k < rank; ++k)
      axes.push_back(k);
  }
  if (pads->isFloat || pads->ints.size() != 2 * axes.size())
    return nodeError(node, "pads must hold 2 integers per padded axis", node.input(1));
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  for (size_t j = 0; j < axes.size(); ++j) {
    if (axes[j] < 0 || axes[j] >= rank)
      return nodeError(node, "axis out of range", node.input(3));
    int64_t lo = pads->ints[j], hi = pads->ints[j + axes.size()];
    if (lo < 0 || hi < 0 || lo > (int64_t(1) << 20) || hi > (int64_t(1) << 20))
      return nodeError(node, "negative pads (cropping) are not supported, nor pads over 2^20",
                       node.input(1));
    low[axes[j]] = lo, high[axes[j]] = hi;
  }
  // Pads of zero are the identity in every mode (MONAI's BasicUNet exports an edge Pad of
  // zeros wherever its upsampled size already equals the skip's).
  if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
      llvm::all_of(high, [](int64_t v) { return v == 0; })) {
    define(node, 0, *x);
    return llvm::Error::success();
  }
  if (*mode != "constant")
    return nodeError(node, "Pad mode '" + *mode +
                               "' with non-zero pads is not supported (the med dialect pads "
                               "with a constant)",
                     node.input(0));
  double value = 0;
  if (hasInput(node, 2)) {
    llvm::Expected<Constant> v = constantInput(node, 2);
    if (!v)
      return v.takeError();
    if (v->numElements() != 1)
      return nodeError(node, "constant_value must be one value", node.input(2));
    value = v->isFloat ? v->floats[0] : double(v->ints[0]);
  }
  auto r = create<PadOp>(node, *x, builder.getDenseI64ArrayAttr(low),
                         builder.getDenseI64ArrayAttr(high), builder.getF64FloatAttr(value));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertSlice(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  auto type = cast<RankedTensorType>(x->getType());
  if (!type.hasStaticShape())
    return nodeError(node, "slices a tensor whose batch or spatial sizes are open; the slice "
                           "depends on sizes med-specialize sets later, so it cannot be "
                           "specialised",
                     node.input(0));
  llvm::Expected<Constant> starts = constantInput(node, 1);
  if (!starts)
    return starts.takeError();
  llvm::Expected<Constant> ends = constantInput(node, 2);
  if (!ends)
    return ends.takeError();
  int64_t rank = type.getRank();
  std::vector<int64_t> axes, steps;
  if (hasInput(node, 3)) {
    llvm::Expected<Constant> a = constantInput(node, 3);
    if (!a)
      return a.takeError();
    axes = a->ints;
  } else {
    for (size_t k = 0; k < starts->ints.size(); ++k)
      axes.push_back(k);
  }
  if (hasInput(node, 4)) {
    llvm::Expected<Constant> s = constantInput(node, 4);
    if (!s)
      return s.takeError();
    steps = s->ints;
  } else {
    steps.assign(starts->ints.size(), 1);
  }
  if (starts->ints.size() != ends->ints.size() || axes.size() != starts->ints.size() ||
      steps.size() != axes.size())
    return nodeError(node, "starts, ends, axes and steps differ in length");
  SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape()), strides(rank, 1);
  for (size_t j = 0; j < axes.size(); ++j) {
    int64_t ax = axes[j] < 0 ? axes[j] + rank : axes[j];
    if (ax < 0 || ax >= rank)
      return nodeError(node, "axis out of range",
                       hasInput(node, 3) ? node.input(3) : node.input(0));
    if (steps[j] <= 0)
      return nodeError(node, "only positive steps are supported", node.input(4));
    int64_t d = type.getDimSize(ax), s = starts->ints[j], e = ends->ints[j];
    s = std::clamp<int64_t>(s < 0 ? s + d : s, 0, d);
    e = std::clamp<int64_t>(e < 0 ? e + d : e, 0, d);
    offsets[ax] = s, strides[ax] = steps[j];
    sizes[ax] = e > s ? (e - s + steps[j] - 1) / steps[j] : 0;
  }
  auto r = create<SliceOp>(node, *x, builder.getDenseI64ArrayAttr(offsets),
                           builder.getDenseI64ArrayAttr(sizes),
                           builder.getDenseI64ArrayAttr(strides));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertReshape(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  llvm::Expected<Constant> shape = constantInput(node, 1);
  if (!shape)
    return shape.takeError();
  auto type = cast<RankedTensorType>(x->getType());
  if (!type.hasStaticShape())
    return nodeError(node, "reshapes a tensor whose batch or spatial sizes are open; the target "
                           "shape depends on sizes med-specialize sets later, so it cannot be "
                           "specialised",
                     node.input(0));
  SmallVector<int64_t> dims(shape->ints.begin(), shape->ints.end());
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && int64_t(i) < type.getRank())
      dims[i] = type.getDimSize(i);
    if (dims[i] == -1 && unknown < 0)
      unknown = i;
    else if (dims[i] <= 0)
      return nodeError(node, "the target shape has an invalid size", node.input(1));
    else if (known > (int64_t(1) << 40) / dims[i])
      return nodeError(node, "the target shape is too large", node.input(1));
    else
      known *= dims[i];
  }
  if (unknown >= 0)
    dims[unknown] = type.getNumElements() / known;
  auto r = create<ReshapeOp>(node, *x, builder.getDenseI64ArrayAttr(dims));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

// ONNX Transpose's `perm` for an input of rank `rank`: output axis i is input axis perm[i];
// without the attribute, the axes reversed. An error unless it is a permutation of 0..rank-1.
llvm::Expected<std::vector<int64_t>> Importer::transposePerm(const onnx::NodeProto &node,
                                                             int64_t rank) const {
  std::vector<int64_t> reversed;
  for (int64_t k = rank - 1; k >= 0; --k)
    reversed.push_back(k);
  llvm::Expected<std::vector<int64_t>> perm = intsAttr(node, "perm", reversed);
  if (!perm)
    return perm.takeError();
  std::string shown;
  for (int64_t p : *perm)
    shown += (shown.empty() ? "" : ", ") + std::to_string(p);
  shown = "perm [" + shown + "]";
  if (int64_t(perm->size()) != rank)
    return nodeError(node, shown + " has " + llvm::Twine(perm->size()) +
                               " entries, but the input has rank " + llvm::Twine(rank),
                     node.input(0));
  std::vector<bool> seen(rank, false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= rank || seen[p])
      return nodeError(node, shown + " is not a permutation of the input's axes 0 to " +
                                 llvm::Twine(rank - 1) + " (each once)",
                       node.input(0));
    seen[p] = true;
  }
  return perm;
}

llvm::Error Importer::convertTranspose(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  int64_t rank = rankOf(*x);
  if (rank < 1)
    return nodeError(node, "transposes a scalar (rank 0); med.transpose needs rank >= 1",
                     node.input(0));
  llvm::Expected<std::vector<int64_t>> perm = transposePerm(node, rank);
  if (!perm)
    return perm.takeError();
  auto r = create<TransposeOp>(node, *x, builder.getDenseI64ArrayAttr(*perm));
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}

llvm::Error Importer::convertIdentity(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  define(node, 0, *x);
  return llvm::Error::success();
}
