//===- Fusion/Resample.cpp - the `resample` template: a transform and what follows --===//
//
// One thread per output voxel of a med.spatial_transform (med-form-resample-fusions),
// kernels/resample.cuh's `resample`: the voxel's position and neighbours are computed once
// (the sampling the transform's own kernel uses), then per channel the sample goes through
// the epilogue, a generated functor of the epilogue's scalar forms (Elementwise.cpp) and
// random numbers (Random.cpp's counters) in f32 registers, which stores only the yielded
// values, over the slice's box when the body crops. With med.affinities instead
// (`resampleAffinities`), the labels at both ends of each affinity are sampled where they
// are needed (a thread per voxel of the crop, all offsets), with the rules of Labels.cpp;
// the resampled labels are never stored. This file reads the roles, chooses the template's
// parameters and emits the functor and the kernel that instantiates the template.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

namespace {
// The resample kernels (kernels/resample.cuh), globals of each (guarded).
const std::string kResampleLibrary = kernelLibrary("resample.cuh");
} // namespace

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
  const int64_t N = ys[0], C = ys[1], outPlane = product(ys, 2);
  std::vector<std::string> params{in("x", s.valueType()), in("m")};
  std::vector<int> args{x, m};

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
    const int64_t below = aff.intAttr("unlabelled_below");
    std::string list;
    for (int64_t o : offs)
      list += (list.empty() ? "" : ", ") + ix.lit(o);
    const std::string extra =
        "  typedef " + std::string(s.labelsInt ? "i64" : "float") + " V;\n" +
        "  static constexpr V below = " +
        (s.labelsInt ? num(below) : flt(static_cast<double>(below))) + ";\n" +
        "  static constexpr int K = " + std::to_string(K) + ";\n" +
        "  static I offset(int k, int axis) {\n    const I o[] = {" + list +
        "};\n    return o[3 * k + axis];\n  }\n";
    params.insert(params.begin(), {out("aff"), out("mask")});
    args.insert(args.begin(), {a, mask});
    launch(op,
           src.kernel("resample_affinities", typed(params, args),
                      "  resampleAffinities<KNAME_shape>(aff, mask, x, m);\n", kBlock,
                      kResampleLibrary + s.shape("KNAME_shape", {N, K, as[2], as[3], as[4]},
                                                 {0, 0, low[0], low[1], low[2]}, extra)),
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

  // The epilogue, the body of the functor's channel(): body values as f32 expressions
  // (registers), inputs read at the voxel's index into their broadcast shape.
  std::string b;
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
    if (o.kind == "dropout") { // the same counter, applied to its input
      const int key = outerInput(o.single("key"));
      if (key < 0 || type(key).dtype != DType::I64 || type(key).numel() != 1)
        error("the key must be an i64 scalar input");
      const std::string x = value(o.single("input"));
      const std::string name = "x" + std::to_string(params.size());
      params.push_back(in(name, "i64"));
      args.push_back(key);
      b += "    float " + t + ";\n" +
           dropoutApply(o, ys, name + "[0]",
                        "((n * " + ix.lit(C) + " + c) * " + ix.lit(outPlane) + " + o)", x, t);
      expr[o.results[0]] = t;
      continue;
    }
    std::vector<std::string> xs;
    for (const char *name : scalarOperands(o.kind))
      xs.push_back(value(o.single(name)));
    const std::string e = o.results.size() == 1 ? scalarExpr(o.kind, xs, &o) : "";
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
  // The functor takes the kernel's parameters but the input and the matrices, in order.
  const std::vector<std::string> ps = typed(params, args);
  std::string sig, pass;
  for (const std::string &p : ps) {
    const std::string name = p.substr(p.find_last_of(' ') + 1);
    if (name == "x" || name == "m")
      continue;
    sig += ", " + p;
    pass += ", " + name;
  }
  const std::string functor =
      "struct KNAME_body {\n  static void channel(const " + I + " n, const " + I + " c, const " +
      I + " q, const " + I + " od, const " + I + " oh, const " + I + " ow, const " + I +
      " o, const " + s.sampleType() + " t" + std::to_string(v) + sig + ") {\n" + b + "  }\n};\n";
  launch(op,
         src.kernel("resample", ps, "  resample<KNAME_shape, KNAME_body>(x, m" + pass + ");\n",
                    kBlock, kResampleLibrary + s.shape("KNAME_shape", box, low) + functor),
         (N * boxPlane + kBlock - 1) / kBlock, kBlock, args);
}

void FunctionGen::registerResampleFusion(FusionTemplates &t) {
  t["resample"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.resampleFusion(op, body);
  };
}

} // namespace mlir::med::cuda
