//===- Fusion/Resample.cpp - the `resample` template: a transform and what follows --===//
//
// One thread per output voxel of a med.spatial_transform (med-form-resample-fusions): the
// voxel's position and neighbours are computed once (Spatial.cpp's sampling code), then
// per channel the sample goes through the epilogue's scalar forms (Elementwise.cpp) and
// random numbers (Random.cpp's counters) in f32 registers, and only the yielded values are
// stored, over the slice's box when the body crops. With med.affinities instead, the
// labels at both ends of each affinity are sampled where they are needed (a thread per
// voxel of the crop, all offsets), with the rules of Labels.cpp; the resampled labels are
// never stored.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

void FunctionGen::resampleFusion(const Op &op, const medrun::Function &body) {
  const std::vector<int> &inputs = op.operand("inputs");
  const Op *transform = body.role("transform"), *affinities = body.role("affinities"),
           *crop = body.role("crop");
  if (body.inputs.size() != inputs.size() || body.outputs.size() != op.results.size() ||
      !transform || transform->kind != "spatial_transform")
    error("the resample fusion's body has no spatial transform");
  auto outerInput = [&](int id) {
    for (size_t j = 0; j < body.inputs.size(); ++j)
      if (body.inputs[j] == id)
        return inputs[j];
    return -1;
  };
  const Op &st = *transform;
  const int x = outerInput(st.single("input")), m = outerInput(st.single("matrix"));
  const int v = st.results.at(0);
  if (x < 0 || m < 0)
    error("the transform must read the fusion's inputs");
  const std::vector<int64_t> &ys = body.values.at(v).shape;
  int64_t bound = 0;
  for (int id : op.results)
    bound = std::max(bound, type(id).numel());
  const Sampling s = sampling(st, x, m, ys, std::max(bound, product(ys)));
  const Index &ix = s.ix;
  const std::string I = ix.type();
  const int64_t N = ys[0], C = ys[1], inPlane = product(s.xs, 2), outPlane = product(ys, 2);
  std::vector<std::string> params{in("x", s.valueType()), in("m")};
  std::vector<int> args{x, m};
  std::string b = ix.narrow ? "  const int i = (int)(blockIdx.x * " + std::to_string(kBlock) +
                                  "u + threadIdx.x);\n"
                            : "  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n";

  if (affinities) {
    const Op &aff = *affinities;
    const int a = result(op, 0), mask = result(op, 1);
    requireFloat(a, "the affinities");
    requireFloat(mask, "the mask");
    const std::vector<int64_t> offs = aff.intsAttr("offsets"), low = aff.intsAttr("crop_low");
    const std::vector<int64_t> &as = shape(a);
    if (C != 1 || s.mode != "nearest" || low.size() != 3 || offs.size() % 3 != 0 ||
        as.size() != 5 || as[0] != N || as[1] != static_cast<int64_t>(offs.size() / 3))
      error("the affinities need one channel of nearest labels and consistent offsets");
    const int64_t K = as[1], crop = product(as, 2);
    // Labels compared in their own type (Labels.cpp): integers exactly, floats as float.
    const std::string vt = s.labelsInt ? "i64" : "float";
    const int64_t below = aff.intAttr("unlabelled_below");
    const std::string ub = s.labelsInt ? num(below) : flt(static_cast<double>(below));
    b += "  if (i >= " + ix.lit(N * crop) + ") return;\n";
    b += "  const " + I + " n = i / " + ix.lit(crop) + ", q = i - n * " + ix.lit(crop) + ";\n";
    b += "  const " + I + " xb = n * " + ix.lit(inPlane) + ";\n";
    // The resampled label at output voxel (od, oh, ow) of sample n.
    b += "  auto sample = [&](const " + I + " od, const " + I + " oh, const " + I + " ow) {\n" +
         s.position() + s.channel("(x + xb)", "v") + "    return (" + vt + ")v;\n  };\n";
    b += "  const " + I + " vz = q / " + ix.lit(as[3] * as[4]) + " + " + ix.lit(low[0]) +
         ", vy = q / " + ix.lit(as[4]) + " % " + ix.lit(as[3]) + " + " + ix.lit(low[1]) +
         ", vx = q % " + ix.lit(as[4]) + " + " + ix.lit(low[2]) + ";\n";
    b += "  const " + vt + " la = sample(vz, vy, vx);\n";
    for (int64_t k = 0; k < K; ++k) {
      const std::string D = ix.lit(ys[2]), H = ix.lit(ys[3]), W = ix.lit(ys[4]);
      b += "  {\n    const " + I + " uz = vz + " + ix.lit(offs[3 * k]) + ", uy = vy + " +
           ix.lit(offs[3 * k + 1]) + ", ux = vx + " + ix.lit(offs[3 * k + 2]) + ";\n";
      b += "    const bool in = uz >= 0 && uz < " + D + " && uy >= 0 && uy < " + H +
           " && ux >= 0 && ux < " + W + ";\n";
      b += "    const " + vt + " lb = in ? sample(uz, uy, ux) : la;\n";
      b += "    const bool valid = in && la >= " + ub + " && lb >= " + ub + ";\n";
      b += "    const " + I + " at = (n * " + ix.lit(K) + " + " + ix.lit(k) + ") * " +
           ix.lit(crop) + " + q;\n";
      b += "    aff[at] = valid && la == lb && la != 0 ? 1.0f : 0.0f; // no background affinity\n";
      b += "    mask[at] = valid ? 1.0f : 0.0f;\n  }\n";
    }
    params.insert(params.begin(), {out("aff"), out("mask")});
    args.insert(args.begin(), {a, mask});
    launch(op, src.kernel("resample_affinities", typed(params, args), b, kBlock),
           (N * crop + kBlock - 1) / kBlock, kBlock, args);
    return;
  }

  // The box the threads visit: the slice's, else the whole output.
  std::vector<int64_t> box = ys, low{0, 0, 0, 0, 0};
  const bool cropped = crop != nullptr;
  if (cropped) {
    low = crop->intsAttr("offsets");
    box = body.values.at(crop->results.at(0)).shape;
    if (low.size() != 5 || box.size() != 5 || box[0] != N || box[1] != C)
      error("the slice must crop the spatial axes only");
  }
  const int64_t boxPlane = product(box, 2);
  b += "  if (i >= " + ix.lit(N * boxPlane) + ") return;\n";
  b += "  const " + I + " n = i / " + ix.lit(boxPlane) + ", q = i - n * " + ix.lit(boxPlane) +
       ";\n";
  b += "  const " + I + " od = q / " + ix.lit(box[3] * box[4]) + " + " + ix.lit(low[2]) +
       ", oh = q / " + ix.lit(box[4]) + " % " + ix.lit(box[3]) + " + " + ix.lit(low[3]) +
       ", ow = q % " + ix.lit(box[4]) + " + " + ix.lit(low[4]) + ";\n";
  const bool random = std::any_of(body.ops.begin(), body.ops.end(),
                                  [](const Op &o) { return o.kind == "random"; });
  if (random) // the voxel's index in the output: the random numbers' counter
    b += "  const " + I + " o = (od * " + ix.lit(ys[3]) + " + oh) * " + ix.lit(ys[4]) + " + ow;\n";
  b += s.position();
  b += "  const " + I + " xb = n * " + ix.lit(C * inPlane) + ";\n";
  b += "  for (" + I + " c = 0; c < " + ix.lit(C) + "; ++c) {\n";
  b += "    const auto* xc = x + xb + c * " + ix.lit(inPlane) + ";\n";
  b += s.channel("xc", "t" + std::to_string(v));

  // The epilogue: body values as f32 expressions (registers), inputs read at the voxel's
  // index into their broadcast shape.
  std::map<int, std::string> expr{{v, "t" + std::to_string(v)}};
  auto value = [&](int id) -> std::string {
    if (auto it = expr.find(id); it != expr.end())
      return it->second;
    const int outer = outerInput(id);
    if (outer < 0)
      error("the epilogue reads a value that is neither an input nor computed before");
    requireFloat(outer, "an epilogue input");
    const std::vector<int64_t> st = broadcastStrides(shape(outer), ys);
    const char *coord[5] = {"n", "c", "od", "oh", "ow"};
    std::string at;
    for (int d = 0; d < 5; ++d)
      if (st[d] != 0)
        at += std::string(at.empty() ? "" : " + ") + coord[d] + " * " + ix.lit(st[d]);
    const std::string name = "x" + std::to_string(params.size());
    params.push_back(in(name));
    args.push_back(outer);
    return expr[id] = "(float)" + name + "[" + (at.empty() ? "0" : at) + "]";
  };
  for (const Op &o : body.ops) { // the epilogue: every op but the transform and the crop
    if (&o == transform || &o == crop)
      continue;
    const std::string t = "t" + std::to_string(o.results.at(0));
    if (o.kind == "random") { // Random.cpp's counter of element (n, c, o)
      const int key = outerInput(o.single("key"));
      if (key < 0 || type(key).dtype != DType::I64 || type(key).numel() != 1)
        error("the key must be an i64 scalar input");
      const std::string name = "x" + std::to_string(params.size());
      params.push_back(in(name, "i64"));
      args.push_back(key);
      b += "    float " + t + ";\n" +
           randomDraw(o, ys, name + "[0]",
                      "((n * " + ix.lit(C) + " + c) * " + ix.lit(outPlane) + " + o)", t);
      expr[o.results[0]] = t;
      continue;
    }
    std::vector<std::string> xs;
    for (const char *name : scalarOperands(o.kind))
      xs.push_back(value(o.single(name)));
    const std::string e = o.results.size() == 1 ? scalarExpr(o.kind, xs) : "";
    if (e.empty())
      error("'med." + o.kind + "' in a resample epilogue has no scalar form");
    b += "    const float " + t + " = " + e + ";\n";
    expr[o.results[0]] = t;
  }
  // Each result stored once, in its storage type, at the voxel's index in the box.
  for (size_t j = 0; j < op.results.size(); ++j) {
    const int id = body.outputs[j];
    const int from = cropped && id == crop->results.at(0) ? crop->single("input") : id;
    if (!expr.count(from))
      error("a result of the resample fusion is not computed by its body");
    const std::string name = "y" + std::to_string(j);
    params.insert(params.begin() + j, out(name, s.labelsInt && from == v ? "int" : "float"));
    args.insert(args.begin() + j, op.results[j]);
    b += "    " + name + "[(n * " + ix.lit(C) + " + c) * " + ix.lit(boxPlane) + " + q] = " +
         expr.at(from) + ";\n";
  }
  b += "  }\n";
  launch(op, src.kernel("resample", typed(params, args), b, kBlock),
         (N * boxPlane + kBlock - 1) / kBlock, kBlock, args);
}

void FunctionGen::registerResampleFusion(FusionTemplates &t) {
  t["resample"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.resampleFusion(op, body);
  };
}

} // namespace mlir::med::cuda
