//===- Spatial.cpp - med.spatial_transform ------------------------------------------===//
//
// One thread per output voxel, all channels of it in that thread (the position, the
// neighbours and their weights are computed once): kernels/resample.cuh's spatialTransform,
// whose sampling the `resample` template (Fusion/Resample.cpp) shares. This file checks the
// op and chooses the template's parameters (Sampling::shape).
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

#include "medrun/Resize.h"

#include <algorithm>
#include <type_traits>

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

/// med.avg_pool and med.avg_pool_grad: one thread per element of the result. The forward
/// sums its window W inside H inside D in f32 and divides by the volume, as the CPU kernel;
/// the gradient reads its window's dy (0 past the last whole window).
void FunctionGen::avgPool(const Op &op, bool grad) {
  const int x = op.single(grad ? "grad_output" : "input"), y = result(op);
  requireFloat(x, "the operand");
  requireFloat(y, "the result");
  const auto &xs = shape(x), &ys = shape(y);
  if (xs.size() != 5 || ys.size() != 5)
    error("avg_pool: operand and result must be N x C x D x H x W");
  const std::vector<int64_t> k = op.intsAttr("kernel");
  if (k.size() != 3)
    error("avg_pool: 'kernel' needs 3 entries");
  const auto &pooled = grad ? ys : xs, &means = grad ? xs : ys;
  const int64_t ID = pooled[2], IH = pooled[3], IW = pooled[4], OD = means[2], OH = means[3],
                OW = means[4];
  const std::string inPlane = num(ID * IH * IW), outPlane = num(OD * OH * OW),
                    volume = flt(double(k[0] * k[1] * k[2]));
  std::string b;
  if (!grad) {
    b = "  const i64 nc = i / " + outPlane + ", o = i % " + outPlane + ";\n"
        "  const i64 od = o / " + num(OH * OW) + ", oh = o / " + num(OW) + " % " + num(OH) +
        ", ow = o % " + num(OW) + ";\n"
        "  const i64 base = nc * " + inPlane + ";\n"
        "  float acc = 0.0f;\n"
        "  for (int a = 0; a < " + num(k[0]) + "; ++a)\n"
        "    for (int b = 0; b < " + num(k[1]) + "; ++b)\n"
        "      for (int c = 0; c < " + num(k[2]) + "; ++c)\n"
        "        acc += (float)x[base + ((od * " + num(k[0]) + " + a) * " + num(IH) + " + oh * " +
        num(k[1]) + " + b) * " + num(IW) + " + ow * " + num(k[2]) + " + c];\n"
        "  y[i] = acc / " + volume + ";\n";
  } else {
    b = "  const i64 nc = i / " + inPlane + ", o = i % " + inPlane + ";\n"
        "  const i64 od = o / " + num(IH * IW) + " / " + num(k[0]) + ", oh = o / " + num(IW) +
        " % " + num(IH) + " / " + num(k[1]) + ", ow = o % " + num(IW) + " / " + num(k[2]) + ";\n"
        "  y[i] = od < " + num(OD) + " && oh < " + num(OH) + " && ow < " + num(OW) +
        " ? (float)x[nc * " + outPlane + " + (od * " + num(OH) + " + oh) * " + num(OW) +
        " + ow] / " + volume + " : 0.0f;\n";
  }
  elementwise(op, grad ? "avg_pool_grad" : "avg_pool", {out("y"), in("x")}, {y, x},
              type(y).numel(), b, "");
}

/// med.max_pool and med.max_pool_grad: one thread per element of the result. Both scan a
/// window D, H, W as the CPU kernel does (a larger value or a NaN takes the place, then a NaN
/// stays); the gradient's thread scans its own element's window and takes dy if the window's
/// place is its own.
void FunctionGen::maxPool(const Op &op, bool grad) {
  const int x = op.single("input"), y = result(op);
  const int dy = grad ? op.single("grad_output") : -1;
  requireFloat(x, "the operand");
  requireFloat(y, "the result");
  const auto &xs = shape(x), &ps = grad ? shape(dy) : shape(y);
  if (xs.size() != 5 || ps.size() != 5)
    error("max_pool: operand and result must be N x C x D x H x W");
  const std::vector<int64_t> k = op.intsAttr("kernel");
  if (k.size() != 3)
    error("max_pool: 'kernel' needs 3 entries");
  const int64_t IH = xs[3], IW = xs[4], OD = ps[2], OH = ps[3], OW = ps[4];
  const std::string inPlane = num(xs[2] * IH * IW), outPlane = num(OD * OH * OW);
  const std::string scan =
      "  float best = 0.0f;\n"
      "  i64 at = -1;\n"
      "  for (int a = 0; a < " + num(k[0]) + "; ++a)\n"
      "    for (int b = 0; b < " + num(k[1]) + "; ++b)\n"
      "      for (int c = 0; c < " + num(k[2]) + "; ++c) {\n"
      "        const i64 p = ((od * " + num(k[0]) + " + a) * " + num(IH) + " + oh * " + num(k[1]) +
      " + b) * " + num(IW) + " + ow * " + num(k[2]) + " + c;\n"
      "        const float v = (float)x[nc * " + inPlane + " + p];\n"
      "        if ((at < 0 || v > best || v != v) && (at < 0 || best == best)) { best = v; at = p; }\n"
      "      }\n";
  std::string b;
  if (!grad) {
    b = "  const i64 nc = i / " + outPlane + ", o = i % " + outPlane + ";\n"
        "  const i64 od = o / " + num(OH * OW) + ", oh = o / " + num(OW) + " % " + num(OH) +
        ", ow = o % " + num(OW) + ";\n" + scan + "  y[i] = best;\n";
    elementwise(op, "max_pool", {out("y"), in("x")}, {y, x}, type(y).numel(), b, "");
  } else {
    b = "  const i64 nc = i / " + inPlane + ", o = i % " + inPlane + ";\n"
        "  const i64 od = o / " + num(IH * IW) + " / " + num(k[0]) + ", oh = o / " + num(IW) +
        " % " + num(IH) + " / " + num(k[1]) + ", ow = o % " + num(IW) + " / " + num(k[2]) + ";\n"
        "  if (od >= " + num(OD) + " || oh >= " + num(OH) + " || ow >= " + num(OW) +
        ") { y[i] = 0.0f; return; }\n" + scan +
        "  y[i] = at == o ? (float)dy[nc * " + outPlane + " + (od * " + num(OH) + " + oh) * " +
        num(OW) + " + ow] : 0.0f;\n";
    elementwise(op, "max_pool_grad", {out("y"), in("x"), in("dy")}, {y, x, dy}, type(y).numel(), b,
                "");
  }
}

namespace {
template <typename V> std::string deviceTable(const std::string &name, const char *type,
                                              const std::vector<V> &values) {
  std::string t = "__device__ const " + std::string(type) + " KNAME_" + name + "[" +
                  std::to_string(std::max<size_t>(values.size(), 1)) + "] = {";
  for (size_t i = 0; i < values.size(); ++i)
    t += (i ? ", " : "") + (std::is_floating_point_v<V> ? flt(double(values[i]))
                                                         : std::to_string(values[i]));
  return t + (values.empty() ? "0};\n" : "};\n");
}
} // namespace

/// med.resize and med.resize_grad: one thread per element of the result, its taps from
/// tables computed by medrun/Resize.h (the CPU kernels' rules, in f32) and embedded in the
/// kernel; the sums nested as the CPU kernels nest them (W inside H inside D). The adjoint
/// gathers through the transposed tables, so no element is summed into twice.
void FunctionGen::resize(const Op &op, bool adjoint) {
  const int x = op.single(adjoint ? "grad_output" : "input"), y = result(op);
  requireFloat(x, "the operand");
  requireFloat(y, "the result");
  const auto &xs = shape(x), &ys = shape(y);
  const auto &small = adjoint ? ys : xs, &large = adjoint ? xs : ys;
  if (xs.size() != 5 || ys.size() != 5)
    error("resize: operand and result must be N x C x D x H x W");
  const bool linear = op.strAttr("mode") == "linear", corners = op.boolAttr("align_corners");
  std::string globals;
  const char *axis = "dhw";
  for (int d = 0; d < 3; ++d) {
    medrun::ResizeAxis<float> t =
        medrun::resizeAxis<float>(small[2 + d], large[2 + d], linear, corners);
    const std::string a(1, axis[d]);
    if (!adjoint) {
      globals += deviceTable(a + "i", "int", t.index) + deviceTable(a + "w", "float", t.weight);
    } else {
      globals += deviceTable(a + "b", "int", t.begin) + deviceTable(a + "o", "int", t.output) +
                 deviceTable(a + "r", "float", t.readWeight);
    }
  }
  const int64_t ID = small[2], IH = small[3], IW = small[4], OD = large[2], OH = large[3],
                OW = large[4];
  const std::string inPlane = num(ID * IH * IW), outPlane = num(OD * OH * OW);
  std::string b;
  if (!adjoint) {
    const std::string TD = linear ? "2" : "1";
    b = "  const i64 nc = i / " + outPlane + ", o = i % " + outPlane + ";\n"
        "  const int od = (int)(o / " + num(OH * OW) + "), oh = (int)(o / " + num(OW) + " % " +
        num(OH) + "), ow = (int)(o % " + num(OW) + ");\n"
        "  const i64 base = nc * " + inPlane + ";\n"
        "  float acc = 0.0f;\n"
        "  for (int a = 0; a < " + TD + "; ++a) {\n"
        "    const i64 id = KNAME_di[od * " + TD + " + a];\n"
        "    float sa = 0.0f;\n"
        "    for (int b = 0; b < " + TD + "; ++b) {\n"
        "      const i64 ih = KNAME_hi[oh * " + TD + " + b];\n"
        "      float sb = 0.0f;\n"
        "      for (int c = 0; c < " + TD + "; ++c)\n"
        "        sb += KNAME_ww[ow * " + TD + " + c] * (float)x[base + (id * " + num(IH) +
        " + ih) * " + num(IW) + " + KNAME_wi[ow * " + TD + " + c]];\n"
        "      sa += KNAME_hw[oh * " + TD + " + b] * sb;\n"
        "    }\n"
        "    acc += KNAME_dw[od * " + TD + " + a] * sa;\n"
        "  }\n"
        "  y[i] = acc;\n";
  } else {
    b = "  const i64 nc = i / " + inPlane + ", o = i % " + inPlane + ";\n"
        "  const int id = (int)(o / " + num(IH * IW) + "), ih = (int)(o / " + num(IW) + " % " +
        num(IH) + "), iw = (int)(o % " + num(IW) + ");\n"
        "  const i64 base = nc * " + outPlane + ";\n"
        "  float acc = 0.0f;\n"
        "  for (int a = KNAME_db[id]; a < KNAME_db[id + 1]; ++a) {\n"
        "    float sa = 0.0f;\n"
        "    for (int b = KNAME_hb[ih]; b < KNAME_hb[ih + 1]; ++b) {\n"
        "      float sb = 0.0f;\n"
        "      for (int c = KNAME_wb[iw]; c < KNAME_wb[iw + 1]; ++c)\n"
        "        sb += KNAME_wr[c] * (float)x[base + ((i64)KNAME_do[a] * " + num(OH) +
        " + KNAME_ho[b]) * " + num(OW) + " + KNAME_wo[c]];\n"
        "      sa += KNAME_hr[b] * sb;\n"
        "    }\n"
        "    acc += KNAME_dr[a] * sa;\n"
        "  }\n"
        "  y[i] = acc;\n";
  }
  elementwise(op, adjoint ? "resize_grad" : "resize", {out("y"), in("x")}, {y, x},
              type(y).numel(), b, globals);
}

void FunctionGen::registerSpatial(Emitters &e) {
  e[OpKind::SpatialTransform] = [](FunctionGen &g, const Op &op) { g.spatialTransform(op); };
  e[OpKind::MaxPool] = [](FunctionGen &g, const Op &op) { g.maxPool(op, false); };
  e[OpKind::MaxPoolGrad] = [](FunctionGen &g, const Op &op) { g.maxPool(op, true); };
  e[OpKind::AvgPool] = [](FunctionGen &g, const Op &op) { g.avgPool(op, false); };
  e[OpKind::AvgPoolGrad] = [](FunctionGen &g, const Op &op) { g.avgPool(op, true); };
  e[OpKind::Resize] = [](FunctionGen &g, const Op &op) { g.resize(op, false); };
  e[OpKind::ResizeGrad] = [](FunctionGen &g, const Op &op) { g.resize(op, true); };
}

} // namespace mlir::med::cuda
