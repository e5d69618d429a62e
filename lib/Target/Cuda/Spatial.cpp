//===- Spatial.cpp - med.spatial_transform ------------------------------------------===//
//
// One thread per output voxel, all channels of it in that thread (the position, the
// neighbours and their weights are computed once). The arithmetic is the CPU kernel's
// (runtime/src/cpu/Spatial.cpp), operation for operation, with the products that meet a sum
// written as fmaf: --fmad cannot contract them differently, and the GPU gives the CPU's
// bits (nearest samples and labels exactly).
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

void FunctionGen::spatialTransform(const Op &op) {
  const int x = op.single("input"), m = op.single("matrix"), y = result(op);
  const std::string &mode = op.strAttr("mode"), &border = op.strAttr("border");
  const double value = op.floatAttr("value");
  const std::vector<int64_t> labels = op.intsAttr("labels");
  const auto &xs = shape(x), &ys = shape(y);
  if (xs.size() != 5 || ys.size() != 5 || shape(m) != std::vector<int64_t>{xs[0], 3, 4})
    error("expected an N x C x D x H x W input and an N x 3 x 4 matrix");
  const bool labelsInt = type(x).dtype == DType::I32;
  if (!labelsInt)
    requireFloat(x, "the input");
  requireFloat(m, "the matrix");
  if (mode == "linear_argmax" && labels.empty())
    error("linear_argmax needs at least one label");
  const int64_t C = xs[1], inPlane = product(xs, 2), outPlane = product(ys, 2);
  const Index ix = indexFor(std::max(type(x).numel(), type(y).numel()));
  const std::string I = ix.type(), T = labelsInt ? "int" : "float";
  // A float as the result type stores it (an i32 label from an integral float).
  auto toT = [&](const std::string &f) { return labelsInt ? "(int)(" + f + ")" : f; };

  std::string b = ix.narrow ? "  const int i = (int)(blockIdx.x * " + std::to_string(kBlock) +
                                  "u + threadIdx.x);\n"
                            : "  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n";
  b += "  if (i >= " + ix.lit(xs[0] * outPlane) + ") return;\n";
  b += "  const " + I + " n = i / " + ix.lit(outPlane) + ", o = i - n * " + ix.lit(outPlane) +
       ";\n";
  b += "  const " + I + " od = o / " + ix.lit(ys[3] * ys[4]) + ", oh = o / " + ix.lit(ys[4]) +
       " % " + ix.lit(ys[3]) + ", ow = o % " + ix.lit(ys[4]) + ";\n";
  b += "  const float* mb = m + 12 * n;\n";
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
  b += "  const " + I + " xb = n * " + ix.lit(C * inPlane) + ", yb = n * " +
       ix.lit(C * outPlane) + " + o;\n";
  // grid_sample's reflection about -0.5 and size - 0.5, then the clamp to [0, size - 1].
  auto reflect = [&](int a) {
    const std::string p = "p" + std::to_string(a), n = flt(static_cast<double>(xs[2 + a]));
    return "  {\n    const float q = fminf(fmaxf(" + p +
           ", -16777216.0f), 16777216.0f), d = fabsf(q - -0.5f);\n"
           "    const float extra = fmodf(d, " + n + ");\n"
           "    const int flips = (int)floorf(d / " + n + ");\n"
           "    const float r = flips % 2 == 0 ? extra + -0.5f : " + n + " - extra + -0.5f;\n"
           "    " + p + " = fminf(" + flt(static_cast<double>(xs[2 + a] - 1)) +
           ", fmaxf(r, 0.0f));\n  }\n";
  };
  const std::string fill = mode == "linear_argmax" || border == "constant" ? flt(value) : "0.0f";

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
    b += "  for (" + I + " c = 0; c < " + ix.lit(C) + "; ++c) {\n";
    b += "    if (inside) y[yb + c * " + ix.lit(outPlane) + "] = x[xb + c * " + ix.lit(inPlane) +
         " + at];\n";
    b += "    else y[yb + c * " + ix.lit(outPlane) + "] = " + toT(fill) + ";\n  }\n";
  } else {
    if (mode == "linear_argmax") {
      b += "  if (!(p0 >= 0.0f && p0 <= " + flt(xs[2] - 1.0) + " && p1 >= 0.0f && p1 <= " +
           flt(xs[3] - 1.0) + " && p2 >= 0.0f && p2 <= " + flt(xs[4] - 1.0) + ")) {\n";
      b += "    for (" + I + " c = 0; c < " + ix.lit(C) + "; ++c) y[yb + c * " +
           ix.lit(outPlane) + "] = " + toT(fill) + ";\n    return;\n  }\n";
    } else if (border == "reflection") {
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
    b += "  for (" + I + " c = 0; c < " + ix.lit(C) + "; ++c) {\n";
    b += "    const auto* xc = x + xb + c * " + ix.lit(inPlane) + ";\n";
    for (int k = 0; k < 8; ++k) {
      const std::string K = std::to_string(k);
      b += "    const float v" + K + " = ok" + K + " ? (float)xc[at" + K + "] : " + fill + ";\n";
    }
    if (mode == "linear_argmax") {
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
      b += "    y[yb + c * " + ix.lit(outPlane) + "] = " + toT("label") + ";\n  }\n";
    } else {
      b += "    float acc = 0.0f;\n";
      for (int k = 0; k < 8; ++k)
        b += "    acc = fmaf(v" + std::to_string(k) + ", wt" + std::to_string(k) + ", acc);\n";
      b += "    y[yb + c * " + ix.lit(outPlane) + "] = acc;\n  }\n";
    }
  }
  const int64_t voxels = xs[0] * outPlane;
  launch(op, src.kernel("spatial_transform", typed({out("y", T), in("x", T), in("m")}, {y, x, m}),
                        b, kBlock),
         (voxels + kBlock - 1) / kBlock, kBlock, {y, x, m});
}

void FunctionGen::registerSpatial(Emitters &e) {
  e["spatial_transform"] = [](FunctionGen &g, const Op &op) { g.spatialTransform(op); };
}

} // namespace mlir::med::cuda
