//===- TrainStep.cpp - loss + gradient + optimizer + EMA -> @train_step ------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"

#include <numeric>

namespace mlir::med {
#define GEN_PASS_DEF_MEDTRAINSTEP
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

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
                          /*frozen=*/true);
  }

  Value read(Location loc, StringRef name, Type type) {
    return b.create<ParamOp>(loc, type, FlatSymbolRefAttr::get(b.getContext(), name)).getResult();
  }

  bool exempt(ParameterOp p) {
    StringRef name = p.getSymName();
    return exemptNormBias && (p.getTensorType().getRank() <= 1 || name.contains("grn_"));
  }

  void runOnOperation() override {
    module = getOperation();
    b = OpBuilder(&getContext());
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError("med-train-step: unknown optimizer '") << optimizer
                                                             << "' (expected adamw or sgd)";
      return signalPassFailure();
    }
    auto lossFn = module.lookupSymbol<func::FuncOp>(loss);
    if (!lossFn || lossFn.isExternal()) {
      module.emitError("med-train-step: no loss function @") << loss;
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError("med-train-step: @train_step already exists");
      return signalPassFailure();
    }
    auto gradFn = module.lookupSymbol<func::FuncOp>(loss + "_grad");
    if (!gradFn) {
      FailureOr<func::FuncOp> built = buildGradientFunction(lossFn);
      if (failed(built))
        return signalPassFailure();
      gradFn = *built;
    }
    auto names = gradFn->getAttrOfType<ArrayAttr>("med.output_names");
    if (!names)
      return signalPassFailure();

    Location loc = lossFn.getLoc();
    Type f32 = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Type> inputs(lossFn.getArgumentTypes());
    size_t batchArgs = inputs.size();
    inputs.append({f32, f32});
    if (ema)
      inputs.push_back(f32);
    b.setInsertionPointAfter(gradFn);
    auto step = b.create<func::FuncOp>(loc, "train_step", b.getFunctionType(inputs, {f32, f32}));
    step->setAttr("med.output_names", b.getStrArrayAttr({"loss", "grad_norm"}));
    SmallVector<Attribute> inputNames;
    if (auto given = lossFn->getAttrOfType<ArrayAttr>("med.input_names"))
      inputNames.append(given.begin(), given.end());
    for (size_t i = inputNames.size(); i < batchArgs; ++i)
      inputNames.push_back(b.getStringAttr("arg" + Twine(i)));
    for (StringRef n : {"lr", "step"})
      inputNames.push_back(b.getStringAttr(n));
    if (ema)
      inputNames.push_back(b.getStringAttr("ema_decay"));
    step->setAttr("med.input_names", b.getArrayAttr(inputNames));
    Block *body = step.addEntryBlock();
    b.setInsertionPointToStart(body);
    Value lr = body->getArgument(batchArgs), t = body->getArgument(batchArgs + 1);
    Value emaDecay = ema ? body->getArgument(batchArgs + 2) : Value();

    auto call = b.create<func::CallOp>(loc, gradFn,
                                       ValueRange(body->getArguments().take_front(batchArgs)));
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

    // Global norm of all gradients, then optional clipping.
    Value normSq;
    for (ParameterOp p : params) {
      Value g = grads[p.getSymName()];
      SmallVector<int64_t> axes(p.getTensorType().getRank());
      std::iota(axes.begin(), axes.end(), 0);
      Value sq = b.create<ReduceOp>(loc, ReduceKind::sum, b.create<MulOp>(loc, g, g), axes, false);
      normSq = normSq ? b.create<AddOp>(loc, normSq, sq).getResult() : sq;
    }
    Value norm = normSq ? b.create<SqrtOp>(loc, normSq).getResult() : scalar(loc, 0.0);
    if (clip > 0) {
      Value coef = b.create<DivOp>(loc, scalar(loc, clip), b.create<AddOp>(loc, norm, scalar(loc, 1e-6)));
      coef = b.create<MinOp>(loc, coef, scalar(loc, 1.0));
      for (ParameterOp p : params)
        grads[p.getSymName()] = b.create<MulOp>(loc, grads[p.getSymName()], coef);
    }

    Value one = ema ? scalar(loc, 1.0) : Value();
    for (ParameterOp p : params) {
      StringRef name = p.getSymName();
      Type type = p.getType();
      Value g = grads[name], value = read(loc, name, type), updated;
      double wd = exempt(p) ? 0.0 : double(weightDecay);
      if (optimizer == "adamw") {
        std::string m = ("optimizer.exp_avg." + name).str(), v = ("optimizer.exp_avg_sq." + name).str();
        declareState(p, v, InitKind::zeros, loc);
        declareState(p, m, InitKind::zeros, loc);
        auto op = b.create<AdamWOp>(loc, value, g, read(loc, m, type), read(loc, v, type), lr, t,
                                    b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
                                    b.getF64FloatAttr(eps), b.getF64FloatAttr(wd));
        b.create<AssignOp>(loc, m, op.getNewExpAvg());
        b.create<AssignOp>(loc, v, op.getNewExpAvgSq());
        updated = op.getNewParam();
      } else {
        std::string buf = ("optimizer.momentum_buffer." + name).str();
        declareState(p, buf, InitKind::zeros, loc);
        auto op = b.create<SGDOp>(loc, value, g, read(loc, buf, type), lr,
                                  llvm::APFloat(double(momentum)), llvm::APFloat(wd),
                                  bool(nesterov));
        b.create<AssignOp>(loc, buf, op.getNewMomentumBuffer());
        updated = op.getNewParam();
      }
      b.create<AssignOp>(loc, name, updated);
      if (ema) {
        std::string e = ("ema." + name).str();
        declareState(p, e, InitKind::copy, loc);
        Value old = read(loc, e, type);
        Value delta = b.create<MulOp>(loc, b.create<SubOp>(loc, updated, old),
                                      b.create<SubOp>(loc, one, emaDecay));
        b.create<AssignOp>(loc, e, b.create<AddOp>(loc, old, delta));
      }
    }
    b.create<func::ReturnOp>(loc, SmallVector<Value>{call.getResult(0), norm});
    if (ema && failed(buildEmaEvaluation(lossFn, step, params)))
      return signalPassFailure();
  }

  // @eval_step_ema: the loss evaluated with the EMA weights (validation as BANIS+ does it).
  LogicalResult buildEmaEvaluation(func::FuncOp lossFn, func::FuncOp after,
                                   ArrayRef<ParameterOp> params) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(after);
    auto eval = cast<func::FuncOp>(b.clone(*lossFn));
    eval.setSymName("eval_step_ema");
    eval.setPublic();
    SymbolTable symbols(module);
    if (failed(inlineAllCalls(eval, symbols)))
      return failure();
    llvm::DenseSet<StringRef> trained;
    for (ParameterOp p : params)
      trained.insert(p.getSymName());
    eval.walk([&](ParamOp read) {
      if (trained.contains(read.getName()))
        read.setNameAttr(FlatSymbolRefAttr::get(b.getStringAttr("ema." + read.getName())));
    });
    return success();
  }
};

} // namespace
