//===- AddLoss.cpp - wrap a network in a loss function -------------------------===//
#include "med/IR/MedOps.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::med {
#define GEN_PASS_DEF_MEDADDLOSS
#include "med/Transforms/Passes.h.inc"
} // namespace mlir::med

using namespace mlir;
using namespace mlir::med;

namespace {

struct MedAddLoss : med::impl::MedAddLossBase<MedAddLoss> {
  using Base::Base;

  func::FuncOp findNetwork(ModuleOp module) {
    if (!network.empty()) {
      auto f = module.lookupSymbol<func::FuncOp>(network);
      if (!f || f.isExternal())
        module.emitError("med-add-loss: no network function @") << network;
      return f && !f.isExternal() ? f : nullptr;
    }
    func::FuncOp found;
    for (auto f : module.getOps<func::FuncOp>()) {
      if (!f.isPublic() || f.isExternal())
        continue;
      if (found) {
        module.emitError("med-add-loss: several public functions; name the network with network=NAME");
        return nullptr;
      }
      found = f;
    }
    if (!found)
      module.emitError("med-add-loss: no public network function");
    return found;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (StringRef name : {"loss", "infer"})
      if (module.lookupSymbol(name)) {
        module.emitError("med-add-loss: @") << name << " already exists";
        return signalPassFailure();
      }
    func::FuncOp net = findNetwork(module);
    if (!net)
      return signalPassFailure();
    // The image, and the step's key where the network drops out (med.dropout reads it).
    auto isKey = [](Type t) {
      auto r = dyn_cast<RankedTensorType>(t);
      return r && r.getRank() == 0 && r.getElementType().isInteger(64);
    };
    const bool keyed = net.getNumArguments() == 2 && isKey(net.getArgumentTypes()[1]);
    if ((net.getNumArguments() != 1 && !keyed) || net.getNumResults() == 0) {
      net.emitError("med-add-loss: the network must take one image (and, where it drops out, "
                    "the step's key: a tensor<i64>) and return logits");
      return signalPassFailure();
    }
    for (auto f : module.getOps<func::FuncOp>())
      if (f.isPublic())
        f.setPrivate();
    // @infer(image) -> the network's outputs: the forward pass the artifact exports, in eval
    // mode (a network with a train form, e.g. BatchNorm or dropout, gets an eval copy that
    // sets no state and takes no key).
    {
      OpBuilder b(&getContext());
      b.setInsertionPointAfter(net);
      func::FuncOp forward = net;
      if (hasTrainForm(net)) {
        std::string name = (net.getSymName() + "_eval").str();
        if (module.lookupSymbol(name)) {
          module.emitError("med-add-loss: @") << name << " already exists";
          return signalPassFailure();
        }
        forward = cast<func::FuncOp>(b.clone(*net));
        forward.setSymName(name);
        forward.setPrivate();
        toEvalForm(forward);
      }
      if (forward.getNumArguments() != 1) {
        net.emitError("med-add-loss: the network's evaluation form must take the image alone");
        return signalPassFailure();
      }
      auto infer = b.create<func::FuncOp>(net.getLoc(), "infer", forward.getFunctionType());
      infer->setAttr("med.input_names", b.getStrArrayAttr({"image"}));
      Block *body = infer.addEntryBlock();
      b.setInsertionPointToStart(body);
      auto call = b.create<func::CallOp>(net.getLoc(), forward, body->getArguments());
      b.create<func::ReturnOp>(net.getLoc(), call.getResults());
    }

    OpBuilder b(&getContext());
    Location loc = net.getLoc();
    Type image = net.getArgumentTypes()[0];
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Type> args = {image};
    // The loss takes the step's key last, as its input "rng" (med-train-step gives it the
    // step's rng), and hands it to the network.
    auto withKey = [&](SmallVector<Type> types) {
      if (keyed)
        types.push_back(net.getArgumentTypes()[1]);
      return types;
    };
    auto networkArgs = [&](Block *body) {
      SmallVector<Value> v{body->getArgument(0)};
      if (keyed)
        v.push_back(body->getArguments().back());
      return v;
    };
    if (type == "bce_with_logits") {
      std::optional<LossReduction> red = symbolizeLossReduction(reduction);
      if (!red || *red == LossReduction::none) {
        module.emitError("med-add-loss: reduction must be mean, sum or per_channel, got '")
            << reduction << "'";
        return signalPassFailure();
      }
      if (net.getNumResults() != 1) {
        net.emitError("med-add-loss: BCE takes one network output, the network has ")
            << net.getNumResults();
        return signalPassFailure();
      }
      args.push_back(net.getResultTypes()[0]);
      if (mask)
        args.push_back(net.getResultTypes()[0]);
      b.setInsertionPointAfter(net);
      auto fn = b.create<func::FuncOp>(loc, "loss", b.getFunctionType(withKey(args), {f32}));
      SmallVector<StringRef> names = {"image", "target"};
      if (mask)
        names.push_back("mask");
      if (keyed)
        names.push_back("rng");
      fn->setAttr("med.input_names", b.getStrArrayAttr(names));
      Block *body = fn.addEntryBlock();
      b.setInsertionPointToStart(body);
      Value logits = b.create<func::CallOp>(loc, net, networkArgs(body)).getResult(0);
      Value l = b.create<BCEWithLogitsOp>(loc, logits, body->getArgument(1),
                                          mask ? body->getArgument(2) : Value(), Value(), *red,
                                          autoPosWeight, llvm::APFloat(double(maxPosWeight)));
      b.create<func::ReturnOp>(loc, l);
      return;
    }
    if (type != "dice_ce") {
      module.emitError("med-add-loss: unknown loss type '") << type
                                                           << "' (expected bce_with_logits or dice_ce)";
      return signalPassFailure();
    }
    size_t levels = net.getNumResults();
    SmallVector<double> w(weights.begin(), weights.end());
    if (w.empty()) {
      double sum = 0;
      for (size_t i = 0; i < levels; ++i)
        sum += std::ldexp(1.0, -static_cast<int>(i));
      for (size_t i = 0; i < levels; ++i)
        w.push_back(std::ldexp(1.0, -static_cast<int>(i)) / sum);
    }
    if (w.size() != levels) {
      module.emitError("med-add-loss: weights needs one entry per network output (")
          << levels << "), got " << w.size();
      return signalPassFailure();
    }
    for (Type t : net.getResultTypes()) {
      auto logits = cast<RankedTensorType>(t);
      SmallVector<int64_t> shape(logits.getShape());
      shape[1] = 1;
      args.push_back(RankedTensorType::get(shape, logits.getElementType()));
    }
    b.setInsertionPointAfter(net);
    auto fn = b.create<func::FuncOp>(loc, "loss", b.getFunctionType(withKey(args), {f32}));
    // One target per output: "target" alone, or "target.0", "target.1", ... with deep supervision.
    SmallVector<std::string> names = {"image"};
    for (size_t i = 0; i < levels; ++i)
      names.push_back(levels == 1 ? std::string("target") : "target." + std::to_string(i));
    if (keyed)
      names.push_back("rng");
    fn->setAttr("med.input_names", b.getStrArrayAttr(SmallVector<StringRef>(names.begin(), names.end())));
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToStart(body);
    for (size_t i = 0; i < levels; ++i) // output i is at 1/2^i of the patch
      fn.setArgAttr(1 + i, "med.downsample", b.getI64IntegerAttr(int64_t(1) << i));
    auto call = b.create<func::CallOp>(loc, net, networkArgs(body));
    if (ignoreLabel < -1) {
      module.emitError("med-add-loss: ignore-label must be a label value (>= 0) or -1 (none), got ")
          << int64_t(ignoreLabel);
      return signalPassFailure();
    }
    IntegerAttr ignore = ignoreLabel >= 0 ? b.getI64IntegerAttr(ignoreLabel) : IntegerAttr();
    Value l = b.create<DiceCEOp>(loc, call.getResults(),
                                 body->getArguments().slice(1, levels), w,
                                 llvm::APFloat(1e-5), llvm::APFloat(1.0), llvm::APFloat(1.0),
                                 bool(batchDice), bool(includeBackground), ignore);
    b.create<func::ReturnOp>(loc, l);
  }
};

} // namespace
