//===- Labels.cpp - affinities, remove_label, label_regions, downsample_nearest ------===//
//
// One thread per output element. Labels are read as stored (never rounded to bf16 under
// bf16-mixed, as the CPU backend reads them) and compared in their own type: integers as
// they are, floats (f32, bf16, f16 storage) as float; the rules are the CPU backend's
// (runtime/src/cpu/Labels.cpp), the same results bit for bit.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

namespace {
bool isFloatType(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }
} // namespace

/// Labels copied to a result (remove_label, downsample_nearest): integers keep their type,
/// floats may change storage (an f32 input, a bf16 result under bf16-mixed).
static void requireSameKind(DType x, DType y) {
  if (x != y && !(isFloatType(x) && isFloatType(y)))
    throw CodegenError{"the result differs from the labels in type"};
}

/// The type a label of `id` is compared in, and a literal of an integer attribute in it.
std::pair<std::string, std::string> FunctionGen::labelCompare(int id, int64_t value) const {
  if (type(id).dtype == DType::F64)
    error("f64 labels: the CUDA backend stores floats as f32, bf16 or f16 only");
  if (isFloatType(type(id).dtype))
    return {"float", flt(static_cast<double>(value))};
  elemType(id); // an integer type the device has
  return {"i64", num(value)};
}

void FunctionGen::affinities(const Op &op) {
  int seg = op.single("seg"), aff = result(op, 0), mask = result(op, 1);
  requireFloat(aff, "the affinities");
  requireFloat(mask, "the mask");
  const auto &xs = shape(seg), &ys = shape(aff);
  std::vector<int64_t> offs = op.intsAttr("offsets"), low = op.intsAttr("crop_low");
  if (xs.size() != 5 || ys.size() != 5 || low.size() != 3 || offs.size() % 3 != 0 ||
      ys[1] != static_cast<int64_t>(offs.size() / 3))
    error("inconsistent shapes, offsets or crop");
  auto [vt, ub] = labelCompare(seg, op.intAttr("unlabelled_below"));
  roundOnRead.erase(seg);
  const std::string D = num(xs[2]), H = num(xs[3]), W = num(xs[4]);
  // The offset of affinity o1, one case per affinity.
  std::string body =
      decompose("i", ys, "o") + "  i64 dz = 0, dy = 0, dx = 0;\n  switch ((int)o1) {\n";
  for (size_t k = 0; k < offs.size(); k += 3)
    body += "  case " + std::to_string(k / 3) + ": dz = " + num(offs[k]) + "; dy = " +
            num(offs[k + 1]) + "; dx = " + num(offs[k + 2]) + "; break;\n";
  body += "  }\n"
          "  const i64 vz = o2 + " + num(low[0]) + ", vy = o3 + " + num(low[1]) + ", vx = o4 + " +
          num(low[2]) + ";\n"
          "  const i64 uz = vz + dz, uy = vy + dy, ux = vx + dx; // the other end\n"
          "  const bool inside = uz >= 0 && uz < " + D + " && uy >= 0 && uy < " + H +
          " && ux >= 0 && ux < " + W + ";\n"
          "  // Read clamped into the volume; the inside flag decides.\n"
          "  const i64 cz = uz < 0 ? 0 : uz >= " + D + " ? " + D + " - 1 : uz;\n"
          "  const i64 cy = uy < 0 ? 0 : uy >= " + H + " ? " + H + " - 1 : uy;\n"
          "  const i64 cx = ux < 0 ? 0 : ux >= " + W + " ? " + W + " - 1 : ux;\n"
          "  const " + vt + " a = (" + vt + ")seg[((o0 * " + D + " + vz) * " + H + " + vy) * " + W +
          " + vx];\n"
          "  const " + vt + " b = (" + vt + ")seg[((o0 * " + D + " + cz) * " + H + " + cy) * " + W +
          " + cx];\n"
          "  const bool valid = inside && a >= " + ub + " && b >= " + ub + ";\n"
          "  const bool same = valid && a == b && a != 0; // background has no affinity\n"
          "  aff[i] = same ? 1.0f : 0.0f;\n"
          "  mask[i] = valid ? 1.0f : 0.0f;\n";
  elementwise(op, "affinities", {out("aff"), out("mask"), in("seg", elemType(seg))},
              {aff, mask, seg}, type(aff).numel(), body);
}

void FunctionGen::removeLabel(const Op &op) {
  int x = op.single("input"), y = result(op);
  auto [vt, label] = labelCompare(x, op.intAttr("label"));
  const std::string t = elemType(y), to = labelCompare(x, op.intAttr("replace_with")).second;
  requireSameKind(type(x).dtype, type(y).dtype);
  roundOnRead.erase(x);
  std::string body = "  const " + vt + " v = (" + vt + ")x[i];\n";
  if (isFloatType(type(x).dtype))
    body += "  if (v == " + label + ") y[i] = " + to + "; else y[i] = x[i];\n";
  else
    body += "  y[i] = v == " + label + " ? (" + t + ")" + to + " : x[i];\n";
  elementwise(op, "remove_label", {out("y", t), in("x", elemType(x))}, {y, x}, type(y).numel(),
              body);
}

void FunctionGen::labelRegions(const Op &op) {
  int x = op.single("input"), y = result(op);
  requireFloat(y, "the regions");
  std::vector<int64_t> labels = op.intsAttr("regions"), sizes = op.intsAttr("region_sizes");
  const auto &ys = shape(y);
  if (ys.size() < 2 || static_cast<int64_t>(sizes.size()) != ys[1])
    error("inconsistent regions");
  const std::string vt = labelCompare(x, 0).first;
  roundOnRead.erase(x);
  const int64_t s = product(ys, 2), r = ys[1];
  std::string body = "  const i64 s = i % " + num(s) + ", q = i / " + num(s) + ";\n"
                     "  const i64 r = q % " + num(r) + ", n = q / " + num(r) + ";\n"
                     "  const " + vt + " v = (" + vt + ")x[n * " + num(s) + " + s];\n"
                     "  bool on = false;\n  switch ((int)r) {\n";
  size_t at = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::string any;
    for (int64_t j = 0; j < sizes[k]; ++j)
      any += (j ? " || v == " : "v == ") + labelCompare(x, labels.at(at++)).second;
    body += "  case " + std::to_string(k) + ": on = " + any + "; break;\n";
  }
  body += "  }\n  y[i] = on ? 1.0f : 0.0f;\n";
  elementwise(op, "label_regions", {out("y"), in("x", elemType(x))}, {y, x}, type(y).numel(),
              body);
}

void FunctionGen::downsampleNearest(const Op &op) {
  int x = op.single("input"), y = result(op);
  const auto &xs = shape(x), &ys = shape(y);
  if (xs.size() != 5 || ys.size() != 5)
    error("inconsistent shapes");
  requireSameKind(type(x).dtype, type(y).dtype);
  roundOnRead.erase(x);
  std::string body = decompose("i", ys, "o");
  // torch's nearest-exact source index: an f32 scale, the product rounded to f32 once.
  for (int a = 0; a < 3; ++a) {
    const float scale = static_cast<float>(xs[2 + a]) / static_cast<float>(ys[2 + a]);
    const std::string j = "o" + std::to_string(2 + a), n = num(xs[2 + a]);
    const std::string s = "s" + std::to_string(a);
    body += "  i64 " + s + " = (i64)floorf(((float)" + j + " + 0.5f) * " + flt(scale) +
            ");\n  if (" + s + " > " + n + " - 1) " + s + " = " + n + " - 1;\n";
  }
  body += "  y[i] = x[(((o0 * " + num(xs[1]) + " + o1) * " + num(xs[2]) + " + s0) * " +
          num(xs[3]) + " + s1) * " + num(xs[4]) + " + s2];\n";
  elementwise(op, "downsample_nearest", {out("y", elemType(y)), in("x", elemType(x))}, {y, x},
              type(y).numel(), body);
}

void FunctionGen::registerLabels(Emitters &e) {
  e[OpKind::Affinities] = [](FunctionGen &g, const Op &op) { g.affinities(op); };
  e[OpKind::RemoveLabel] = [](FunctionGen &g, const Op &op) { g.removeLabel(op); };
  e[OpKind::LabelRegions] = [](FunctionGen &g, const Op &op) { g.labelRegions(op); };
  e[OpKind::DownsampleNearest] = [](FunctionGen &g, const Op &op) { g.downsampleNearest(op); };
}

} // namespace mlir::med::cuda
