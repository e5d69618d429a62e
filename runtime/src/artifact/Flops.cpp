//===- Flops.cpp - arithmetic and memory traffic of an artifact function ----------===//
//
// The FLOP rule of each op is the op table's (med/OpTable.h), as for medc stats.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Flops.h"

#include "medrun/Error.h"
#include "med/OpTable.h"

namespace medrun {

OpCost opCost(const Function &fn, const OpInfo &op) {
  OpCost cost;
  cost.count = 1;
  if (op.op() == med::ops::OpKind::Fusion && op.body) {
    // The body's arithmetic; only the fusion's own inputs and results move (below).
    for (const OpInfo &inner : op.body->ops)
      cost.flops += opCost(*op.body, inner).flops;
  } else {
    med::ops::OpShapes shapes;
    shapes.operand = [&](const char *name) {
      std::vector<std::vector<int64_t>> out;
      for (const auto &[group, ids] : op.operands)
        if (group == name)
          for (int id : ids)
            out.push_back(fn.values.at(id).shape);
      return out;
    };
    for (int id : op.results)
      shapes.results.push_back(fn.values.at(id).shape);
    med::ops::OpFlops flops = med::ops::flopsOf(*op.schema, shapes);
    if (!flops.problem.empty())
      throw Error(str(op.describe(), ": ", flops.problem));
    cost.flops = flops.flops;
  }

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
