//===- Patterns.cpp - groups of ONNX nodes that are one med op -------------------===//
//
// torch.onnx.export (opset < 18/20) has no GroupNorm and no GELU node; it writes
//   GroupNorm(G, C):  Reshape(x, [0, G, -1]) -> InstanceNormalization(ones(G), zeros(G), eps)
//                     -> Reshape(., Shape(x)) -> Mul(weight as [C,1,1,1]) -> Add(bias as [C,1,1,1])
//   GELU (erf):       Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)
// Each group is found here, on the graph (before any conversion), and becomes one med op at
// its last node; its inner nodes are skipped. A group whose inner tensor is read elsewhere is
// left alone (its nodes then convert, or are refused, one by one).
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include <cmath>

using namespace mlir;
using namespace mlir::med::onnx_import;

namespace {

struct Matcher {
  Importer &im;
  const onnx::GraphProto &graph;

  const onnx::NodeProto *producerOf(const std::string &name, const char *opType) const {
    auto it = im.producer.find(name);
    if (it == im.producer.end())
      return nullptr;
    const onnx::NodeProto &n = graph.node(it->second);
    return n.op_type() == opType ? &n : nullptr;
  }
  int indexOf(const onnx::NodeProto *n) const {
    for (const std::string &out : n->output())
      if (!out.empty())
        return im.producer.lookup(out);
    return 0; // unreachable: n was found as the producer of a named output
  }
  // Read by exactly one node and not a graph output: safe to fold into a group.
  bool inner(const std::string &name) const {
    return im.readers.lookup(name) == 1 && !im.graphOutputs.count(name);
  }
  // The values of a Constant node or initializer (small ones only).
  std::optional<Constant> constant(const std::string &name) const {
    Constant c;
    if (auto init = im.initializers.find(name); init != im.initializers.end()) {
      llvm::Expected<Constant> d = im.decode(*init->second, name);
      if (!d) {
        llvm::consumeError(d.takeError());
        return std::nullopt;
      }
      c = std::move(*d);
    } else if (const onnx::NodeProto *n = producerOf(name, "Constant")) {
      const onnx::AttributeProto *v = im.attribute(*n, "value");
      if (!v || v->type() != onnx::AttributeProto::TENSOR)
        return std::nullopt;
      llvm::Expected<Constant> d = im.decode(v->t(), name);
      if (!d) {
        llvm::consumeError(d.takeError());
        return std::nullopt;
      }
      c = std::move(*d);
    } else {
      return std::nullopt;
    }
    if (c.numElements() > 4096)
      return std::nullopt;
    if (llvm::Error e = im.decodeValues(c, name)) {
      llvm::consumeError(std::move(e));
      return std::nullopt;
    }
    return c;
  }
  bool scalarNear(const std::string &name, double value) const {
    std::optional<Constant> c = constant(name);
    if (!c || c->numElements() != 1)
      return false;
    double v = c->isFloat ? c->floats[0] : double(c->ints[0]);
    return std::fabs(v - value) <= 1e-6 * std::fabs(value);
  }
  bool allEqual(const Constant &c, double value) const {
    if (!c.isFloat)
      return false;
    return llvm::all_of(c.floats, [&](double v) { return v == value; });
  }

  // GroupNorm's simulation ending at `root` (an Add, or the second Reshape when the norm has
  // no affine parameters).
  std::optional<PatternMatch> groupNorm(const onnx::NodeProto &root,
                                        std::vector<int> &group) const {
    PatternMatch m{PatternMatch::GroupNorm, "", "", "", 0, 1e-5};
    const onnx::NodeProto *reshapeBack = nullptr;
    if (root.op_type() == "Add" && root.input_size() == 2) {
      for (int side = 0; side < 2 && !reshapeBack; ++side) {
        const onnx::NodeProto *mul = producerOf(root.input(side), "Mul");
        if (!mul || mul->input_size() != 2 || !inner(root.input(side)))
          continue;
        for (int s = 0; s < 2; ++s)
          if (const onnx::NodeProto *r = producerOf(mul->input(s), "Reshape");
              r && inner(mul->input(s))) {
            reshapeBack = r;
            m.gamma = mul->input(1 - s);
            m.beta = root.input(1 - side);
            group.push_back(indexOf(mul));
            break;
          }
      }
    } else if (root.op_type() == "Reshape") {
      reshapeBack = &root;
    }
    if (!reshapeBack || reshapeBack->input_size() != 2)
      return std::nullopt;
    const onnx::NodeProto *norm = producerOf(reshapeBack->input(0), "InstanceNormalization");
    const onnx::NodeProto *shape = producerOf(reshapeBack->input(1), "Shape");
    if (!norm || !shape || norm->input_size() != 3 || shape->input_size() != 1 ||
        !inner(reshapeBack->input(0)) || !inner(reshapeBack->input(1)))
      return std::nullopt;
    const onnx::NodeProto *reshapeIn = producerOf(norm->input(0), "Reshape");
    if (!reshapeIn || reshapeIn->input_size() != 2 || !inner(norm->input(0)) ||
        reshapeIn->input(0) != shape->input(0))
      return std::nullopt;
    std::optional<Constant> target = constant(reshapeIn->input(1));
    if (!target || target->isFloat || target->ints.size() != 3 || target->ints[0] != 0 ||
        target->ints[1] <= 0 || target->ints[2] != -1)
      return std::nullopt;
    m.groups = target->ints[1];
    std::optional<Constant> ones = constant(norm->input(1)), zeros = constant(norm->input(2));
    if (!ones || !zeros || ones->numElements() != m.groups || zeros->numElements() != m.groups ||
        !allEqual(*ones, 1.0) || !allEqual(*zeros, 0.0))
      return std::nullopt;
    llvm::Expected<double> eps = im.floatAttr(*norm, "epsilon", 1e-5);
    if (!eps) {
      llvm::consumeError(eps.takeError());
      return std::nullopt;
    }
    m.epsilon = *eps;
    m.input = reshapeIn->input(0);
    for (const onnx::NodeProto *n : {reshapeIn, norm, shape, reshapeBack})
      group.push_back(indexOf(n));
    return m;
  }

  std::optional<PatternMatch> gelu(const onnx::NodeProto &root, std::vector<int> &group) const {
    if (root.op_type() != "Mul" || root.input_size() != 2)
      return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      if (!scalarNear(root.input(1 - side), 0.5))
        continue;
      const onnx::NodeProto *mul = producerOf(root.input(side), "Mul");
      if (!mul || mul->input_size() != 2 || !inner(root.input(side)))
        continue;
      for (int s = 0; s < 2; ++s) {
        const onnx::NodeProto *add = producerOf(mul->input(s), "Add");
        if (!add || add->input_size() != 2 || !inner(mul->input(s)))
          continue;
        for (int t = 0; t < 2; ++t) {
          const onnx::NodeProto *erf = producerOf(add->input(t), "Erf");
          if (!erf || erf->input_size() != 1 || !inner(add->input(t)) ||
              !scalarNear(add->input(1 - t), 1.0))
            continue;
          const onnx::NodeProto *div = producerOf(erf->input(0), "Div");
          if (!div || div->input_size() != 2 || !inner(erf->input(0)) ||
              div->input(0) != mul->input(1 - s) || !scalarNear(div->input(1), std::sqrt(2.0)))
            continue;
          for (const onnx::NodeProto *n : {div, erf, add, mul})
            group.push_back(indexOf(n));
          return PatternMatch{PatternMatch::Gelu, div->input(0), "", "", 0, 0};
        }
      }
    }
    return std::nullopt;
  }
};

} // namespace

void Importer::matchPatterns(const onnx::GraphProto &g) {
  absorbed.assign(g.node_size(), false);
  Matcher matcher{*this, g};
  auto claim = [&](int root, PatternMatch m, const std::vector<int> &group) {
    for (int n : group)
      absorbed[n] = true;
    patternRoots[root] = std::move(m);
  };
  // Affine GroupNorm first (ending at its Add), then the ones without weight and bias.
  for (int pass = 0; pass < 2; ++pass)
    for (int n = 0; n < g.node_size(); ++n) {
      if (absorbed[n] || patternRoots.count(n))
        continue;
      std::vector<int> group;
      const onnx::NodeProto &node = g.node(n);
      if ((pass == 0 && node.op_type() == "Add") || (pass == 1 && node.op_type() == "Reshape")) {
        if (std::optional<PatternMatch> m = matcher.groupNorm(node, group))
          claim(n, *m, group);
      } else if (pass == 0 && node.op_type() == "Mul") {
        if (std::optional<PatternMatch> m = matcher.gelu(node, group))
          claim(n, *m, group);
      }
    }
  // A root absorbed by a later group (cannot happen for these shapes) would lose its node.
  for (auto &[root, m] : patternRoots)
    absorbed[root] = false;
}
