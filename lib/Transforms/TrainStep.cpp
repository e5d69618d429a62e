//===- TrainStep.cpp - loss + gradient + optimizer + EMA (+ loss scaling) -> @train_step -===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace mlir::med {
#define GEN_PASS_DEF_MEDTRAINSTEP
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

bool mlir::med::hasTrainForm(func::FuncOp f) {
  return f.walk([](Operation *op) {
           auto bn = dyn_cast<BatchNormOp>(op);
           return (bn && bn.getTraining()) || isa<AssignOp, DropoutOp>(op)
                      ? WalkResult::interrupt()
                      : WalkResult::advance();
         }).wasInterrupted();
}

void mlir::med::toEvalForm(func::FuncOp f) {
  f.walk([](Operation *op) {
    if (auto bn = dyn_cast<BatchNormOp>(op)) {
      bn.setTraining(false);
    } else if (auto dropout = dyn_cast<DropoutOp>(op)) {
      dropout.getResult().replaceAllUsesWith(dropout.getInput());
      op->erase();
    } else if (isa<AssignOp>(op)) {
      op->erase();
    }
  });
  // The key the dropouts read: an evaluation takes no step's key.
  if (f.isExternal())
    return;
  auto names = f->getAttrOfType<ArrayAttr>("med.input_names");
  llvm::BitVector erase(f.getNumArguments());
  SmallVector<Attribute> kept;
  for (BlockArgument arg : f.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    bool key = type && type.getRank() == 0 && type.getElementType().isInteger(64) &&
               arg.use_empty();
    if (key)
      erase.set(arg.getArgNumber());
    else if (names && arg.getArgNumber() < names.size())
      kept.push_back(names[arg.getArgNumber()]);
  }
  if (erase.none())
    return;
  f.eraseArguments(erase);
  if (names)
    f->setAttr("med.input_names", ArrayAttr::get(f.getContext(), kept));
}

namespace {

struct MedTrainStep : med::impl::MedTrainStepBase<MedTrainStep> {
  using Base::Base;

  ModuleOp module;
  OpBuilder b{static_cast<MLIRContext *>(nullptr)}; // set in runOnOperation

  Value scalar(Location loc, double v) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getF32FloatAttr(v).getValue()));
  }

  // Declares (once) a frozen state tensor like `param`, before the functions.
  void declareState(ParameterOp param, StringRef name, InitKind init, Location loc) {
    if (module.lookupSymbol(name))
      return;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(param);
    b.create<ParameterOp>(loc, name, param.getTensorType(), init, IntegerAttr(),
                          init == InitKind::copy ? FlatSymbolRefAttr::get(param.getSymNameAttr())
                                                 : FlatSymbolRefAttr(),
                          /*frozen=*/true, /*value=*/FloatAttr());
  }

  Value read(Location loc, StringRef name, Type type) {
    return b.create<ParamOp>(loc, type, FlatSymbolRefAttr::get(b.getContext(), name)).getResult();
  }

  bool exempt(ParameterOp p) {
    StringRef name = p.getSymName();
    return exemptNormBias && (p.getTensorType().getRank() <= 1 || name.contains("grn_"));
  }

  // Declares (once) a frozen scalar state tensor after the last parameter.
  void declareScalarState(StringRef name, Location loc) {
    if (module.lookupSymbol(name))
      return;
    OpBuilder::InsertionGuard guard(b);
    ParameterOp last;
    for (auto p : module.getOps<ParameterOp>())
      last = p;
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(module.getBody());
    b.create<ParameterOp>(loc, name, RankedTensorType::get({}, b.getF32Type()), InitKind::zeros,
                          IntegerAttr(), FlatSymbolRefAttr(), /*frozen=*/true,
                          /*value=*/FloatAttr());
  }

  LogicalResult checkOptions() {
    if (optimizer != "adamw" && optimizer != "sgd")
      return module.emitError("med-train-step: unknown optimizer '")
             << optimizer << "' (expected adamw or sgd)";
    if (precision != "fp32" && precision != "bf16-mixed" && precision != "fp16-mixed")
      return module.emitError("med-train-step: unknown precision '")
             << precision << "' (expected fp32, bf16-mixed or fp16-mixed)";
    if (!(initScale > 0) || !std::isfinite(initScale) || initScale > 3.4028234663852886e38)
      return module.emitError("med-train-step: init-scale must be a positive f32 number, got ")
             << initScale;
    if (!(growthFactor > 1) || !std::isfinite(growthFactor))
      return module.emitError("med-train-step: growth-factor must be > 1, got ") << growthFactor;
    if (!(backoffFactor > 0 && backoffFactor < 1))
      return module.emitError("med-train-step: backoff-factor must be in (0, 1), got ")
             << backoffFactor;
    if (growthInterval < 1)
      return module.emitError("med-train-step: growth-interval must be at least 1, got ")
             << static_cast<int64_t>(growthInterval);
    return success();
  }

  // fp16-mixed: @<loss>_scaled(<loss arguments>, %scale) returns (loss · scale, <loss
  // results>); its gradient function is the scaled backward pass of torch.amp.GradScaler
  // (the seed of the reverse sweep is the scale, so gradients are scaled from the loss
  // on). Both are private: they only exist to be inlined into the step.
  FailureOr<func::FuncOp> buildScaledGradient(func::FuncOp lossFn) {
    std::string name = (lossFn.getSymName() + "_scaled").str(), gradName = name + "_grad";
    for (StringRef taken : {StringRef(name), StringRef(gradName)})
      if (module.lookupSymbol(taken))
        return module.emitError("med-train-step: @") << taken << " already exists";
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(lossFn);
    auto scaled = cast<func::FuncOp>(b.clone(*lossFn));
    scaled.setSymName(name);
    scaled.setPrivate();
    scaled->removeAttr("med.input_names");
    Location loc = lossFn.getLoc();
    unsigned n = scaled.getNumArguments();
    scaled.insertArgument(n, RankedTensorType::get({}, b.getF32Type()), {}, loc);
    auto ret = cast<func::ReturnOp>(scaled.getBody().front().getTerminator());
    b.setInsertionPoint(ret);
    if (ret.getNumOperands() == 0 || !isa<RankedTensorType>(ret.getOperand(0).getType()) ||
        cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() != 0)
      return lossFn.emitError("med-train-step: the first result of @")
             << lossFn.getSymName() << " must be a scalar loss";
    SmallVector<Value> results{
        b.create<MulOp>(loc, ret.getOperand(0), scaled.getArgument(n)).getResult()};
    results.append(ret.getOperands().begin(), ret.getOperands().end());
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    scaled.setType(b.getFunctionType(scaled.getArgumentTypes(), ValueRange(results).getTypes()));
    FailureOr<func::FuncOp> grad = buildGradientFunction(scaled);
    if (succeeded(grad))
      grad->setPrivate();
    return grad;
  }

  static std::string inputName(func::FuncOp f, unsigned i) {
    auto names = f->getAttrOfType<ArrayAttr>("med.input_names");
    if (names && i < names.size())
      if (auto s = dyn_cast<StringAttr>(names[i]))
        return s.str();
    return "arg" + std::to_string(i);
  }

  // The loss function's input that is the step's key (its network's dropouts read it): an
  // i64 scalar named "rng" (med-add-loss), or -1.
  static int keyInput(func::FuncOp f) {
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto t = dyn_cast<RankedTensorType>(f.getArgumentTypes()[i]);
      if (t && t.getRank() == 0 && t.getElementType().isInteger(64) && inputName(f, i) == "rng")
        return i;
    }
    return -1;
  }

  // The augmentation pipeline in front of the loss: which argument is the key, and which
  // of its results feeds each of the loss function's inputs (matched by name; kStepKey: the
  // loss's key input, which takes the step's rng).
  static constexpr unsigned kStepKey = ~0u;
  struct Augmentation {
    func::FuncOp fn;
    unsigned key = 0;
    SmallVector<unsigned> resultFor;
  };

  LogicalResult linkAugmentation(func::FuncOp lossFn, Augmentation &aug) {
    auto fn = module.lookupSymbol<func::FuncOp>(augment);
    if (!fn || fn.isExternal())
      return module.emitError("med-train-step: no augmentation function @") << augment;
    auto isKey = [](Type t) {
      auto r = dyn_cast<RankedTensorType>(t);
      return r && r.getRank() == 0 && r.getElementType().isInteger(64);
    };
    unsigned keys = llvm::count_if(fn.getArgumentTypes(), isKey);
    if (keys != 1)
      return fn.emitError("med-train-step: the augmentation @")
             << augment << " must take exactly one tensor<i64> key (the step's rng), it takes "
             << keys;
    aug.key = llvm::find_if(fn.getArgumentTypes(), isKey) - fn.getArgumentTypes().begin();
    auto outputs = fn->getAttrOfType<ArrayAttr>("med.output_names");
    if (!outputs || outputs.size() != fn.getNumResults())
      return fn.emitError("med-train-step: the augmentation @")
             << augment << " needs med.output_names, one per result";
    for (unsigned i = 0; i < lossFn.getNumArguments(); ++i) {
      if (int(i) == keyInput(lossFn)) {
        aug.resultFor.push_back(kStepKey);
        continue;
      }
      std::string want = inputName(lossFn, i);
      auto it = llvm::find_if(outputs, [&](Attribute a) {
        return cast<StringAttr>(a).getValue() == want;
      });
      if (it == outputs.end())
        return fn.emitError("med-train-step: the augmentation @")
               << augment << " returns no '" << want << "', which @" << lossFn.getSymName()
               << " takes (it returns " << outputs << ")";
      unsigned r = it - outputs.begin();
      if (fn.getResultTypes()[r] != lossFn.getArgumentTypes()[i])
        return fn.emitError("med-train-step: the augmentation @")
               << augment << " returns '" << want << "' as " << fn.getResultTypes()[r]
               << ", but @" << lossFn.getSymName() << " takes " << lossFn.getArgumentTypes()[i]
               << " (generate the pipeline for the recipe's batch and patch)";
      aug.resultFor.push_back(r);
    }
    // Augmentation computes in f32 under mixed precision; only what it returns is stored as
    // the step's inputs would be.
    Operation *ret = fn.getBody().front().getTerminator();
    for (Operation &op : fn.getBody().front())
      if (isa<MedDialect>(op.getDialect()) &&
          llvm::none_of(op.getUsers(), [&](Operation *user) { return user == ret; }))
        op.setAttr("med.fp32", b.getUnitAttr());
    // Public as well: the artifact keeps it, so that medrun can show what it does
    // (`medrun augment-preview`) without a step.
    fn.setPublic();
    aug.fn = fn;
    return success();
  }

  void runOnOperation() override {
    module = getOperation();
    b = OpBuilder(&getContext());
    if (failed(checkOptions()))
      return signalPassFailure();
    const bool scaling = precision == "fp16-mixed";
    auto lossFn = module.lookupSymbol<func::FuncOp>(loss);
    if (!lossFn || lossFn.isExternal()) {
      module.emitError("med-train-step: no loss function @") << loss;
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError("med-train-step: @train_step already exists");
      return signalPassFailure();
    }
    func::FuncOp gradFn;
    if (scaling) {
      FailureOr<func::FuncOp> built = buildScaledGradient(lossFn);
      if (failed(built))
        return signalPassFailure();
      gradFn = *built;
    } else if (!(gradFn = module.lookupSymbol<func::FuncOp>(loss + "_grad"))) {
      FailureOr<func::FuncOp> built = buildGradientFunction(lossFn);
      if (failed(built))
        return signalPassFailure();
      gradFn = *built;
    }
    auto names = gradFn->getAttrOfType<ArrayAttr>("med.output_names");
    if (!names)
      return signalPassFailure();
    // The gradient function runs in the step's precision, so that its gradients can be
    // checked on their own (fp16-mixed gradients exist only scaled, inside the step).
    if (precision == "bf16-mixed")
      gradFn->setAttr("med.precision", b.getStringAttr(precision));

    // Inputs: the batch, lr, step[, ema_decay][, loss_scale, growth_tracker], rng. The batch
    // is the loss function's inputs, or the augmentation pipeline's without its key. A loss
    // whose network drops out takes the step's key itself (its input "rng"): without an
    // augmentation that input is the step's rng, in its place among the batch.
    Location loc = lossFn.getLoc();
    Type f32 = RankedTensorType::get({}, b.getF32Type());
    Augmentation aug;
    if (!augment.empty() && failed(linkAugmentation(lossFn, aug)))
      return signalPassFailure();
    func::FuncOp batchFn = aug.fn ? aug.fn : lossFn;
    SmallVector<Type> inputs;
    SmallVector<Attribute> inputNames;
    for (unsigned i = 0; i < batchFn.getNumArguments(); ++i) {
      if (aug.fn && i == aug.key)
        continue;
      inputs.push_back(batchFn.getArgumentTypes()[i]);
      inputNames.push_back(b.getStringAttr(inputName(batchFn, i)));
    }
    size_t batchArgs = inputs.size();
    llvm::StringMap<unsigned> argIndex;
    auto addInput = [&](StringRef name, Type type) {
      argIndex[name] = inputs.size();
      inputs.push_back(type);
      inputNames.push_back(b.getStringAttr(name));
    };
    addInput("lr", f32);
    addInput("step", f32);
    if (ema)
      addInput("ema_decay", f32);
    if (scaling) {
      addInput("loss_scale", f32);
      addInput("growth_tracker", f32);
    }
    const int lossKey = keyInput(lossFn);
    if (lossKey >= 0 && !aug.fn)
      argIndex["rng"] = lossKey;
    else
      addInput("rng", RankedTensorType::get({}, b.getI64Type()));
    SmallVector<StringRef> outputNames{"loss", "grad_norm"};
    if (scaling)
      outputNames.append({"loss_scale", "growth_tracker", "found_inf"});
    if (guardUpdate)
      outputNames.push_back("update_nonfinite");

    b.setInsertionPointAfter(gradFn);
    auto step = b.create<func::FuncOp>(
        loc, "train_step", b.getFunctionType(inputs, SmallVector<Type>(outputNames.size(), f32)));
    step->setAttr("med.input_names", b.getArrayAttr(inputNames));
    step->setAttr("med.output_names", b.getStrArrayAttr(outputNames));
    step->setAttr("med.precision", b.getStringAttr(precision));
    if (scaling)
      step->setAttr("med.init_loss_scale", b.getF64FloatAttr(initScale));
    Block *body = step.addEntryBlock();
    b.setInsertionPointToStart(body);
    auto arg = [&](StringRef name) { return body->getArgument(argIndex.lookup(name)); };
    Value lr = arg("lr"), t = arg("step");
    Value emaDecay = ema ? arg("ema_decay") : Value();
    Value lossScale = scaling ? arg("loss_scale") : Value();

    SmallVector<Value> callArgs(body->getArguments().take_front(batchArgs));
    if (aug.fn) { // augment first; its results are the loss function's inputs
      SmallVector<Value> augArgs(callArgs);
      augArgs.insert(augArgs.begin() + aug.key, arg("rng"));
      auto augmented = b.create<func::CallOp>(loc, aug.fn, augArgs);
      callArgs.clear();
      for (unsigned r : aug.resultFor)
        callArgs.push_back(r == kStepKey ? Value(arg("rng")) : augmented.getResult(r));
    }
    if (scaling)
      callArgs.push_back(lossScale);
    auto call = b.create<func::CallOp>(loc, gradFn, callArgs);
    Value lossValue = call.getResult(scaling ? 1 : 0);
    llvm::StringMap<Value> grads;
    for (auto [name, value] : llvm::zip(names, call.getResults())) {
      StringRef n = cast<StringAttr>(name).getValue();
      if (n.consume_front("grad.") && !n.starts_with("arg"))
        grads[n] = value;
    }
    SmallVector<ParameterOp> params;
    for (auto p : module.getOps<ParameterOp>())
      if (!p.getFrozen() && grads.count(p.getSymName()))
        params.push_back(p);

    // fp16-mixed: found_inf over the scaled gradients, then unscale them (GradScaler.unscale_).
    Value foundInf;
    if (scaling) {
      SmallVector<Value> scaled;
      for (ParameterOp p : params)
        scaled.push_back(grads[p.getSymName()]);
      foundInf = scaled.empty() ? scalar(loc, 0.0) // nothing trained: nothing overflows
                                : b.create<AnyNonFiniteOp>(loc, scaled).getResult();
      Value inverse = b.create<DivOp>(loc, scalar(loc, 1.0), lossScale);
      for (ParameterOp p : params)
        grads[p.getSymName()] = b.create<MulOp>(loc, grads[p.getSymName()], inverse);
    }
    // Keeps `old` instead of `updated` when the step is skipped.
    auto keep = [&](Value old, Value updated) -> Value {
      return foundInf ? b.create<SelectOp>(loc, foundInf, old, updated).getResult() : updated;
    };

    // Global norm of all gradients (one op, summed in a fixed order), then optional clipping.
    Value normSq;
    if (!params.empty()) {
      SmallVector<Value> all;
      for (ParameterOp p : params)
        all.push_back(grads[p.getSymName()]);
      normSq = b.create<SumSquaresOp>(loc, all);
    }
    Value norm = normSq ? b.create<SqrtOp>(loc, normSq).getResult() : scalar(loc, 0.0);
    if (clip > 0) {
      Value coef = b.create<DivOp>(loc, scalar(loc, clip), b.create<AddOp>(loc, norm, scalar(loc, 1e-6)));
      coef = b.create<MinOp>(loc, coef, scalar(loc, 1.0));
      for (ParameterOp p : params)
        grads[p.getSymName()] = b.create<MulOp>(loc, grads[p.getSymName()], coef);
    }

    // With loss scaling, AdamW counts the updates it applied (torch's skipped steps do not
    // advance its state's step), so bias correction uses that count, not the step input.
    Value appliedBefore;
    if (scaling && optimizer == "adamw") {
      declareScalarState("optimizer.step", loc);
      appliedBefore = read(loc, "optimizer.step", f32);
      t = b.create<AddOp>(loc, appliedBefore, scalar(loc, 1.0));
    }

    // 1 - decay once for every EMA update: the updates differ only in their tensors.
    Value emaRate = ema ? b.create<SubOp>(loc, scalar(loc, 1.0), emaDecay).getResult() : Value();
    for (ParameterOp p : params) {
      StringRef name = p.getSymName();
      Type type = p.getType();
      Value g = grads[name], value = read(loc, name, type), updated;
      double wd = exempt(p) ? 0.0 : double(weightDecay);
      if (optimizer == "adamw") {
        std::string m = ("optimizer.exp_avg." + name).str(), v = ("optimizer.exp_avg_sq." + name).str();
        declareState(p, v, InitKind::zeros, loc);
        declareState(p, m, InitKind::zeros, loc);
        Value mOld = read(loc, m, type), vOld = read(loc, v, type);
        auto op = b.create<AdamWOp>(loc, value, g, mOld, vOld, lr, t, b.getF64FloatAttr(beta1),
                                    b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
                                    b.getF64FloatAttr(wd));
        b.create<AssignOp>(loc, m, keep(mOld, op.getNewExpAvg()));
        b.create<AssignOp>(loc, v, keep(vOld, op.getNewExpAvgSq()));
        updated = op.getNewParam();
      } else {
        std::string buf = ("optimizer.momentum_buffer." + name).str();
        declareState(p, buf, InitKind::zeros, loc);
        Value bufOld = read(loc, buf, type);
        auto op = b.create<SGDOp>(loc, value, g, bufOld, lr, llvm::APFloat(double(momentum)),
                                  llvm::APFloat(wd), bool(nesterov));
        b.create<AssignOp>(loc, buf, keep(bufOld, op.getNewMomentumBuffer()));
        updated = op.getNewParam();
      }
      b.create<AssignOp>(loc, name, keep(value, updated));
      if (ema) {
        std::string e = ("ema." + name).str();
        declareState(p, e, InitKind::copy, loc);
        Value old = read(loc, e, type);
        Value delta = b.create<MulOp>(loc, b.create<SubOp>(loc, updated, old), emaRate);
        b.create<AssignOp>(loc, e, keep(old, b.create<AddOp>(loc, old, delta)));
      }
    }
    SmallVector<Value> results{lossValue, norm};
    if (appliedBefore)
      b.create<AssignOp>(loc, "optimizer.step", keep(appliedBefore, t));
    if (scaling) {
      auto update = b.create<UpdateLossScaleOp>(
          loc, lossScale, arg("growth_tracker"), foundInf, b.getF64FloatAttr(growthFactor),
          b.getF64FloatAttr(backoffFactor), b.getI64IntegerAttr(growthInterval));
      results.append({update.getNewScale(), update.getNewGrowthTracker(), foundInf});
    }
    if (guardUpdate) { // any assigned value inf or NaN: the runtime drops the step
      SmallVector<Value> assigned;
      for (AssignOp a : body->getOps<AssignOp>())
        assigned.push_back(a.getValue());
      Value guard = assigned.empty() ? scalar(loc, 0.0)
                                     : b.create<AnyNonFiniteOp>(loc, assigned).getResult();
      if (!assigned.empty()) // med-flatten-optimizer reads it from the flat updates
        guard.getDefiningOp()->setAttr("med.update_guard", b.getUnitAttr());
      results.push_back(guard);
    }
    b.create<func::ReturnOp>(loc, results);
    // Everything the step adds around the gradient is master-weight math: f32 under mixed
    // precision (the runtime keeps these ops' values in f32).
    for (Operation &op : *body)
      if (isa<MedDialect>(op.getDialect()))
        op.setAttr("med.fp32", b.getUnitAttr());
    FailureOr<func::FuncOp> eval = buildEvaluation(lossFn, step, params, "eval_step", false);
    if (failed(eval) ||
        (ema && failed(buildEvaluation(lossFn, *eval, params, "eval_step_ema", true))))
      return signalPassFailure();
  }

  // @eval_step: the loss with the current weights; @eval_step_ema: with the EMA weights
  // (validation as BANIS+ does it). Both take the loss's inputs and change no state.
  FailureOr<func::FuncOp> buildEvaluation(func::FuncOp lossFn, func::FuncOp after,
                                          ArrayRef<ParameterOp> params, StringRef name,
                                          bool withEma) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(after);
    auto eval = cast<func::FuncOp>(b.clone(*lossFn));
    eval.setSymName(name);
    eval.setPublic();
    eval->setAttr("med.output_names", b.getStrArrayAttr({"loss"}));
    SymbolTable symbols(module);
    if (failed(inlineAllCalls(eval, symbols)))
      return failure();
    // Validation as nnU-Net's net.eval(): BatchNorm normalizes with its running statistics,
    // which the evaluation leaves as they are.
    toEvalForm(eval);
    if (!withEma)
      return eval;
    llvm::DenseSet<StringRef> trained;
    for (ParameterOp p : params)
      trained.insert(p.getSymName());
    eval.walk([&](ParamOp read) {
      if (trained.contains(read.getName()))
        read.setNameAttr(FlatSymbolRefAttr::get(b.getStringAttr("ema." + read.getName())));
    });
    return eval;
  }
};

} // namespace
