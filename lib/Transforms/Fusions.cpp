//===- Fusions.cpp - what the fusion-forming passes share ---------------------------===//
#include "Fusions.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::med {

FusionOp buildFusion(OpBuilder &b, Location loc, StringRef templ, ArrayRef<Operation *> ops,
                     ArrayRef<Operation *> escapes,
                     const llvm::SmallPtrSetImpl<Operation *> &members,
                     SmallVectorImpl<Value> &escaping) {
  llvm::SetVector<Value> inputs;
  for (Operation *op : ops)
    for (Value v : op->getOperands())
      if (!members.contains(v.getDefiningOp()))
        inputs.insert(v);
  escaping.clear();
  for (Operation *op : escapes)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !members.contains(u); }))
        escaping.push_back(r);
  auto fusion = b.create<FusionOp>(loc, templ, ValueRange(escaping).getTypes(),
                                   inputs.getArrayRef());
  Block &body = fusion.getBody().front();
  IRMapping map;
  map.map(inputs.getArrayRef(), body.getArguments());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&body);
  for (Operation *op : ops)
    b.clone(*op, map);
  SmallVector<Value> yielded;
  for (Value r : escaping)
    yielded.push_back(map.lookup(r));
  b.create<YieldOp>(loc, yielded);
  return fusion;
}

void useFusionResults(FusionOp fusion, ArrayRef<Value> escaping,
                      const llvm::SmallPtrSetImpl<Operation *> &members) {
  for (auto [r, f] : llvm::zip(escaping, fusion.getResults()))
    Value(r).replaceUsesWithIf(
        f, [&](OpOperand &use) { return !members.contains(use.getOwner()); });
}

FusionOp formFusion(OpBuilder &b, Location loc, StringRef templ, ArrayRef<Operation *> ops,
                    ArrayRef<Operation *> escapes,
                    const llvm::SmallPtrSetImpl<Operation *> &members) {
  SmallVector<Value> escaping;
  FusionOp fusion = buildFusion(b, loc, templ, ops, escapes, members, escaping);
  if (failed(matchRoles(fusion))) {
    fusion->erase();
    return nullptr;
  }
  useFusionResults(fusion, escaping, members);
  return fusion;
}

LogicalResult matchRoles(FusionOp fusion) {
  FailureOr<DictionaryAttr> roles =
      matchFusionTemplate(fusion.getTemplateName(), fusion.getBody().front(), nullptr);
  if (failed(roles))
    return failure();
  if (!roles->empty())
    fusion.setRolesAttr(*roles);
  return success();
}

bool hoistBefore(Operation *op, Operation *at,
                 const llvm::SmallPtrSetImpl<Operation *> &members) {
  if (op->isBeforeInBlock(at))
    return true;
  if (op == at || members.contains(op) || !isMemoryEffectFree(op))
    return false;
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp(); def && !hoistBefore(def, at, members))
      return false;
  op->moveBefore(at);
  return true;
}

std::optional<Type> mixedStorageType(func::FuncOp f) {
  auto precision = f->getAttrOfType<StringAttr>("med.precision");
  if (precision && precision == "bf16-mixed")
    return BFloat16Type::get(f.getContext());
  if (precision && precision == "fp16-mixed")
    return Float16Type::get(f.getContext());
  return std::nullopt;
}

} // namespace mlir::med
