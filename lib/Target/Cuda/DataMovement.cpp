//===- DataMovement.cpp - param, assign, reshape, pad, slice, concat, transpose, broadcast -===//
//
// One thread per output element; param, assign and reshape need no kernel.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

/// A parameter binds its resident buffer: no kernel.
void FunctionGen::param(const Op &op) {
  steps.push_back(json::Object{{"kind", "param"},
                               {"op", static_cast<int64_t>(indexOf(op))},
                               {"name", op.strAttr("name")},
                               {"value", result(op)}});
}

/// An assigned value is downloaded after the step: no kernel.
void FunctionGen::assign(const Op &op) {
  json::Object step{{"kind", "assign"},
                    {"op", static_cast<int64_t>(indexOf(op))},
                    {"name", op.strAttr("name")},
                    {"value", op.single("value")}};
  if (inPlace.count(op.single("value")))
    step["in_place"] = true;
  steps.push_back(std::move(step));
}

/// A reshape aliases its input's buffer: no kernel.
void FunctionGen::reshape(const Op &op) {
  int x = op.single("input"), y = result(op);
  if (type(x).numel() != type(y).numel() || type(x).dtype != type(y).dtype)
    error("reshape changes the number of elements or the element type");
  steps.push_back(json::Object{{"kind", "alias"},
                               {"op", static_cast<int64_t>(indexOf(op))},
                               {"from", x},
                               {"value", y}});
}

void FunctionGen::pad(const Op &op) {
  int x = op.single("input"), y = result(op);
  std::string t = elemType(x);
  const auto &xs = shape(x), &ys = shape(y);
  std::vector<int64_t> low = op.intsAttr("low"), high = op.intsAttr("high");
  if (low.size() != xs.size() || high.size() != xs.size() || ys.size() != xs.size())
    error("need one low and one high entry per axis");
  double value = op.floatAttr("value");
  const DType dt = type(x).dtype;
  std::string fill = dt == DType::F32 || dt == DType::BF16 || dt == DType::F16 ? flt(value)
                     : dt == DType::F64 ? dbl(value)
                                        : "(" + t + ")" + dbl(value);
  std::vector<int64_t> st = contiguousStrides(xs);
  // Axes in 32-bit arithmetic where the output allows it (divisions by constants).
  const int64_t r = static_cast<int64_t>(ys.size()), numel = type(y).numel();
  const Index ix = indexFor(numel);
  // Whether output axes o0..o{count-1} lie inside the input, and the input offset they give.
  std::string inside = "true", off = "0";
  auto axes = [&](int64_t count) {
    for (int64_t d = 0; d < count; ++d) {
      const std::string idx = "(o" + std::to_string(d) + " - " + ix.lit(low[d]) + ")";
      inside += " && " + idx + " >= 0 && " + idx + " < " + ix.lit(xs[d]);
      off += " + (i64)" + idx + " * " + num(st[d]);
    }
  };
  // Rows along the last axis that are whole vectors of the output: a thread writes one
  // vector (one store, and one split of its index into axes for all its elements).
  const int lanes = lanesFor({y});
  if (r > 0 && numel > 0 && ys.back() % lanes == 0) {
    const std::string I = ix.type(), K = std::to_string(lanes);
    std::vector<int64_t> vs = ys;
    vs.back() /= lanes;
    axes(r - 1);
    const std::string last = "o" + std::to_string(r - 1);
    // 16-bit floats move through float (exactly); every other type as itself.
    const std::string read =
        dt == DType::BF16 || dt == DType::F16 ? "(float)x[row + w]" : "x[row + w]";
    std::string body = decompose("(" + I + ")i", vs, "o", ix) +
        "  const bool inRow = " + inside + ";\n"
        "  const i64 row = " + off + ";\n"
        "  Vec<" + t + ", " + K + "> v;\n"
        "  for (int k = 0; k < " + K + "; ++k) {\n"
        "    const " + I + " w = " + last + " * " + K + " + k - " + ix.lit(low[r - 1]) + ";\n"
        "    v[k] = inRow && w >= 0 && w < " + ix.lit(xs[r - 1]) + " ? " + read + " : " + fill +
        ";\n"
        "  }\n"
        "  vstore<" + K + ">(y + i * " + K + ", v);\n";
    elementwise(op, "pad_rows", {out("y", t), in("x", t)}, {y, x}, numel / lanes, body);
    return;
  }
  axes(r);
  std::string body = decompose("(" + ix.type() + ")i", ys, "o", ix) +
                     "  y[i] = (" + inside + ") ? x[" + off + "] : " + fill + ";\n";
  elementwise(op, "pad", {out("y", t), in("x", t)}, {y, x}, type(y).numel(), body);
}

void FunctionGen::slice(const Op &op) {
  int x = op.single("input"), y = result(op);
  std::string t = elemType(x);
  const auto &xs = shape(x), &ys = shape(y);
  std::vector<int64_t> offs = op.intsAttr("offsets"), strides = op.intsAttr("strides");
  if (strides.empty())
    strides.assign(xs.size(), 1);
  if (offs.size() != xs.size() || strides.size() != xs.size() || ys.size() != xs.size())
    error("need one offset and stride per axis");
  for (size_t d = 0; d < xs.size(); ++d)
    if (ys[d] > 0 && (offs[d] < 0 || strides[d] < 1 || offs[d] + (ys[d] - 1) * strides[d] >= xs[d]))
      error("the box does not lie inside the input");
  std::vector<int64_t> st = contiguousStrides(xs);
  // Axes in 32-bit arithmetic where the output allows it (divisions by constants).
  const Index ix = indexFor(type(y).numel());
  std::string body = decompose("(" + ix.type() + ")i", ys, "o", ix), off;
  for (size_t d = 0; d < xs.size(); ++d)
    off += (off.empty() ? "" : " + ") + std::string("(") + num(offs[d]) + " + (i64)o" +
           std::to_string(d) + " * " + num(strides[d]) + ") * " + num(st[d]);
  body += "  y[i] = x[" + (off.empty() ? std::string("0") : off) + "];\n";
  elementwise(op, "slice", {out("y", t), in("x", t)}, {y, x}, type(y).numel(), body);
}

void FunctionGen::concat(const Op &op) {
  const std::vector<int> &ins = op.operand("inputs");
  int y = result(op);
  std::string t = elemType(y);
  const auto &ys = shape(y);
  int64_t axis = op.intAttr("axis"), r = static_cast<int64_t>(ys.size());
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    error("axis out of range");
  const int64_t inner = product(ys, axis + 1), ax = ys[axis];
  std::string body = "  const i64 inner = i % " + num(inner) + ", q = i / " + num(inner) +
                     ";\n  const i64 a = q % " + num(ax) + ", outer = q / " + num(ax) + ";\n";
  std::vector<std::string> params{out("y", t)};
  std::vector<int> args{y};
  int64_t start = 0;
  for (size_t k = 0; k < ins.size(); ++k) {
    if (elemType(ins[k]) != t || shape(ins[k]).size() != ys.size())
      error("inputs and result differ in element type or rank");
    int64_t len = shape(ins[k])[axis];
    std::string name = "x" + std::to_string(k);
    params.push_back(in(name, t));
    args.push_back(ins[k]);
    body += "  " + std::string(k ? "else " : "") + "if (a < " + num(start + len) + ") y[i] = " +
            name + "[(outer * " + num(len) + " + (a - " + num(start) + ")) * " + num(inner) +
            " + inner];\n";
    start += len;
  }
  if (start != ax)
    error("inputs do not add up to the result along the axis");
  elementwise(op, "concat", params, args, type(y).numel(), body);
}

/// Output element i gathers the input element at its indices permuted: axis d of the result
/// is axis permutation[d] of the input, so its index steps the input by that axis's stride.
void FunctionGen::transpose(const Op &op) {
  int x = op.single("input"), y = result(op);
  std::string t = elemType(x);
  const auto &xs = shape(x), &ys = shape(y);
  std::vector<int64_t> perm = op.intsAttr("permutation");
  if (xs.empty() || perm.size() != xs.size() || ys.size() != xs.size())
    error("need one permutation entry per axis of the input");
  std::vector<int64_t> xst = contiguousStrides(xs), st(perm.size());
  std::vector<bool> seen(xs.size(), false);
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(xs.size()) || seen[perm[d]] ||
        ys[d] != xs[perm[d]])
      error("the result is not the input with its axes permuted");
    seen[perm[d]] = true;
    st[d] = xst[perm[d]];
  }
  std::string body = decompose("i", ys, "o");
  body += "  y[i] = x[" + offsetExpr("o", st) + "];\n";
  elementwise(op, "transpose", {out("y", t), in("x", t)}, {y, x}, type(y).numel(), body);
}

void FunctionGen::broadcast(const Op &op) {
  int x = op.single("input"), y = result(op);
  std::string t = elemType(x);
  const auto &ys = shape(y);
  std::string body = decompose("i", ys, "o");
  body += "  y[i] = x[" + offsetExpr("o", broadcastStrides(shape(x), ys)) + "];\n";
  elementwise(op, "broadcast", {out("y", t), in("x", t)}, {y, x}, type(y).numel(), body);
}

/// The strided slice's gradient: zeros, and the gradient where the slice read.
void FunctionGen::sliceGrad(const Op &op) {
  int dy = op.single("grad_output"), dx = result(op);
  std::string t = elemType(dx);
  const auto &gs = shape(dy), &xs = shape(dx);
  std::vector<int64_t> offs = op.intsAttr("offsets"), strides = op.intsAttr("strides");
  if (offs.size() != xs.size() || strides.size() != xs.size() || gs.size() != xs.size())
    error("need one offset and stride per axis");
  std::vector<int64_t> gst = contiguousStrides(gs);
  std::string body = decompose("i", xs, "o"), hit, off;
  for (size_t d = 0; d < xs.size(); ++d) {
    std::string q = "(o" + std::to_string(d) + " - " + num(offs[d]) + ")";
    hit += (hit.empty() ? "" : " && ") + q + " >= 0 && " + q + " % " + num(strides[d]) +
           " == 0 && " + q + " / " + num(strides[d]) + " < " + num(gs[d]);
    off += (off.empty() ? "" : " + ") + q + " / " + num(strides[d]) + " * " + num(gst[d]);
  }
  if (hit.empty())
    hit = "true", off = "0";
  body += "  y[i] = (" + hit + ") ? x[" + off + "] : " +
          (t == "bf16" || t == "f16" ? "0.0f" : "(" + t + ")0") +
          ";\n";
  elementwise(op, "slice_grad", {out("y", t), in("x", t)}, {dx, dy}, type(dx).numel(), body);
}

/// Packed tensors: each input that a kernel of this function writes is placed in its slice
/// of the result (its producer writes there; no copy), the rest are copied. The result is
/// zeroed before the first producer writes into it, which leaves the gaps zero.
void FunctionGen::pack(const Op &op) {
  int y = result(op);
  const std::vector<int> &xs = op.operand("inputs");
  const std::vector<int64_t> offsets = op.intsAttr("offsets");
  if (type(y).dtype != DType::F32 || offsets.size() != xs.size())
    error("needs an f32 result and one offset per input");
  // Aliases (reshapes) and producers of the function's values so far.
  std::map<int, int> aliasOf;
  std::set<int64_t> launching;
  for (const json::Value &v : steps) {
    const json::Object &step = *v.getAsObject();
    const std::string kind = step.getString("kind").value_or("").str();
    const int64_t at = *step.getInteger("op");
    if (kind == "alias")
      aliasOf[*step.getInteger("value")] = *step.getInteger("from");
    if (kind == "launch")
      launching.insert(at);
  }
  std::optional<int64_t> first; // the earliest producer of a placed input
  json::Array places;
  std::vector<size_t> rest; // the inputs copied instead
  for (size_t i = 0; i < xs.size(); ++i) {
    int root = xs[i];
    while (aliasOf.count(root))
      root = aliasOf[root];
    auto p = producers.find(root);
    const bool placeable = type(root).dtype == DType::F32 && p != producers.end() &&
                           launching.count(p->second) && !placed.count(root) &&
                           offsets[i] >= 0 && offsets[i] % 4 == 0 &&
                           offsets[i] + type(xs[i]).numel() <= type(y).numel();
    if (!placeable) {
      if (type(xs[i]).numel() > 0)
        rest.push_back(i);
      continue;
    }
    placed.insert(root);
    first = std::min(first.value_or(p->second), p->second);
    places.push_back(json::Object{{"kind", "place"},
                                  {"op", static_cast<int64_t>(indexOf(op))},
                                  {"value", root},
                                  {"into", y},
                                  {"offset", offsets[i] * 4}});
  }
  // Zero the result before anything writes into it: before the first placed producer.
  const size_t mark = steps.size();
  elementwise(op, "pack_zero", {out("y")}, {y}, type(y).numel(), "  y[i] = 0.0f;\n");
  if (first && steps.size() > mark) {
    json::Value zero = std::move(steps.back());
    steps.pop_back();
    auto at = std::find_if(steps.begin(), steps.end(), [&](const json::Value &v) {
      return *v.getAsObject()->getInteger("op") == *first;
    });
    steps.insert(at, std::move(zero));
  }
  for (json::Value &v : places)
    steps.push_back(std::move(v));
  // The rest is copied (converted from bf16/f16 where stored so), up to kPerCopy inputs per
  // kernel: one thread per element, each finding its input among the chunk's.
  constexpr size_t kPerCopy = 24;
  for (size_t c = 0; c < rest.size(); c += kPerCopy) {
    std::vector<std::string> params{out("y")};
    std::vector<int> args{y};
    std::string body;
    int64_t begin = 0;
    for (size_t k = c; k < std::min(rest.size(), c + kPerCopy); ++k) {
      const size_t i = rest[k];
      const std::string x = "x" + std::to_string(k - c);
      params.push_back(in(x, elemType(xs[i])));
      args.push_back(xs[i]);
      const int64_t end = begin + type(xs[i]).numel();
      body += "  " + std::string(k == c ? "" : "else ") + "if (i < " + num(end) + ") y[" +
              num(offsets[i] - begin) + " + i] = (float)" + x + "[i - " + num(begin) + "];\n";
      begin = end;
    }
    elementwise(op, "pack_copy", params, args, begin, body);
  }
}

/// A gradient bucket summed over the ranks: in place, so each result aliases its input (a
/// later pack then places the input's producer in its slice); the runtime hands the bucket to
/// its reducer at the `all_reduce` step, as one slice where the inputs lie as the bucket says.
void FunctionGen::allReduce(const Op &op) {
  const std::vector<int> &xs = op.operand("inputs");
  if (xs.size() != op.results.size())
    error("needs one result per input");
  for (size_t i = 0; i < xs.size(); ++i)
    steps.push_back(json::Object{{"kind", "alias"},
                                 {"op", static_cast<int64_t>(indexOf(op))},
                                 {"from", xs[i]},
                                 {"value", op.results[i]}});
  json::Array args;
  for (int x : xs)
    args.push_back(x);
  steps.push_back(json::Object{{"kind", "all_reduce"},
                               {"op", static_cast<int64_t>(indexOf(op))},
                               {"args", std::move(args)}});
}

void FunctionGen::registerDataMovement(Emitters &e) {
  e[OpKind::Param] = [](FunctionGen &g, const Op &op) { g.param(op); };
  e[OpKind::Assign] = [](FunctionGen &g, const Op &op) { g.assign(op); };
  e[OpKind::Reshape] = [](FunctionGen &g, const Op &op) { g.reshape(op); };
  e[OpKind::Pack] = [](FunctionGen &g, const Op &op) { g.pack(op); };
  e[OpKind::AllReduce] = [](FunctionGen &g, const Op &op) { g.allReduce(op); };
  e[OpKind::Pad] = [](FunctionGen &g, const Op &op) { g.pad(op); };
  e[OpKind::Slice] = [](FunctionGen &g, const Op &op) { g.slice(op); };
  e[OpKind::Concat] = [](FunctionGen &g, const Op &op) { g.concat(op); };
  e[OpKind::Transpose] = [](FunctionGen &g, const Op &op) { g.transpose(op); };
  e[OpKind::Broadcast] = [](FunctionGen &g, const Op &op) { g.broadcast(op); };
  e[OpKind::SliceGrad] = [](FunctionGen &g, const Op &op) { g.sliceGrad(op); };
}

} // namespace mlir::med::cuda
