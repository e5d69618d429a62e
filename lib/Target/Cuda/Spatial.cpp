//===- Spatial.cpp - med.spatial_transform ------------------------------------------===//
//
// One thread per output voxel, all channels of it in that thread (the position, the
// neighbours and their weights are computed once): kernels/resample.cuh's spatialTransform,
// whose sampling the `resample` template (Fusion/Resample.cpp) shares. This file checks the
// op and chooses the template's parameters (Sampling::shape).
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

namespace {
// The sampling and the resample kernels (kernels/resample.cuh): globals of every kernel that
// samples (guarded, so kernels of one module share it).
const std::string kResampleLibrary = kernelLibrary("resample.cuh");
} // namespace

FunctionGen::Sampling FunctionGen::sampling(const Op &op, int x, int m,
                                            const std::vector<int64_t> &ys,
                                            int64_t bound) const {
  Sampling s{op.strAttr("mode"), op.strAttr("border"), op.floatAttr("value"),
             op.intsAttr("labels"), shape(x), ys, type(x).dtype == DType::I32,
             indexFor(std::max(type(x).numel(), bound))};
  if (s.xs.size() != 5 || ys.size() != 5 || shape(m) != std::vector<int64_t>{s.xs[0], 3, 4})
    error("expected an N x C x D x H x W input and an N x 3 x 4 matrix");
  if (!s.labelsInt)
    requireFloat(x, "the input");
  requireFloat(m, "the matrix");
  if (s.mode != "linear" && s.mode != "nearest" && s.mode != "linear_argmax")
    error("unknown mode '" + s.mode + "'");
  if (s.mode == "linear_argmax" && s.labels.empty())
    error("linear_argmax needs at least one label");
  return s;
}

std::string FunctionGen::Sampling::shape(const std::string &name,
                                         const std::vector<int64_t> &box,
                                         const std::vector<int64_t> &low,
                                         const std::string &extra) const {
  // Three members `<prefix>D, <prefix>H, <prefix>W` of the spatial axes of `v` (N, C, D, H, W).
  auto spatial = [&](const std::string &prefix, const std::vector<int64_t> &v) {
    return "  static constexpr I " + prefix + "D = " + ix.lit(v[2]) + ", " + prefix +
           "H = " + ix.lit(v[3]) + ", " + prefix + "W = " + ix.lit(v[4]) + ";\n";
  };
  const char *modeName = mode == "nearest" ? "Nearest" : mode == "linear" ? "Linear" : "LinearArgmax";
  const char *borderName = border == "reflection" ? "Reflection" : border == "constant" ? "Constant" : "Zeros";
  std::string b = "struct " + name + " {\n  typedef " + ix.type() + " I;\n  typedef " +
                  valueType() + " T;\n  static constexpr I N = " + ix.lit(ys[0]) + ", C = " +
                  ix.lit(ys[1]) + ";\n" + spatial("X", xs) + spatial("Y", ys) +
                  spatial("B", box) + spatial("L", low) +
                  "  static constexpr SampleMode mode = SampleMode::" + modeName +
                  ";\n  static constexpr SampleBorder border = SampleBorder::" + borderName +
                  ";\n  static float fill() { return " + flt(value) + "; }\n  static T fillT() { return (T)(" +
                  flt(value) + "); }\n";
  if (mode == "linear_argmax") {
    std::string ls;
    for (int64_t l : labels)
      ls += (ls.empty() ? "" : ", ") + flt(static_cast<double>(l));
    b += "  static constexpr int labels = " + std::to_string(labels.size()) +
         ";\n  static float label(int l) {\n    const float ls[] = {" + ls +
         "};\n    return ls[l];\n  }\n";
  }
  return b + extra + "};\n";
}

void FunctionGen::spatialTransform(const Op &op) {
  const int x = op.single("input"), m = op.single("matrix"), y = result(op);
  const Sampling s = sampling(op, x, m, shape(y), type(y).numel());
  const int64_t voxels = s.xs[0] * product(s.ys, 2);
  const std::string T = s.valueType();
  launch(op, src.kernel("spatial_transform", typed({out("y", T), in("x", T), in("m")}, {y, x, m}),
                        "  spatialTransform<KNAME_shape>(y, x, m);\n", kBlock,
                        kResampleLibrary + s.shape("KNAME_shape", s.ys, {0, 0, 0, 0, 0})),
         (voxels + kBlock - 1) / kBlock, kBlock, {y, x, m});
}

void FunctionGen::registerSpatial(Emitters &e) {
  e[OpKind::SpatialTransform] = [](FunctionGen &g, const Op &op) { g.spatialTransform(op); };
}

} // namespace mlir::med::cuda
