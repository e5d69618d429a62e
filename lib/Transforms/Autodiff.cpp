//===- Autodiff.cpp - reverse-mode differentiation of loss functions ------------===//
//
// Builds `<f>_grad` next to a loss function `f` (see MedAutodiff in Passes.td):
//   1. activity: values reachable from parameters/arguments AND reaching the loss; active ops
//      whose rule reuses forward work are replaced by forms that save it (saveForGradient);
//   2. reverse sweep: each active op's gradient rule turns result gradients into operand
//      gradients, accumulated with med.add;
//   3. the function returns the original results, then parameter and argument gradients.
//
//===----------------------------------------------------------------------------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::med {
#define GEN_PASS_DEF_MEDAUTODIFF
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

bool isScalarLoss(func::FuncOp f) {
  if (f.getNumResults() == 0)
    return false;
  auto t = dyn_cast<RankedTensorType>(f.getResultTypes()[0]);
  return t && t.getRank() == 0 && isa<FloatType>(t.getElementType());
}

Value zerosLike(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0).getValue()));
}

// Active values: reachable from a parameter or float argument, and reaching `loss`.
llvm::DenseSet<Value> activeValues(Block &body, Value loss,
                                   const llvm::DenseSet<StringAttr> &frozen) {
  llvm::DenseSet<Value> varied, useful{loss};
  for (BlockArgument arg : body.getArguments())
    if (isFloatTensor(arg))
      varied.insert(arg);
  for (Operation &op : body) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (isFloatTensor(param.getResult()) && !frozen.contains(param.getNameAttr().getAttr()))
        varied.insert(param.getResult());
      continue;
    }
    if (op.hasTrait<NotDifferentiable>())
      continue;
    if (llvm::any_of(op.getOperands(), [&](Value v) { return varied.contains(v); }))
      for (Value r : op.getResults())
        varied.insert(r);
  }
  for (Operation &op : llvm::reverse(body))
    if (llvm::any_of(op.getResults(), [&](Value r) { return useful.contains(r); }))
      for (Value v : op.getOperands())
        useful.insert(v);
  llvm::DenseSet<Value> active;
  for (Value v : varied)
    if (useful.contains(v))
      active.insert(v);
  return active;
}

} // namespace

FailureOr<func::FuncOp> mlir::med::buildGradientFunction(func::FuncOp f) {
  auto module = f->getParentOfType<ModuleOp>();
  if (!isScalarLoss(f))
    return f.emitError("med-autodiff: the first result of @")
           << f.getSymName() << " must be a scalar floating-point loss";
  if (module.lookupSymbol((f.getSymName() + "_grad").str()))
    return f.emitError("med-autodiff: @") << f.getSymName() << "_grad already exists";
  if (!f.getBody().hasOneBlock())
    return f.emitError("med-autodiff: needs a function with one block (run med-specialize)");
  OpBuilder mb(f->getContext());
  mb.setInsertionPointAfter(f);
  auto g = cast<func::FuncOp>(mb.clone(*f));
  g.setSymName((f.getSymName() + "_grad").str());
  g.setPublic();
  Block &body = g.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  llvm::DenseSet<StringAttr> frozen;
  for (auto decl : module.getOps<ParameterOp>())
    if (decl.getFrozen())
      frozen.insert(decl.getSymNameAttr());
  llvm::DenseSet<Value> active = activeValues(body, ret.getOperand(0), frozen);

  OpBuilder b(ret);
  // Ops whose gradient reuses forward work (group_norm's statistics) are replaced by forms
  // that keep it; only in the gradient function, so forward-only functions stay lean.
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule || llvm::none_of(op.getResults(), [&](Value r) { return active.contains(r); }))
      continue;
    b.setInsertionPoint(&op);
    Operation *saving = rule.saveForGradient(b);
    if (!saving)
      continue;
    for (auto [old, now] : llvm::zip(op.getResults(), saving->getResults())) {
      if (active.erase(old))
        active.insert(now);
      old.replaceAllUsesWith(now);
    }
    op.erase();
  }
  b.setInsertionPoint(ret);
  Value loss = ret.getOperand(0);
  llvm::DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g, Location loc) {
    Value &slot = grads[v];
    slot = slot ? b.create<AddOp>(loc, slot, g).getResult() : g;
  };
  auto lossType = cast<RankedTensorType>(loss.getType());
  grads[loss] = b.create<ConstantOp>(
      ret.getLoc(),
      DenseElementsAttr::get(lossType, b.getFloatAttr(lossType.getElementType(), 1.0).getValue()));

  llvm::MapVector<StringAttr, Value> paramGrads;
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = active.contains(r) ? grads.lookup(r) : Value();
      resultGrads.push_back(g);
      any |= static_cast<bool>(g);
    }
    if (!any)
      continue;
    if (auto param = dyn_cast<ParamOp>(op)) {
      StringAttr name = param.getNameAttr().getAttr();
      Value &slot = paramGrads[name];
      slot = slot ? b.create<AddOp>(op->getLoc(), slot, resultGrads[0]).getResult()
                  : resultGrads[0];
      continue;
    }
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitOpError("has no gradient rule but lies between the parameters and the loss");
    // A result without a gradient stays null (zero); rules of multi-result ops handle it.
    SmallVector<Value> operandGrads;
    if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError("gradient rule returned ")
             << operandGrads.size() << " gradients for " << op->getNumOperands() << " operands";
    for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active.contains(v))
        accumulate(v, g, op->getLoc());
  }

  // Results: the originals, then parameter gradients in declaration order, then arguments.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<Attribute> names;
  for (size_t i = 0; i < results.size(); ++i)
    names.push_back(b.getStringAttr("out" + Twine(i)));
  llvm::DenseMap<StringAttr, Value> readParams;
  for (Operation *op : forward)
    if (auto param = dyn_cast<ParamOp>(op); param && isFloatTensor(param.getResult()))
      readParams.try_emplace(param.getNameAttr().getAttr(), param.getResult());
  for (auto decl : module.getOps<ParameterOp>()) {
    StringAttr name = decl.getSymNameAttr();
    auto read = readParams.find(name);
    if (read == readParams.end() || decl.getFrozen())
      continue;
    Value g = paramGrads.lookup(name);
    if (!g) {
      decl.emitWarning("parameter ") << name << " does not influence the loss of @"
                                     << f.getSymName() << "; its gradient is zero (freeze it?)";
      g = zerosLike(b, ret.getLoc(), read->second);
    }
    results.push_back(g);
    names.push_back(b.getStringAttr("grad." + name.getValue()));
  }
  for (BlockArgument arg : body.getArguments()) {
    if (!isFloatTensor(arg))
      continue;
    Value g = grads.lookup(arg);
    results.push_back(g ? g : zerosLike(b, ret.getLoc(), arg));
    names.push_back(b.getStringAttr("grad.arg" + Twine(arg.getArgNumber())));
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  // Gradients built for operands that need none (data, constants) are unused: drop them.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  g.setType(FunctionType::get(g.getContext(), g.getArgumentTypes(), ValueRange(results).getTypes()));
  g->setAttr("med.output_names", b.getArrayAttr(names));
  return g;
}

namespace {

struct MedAutodiff : med::impl::MedAutodiffBase<MedAutodiff> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> targets;
    if (!function.empty()) {
      auto f = module.lookupSymbol<func::FuncOp>(function);
      if (!f || f.isExternal()) {
        module.emitError("med-autodiff: no function @") << function << " with a body";
        return signalPassFailure();
      }
      targets.push_back(f);
    } else {
      for (auto f : module.getOps<func::FuncOp>())
        if (f.isPublic() && !f.isExternal() && isScalarLoss(f))
          targets.push_back(f);
    }
    for (func::FuncOp f : targets)
      if (failed(buildGradientFunction(f)))
        return signalPassFailure();
  }
};

} // namespace
