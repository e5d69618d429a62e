//===- Resize.cpp - ONNX Resize ---------------------------------------------------===//
//
// ONNX Resize as med.resize, in the forms torch.onnx.export writes for interpolate /
// nn.Upsample in 3-D: `linear` with coordinate_transformation_mode `half_pixel`
// (align_corners=False; old exporters' `pytorch_half_pixel` is the same wherever every
// output axis is longer than 1) or `align_corners`, and `nearest` with `asymmetric` and
// nearest_mode `floor` (torch's `nearest`). `scales` (whole factors ≥ 1 on D, H, W; 1 on N
// and C) become med.resize's `scale`, so that the result's size follows the input's open
// spatial sizes through med-specialize; `sizes` known at import time become its `size`.
// Every other form is refused naming the attribute or input that differs.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedOps.h"

#include <cmath>
#include <sstream>
#include <string>

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

namespace {

template <typename T> std::string listStr(const std::vector<T> &v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i)
    s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

// Sizes with the open ones (read from a run-time shape) as '?'.
std::string listStr(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + (ShapedType::isDynamic(v[i]) ? "?" : std::to_string(v[i]));
  return s + "]";
}

constexpr int64_t kRank = 5;

} // namespace

llvm::Error Importer::convertResize(const onnx::NodeProto &node) {
  llvm::Expected<Value> x = operand(node, 0);
  if (!x)
    return x.takeError();
  auto type = dyn_cast<RankedTensorType>(x->getType());
  if (!type || type.getRank() != kRank)
    return nodeError(node, "only 3-D resizing (an N x C x D x H x W input) is imported",
                     node.input(0));

  // ---- How positions are computed: the three forms torch exports. ----------------------
  llvm::Expected<std::string> mode = stringAttr(node, "mode", "nearest");
  if (!mode)
    return mode.takeError();
  llvm::Expected<std::string> coordinates =
      stringAttr(node, "coordinate_transformation_mode", "half_pixel");
  if (!coordinates)
    return coordinates.takeError();
  llvm::Expected<std::string> nearestMode = stringAttr(node, "nearest_mode", "round_prefer_floor");
  if (!nearestMode)
    return nearestMode.takeError();
  bool alignCorners = false;
  ResizeMode medMode;
  if (*mode == "linear") {
    medMode = ResizeMode::linear;
    if (*coordinates == "align_corners")
      alignCorners = true;
    else if (*coordinates != "half_pixel" && *coordinates != "pytorch_half_pixel")
      return nodeError(node, "coordinate_transformation_mode '" + *coordinates +
                                 "' with mode 'linear' is not imported (half_pixel, as "
                                 "torch's align_corners=False, or align_corners)");
  } else if (*mode == "nearest") {
    medMode = ResizeMode::nearest;
    if (*coordinates != "asymmetric")
      return nodeError(node, "coordinate_transformation_mode '" + *coordinates +
                                 "' with mode 'nearest' is not imported (asymmetric with "
                                 "nearest_mode floor, as torch's 'nearest')");
    if (*nearestMode != "floor")
      return nodeError(node, "nearest_mode '" + *nearestMode +
                                 "' is not imported (floor, as torch's 'nearest')");
  } else {
    return nodeError(node, "mode '" + *mode + "' is not imported (linear: trilinear, or "
                                              "nearest)");
  }
  llvm::Expected<int64_t> antialias = intAttr(node, "antialias", 0);
  if (!antialias)
    return antialias.takeError();
  if (*antialias != 0)
    return nodeError(node, "antialias 1 is not imported (med.resize does not filter)");
  llvm::Expected<int64_t> excludeOutside = intAttr(node, "exclude_outside", 0);
  if (!excludeOutside)
    return excludeOutside.takeError();
  if (*excludeOutside != 0)
    return nodeError(node, "exclude_outside 1 is not imported");
  llvm::Expected<std::string> aspect = stringAttr(node, "keep_aspect_ratio_policy", "stretch");
  if (!aspect)
    return aspect.takeError();
  if (*aspect != "stretch")
    return nodeError(node, "keep_aspect_ratio_policy '" + *aspect +
                               "' is not imported (stretch: each axis to its own size)");

  // ---- Which axes `scales` / `sizes` list (opset 18's `axes`; all of them by default). ---
  std::vector<int64_t> axes;
  if (attribute(node, "axes")) {
    llvm::Expected<std::vector<int64_t>> listed = intsAttr(node, "axes", {});
    if (!listed)
      return listed.takeError();
    for (int64_t a : *listed) {
      int64_t axis = a < 0 ? a + kRank : a;
      if (axis < 0 || axis >= kRank || llvm::is_contained(axes, axis))
        return nodeError(node, "axes " + listStr(*listed) +
                                   ": each must name a different axis of the rank-5 input");
      axes.push_back(axis);
    }
  } else {
    axes = {0, 1, 2, 3, 4};
  }

  // ---- The factors or the sizes. ---------------------------------------------------------
  // An input is given when present and not empty (exporters write an empty tensor for the
  // one they do not use).
  auto given = [&](int i) -> llvm::Expected<std::optional<Constant>> {
    if (!hasInput(node, i))
      return std::nullopt;
    const Entry *e = lookup(node.input(i));
    if (i == 3 && e && e->shapeOf && !e->shapeDims.empty()) {
      // Sizes read partly from a run-time shape (interpolate(size=...)): the open ones
      // (the batch) stay the input's.
      Constant c;
      c.isFloat = false;
      c.ints = e->shapeDims;
      c.dims = {static_cast<int64_t>(c.ints.size())};
      return c;
    }
    if (!e || !e->constant)
      return nodeError(node,
                       std::string(i == 2 ? "scales" : "sizes") +
                           " must be known at import time (a constant or shape arithmetic "
                           "on constants), as " +
                           (i == 2 ? "torch's scale_factor" : "static sizes") + " are",
                       node.input(i));
    llvm::Expected<Constant> c = constantInput(node, i);
    if (!c)
      return c.takeError();
    if (c->numElements() == 0)
      return std::nullopt;
    return std::move(*c);
  };
  llvm::Expected<std::optional<Constant>> scales = given(2);
  if (!scales)
    return scales.takeError();
  llvm::Expected<std::optional<Constant>> sizes = given(3);
  if (!sizes)
    return sizes.takeError();
  if (scales->has_value() == sizes->has_value())
    return nodeError(node, *scales ? "gives both scales and sizes (ONNX allows one)"
                                   : "gives neither scales nor sizes");
  ArrayRef<int64_t> inShape = type.getShape();
  DenseI64ArrayAttr sizeAttr, scaleAttr;
  if (*scales) {
    const Constant &c = **scales;
    const std::string input = node.input(2);
    if (!c.isFloat || static_cast<size_t>(c.numElements()) != axes.size())
      return nodeError(node, "scales must hold " + std::to_string(axes.size()) +
                                 " floats (one per resized axis)", input);
    std::vector<double> all(kRank, 1.0);
    for (size_t k = 0; k < axes.size(); ++k)
      all[axes[k]] = c.floats[k];
    if (all[0] != 1.0 || all[1] != 1.0)
      return nodeError(node, "scales " + listStr(all) +
                                 ": only the spatial axes are resized (N and C scales of 1)",
                       input);
    SmallVector<int64_t> factors;
    for (int d = 2; d < kRank; ++d) {
      if (!(all[d] >= 1.0 && all[d] <= 1024.0 && all[d] == std::floor(all[d])))
        return nodeError(node, "scales " + listStr(all) +
                                   ": only whole factors from 1 to 1024 on D, H, W are imported "
                                   "(med.resize's scale)",
                         input);
      factors.push_back(static_cast<int64_t>(all[d]));
    }
    scaleAttr = builder.getDenseI64ArrayAttr(factors);
  } else {
    const Constant &c = **sizes;
    const std::string input = node.input(3);
    if (c.isFloat || static_cast<size_t>(c.numElements()) != axes.size())
      return nodeError(node, "sizes must hold " + std::to_string(axes.size()) +
                                 " integers (one per resized axis)", input);
    std::vector<int64_t> all(inShape.begin(), inShape.end());
    for (size_t k = 0; k < axes.size(); ++k)
      all[axes[k]] = c.ints[k];
    for (int d = 2; d < kRank; ++d)
      if (ShapedType::isDynamic(all[d]))
        return nodeError(node, "sizes: the spatial size of axis " + std::to_string(d) +
                                   " is read from a shape known only at run time (the output "
                                   "size must be a constant, or use scales)",
                         input);
    // N and C stay: the batch size the export saw (open here) or the channels.
    for (int a = 0; a < 2; ++a)
      if (!ShapedType::isDynamic(inShape[a]) && !ShapedType::isDynamic(all[a]) &&
          all[a] != inShape[a])
        return nodeError(node, "sizes " + listStr(all) + " resize axis " + std::to_string(a) +
                                   " (" + std::to_string(inShape[a]) +
                                   "): only the spatial axes are resized",
                         input);
    SmallVector<int64_t> size(all.begin() + 2, all.end());
    for (int64_t s : size)
      if (s < 1)
        return nodeError(node, "sizes " + listStr(all) + ": spatial sizes must be at least 1",
                         input);
    if (*coordinates == "pytorch_half_pixel" && llvm::is_contained(size, 1))
      return nodeError(node, "coordinate_transformation_mode 'pytorch_half_pixel' with an "
                             "output axis of length 1 is not imported (it reads index 0 there, "
                             "half_pixel the middle)");
    sizeAttr = builder.getDenseI64ArrayAttr(size);
  }
  auto r = create<ResizeOp>(node, medMode, *x, sizeAttr, scaleAttr, alignCorners);
  if (!r)
    return r.takeError();
  define(node, 0, r->getResult());
  return llvm::Error::success();
}
