//===- OpTable.cpp - the op table and the rules read from it ---------------------===//
#include "med/OpTable.h"

#include <algorithm>

namespace med::ops {

const std::vector<OpSchema> &allOps() {
  static const std::vector<OpSchema> table = {
#include "med/OpTable.inc"
  };
  return table;
}

const OpSchema *findOp(std::string_view name) {
  const std::vector<OpSchema> &ops = allOps(); // sorted by name (the generator's order)
  auto it = std::lower_bound(ops.begin(), ops.end(), name,
                             [](const OpSchema &op, std::string_view n) { return op.name < n; });
  return it != ops.end() && it->name == name ? &*it : nullptr;
}

const OperandSpec *OpSchema::operand(std::string_view n) const {
  for (const OperandSpec &o : operands)
    if (o.name == n)
      return &o;
  return nullptr;
}

const AttrSpec *OpSchema::attr(std::string_view n) const {
  for (const AttrSpec &a : attrs)
    if (a.name == n)
      return &a;
  return nullptr;
}

namespace {
double elements(const std::vector<int64_t> &shape) {
  double n = 1; // in double: no int64 product to overflow
  for (int64_t d : shape)
    n *= static_cast<double>(d);
  return n;
}

/// Weight dim 1 times the kernel volume: the multiply-adds per element on the side of the
/// convolution that the weight's dim 0 does not count (Cin/groups·k³ of a conv3d).
double perElementMacs(const std::vector<int64_t> &weight, OpFlops &f) {
  if (weight.size() != 5) {
    std::string shape;
    for (int64_t d : weight)
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    f.problem = "expected a rank-5 weight, got " + (shape.empty() ? "none" : shape);
    return 0;
  }
  return static_cast<double>(weight[1]) * elements({weight.begin() + 2, weight.end()});
}

std::vector<int64_t> first(const std::vector<std::vector<int64_t>> &shapes) {
  return shapes.empty() ? std::vector<int64_t>{} : shapes.front();
}
} // namespace

OpFlops flopsOf(const OpSchema &op, const OpShapes &s) {
  OpFlops f;
  const std::vector<int64_t> result = s.results.empty() ? std::vector<int64_t>{} : s.results[0];
  switch (op.flopRule) {
  case FlopRule::None:
  case FlopRule::Fusion:
    return f;
  case FlopRule::PerElement: {
    double n = 0;
    if (*op.flopOperand)
      for (const std::vector<int64_t> &shape : s.operand(op.flopOperand))
        n += elements(shape);
    else
      n = elements(result);
    f.flops = op.perElement * n;
    return f;
  }
  case FlopRule::Conv: // a shift-sum's result has its input's shape: the same rule
    f.macs = elements(result) * perElementMacs(first(s.operand("weight")), f);
    break;
  case FlopRule::ConvTranspose: // each input element is scattered to Cout/groups·k³ outputs
    f.macs = elements(first(s.operand("input"))) * perElementMacs(first(s.operand("weight")), f);
    break;
  case FlopRule::ConvGradWeight: // the result has the weight's shape
    f.macs = elements(first(s.operand("grad_output"))) * perElementMacs(result, f);
    break;
  }
  if (op.operand("bias") && !s.operand("bias").empty())
    f.biasAdd = elements(result);
  f.flops = 2 * f.macs + f.biasAdd;
  return f;
}

std::vector<std::string>
missingPieces(const std::vector<std::pair<std::string, Provides>> &registries) {
  std::vector<std::string> missing;
  for (const OpSchema &op : allOps())
    for (const auto &[piece, provides] : registries)
      if (!provides(op.kind))
        missing.push_back("op '" + std::string(op.name) + "': no " + piece);
  return missing;
}

} // namespace med::ops
