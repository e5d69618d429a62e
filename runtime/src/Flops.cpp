//===- Flops.cpp - arithmetic and memory traffic of an artifact function ----------===//
//
// The rules are in Flops.h; they follow medc stats (lib/Analysis/ModelStats.cpp) op for op.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Flops.h"

#include "medrun/Error.h"

#include <algorithm>
#include <set>

namespace medrun {
namespace {

const Shape &shapeOf(const Function &fn, int value) { return fn.values.at(value).shape; }

double elements(const Function &fn, int value) {
  return static_cast<double>(numElements(shapeOf(fn, value)));
}

// prod(shape[2:]) * shape[1] of a rank-5 weight-shaped value: the multiply-adds per element
// on the side of the convolution the weight's dim 1 does not count.
double perElementMacs(const Function &fn, const OpInfo &op, int weight) {
  const Shape &w = shapeOf(fn, weight);
  if (w.size() != 5)
    throw Error(str(op.describe(), ": expected a rank-5 weight, got ", shapeStr(w)));
  return static_cast<double>(w[1]) * static_cast<double>(w[2]) * static_cast<double>(w[3]) *
         static_cast<double>(w[4]); // in double: no int64 product to overflow
}

double flopsPerElement(const std::string &kind) {
  static const std::set<std::string> norms = {"group_norm",      "channel_layer_norm",
                                              "grn",             "group_norm_grad",
                                              "channel_layer_norm_grad", "grn_grad"};
  static const std::set<std::string> none = {"pad", "slice", "concat", "param", "constant",
                                             "assign", "reshape"};
  if (norms.count(kind))
    return 7;
  if (kind == "group_norm_apply") // group_norm's 7 less its statistics' 4
    return 3;
  if (kind == "spatial_transform") // a weighted sum of 8 neighbours (per label: argmax)
    return 16;
  if (none.count(kind))
    return 0;
  return 1;
}

bool isLoss(const std::string &kind) {
  return kind == "bce_with_logits" || kind == "dice_ce" || kind == "bce_with_logits_grad" ||
         kind == "dice_ce_grad";
}

} // namespace

OpCost opCost(const Function &fn, const OpInfo &op) {
  OpCost cost;
  cost.count = 1;
  if (op.kind == "conv3d" || op.kind == "shift_sum") { // a shift-sum's result has the input's shape
    cost.flops = 2 * elements(fn, op.results.at(0)) * perElementMacs(fn, op, op.single("weight"));
  } else if (op.kind == "conv3d_transpose") {
    cost.flops = 2 * elements(fn, op.single("input")) * perElementMacs(fn, op, op.single("weight"));
  } else if (op.kind == "conv3d_grad_weight" || op.kind == "shift_sum_grad_weight") {
    // The result has the weight's shape; grad_output that of the convolution's output.
    cost.flops =
        2 * elements(fn, op.single("grad_output")) * perElementMacs(fn, op, op.results.at(0));
  } else if (op.kind == "group_norm_stats") { // as medc stats: 4 per input element
    cost.flops = 4 * elements(fn, op.single("input"));
  } else if (isLoss(op.kind)) {
    for (int logits : op.operand("logits")) // dice_ce: one per deep-supervision level
      cost.flops += 8 * elements(fn, logits);
  } else if (op.kind == "fusion" && op.body) {
    // The body's arithmetic; only the fusion's own inputs and results move (below).
    for (const OpInfo &inner : op.body->ops)
      cost.flops += opCost(*op.body, inner).flops;
  } else if (!op.results.empty()) {
    cost.flops = flopsPerElement(op.kind) * elements(fn, op.results.front());
  }

  const bool bias = std::any_of(op.operands.begin(), op.operands.end(), [](const auto &group) {
    return group.first == "bias" && !group.second.empty();
  });
  if ((op.kind == "conv3d" || op.kind == "shift_sum" || op.kind == "conv3d_transpose") && bias)
    cost.flops += elements(fn, op.results.at(0)); // the bias add, one per output element

  if (op.kind == "param" || op.kind == "reshape" || op.kind == "assign")
    return cost;
  auto bytes = [&](int value) {
    const ValueInfo &v = fn.values.at(value);
    // As stored (bf16/f16 activations under mixed precision): the bytes that move.
    return static_cast<double>(numElements(v.shape)) * static_cast<double>(dtypeSize(v.storage));
  };
  for (const auto &[name, ids] : op.operands)
    for (int id : ids)
      cost.bytes += bytes(id);
  for (int id : op.results)
    cost.bytes += bytes(id);
  return cost;
}

FunctionCost functionCost(const Function &fn) {
  FunctionCost cost;
  for (const OpInfo &op : fn.ops) {
    OpCost c = opCost(fn, op);
    cost.total += c;
    cost.byKind[op.kind] += c;
  }
  return cost;
}

} // namespace medrun
