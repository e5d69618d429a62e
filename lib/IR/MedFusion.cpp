//===- MedFusion.cpp - med.fusion, its templates' matchers, fusion kinds ---------===//
#include "med/IR/MedOps.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::med;

FusionKind mlir::med::fusionKind(Operation *op) {
  if (auto f = dyn_cast<FusionOpInterface>(op))
    return f.getFusionKind();
  return FusionKind::Opaque;
}

FusionKind mlir::med::broadcastingKind(Operation *op) {
  for (Value v : op->getOperands())
    if (v.getType() != op->getResult(0).getType())
      return FusionKind::Broadcast;
  return FusionKind::Elementwise;
}

ArrayRef<StringRef> mlir::med::fusionTemplates() {
  static const StringRef names[] = {"elementwise"};
  return names;
}

namespace {
/// Does `from` broadcast to `to` (NumPy rules: trailing axes aligned, sizes equal or 1)?
bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1)
      return false;
  }
  return true;
}

/// The `elementwise` template: one thread per element of the results' shape; each body op
/// is elementwise or broadcast and produces that shape, so every value lives in registers
/// and only block arguments may be read at broadcast indices.
LogicalResult matchElementwise(Block &body, llvm::function_ref<InFlightDiagnostic()> report) {
  auto fail = [&](auto &&...parts) {
    if (report)
      (report() << ... << parts);
    return failure();
  };
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().empty())
    return fail("template 'elementwise': the body yields nothing");
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  RankedTensorType space = shapeOf(yield.getValues()[0]);
  if (!space.hasStaticShape())
    return fail("template 'elementwise': results need static shapes");
  size_t ops = 0;
  for (Operation &op : body.without_terminator()) {
    ++ops;
    FusionKind kind = fusionKind(&op);
    if (kind != FusionKind::Elementwise && kind != FusionKind::Broadcast)
      return fail("template 'elementwise' cannot run '", op.getName(),
                  "': expected ops of elementwise or broadcast access");
    for (Value r : op.getResults())
      if (shapeOf(r).getShape() != space.getShape() ||
          !isa<FloatType>(shapeOf(r).getElementType()))
        return fail("template 'elementwise': '", op.getName(), "' produces ", r.getType(),
                    ", expected floats of the results' shape ", space);
  }
  if (ops == 0)
    return fail("template 'elementwise': the body has no ops");
  for (BlockArgument arg : body.getArguments())
    if (!isa<FloatType>(shapeOf(arg).getElementType()) ||
        !broadcastsTo(shapeOf(arg).getShape(), space.getShape()))
      return fail("template 'elementwise': input #", arg.getArgNumber(), " of type ",
                  arg.getType(), " does not broadcast to the results' shape ", space);
  for (Value v : yield.getValues()) {
    if (isa<BlockArgument>(v))
      return fail("template 'elementwise': a result is an input; expected results of body ops");
    if (shapeOf(v).getShape() != space.getShape())
      return fail("template 'elementwise': results of different shapes ", v.getType(),
                  " and ", space);
  }
  return success();
}
} // namespace

LogicalResult mlir::med::matchFusionTemplate(StringRef name, Block &body,
                                             llvm::function_ref<InFlightDiagnostic()> report) {
  if (name == "elementwise")
    return matchElementwise(body, report);
  if (report)
    report() << "unknown fusion template '" << name << "' (expected one of: "
             << llvm::join(fusionTemplates(), ", ") << ")";
  return failure();
}

void FusionOp::build(OpBuilder &builder, OperationState &state, StringRef templateName,
                     TypeRange results, ValueRange inputs) {
  state.addAttribute(getTemplateNameAttrName(state.name), builder.getStringAttr(templateName));
  state.addOperands(inputs);
  state.addTypes(results);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value v : inputs)
    block->addArgument(v.getType(), v.getLoc());
}

LogicalResult FusionOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("the body has ") << body.getNumArguments() << " arguments for "
                                        << getInputs().size() << " inputs";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(body.getArguments(), getInputs())))
    if (std::get<0>(pair).getType() != std::get<1>(pair).getType())
      return emitOpError("body argument #")
             << i << " has type " << std::get<0>(pair).getType() << ", input #" << i << " "
             << std::get<1>(pair).getType();
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("the body yields ")
           << yield.getValues().getTypes() << ", the op's results are " << getResultTypes();
  return matchFusionTemplate(getTemplateName(), body, [&] { return emitOpError(); });
}

FusionKind GeluGradOp::getFusionKind() { return FusionKind::Elementwise; }
// The optimizers update each element from the same element of the parameter, gradient and
// state, with the scalar learning rate (and step) broadcast.
FusionKind AdamWOp::getFusionKind() { return FusionKind::Broadcast; }
FusionKind SGDOp::getFusionKind() { return FusionKind::Broadcast; }
FusionKind SelectOp::getFusionKind() { return FusionKind::Broadcast; }
// Each output element of a shift-sum (and each tap of its weight gradient) reads a window of
// neighbouring input elements of its channel.
FusionKind ShiftSumOp::getFusionKind() { return FusionKind::Stencil; }
FusionKind ShiftSumGradWeightOp::getFusionKind() { return FusionKind::Stencil; }
