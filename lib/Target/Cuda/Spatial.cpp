//===- Spatial.cpp - med.spatial_transform ------------------------------------------===//
//
// One thread per output voxel, all channels of it in that thread (the position, the
// neighbours and their weights are computed once); the `resample` template
// (Fusion/Resample.cpp) samples with the same code. The arithmetic is the CPU kernel's
// (runtime/src/cpu/Spatial.cpp), operation for operation, with the products that meet a sum
// written as fmaf: --fmad cannot contract them differently, and the GPU gives the CPU's
// bits (nearest samples and labels exactly).
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

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

std::string FunctionGen::Sampling::position() const {
  const std::string I = ix.type();
  std::string b = "  const auto* mb = m + 12 * n;\n";
  const char *o3[3] = {"od", "oh", "ow"};
  for (int a = 0; a < 3; ++a)
    b += "  const float d" + std::to_string(a) + " = (float)" + o3[a] + " - " +
         flt((ys[2 + a] - 1) / 2.0) + ";\n";
  // Position on each input axis (D, H, W): M·d + t + c_in.
  for (int a = 0; a < 3; ++a) {
    const std::string r = std::to_string(4 * a);
    b += "  float p" + std::to_string(a) + " = fmaf(mb[" + r + "], d0, fmaf(mb[" + r +
         " + 1], d1, fmaf(mb[" + r + " + 2], d2, mb[" + r + " + 3] + " +
         flt((xs[2 + a] - 1) / 2.0) + ")));\n";
  }
  // grid_sample's reflection about -0.5 and size - 0.5, then the clamp to [0, size - 1].
  auto reflect = [&](int a) {
    const std::string p = "p" + std::to_string(a), n = flt(static_cast<double>(xs[2 + a]));
    return "  {\n    const float q = fminf(fmaxf(" + p +
           ", -16777216.0f), 16777216.0f), d = fabsf(q - -0.5f);\n"
           // fmodf is a loop on the GPU; below n it returns d exactly, as the CPU's does.
           "    const float extra = d < " + n + " ? d : fmodf(d, " + n + ");\n"
           "    const int flips = (int)floorf(d / " + n + ");\n"
           "    const float r = flips % 2 == 0 ? extra + -0.5f : " + n + " - extra + -0.5f;\n"
           "    " + p + " = fminf(" + flt(static_cast<double>(xs[2 + a] - 1)) +
           ", fmaxf(r, 0.0f));\n  }\n";
  };
  if (mode == "nearest") {
    if (border == "reflection")
      for (int a = 0; a < 3; ++a)
        b += reflect(a);
    b += "  const float r0 = nearbyintf(p0), r1 = nearbyintf(p1), r2 = nearbyintf(p2);"
         " // half to even\n";
    b += "  const bool inside = r0 >= 0.0f && r0 <= " + flt(xs[2] - 1.0) + " && r1 >= 0.0f && r1 <= " +
         flt(xs[3] - 1.0) + " && r2 >= 0.0f && r2 <= " + flt(xs[4] - 1.0) + ";\n";
    b += "  const " + I + " at = inside ? ((" + I + ")r0 * " + ix.lit(xs[3]) + " + (" + I +
         ")r1) * " + ix.lit(xs[4]) + " + (" + I + ")r2 : 0;\n";
    return b;
  }
  if (mode == "linear_argmax") {
    b += "  const bool inside = p0 >= 0.0f && p0 <= " + flt(xs[2] - 1.0) + " && p1 >= 0.0f && p1 <= " +
         flt(xs[3] - 1.0) + " && p2 >= 0.0f && p2 <= " + flt(xs[4] - 1.0) + ";\n";
  }
  if (border == "reflection" && mode == "linear") {
    for (int a = 0; a < 3; ++a)
      b += reflect(a);
  } else { // clamped to where no neighbour is inside any more: the same samples
    for (int a = 0; a < 3; ++a)
      b += "  p" + std::to_string(a) + " = fminf(fmaxf(p" + std::to_string(a) + ", -2.0f), " +
           flt(xs[2 + a] + 1.0) + ");\n";
  }
  for (int a = 0; a < 3; ++a) {
    const std::string s = std::to_string(a);
    b += "  const float f" + s + " = floorf(p" + s + ");\n  const " + I + " l" + s + " = (" +
         I + ")f" + s + ";\n  const float w" + s + "0 = (f" + s + " + 1.0f) - p" + s + ", w" +
         s + "1 = p" + s + " - f" + s + ";\n";
  }
  // The 8 neighbours in grid_sample's order: z, then y, then x, low before high.
  for (int k = 0; k < 8; ++k) {
    const std::string K = std::to_string(k), dz = std::to_string(k >> 2),
                      dy = std::to_string(k >> 1 & 1), dx = std::to_string(k & 1);
    b += "  const bool ok" + K + " = l0 + " + dz + " >= 0 && l0 + " + dz + " < " +
         ix.lit(xs[2]) + " && l1 + " + dy + " >= 0 && l1 + " + dy + " < " + ix.lit(xs[3]) +
         " && l2 + " + dx + " >= 0 && l2 + " + dx + " < " + ix.lit(xs[4]) + ";\n";
    b += "  const " + I + " at" + K + " = ok" + K + " ? ((l0 + " + dz + ") * " +
         ix.lit(xs[3]) + " + l1 + " + dy + ") * " + ix.lit(xs[4]) + " + l2 + " + dx +
         " : 0;\n";
    b += "  const float wt" + K + " = (w2" + dx + " * w1" + dy + ") * w0" + dz + ";\n";
  }
  return b;
}

std::string FunctionGen::Sampling::channel(const std::string &xc, const std::string &v) const {
  const std::string T = valueType();
  const std::string fill = mode == "linear_argmax" || border == "constant" ? flt(value) : "0.0f";
  const std::string fillT = labelsInt ? "(int)(" + fill + ")" : fill;
  if (mode == "nearest")
    return "    const " + T + " " + v + " = inside ? (" + T + ")" + xc + "[at] : " + fillT +
           ";\n";
  std::string b;
  for (int k = 0; k < 8; ++k) {
    const std::string K = std::to_string(k);
    b += "    const float v" + K + " = ok" + K + " ? (float)" + xc + "[at" + K + "] : " + fill +
         ";\n";
  }
  if (mode == "linear") {
    b += "    float acc = 0.0f;\n";
    for (int k = 0; k < 8; ++k)
      b += "    acc = fmaf(v" + std::to_string(k) + ", wt" + std::to_string(k) + ", acc);\n";
    return b + "    const float " + v + " = acc;\n";
  }
  b += "    float best = 0.0f, label = 0.0f;\n";
  for (size_t l = 0; l < labels.size(); ++l) {
    const std::string L = flt(static_cast<double>(labels[l]));
    b += "    {\n      float s = 0.0f;\n";
    for (int k = 0; k < 8; ++k) {
      const std::string K = std::to_string(k);
      b += "      if (ok" + K + " && v" + K + " == " + L + ") s += wt" + K + ";\n";
    }
    // Strict: a later label must beat the best so far, so the lowest label wins a tie.
    b += l == 0 ? "      best = s; label = " + L + ";\n"
                : "      if (s > best) { best = s; label = " + L + "; }\n";
    b += "    }\n";
  }
  // Outside [0, n - 1] on some axis: the fill value (nnU-Net's -1).
  return b + "    const " + T + " " + v + " = inside ? (" + T + ")(label) : " + fillT + ";\n";
}

void FunctionGen::spatialTransform(const Op &op) {
  const int x = op.single("input"), m = op.single("matrix"), y = result(op);
  const Sampling s = sampling(op, x, m, shape(y), type(y).numel());
  const auto &xs = s.xs, &ys = s.ys;
  const Index &ix = s.ix;
  const int64_t C = xs[1], inPlane = product(xs, 2), outPlane = product(ys, 2);
  const std::string I = ix.type();

  std::string b = ix.narrow ? "  const int i = (int)(blockIdx.x * " + std::to_string(kBlock) +
                                  "u + threadIdx.x);\n"
                            : "  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n";
  b += "  if (i >= " + ix.lit(xs[0] * outPlane) + ") return;\n";
  b += "  const " + I + " n = i / " + ix.lit(outPlane) + ", o = i - n * " + ix.lit(outPlane) +
       ";\n";
  b += "  const " + I + " od = o / " + ix.lit(ys[3] * ys[4]) + ", oh = o / " + ix.lit(ys[4]) +
       " % " + ix.lit(ys[3]) + ", ow = o % " + ix.lit(ys[4]) + ";\n";
  b += s.position();
  b += "  const " + I + " xb = n * " + ix.lit(C * inPlane) + ", yb = n * " +
       ix.lit(C * outPlane) + " + o;\n";
  b += "  for (" + I + " c = 0; c < " + ix.lit(C) + "; ++c) {\n";
  b += "    const auto* xc = x + xb + c * " + ix.lit(inPlane) + ";\n";
  b += s.channel("xc", "v");
  b += "    y[yb + c * " + ix.lit(outPlane) + "] = v;\n  }\n";
  const int64_t voxels = xs[0] * outPlane;
  const std::string T = s.valueType();
  launch(op, src.kernel("spatial_transform", typed({out("y", T), in("x", T), in("m")}, {y, x, m}),
                        b, kBlock),
         (voxels + kBlock - 1) / kBlock, kBlock, {y, x, m});
}

void FunctionGen::registerSpatial(Emitters &e) {
  e["spatial_transform"] = [](FunctionGen &g, const Op &op) { g.spatialTransform(op); };
}

} // namespace mlir::med::cuda
