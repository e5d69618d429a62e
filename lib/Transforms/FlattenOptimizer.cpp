//===- FlattenOptimizer.cpp - one update over flat buffers for alike parameters ------===//
//
// Lanes are found backwards from the assigns (an op joins the lane of its users when all
// of them are in one lane), grouped by a signature that spells a lane's ops with its
// leaves numbered by first use, and each group of two or more lanes is rewritten as one
// chain over flat tensors. See Passes.td for the rules.
//
//===----------------------------------------------------------------------------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDFLATTENOPTIMIZER
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

/// One parameter's update chain.
struct Lane {
  SmallVector<Operation *> ops;     ///< in block order, assigns included
  SmallVector<StringRef> states;    ///< per state slot: the tensor read or assigned
  SmallVector<Value> values;        ///< per value slot: the gradient-like leaf
  SmallVector<Value> uniforms;      ///< per scalar slot: the scalar leaf
  RankedTensorType type;            ///< the lane's shape (f32)
  std::string signature;
};

bool isScalar(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == 0;
}

/// The training step's guard on its updated state (med-train-step guard-update): an
/// any_non_finite of every assigned value. It reads a lane's values without holding the
/// lane back: it reads the flat values instead (padding stays 0 through every update).
bool isUpdateGuard(Operation *op) {
  return isa<AnyNonFiniteOp>(op) && op->hasAttr("med.update_guard");
}

struct MedFlattenOptimizer : med::impl::MedFlattenOptimizerBase<MedFlattenOptimizer> {
  using Base::Base;

  ModuleOp module;
  int nextBuffer = 0;

  /// A tensor that may join a flat buffer: an f32 med.parameter of `type`, not yet a member.
  ParameterOp state(StringRef name, RankedTensorType type) {
    auto p = module.lookupSymbol<ParameterOp>(name);
    return p && p.getType() == type ? p : ParameterOp();
  }

  /// An op a lane may hold: elementwise or scalar-broadcasting, results of one non-scalar
  /// f32 shape, operands of that shape or scalars.
  static bool liftable(Operation *op) {
    FusionKind kind = fusionKind(op);
    if ((kind != FusionKind::Elementwise && kind != FusionKind::Broadcast) ||
        op->getNumRegions() || op->getNumResults() == 0)
      return false;
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || type.getRank() == 0 || !type.getElementType().isF32())
      return false;
    for (Value r : op->getResults())
      if (r.getType() != type)
        return false;
    for (Value v : op->getOperands())
      if (v.getType() != type && !isScalar(v))
        return false;
    return true;
  }

  void runOnOperation() override {
    module = getOperation();
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && failed(flatten(fn)))
        return signalPassFailure();
  }

  LogicalResult flatten(func::FuncOp fn) {
    Block &block = fn.getBody().front();
    llvm::DenseSet<StringRef> taken; // already members of a flat buffer
    for (auto f : module.getOps<FlatBufferOp>())
      for (Attribute m : f.getMembers())
        taken.insert(cast<FlatSymbolRefAttr>(m).getValue());

    // 1. Lanes, backwards: an assign starts one; an op joins when all its users share one.
    llvm::DenseMap<Operation *, unsigned> laneOf;
    llvm::EquivalenceClasses<unsigned> same;
    unsigned count = 0;
    for (Operation &op : llvm::reverse(block)) {
      if (auto a = dyn_cast<AssignOp>(op)) {
        auto type = dyn_cast<RankedTensorType>(a.getValue().getType());
        if (type && type.getRank() > 0 && state(a.getName(), type) && !taken.contains(a.getName())) {
          laneOf[&op] = count;
          same.insert(count++);
        }
        continue;
      }
      if (!liftable(&op) || op.use_empty())
        continue;
      std::optional<unsigned> lane;
      bool inside = true;
      for (Operation *user : op.getUsers()) {
        if (isUpdateGuard(user))
          continue;
        auto it = laneOf.find(user);
        if (it == laneOf.end()) {
          inside = false;
          break;
        }
        if (lane)
          same.unionSets(*lane, it->second);
        lane = same.getLeaderValue(it->second);
      }
      if (inside && lane)
        laneOf[&op] = *lane;
    }
    llvm::MapVector<unsigned, Lane> lanes; // by leader, in block order of first op
    for (Operation &op : block)
      if (auto it = laneOf.find(&op); it != laneOf.end())
        lanes[same.getLeaderValue(it->second)].ops.push_back(&op);

    // 2. Leaves and signatures; lanes that break a rule are dropped.
    llvm::StringMap<SmallVector<Lane *>> groups;
    SmallVector<std::string> order;
    for (auto &[leader, lane] : lanes) {
      if (!describe(lane, taken))
        continue;
      auto [it, fresh] = groups.try_emplace(lane.signature);
      if (fresh)
        order.push_back(lane.signature);
      it->second.push_back(&lane);
    }
    for (const std::string &sig : order) {
      SmallVector<Lane *> &group = groups[sig];
      // A tensor lives in one place: a group whose lanes share a state is left alone.
      llvm::DenseSet<StringRef> names;
      bool distinct = true;
      for (Lane *lane : group)
        for (StringRef name : lane->states)
          distinct = distinct && !taken.contains(name) && names.insert(name).second;
      if (group.size() < 2 || !distinct)
        continue;
      taken.insert(names.begin(), names.end());
      rewrite(fn, group);
    }
    return success();
  }

  /// Numbers the lane's leaves and spells its ops; false when the lane cannot be flattened.
  bool describe(Lane &lane, const llvm::DenseSet<StringRef> &taken) {
    llvm::DenseMap<Operation *, unsigned> index;
    llvm::StringMap<unsigned> stateSlot;
    llvm::DenseMap<Value, unsigned> valueSlot, uniformSlot;
    llvm::raw_string_ostream os(lane.signature);
    auto slotOf = [&](StringRef name) -> std::optional<unsigned> {
      if (taken.contains(name) || !state(name, lane.type))
        return std::nullopt;
      auto [it, fresh] = stateSlot.try_emplace(name, lane.states.size());
      if (fresh)
        lane.states.push_back(name);
      return it->second;
    };
    for (Operation *op : lane.ops) {
      Value first = isa<AssignOp>(op) ? op->getOperand(0) : op->getResult(0);
      auto type = cast<RankedTensorType>(first.getType());
      if (!lane.type)
        lane.type = type;
      if (type != lane.type)
        return false;
      index[op] = index.size();
      // An assign's name is a leaf (a state slot), not part of the lane's shape.
      os << op->getName()
         << (isa<AssignOp>(op) ? op->getDiscardableAttrDictionary() : op->getAttrDictionary())
         << "(";
      if (auto a = dyn_cast<AssignOp>(op)) {
        std::optional<unsigned> k = slotOf(a.getName());
        if (!k)
          return false;
        os << "state" << *k << " ";
      }
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (auto it = index.find(def); def && it != index.end()) {
          os << "op" << it->second << "#" << cast<OpResult>(v).getResultNumber() << " ";
        } else if (isScalar(v)) {
          auto [u, fresh] = uniformSlot.try_emplace(v, lane.uniforms.size());
          if (fresh)
            lane.uniforms.push_back(v);
          os << "scalar" << u->second << " ";
        } else if (auto read = dyn_cast_or_null<ParamOp>(def)) {
          std::optional<unsigned> k = slotOf(read.getName());
          if (!k)
            return false;
          os << "state" << *k << " ";
        } else {
          auto [u, fresh] = valueSlot.try_emplace(v, lane.values.size());
          if (fresh)
            lane.values.push_back(v);
          os << "value" << u->second << " ";
        }
      }
      os << ") ";
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), isUpdateGuard))
          os << "guarded#" << cast<OpResult>(r).getResultNumber() << " ";
    }
    // Scalars must be the very same values in every lane of a group.
    for (Value u : lane.uniforms)
      os << "|" << u.getAsOpaquePointer();
    // A lane of assigns alone updates nothing: flattening it would only copy.
    return !lane.states.empty() && llvm::any_of(lane.ops, [](Operation *op) {
      return !isa<AssignOp>(op);
    });
  }

  void rewrite(func::FuncOp fn, ArrayRef<Lane *> group) {
    OpBuilder b(fn.getContext());
    Block &block = fn.getBody().front();
    Lane &first = *group.front();
    Location loc = first.ops.back()->getLoc();
    const int64_t align = alignment;
    SmallVector<int64_t> offsets;
    int64_t end = 0;
    for (Lane *lane : group) {
      offsets.push_back((end + align - 1) / align * align);
      end = offsets.back() + lane->type.getNumElements();
    }
    const int64_t size = (end + align - 1) / align * align;
    auto flatType = RankedTensorType::get({size}, b.getF32Type());

    // The flat buffers, after the module's last state declaration.
    SmallVector<std::string> names;
    {
      Operation *last = nullptr;
      for (Operation &op : *module.getBody())
        if (isa<ParameterOp, FlatBufferOp>(op))
          last = &op;
      b.setInsertionPointAfter(last);
      for (size_t k = 0; k < first.states.size(); ++k) {
        std::string name;
        do
          name = "flat." + std::to_string(nextBuffer++);
        while (module.lookupSymbol(name));
        SmallVector<Attribute> members;
        for (Lane *lane : group)
          members.push_back(FlatSymbolRefAttr::get(b.getContext(), lane->states[k]));
        b.create<FlatBufferOp>(loc, name, flatType, b.getArrayAttr(members), offsets,
                               static_cast<uint64_t>(align));
        names.push_back(name);
      }
    }
    auto position = [&](Value v) -> Operation * {
      return v.getDefiningOp() ? v.getDefiningOp() : nullptr;
    };
    auto later = [&](Operation *a, Operation *c) {
      return !a ? c : !c ? a : a->isBeforeInBlock(c) ? c : a;
    };
    auto insertAfter = [&](Operation *op) {
      if (op)
        b.setInsertionPointAfter(op);
      else
        b.setInsertionPointToStart(&block);
    };

    // The gradient-like leaves packed, after the last of them.
    SmallVector<Value> packs;
    for (size_t k = 0; k < first.values.size(); ++k) {
      SmallVector<Value> inputs;
      Operation *at = nullptr;
      for (Lane *lane : group) {
        inputs.push_back(lane->values[k]);
        at = later(at, position(lane->values[k]));
      }
      insertAfter(at);
      auto pack = b.create<PackOp>(loc, inputs, offsets, size);
      pack->setAttr("med.fp32", b.getUnitAttr());
      packs.push_back(pack);
      // Reductions over every gradient element read the pack instead.
      for (Operation &op : block) {
        if (!op.hasTrait<ElementSetReduction>() || &op == pack.getOperation())
          continue;
        SmallVector<Value> rest(op.getOperands());
        bool all = true;
        for (Value v : inputs) {
          auto it = llvm::find(rest, v);
          if (it == rest.end()) {
            all = false;
            break;
          }
          rest.erase(it);
        }
        if (!all || !pack->isBeforeInBlock(&op))
          continue;
        rest.push_back(pack);
        op.setOperands(rest);
      }
    }

    // One chain over the flat tensors, after every leaf.
    Operation *at = nullptr;
    for (Value p : packs)
      at = later(at, p.getDefiningOp());
    for (Value u : first.uniforms)
      at = later(at, position(u));
    insertAfter(at);
    IRMapping map;
    llvm::DenseMap<StringRef, unsigned> slotOf;
    for (auto [k, name] : llvm::enumerate(first.states))
      slotOf[name] = k;
    auto read = [&](unsigned k) {
      auto r = b.create<ParamOp>(loc, flatType, FlatSymbolRefAttr::get(b.getContext(), names[k]));
      r->setAttr("med.fp32", b.getUnitAttr());
      return r.getResult();
    };
    SmallVector<Value> reads(first.states.size());
    // The guard's operands that the flat values replace: each lane value it reads, by the
    // flat value of that op and result.
    llvm::DenseMap<Value, std::pair<unsigned, unsigned>> guarded; // -> (op index, result)
    for (Lane *lane : group)
      for (auto [k, op] : llvm::enumerate(lane->ops))
        for (Value r : op->getResults())
          if (llvm::any_of(r.getUsers(), isUpdateGuard))
            guarded[r] = {unsigned(k), cast<OpResult>(r).getResultNumber()};
    SmallVector<Operation *> copies;
    for (Operation *op : first.ops) {
      for (Value v : op->getOperands()) {
        if (map.contains(v) || isScalar(v))
          continue;
        if (auto r = dyn_cast_or_null<ParamOp>(v.getDefiningOp()); r && slotOf.count(r.getName())) {
          unsigned k = slotOf[r.getName()];
          if (!reads[k])
            reads[k] = read(k);
          map.map(v, reads[k]);
        } else if (auto it = llvm::find(first.values, v); it != first.values.end()) {
          map.map(v, packs[it - first.values.begin()]);
        }
      }
      if (auto a = dyn_cast<AssignOp>(op)) {
        auto assign = b.create<AssignOp>(a.getLoc(), names[slotOf[a.getName()]],
                                         map.lookup(a.getValue()));
        for (NamedAttribute attr : a->getDiscardableAttrs())
          assign->setAttr(attr.getName(), attr.getValue());
        copies.push_back(assign);
        continue;
      }
      Operation *copy = b.clone(*op, map);
      for (Value r : copy->getResults())
        r.setType(flatType);
      copies.push_back(copy);
    }
    if (!guarded.empty()) {
      llvm::SetVector<Operation *> guards;
      for (auto &[v, at] : guarded)
        for (Operation *user : v.getUsers())
          if (isUpdateGuard(user))
            guards.insert(user);
      for (Operation *guard : guards) {
        SmallVector<Value> operands;
        llvm::SetVector<Value> flat;
        for (Value v : guard->getOperands()) {
          auto it = guarded.find(v);
          if (it == guarded.end())
            operands.push_back(v);
          else
            flat.insert(copies[it->second.first]->getResult(it->second.second));
        }
        operands.append(flat.begin(), flat.end());
        guard->setOperands(operands);
        if (!copies.back()->isBeforeInBlock(guard)) // after the flat chain it reads
          guard->moveAfter(copies.back());
      }
    }

    // The lanes go; so do state reads nothing else uses.
    llvm::SetVector<ParamOp> reads0;
    for (Lane *lane : group)
      for (Operation *op : llvm::reverse(lane->ops)) {
        for (Value v : op->getOperands())
          if (auto r = dyn_cast_or_null<ParamOp>(v.getDefiningOp()))
            reads0.insert(r);
        op->erase();
      }
    for (ParamOp r : reads0)
      if (r->use_empty())
        r->erase();
  }
};

} // namespace
