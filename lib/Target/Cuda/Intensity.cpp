//===- Intensity.cpp - med.gaussian_blur, med.simulate_low_resolution, med.mirror ---===//
//
// One thread per output element; the index and weight rules are prelude.cuh's, the device
// side of medrun/Augment.h. The blur runs as the CPU's does: a pass per axis (D, H, W),
// each reading the previous pass's f32 result, so the two agree to the rounding of exp.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

namespace {
struct Dims5 {
  int64_t n, c, d, h, w;
};
} // namespace

static Dims5 dims5(const std::vector<int64_t> &s) { return {s[0], s[1], s[2], s[3], s[4]}; }

/// The element i's (sample·C + channel) and its D, H, W indices, as code.
static std::string decomposeNCDHW(const Dims5 &v) {
  return decompose("i", {v.n * v.c, v.d, v.h, v.w}, "o") +
         "  const i64 nc = o0, d = o1, h = o2, w = o3;\n";
}

void FunctionGen::gaussianBlur(const Op &op) {
  int x = op.single("input"), sigma = op.single("sigma"), y = result(op);
  requireFloat(x, "the input");
  requireFloat(sigma, "sigma");
  const Dims5 v = dims5(shape(x));
  const int64_t n = type(x).numel();
  const int a = scratch(n * 4), b = scratch(n * 4);
  const int64_t size[3] = {v.d, v.h, v.w}, stride[3] = {v.h * v.w, v.w, 1};
  const char *index[3] = {"d", "h", "w"};
  // D: input -> a, H: a -> b, W: b -> result; each pass with its axis's taps.
  const int from[3] = {x, a, b}, to[3] = {a, b, y};
  for (int axis = 0; axis < 3; ++axis) {
    const std::string at = index[axis], S = num(size[axis]), st = num(stride[axis]);
    std::string body = decomposeNCDHW(v) +
                       "  const float sg = (float)s[nc * 3 + " + std::to_string(axis) + "];\n"
                       "  const i64 r = medBlurRadius(sg, " + S + ");\n"
                       "  const i64 base = i - " + at + " * " + st + ";\n"
                       "  if (r == 0) { y[i] = (float)x[i]; return; }\n"
                       "  float sum = 0.0f;\n"
                       "  for (i64 j = -r; j <= r; ++j) { const float q = (float)j / sg; sum += expf(-0.5f * q * q); }\n"
                       "  float acc = 0.0f;\n"
                       "  for (i64 j = -r; j <= r; ++j) {\n"
                       "    const float q = (float)j / sg;\n"
                       "    acc += expf(-0.5f * q * q) / sum * (float)x[base + medReflect(" + at + " + j, " + S + ") * " + st + "];\n"
                       "  }\n"
                       "  y[i] = acc;\n";
    elementwise(op, std::string("gaussian_blur_") + index[axis],
                {out("y"), in("x"), in("s")}, {to[axis], from[axis], sigma}, n, body);
  }
}

void FunctionGen::simulateLowResolution(const Op &op) {
  int x = op.single("input"), scale = op.single("scale"), y = result(op);
  requireFloat(x, "the input");
  requireFloat(scale, "scale");
  const Dims5 v = dims5(shape(x));
  const std::string D = num(v.d), H = num(v.h), W = num(v.w);
  std::string body = decomposeNCDHW(v);
  const char *axes[3] = {"d", "h", "w"};
  const std::string sizes[3] = {D, H, W};
  for (int a = 0; a < 3; ++a) {
    const std::string o = axes[a], n = sizes[a];
    body += "  i64 " + o + "0, " + o + "1; float f" + o + ";\n"
            "  {\n"
            "    const i64 m = medLowResolutionSize(" + n + ", (float)s[nc * 3 + " + std::to_string(a) + "]);\n"
            "    medLinearSource(" + o + ", m, " + n + ", " + o + "0, " + o + "1, f" + o + ");\n"
            "    " + o + "0 = medNearestExactSource(" + o + "0, " + n + ", m);\n"
            "    " + o + "1 = medNearestExactSource(" + o + "1, " + n + ", m);\n"
            "  }\n";
  }
  body += "  const i64 vol = nc * " + num(v.d * v.h * v.w) + ";\n"
          "  auto at = [&](i64 dd, i64 hh, i64 ww) { return (float)x[vol + (dd * " + H + " + hh) * " + W + " + ww]; };\n"
          "  auto row = [&](i64 dd, i64 hh) { return (1.0f - fw) * at(dd, hh, w0) + fw * at(dd, hh, w1); };\n"
          "  auto slab = [&](i64 dd) { return (1.0f - fh) * row(dd, h0) + fh * row(dd, h1); };\n"
          "  y[i] = (1.0f - fd) * slab(d0) + fd * slab(d1);\n";
  elementwise(op, "simulate_low_resolution", {out("y"), in("x"), in("s")}, {y, x, scale},
              type(x).numel(), body);
}

void FunctionGen::mirror(const Op &op) {
  int x = op.single("input"), flip = op.single("flip"), y = result(op);
  requireFloat(flip, "flip");
  const Dims5 v = dims5(shape(x));
  const std::string t = elemType(x), D = num(v.d), H = num(v.h), W = num(v.w);
  std::string body = decomposeNCDHW(v) +
                     "  const i64 n = nc / " + num(v.c) + ";\n"
                     "  const i64 sd = (float)f[n * 3] != 0.0f ? " + D + " - 1 - d : d;\n"
                     "  const i64 sh = (float)f[n * 3 + 1] != 0.0f ? " + H + " - 1 - h : h;\n"
                     "  const i64 sw = (float)f[n * 3 + 2] != 0.0f ? " + W + " - 1 - w : w;\n"
                     "  y[i] = x[((nc * " + D + " + sd) * " + H + " + sh) * " + W + " + sw];\n";
  elementwise(op, "mirror", {out("y", t), in("x", t), in("f")}, {y, x, flip}, type(x).numel(),
              body);
}

void FunctionGen::shiftSlices(const Op &op) {
  int x = op.single("input"), shift = op.single("shift"), y = result(op);
  requireFloat(shift, "shift");
  const Dims5 v = dims5(shape(x));
  const std::string t = elemType(x), D = num(v.d), H = num(v.h), W = num(v.w);
  std::string body = decomposeNCDHW(v) +
                     "  const i64 sd = (nc / " + num(v.c) + " * " + D + " + d) * 2;\n"
                     "  const i64 fh = medRolledSource(h, " + H + ", (float)s[sd]);\n"
                     "  const i64 fw = medRolledSource(w, " + W + ", (float)s[sd + 1]);\n"
                     "  y[i] = x[((nc * " + D + " + d) * " + H + " + fh) * " + W + " + fw];\n";
  elementwise(op, "shift_slices", {out("y", t), in("x", t), in("s")}, {y, x, shift},
              type(x).numel(), body);
}

void FunctionGen::affineMatrix(const Op &op) {
  int angles = op.single("angles"), scales = op.single("scales"), y = result(op);
  std::optional<int> shear = op.optional("shear");
  for (int id : {angles, scales, y})
    requireFloat(id, "an operand");
  const int64_t n = shape(angles).at(0);
  std::string body =
      "  double a[3], k[3], sh[6] = {0, 0, 0, 0, 0, 0}, m[12];\n"
      "  for (int j = 0; j < 3; ++j) { a[j] = (float)angles[i * 3 + j]; k[j] = (float)scales[i * 3 + j]; }\n";
  std::vector<std::string> params{out("y"), in("angles"), in("scales")};
  std::vector<int> args{y, angles, scales};
  if (shear) {
    requireFloat(*shear, "shear");
    body += "  for (int j = 0; j < 6; ++j) sh[j] = (float)shear[i * 6 + j];\n";
    params.push_back(in("shear"));
    args.push_back(*shear);
  }
  body += "  medAffineMatrix(a, k, sh, m);\n"
          "  for (int j = 0; j < 12; ++j) y[i * 12 + j] = (float)m[j];\n";
  elementwise(op, shear ? "affine_matrix_shear" : "affine_matrix", params, args, n, body);
}

void FunctionGen::orientationMatrix(const Op &op) {
  int u = op.single("u"), y = result(op);
  requireFloat(u, "u");
  requireFloat(y, "the result");
  elementwise(op, "orientation_matrix", {out("y"), in("u")}, {y, u}, shape(u).at(0),
              "  float m[12];\n  medOrientationMatrix((float)u[i], m);\n"
              "  for (int j = 0; j < 12; ++j) y[i * 12 + j] = m[j];\n");
}

void FunctionGen::registerIntensity(Emitters &e) {
  e[OpKind::GaussianBlur] = [](FunctionGen &g, const Op &op) { g.gaussianBlur(op); };
  e[OpKind::SimulateLowResolution] = [](FunctionGen &g, const Op &op) { g.simulateLowResolution(op); };
  e[OpKind::Mirror] = [](FunctionGen &g, const Op &op) { g.mirror(op); };
  e[OpKind::ShiftSlices] = [](FunctionGen &g, const Op &op) { g.shiftSlices(op); };
  e[OpKind::AffineMatrix] = [](FunctionGen &g, const Op &op) { g.affineMatrix(op); };
  e[OpKind::OrientationMatrix] = [](FunctionGen &g, const Op &op) { g.orientationMatrix(op); };
}

} // namespace mlir::med::cuda
