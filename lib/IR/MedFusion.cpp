//===- MedFusion.cpp - med.fusion, its templates' matchers, fusion kinds ---------===//
#include "med/IR/MedOps.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::med;

bool mlir::med::isScalarLiteralConstant(ConstantOp op) {
  auto type = cast<RankedTensorType>(op.getType());
  return type.getRank() == 0 && type.getElementType().isF32();
}

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
  static const StringRef names[] = {"elementwise", "mlp",     "mlp_grad",    "reduce",
                                    "resample",    "stencil", "stencil_grad"};
  return names;
}

namespace {
bool allOnes(ArrayRef<int64_t> v) { return llvm::all_of(v, [](int64_t x) { return x == 1; }); }
bool allZeros(ArrayRef<int64_t> v) { return llvm::all_of(v, [](int64_t x) { return x == 0; }); }

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

/// Does every use of block argument `arg` give a generator (generate access) only a key or
/// a shape, never elements to read?
bool onlyGenerated(BlockArgument arg) {
  return !arg.use_empty() && llvm::all_of(arg.getUsers(), [](Operation *u) {
    return fusionKind(u) == FusionKind::Generate;
  });
}

/// The `elementwise` template: one thread per element of the results' shape; each body op
/// is elementwise, broadcast or generate access (random numbers drawn by the element's
/// counter) and produces that shape, so every value lives in registers and only block
/// arguments may be read at broadcast indices.
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
    if (auto c = dyn_cast<ConstantOp>(&op); c && isScalarLiteralConstant(c))
      continue; // a literal in the kernel
    ++ops;
    FusionKind kind = fusionKind(&op);
    if (kind != FusionKind::Elementwise && kind != FusionKind::Broadcast &&
        kind != FusionKind::Generate)
      return fail("template 'elementwise' cannot run '", op.getName(),
                  "': expected ops of elementwise, broadcast or generate access");
    for (Value r : op.getResults())
      if (shapeOf(r).getShape() != space.getShape() ||
          !isa<FloatType>(shapeOf(r).getElementType()))
        return fail("template 'elementwise': '", op.getName(), "' produces ", r.getType(),
                    ", expected floats of the results' shape ", space);
  }
  if (ops == 0)
    return fail("template 'elementwise': the body has no ops");
  for (BlockArgument arg : body.getArguments())
    if (!onlyGenerated(arg) && (!isa<FloatType>(shapeOf(arg).getElementType()) ||
                                !broadcastsTo(shapeOf(arg).getShape(), space.getShape())))
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

// ---- the block MLP: 1×1×1 expand → activation → 1×1×1 compress ----------------------

/// The roles of the ops of an `mlp` or `mlp_grad` body, found from its data flow.
struct MlpRoles {
  Conv3dOp expand, compress;             // h = W1·x + b1; m = W2·g + b2
  Operation *act = nullptr;              // g = act(h)
  Operation *residual = nullptr;         // y = m ⊕ r (mlp, optional)
  Conv3dTransposeOp gradAct, gradInput;  // dg = W2ᵀ·dy; dx = W1ᵀ·dh
  Conv3dGradWeightOp gradW2, gradW1;     // dW2 = Σ dy·gᵀ; dW1 = Σ dh·xᵀ
  Operation *actGrad = nullptr;          // dh = act'(h, dg)
  ReduceOp gradB1;                       // db1 = Σ dh
};

using Report = llvm::function_ref<InFlightDiagnostic()>;
/// What a matcher found: each role's op (med.fusion's `roles`, as indices into the body).
using Roles = SmallVector<std::pair<StringRef, Operation *>>;

LogicalResult mlpFail(Report report, StringRef templ, const Twine &why) {
  if (report)
    report() << "template '" << templ << "': " << why;
  return failure();
}

bool isArg(Value v) { return isa<BlockArgument>(v); }
bool isContraction(Operation *op) { return op && fusionKind(op) == FusionKind::Contraction; }
/// An elementwise op (one result) whose operands are exactly `operands`, in order.
bool isElementwiseOf(Operation *op, ArrayRef<Value> operands) {
  return op && fusionKind(op) == FusionKind::Elementwise && op->getNumResults() == 1 &&
         llvm::equal(op->getOperands(), operands);
}
bool usedOnlyBy(Value v, ArrayRef<Operation *> users) {
  return llvm::all_of(v.getUsers(), [&](Operation *u) { return llvm::is_contained(users, u); });
}

/// The templates keep a tile's input channels and output channels in registers (operand
/// fragments and accumulators): at most this many of each. The expansion is chunked and
/// has no bound.
constexpr int64_t kMlpMaxChannels = 128;

/// Does `v` (N×C×D×H×W, static) have at most kMlpMaxChannels channels?
bool fitsMlp(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() && t.getRank() == 5 && t.getDimSize(1) <= kMlpMaxChannels;
}

/// The forward part shared by both templates: h = expand(x, W1, b1) from block arguments,
/// g = act(h). Returns the act op.
LogicalResult matchExpansion(Conv3dOp expand, MlpRoles &r, StringRef templ, Report report) {
  if (!expand || !isContraction(expand) || !isArg(expand.getInput()) ||
      !isArg(expand.getWeight()) || (expand.getBias() && !isArg(expand.getBias())))
    return mlpFail(report, templ,
                   "expected a 1×1×1 convolution of body arguments (input, weight, bias) first");
  if (!fitsMlp(expand.getInput()))
    return mlpFail(report, templ, "the input needs a static N×C×D×H×W shape with at most " +
                                      Twine(kMlpMaxChannels) + " channels");
  r.expand = expand;
  Operation *act = nullptr;
  for (Operation *u : expand.getResult().getUsers())
    if (isElementwiseOf(u, {expand.getResult()}))
      act = act ? act : u;
  if (!act)
    return mlpFail(report, templ, "expected an elementwise activation of the expansion");
  r.act = act;
  return success();
}

/// `mlp`: y = W2·act(W1·x + b1) + b2, optionally ⊕ r (an elementwise op of that result and
/// a body argument, e.g. the residual add); one result. The expansion never leaves the
/// kernel.
LogicalResult matchMlp(Block &body, Report report, Roles &roles) {
  MlpRoles r;
  auto ops = llvm::to_vector(llvm::make_pointer_range(body.without_terminator()));
  if (ops.size() != 3 && ops.size() != 4)
    return mlpFail(report, "mlp", "expected expand, activation, compress and an optional "
                                  "elementwise epilogue");
  if (failed(matchExpansion(dyn_cast<Conv3dOp>(ops[0]), r, "mlp", report)))
    return failure();
  auto compress = dyn_cast<Conv3dOp>(ops[2]);
  if (ops[1] != r.act || !compress || !isContraction(compress) ||
      compress.getInput() != r.act->getResult(0) || !isArg(compress.getWeight()) ||
      (compress.getBias() && !isArg(compress.getBias())) ||
      !usedOnlyBy(r.expand.getResult(), {r.act}) ||
      !usedOnlyBy(r.act->getResult(0), {compress}))
    return mlpFail(report, "mlp", "expected a 1×1×1 convolution of the activation (with "
                                  "body arguments as weight and bias) third");
  Value last = compress.getResult();
  if (!fitsMlp(last))
    return mlpFail(report, "mlp", "the compression may have at most " +
                                      Twine(kMlpMaxChannels) + " channels");
  if (ops.size() == 4) {
    Operation *e = ops[3];
    FusionKind kind = fusionKind(e);
    if ((kind != FusionKind::Elementwise && kind != FusionKind::Broadcast) ||
        e->getNumOperands() != 2 || e->getNumResults() != 1 ||
        e->getResult(0).getType() != last.getType() || !usedOnlyBy(last, {e}) ||
        !llvm::is_contained(e->getOperands(), last) ||
        !llvm::all_of(e->getOperands(), [&](Value v) {
          return v == last || (isArg(v) && v.getType() == last.getType());
        }))
      return mlpFail(report, "mlp", "the epilogue must be one elementwise op of the "
                                    "compression and a body argument of its shape");
    r.residual = e;
    last = e->getResult(0);
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != 1 || yield.getValues()[0] != last)
    return mlpFail(report, "mlp", "the body must yield the last op's result only");
  roles = {{"expand", r.expand}, {"activation", r.act}, {"compress", compress}};
  if (r.residual)
    roles.push_back({"epilogue", r.residual});
  return success();
}

/// `mlp_grad`: the gradients of an `mlp` from its output gradient dy, recomputing the
/// expansion instead of reading it: h = W1·x + b1, g = act(h), dg = W2ᵀ·dy,
/// dW2 = Σ dy·gᵀ, dh = act'(h, dg), dW1 = Σ dh·xᵀ, and optionally dx = W1ᵀ·dh and
/// db1 = Σ dh over all but the channel axis. Yields a subset of (dx, dW1, db1, dW2) that
/// includes both weight gradients.
LogicalResult matchMlpGrad(Block &body, Report report, Roles &roles) {
  MlpRoles r;
  StringRef t = "mlp_grad";
  Conv3dOp expand;
  for (Operation &op : body.without_terminator())
    if (auto c = dyn_cast<Conv3dOp>(op); c && !expand)
      expand = c;
  if (failed(matchExpansion(expand, r, t, report)))
    return failure();
  Value x = expand.getInput(), w1 = expand.getWeight(), h = expand.getResult(),
        g = r.act->getResult(0);
  for (Operation &op : body.without_terminator()) {
    if (&op == expand || &op == r.act)
      continue;
    if (auto c = dyn_cast<Conv3dGradWeightOp>(op); c && isContraction(c)) {
      if (c.getInput() == g && isArg(c.getGradOutput()) && !r.gradW2)
        r.gradW2 = c;
      else if (c.getInput() == x && !r.gradW1)
        r.gradW1 = c;
      else
        return mlpFail(report, t, "unexpected weight gradient");
    } else if (auto c = dyn_cast<Conv3dTransposeOp>(op); c && isContraction(c) && !c.getBias()) {
      if (isArg(c.getInput()) && isArg(c.getWeight()) && !r.gradAct)
        r.gradAct = c;
      else if (c.getWeight() == w1 && !r.gradInput)
        r.gradInput = c;
      else
        return mlpFail(report, t, "unexpected transposed 1×1×1 convolution");
    } else if (auto c = dyn_cast<ReduceOp>(op); c && !r.gradB1 &&
                                                c.getKind() == ReduceKind::sum &&
                                                !c.getKeepdims() &&
                                                llvm::equal(c.getAxes(), ArrayRef<int64_t>{0, 2, 3, 4})) {
      r.gradB1 = c;
    } else if (fusionKind(&op) == FusionKind::Elementwise && op.getNumOperands() == 2 &&
               !r.actGrad) {
      r.actGrad = &op;
    } else {
      return mlpFail(report, t, "cannot run '" + op.getName().getStringRef() + "'");
    }
  }
  if (!r.gradAct || !r.gradW2 || !r.actGrad || !r.gradW1)
    return mlpFail(report, t, "expected dg = W2ᵀ·dy, dW2, dh = act'(h, dg) and dW1");
  Value dy = r.gradAct.getInput(), dg = r.gradAct.getResult(), dh = r.actGrad->getResult(0);
  if (!fitsMlp(dy))
    return mlpFail(report, t, "the output gradient may have at most " +
                                  Twine(kMlpMaxChannels) + " channels");
  if (r.gradW2.getGradOutput() != dy || !isElementwiseOf(r.actGrad, {h, dg}) ||
      r.gradW1.getGradOutput() != dh || (r.gradInput && r.gradInput.getInput() != dh) ||
      (r.gradB1 && r.gradB1.getInput() != dh))
    return mlpFail(report, t, "the gradients are not wired as the block MLP's");
  if (!usedOnlyBy(h, {r.act, r.actGrad}) || !usedOnlyBy(g, {r.gradW2.getOperation()}) ||
      !usedOnlyBy(dg, {r.actGrad}))
    return mlpFail(report, t, "the recomputed expansion may not be yielded");
  auto yield = cast<YieldOp>(body.getTerminator());
  llvm::SmallPtrSet<Value, 4> yielded(yield.getValues().begin(), yield.getValues().end());
  if (!yielded.contains(r.gradW1.getResult()) || !yielded.contains(r.gradW2.getResult()))
    return mlpFail(report, t, "the body must yield both weight gradients");
  for (Value v : yield.getValues())
    if (v != r.gradW1.getResult() && v != r.gradW2.getResult() &&
        !(r.gradInput && v == r.gradInput.getResult()) &&
        !(r.gradB1 && v == r.gradB1.getResult()))
      return mlpFail(report, t, "it may yield only dx, dW1, db1 and dW2");
  roles = {{"expand", r.expand}, {"activation", r.act}, {"dg", r.gradAct},
           {"dw2", r.gradW2},    {"dh", r.actGrad},     {"dw1", r.gradW1}};
  if (r.gradInput)
    roles.push_back({"dx", r.gradInput});
  if (r.gradB1)
    roles.push_back({"db1", r.gradB1});
  return success();
}
/// The `stencil` template: one stencil kernel (a shift-sum of rank-5 block arguments, kernel
/// at most 7 along each axis: any such tile fits shared memory) yielding its result, and
/// optionally med.group_norm_stats of that result yielding the mean and rstd, computed in
/// the kernel's epilogue; or instead a residual: med.add of its result and a block argument
/// of the same type, yielding only the sum.
LogicalResult matchStencil(Block &body, Report report, Roles &roles) {
  const StringRef t = "stencil";
  auto ops = body.without_terminator();
  SmallVector<Operation *> list;
  for (Operation &op : ops)
    list.push_back(&op);
  if (list.empty() || list.size() > 2)
    return mlpFail(report, t, "expected a stencil and optionally the statistics of its result");
  Operation *stencil = list[0];
  if (fusionKind(stencil) != FusionKind::Stencil || stencil->getNumResults() != 1 ||
      stencil->getNumOperands() < 2 ||
      stencil->getOperand(0).getType() != stencil->getResult(0).getType())
    return mlpFail(report, t, "expected a stencil op with a result of its input's shape first");
  if (!llvm::all_of(stencil->getOperands(), isArg))
    return mlpFail(report, t, "the stencil must read block arguments only");
  auto x = dyn_cast<RankedTensorType>(stencil->getResult(0).getType());
  auto w = dyn_cast<RankedTensorType>(stencil->getOperand(1).getType());
  if (!x || x.getRank() != 5 || !x.hasStaticShape() || !w || w.getRank() != 5 ||
      llvm::any_of(w.getShape().drop_front(2), [](int64_t k) { return k < 1 || k > 7; }))
    return mlpFail(report, t, "expected a static N×C×D×H×W result and a kernel of at most 7");
  SmallVector<Value> expected{stencil->getResult(0)};
  roles = {{"stencil", stencil}};
  if (list.size() == 2) {
    if (auto add = dyn_cast<AddOp>(list[1])) {
      Value y = stencil->getResult(0);
      Value other = add.getLhs() == y ? add.getRhs() : add.getLhs();
      if ((add.getLhs() == y) == (add.getRhs() == y) || !isArg(other) ||
          other.getType() != y.getType() || add.getType() != y.getType())
        return mlpFail(report, t,
                       "a residual must add a block argument of the stencil's result type "
                       "to its result");
      expected = {add.getResult()};
      roles.push_back({"residual", add});
    } else {
      auto stats = dyn_cast<GroupNormStatsOp>(list[1]);
      if (!stats || stats.getInput() != stencil->getResult(0))
        return mlpFail(report, t,
                       "the epilogue must be med.group_norm_stats of the stencil's result or "
                       "the add of a block argument");
      expected.append({stats.getMean(), stats.getRstd()});
      roles.push_back({"statistics", stats});
    }
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (!llvm::equal(yield.getValues(), expected))
    return mlpFail(report, t,
                   "the body must yield the stencil's result, then the mean and rstd (or "
                   "with a residual its sum alone)");
  return success();
}

/// The `stencil_grad` template: med.shift_sum_grad_weight of two N×C×D×H×W body arguments
/// (kernel at most 7 along each axis, a channel's volume within 32-bit offsets) and the sum
/// of the same output gradient over N, D, H and W (the shift-sum's bias gradient, C values),
/// yielding both, in that order: the weight gradient's kernel sums dy as it reads it.
LogicalResult matchStencilGrad(Block &body, Report report, Roles &roles) {
  const StringRef t = "stencil_grad";
  SmallVector<Operation *> list;
  for (Operation &op : body.without_terminator())
    list.push_back(&op);
  auto gradWeight = list.size() == 2 ? dyn_cast<ShiftSumGradWeightOp>(list[0]) : nullptr;
  auto sum = list.size() == 2 ? dyn_cast<ReduceOp>(list[1]) : nullptr;
  if (!gradWeight || !sum)
    return mlpFail(report, t,
                   "expected med.shift_sum_grad_weight and then the sum of its output gradient");
  if (!isArg(gradWeight.getInput()) || !isArg(gradWeight.getGradOutput()))
    return mlpFail(report, t, "the weight gradient must read block arguments only");
  auto x = cast<RankedTensorType>(gradWeight.getInput().getType());
  auto w = cast<RankedTensorType>(gradWeight.getResult().getType());
  if (x.getRank() != 5 || !x.hasStaticShape() || w.getRank() != 5 ||
      llvm::any_of(w.getShape().drop_front(2), [](int64_t k) { return k < 1 || k > 7; }) ||
      x.getDimSize(2) * x.getDimSize(3) * x.getDimSize(4) >= (int64_t{1} << 31) - 65536)
    return mlpFail(report, t,
                   "expected a static N×C×D×H×W input of fewer than 2^31 voxels a channel and "
                   "a kernel of at most 7");
  if (sum.getKind() != ReduceKind::sum || sum.getInput() != gradWeight.getGradOutput() ||
      sum.getKeepdims() || ArrayRef<int64_t>(sum.getAxes()) != ArrayRef<int64_t>{0, 2, 3, 4})
    return mlpFail(report, t,
                   "the epilogue must be the sum of the output gradient over axes 0, 2, 3, 4");
  if (!llvm::equal(cast<YieldOp>(body.getTerminator()).getValues(),
                   SmallVector<Value>{gradWeight.getResult(), sum.getResult()}))
    return mlpFail(report, t, "the body must yield the weight gradient, then the bias gradient");
  roles = {{"grad_weight", gradWeight}, {"bias_grad", sum}};
  return success();
}

/// The `resample` template: one thread per output voxel of a med.spatial_transform of body
/// arguments, which computes the voxel's position and neighbours once and then either
/// - an epilogue: ops of elementwise, broadcast or generate access (random numbers) that
///   produce floats of the transform's result shape from it, from each other and from body
///   arguments (which broadcast to that shape), optionally closed by a slice of the last value
///   over the spatial axes (the kernel then visits only that box), which is then the one
///   result; or
/// - med.affinities of a `nearest` transform's result, yielding the affinities and their
///   mask: the labels at both ends of each affinity are sampled where they are needed and
///   the resampled volume is never stored.
LogicalResult matchResample(Block &body, Report report, Roles &roles) {
  const StringRef t = "resample";
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  auto transform = ops.empty() ? SpatialTransformOp() : dyn_cast<SpatialTransformOp>(ops[0]);
  if (!transform || !llvm::all_of(transform->getOperands(), isArg))
    return mlpFail(report, t, "expected a med.spatial_transform of body arguments first");
  auto space = cast<RankedTensorType>(transform.getType());
  if (!space.hasStaticShape() || space.getRank() != 5)
    return mlpFail(report, t, "expected a static N×C×D×H×W transform");
  auto yield = cast<YieldOp>(body.getTerminator());
  if (ops.size() == 2 && isa<AffinitiesOp>(ops[1])) {
    auto aff = cast<AffinitiesOp>(ops[1]);
    if (transform.getMode() != ResampleMode::nearest || aff.getSeg() != transform.getResult())
      return mlpFail(report, t, "affinities need the labels of a nearest transform");
    if (!llvm::equal(yield.getValues(), aff->getResults()))
      return mlpFail(report, t, "the body must yield the affinities and the mask only");
    roles = {{"transform", transform}, {"affinities", aff}};
    return success();
  }
  auto slice = dyn_cast<SliceOp>(ops.back());
  ArrayRef<Operation *> epilogue = ArrayRef(ops).drop_front().drop_back(slice ? 1 : 0);
  llvm::SmallPtrSet<Value, 8> inside{transform.getResult()};
  for (Operation *op : epilogue) {
    FusionKind kind = fusionKind(op);
    if (kind != FusionKind::Elementwise && kind != FusionKind::Broadcast &&
        kind != FusionKind::Generate)
      return mlpFail(report, t, "cannot run '" + op->getName().getStringRef() +
                                    "' in the epilogue: expected elementwise, broadcast or "
                                    "generate access");
    for (Value r : op->getResults()) {
      auto type = cast<RankedTensorType>(r.getType());
      if (type.getShape() != space.getShape() || !isa<FloatType>(type.getElementType()))
        return mlpFail(report, t, "'" + op->getName().getStringRef() +
                                      "' must produce floats of the transform's shape");
      inside.insert(r);
    } // what they read broadcasts to their result: their own verifiers say so
  }
  if (slice) {
    auto strides = slice.getStrides();
    ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
    if (!inside.contains(slice.getInput()) || !slice.getInput().hasOneUse() ||
        (strides && !allOnes(*strides)) || offsets.size() != 5 || offsets[0] != 0 ||
        offsets[1] != 0 || sizes[0] != space.getDimSize(0) || sizes[1] != space.getDimSize(1))
      return mlpFail(report, t, "the slice must crop the last value, used by it alone, over "
                                "the spatial axes with stride 1");
    if (yield.getValues().size() != 1 || yield.getValues()[0] != slice.getResult())
      return mlpFail(report, t, "with a slice, the body must yield the slice only");
    roles = {{"transform", transform}, {"crop", slice}};
    return success();
  }
  if (yield.getValues().empty())
    return mlpFail(report, t, "the body yields nothing");
  for (Value v : yield.getValues())
    if (!inside.contains(v))
      return mlpFail(report, t, "the body may yield the transform's result and its epilogue's");
  roles = {{"transform", transform}};
  return success();
}

/// The `reduce` template: two or more reductions (sum, mean, max, min) of one body argument
/// over the same axes, its innermost axis of size above 1 among them (each output's terms
/// are rows of contiguous elements: a split sum with one accumulator per reduction), each
/// result yielded once, in order.
LogicalResult matchReduce(Block &body, Report report) {
  const StringRef t = "reduce";
  SmallVector<ReduceOp> ops;
  for (Operation &op : body.without_terminator()) {
    auto r = dyn_cast<ReduceOp>(op);
    if (!r || fusionKind(r) != FusionKind::Reduction)
      return mlpFail(report, t, "cannot run '" + op.getName().getStringRef() +
                                    "': expected reductions only");
    ops.push_back(r);
  }
  if (ops.size() < 2)
    return mlpFail(report, t, "expected at least two reductions");
  Value x = ops[0].getInput();
  for (ReduceOp r : ops)
    if (r.getInput() != x || !isArg(x) || r.getAxes() != ops[0].getAxes() ||
        r.getKeepdims() != ops[0].getKeepdims())
      return mlpFail(report, t, "expected reductions of one body argument over the same axes");
  auto type = cast<RankedTensorType>(x.getType());
  if (!type.hasStaticShape())
    return mlpFail(report, t, "the input needs a static shape");
  int64_t inner = -1;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.getDimSize(i) != 1)
      inner = i;
  if (inner < 0 || llvm::none_of(ops[0].getAxes(), [&](int64_t a) {
        return (a < 0 ? a + type.getRank() : a) == inner;
      }))
    return mlpFail(report, t, "the innermost axis of size above 1 must be reduced");
  SmallVector<Value> expected;
  for (ReduceOp r : ops)
    expected.push_back(r.getResult());
  if (!llvm::equal(cast<YieldOp>(body.getTerminator()).getValues(), expected))
    return mlpFail(report, t, "the body must yield each reduction's result, in order");
  return success();
}
} // namespace

FailureOr<DictionaryAttr>
mlir::med::matchFusionTemplate(StringRef name, Block &body,
                               llvm::function_ref<InFlightDiagnostic()> report) {
  Roles roles;
  LogicalResult matched = failure();
  if (name == "elementwise")
    matched = matchElementwise(body, report);
  else if (name == "mlp")
    matched = matchMlp(body, report, roles);
  else if (name == "mlp_grad")
    matched = matchMlpGrad(body, report, roles);
  else if (name == "reduce")
    matched = matchReduce(body, report);
  else if (name == "resample")
    matched = matchResample(body, report, roles);
  else if (name == "stencil")
    matched = matchStencil(body, report, roles);
  else if (name == "stencil_grad")
    matched = matchStencilGrad(body, report, roles);
  else if (report)
    report() << "unknown fusion template '" << name << "' (expected one of: "
             << llvm::join(fusionTemplates(), ", ") << ")";
  if (failed(matched))
    return failure();
  // Each role's op by its position in the body: the plan lists a body's ops in this order.
  Builder b(body.getParentOp()->getContext());
  SmallVector<NamedAttribute> entries;
  for (auto [role, op] : roles) {
    int64_t index = 0;
    for (Operation &o : body) {
      if (&o == op)
        break;
      ++index;
    }
    entries.push_back(b.getNamedAttr(role, b.getI64IntegerAttr(index)));
  }
  return b.getDictionaryAttr(entries);
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
  FailureOr<DictionaryAttr> roles =
      matchFusionTemplate(getTemplateName(), body, [&] { return emitOpError(); });
  if (failed(roles))
    return failure();
  // The roles travel to the code generators, which read them instead of matching again:
  // they must be the matcher's (none for a template without roles).
  DictionaryAttr given = getRolesAttr();
  if (roles->empty() ? given != nullptr : given != *roles) {
    InFlightDiagnostic d = emitOpError("template '") << getTemplateName() << "': roles ";
    if (given)
      d << given;
    else
      d << "missing";
    d << ", but its matcher finds ";
    if (roles->empty())
      d << "none (leave the attribute out)";
    else
      d << *roles;
    return d;
  }
  return success();
}

FusionKind GeluGradOp::getFusionKind() { return FusionKind::Elementwise; }

namespace {
/// A 1×1×1 kernel, stride 1, no padding, one group: a product over the channel axis.
bool pointwise(Value weight, ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
               ArrayRef<int64_t> dilation, int64_t groups) {
  auto w = dyn_cast<RankedTensorType>(weight.getType());
  return w && w.getRank() == 5 && allOnes(w.getShape().drop_front(2)) && allOnes(stride) &&
         allZeros(padding) && allOnes(dilation) && groups == 1;
}
} // namespace

// A 1×1×1 convolution, its transpose and its weight gradient contract over channels; other
// convolutions are windows the fusion passes leave alone.
FusionKind Conv3dOp::getFusionKind() {
  return pointwise(getWeight(), getStride(), getPadding(), getDilation(), getGroups())
             ? FusionKind::Contraction
             : FusionKind::Opaque;
}
FusionKind Conv3dTransposeOp::getFusionKind() {
  return pointwise(getWeight(), getStride(), getPadding(), getDilation(), getGroups()) &&
                 allZeros(getOutputPadding())
             ? FusionKind::Contraction
             : FusionKind::Opaque;
}
FusionKind Conv3dGradWeightOp::getFusionKind() {
  return allOnes(getKernel()) && allOnes(getStride()) && allZeros(getPadding()) &&
                 allOnes(getDilation()) && getGroups() == 1
             ? FusionKind::Contraction
             : FusionKind::Opaque;
}
FusionKind ReduceOp::getFusionKind() { return FusionKind::Reduction; }
// The optimizers update each element from the same element of the parameter, gradient and
// state, with the scalar learning rate (and step) broadcast.
FusionKind AdamWOp::getFusionKind() { return FusionKind::Broadcast; }
FusionKind SGDOp::getFusionKind() { return FusionKind::Broadcast; }
FusionKind SelectOp::getFusionKind() { return FusionKind::Broadcast; }
// Each output element of a shift-sum (and each tap of its weight gradient) reads a window of
// neighbouring input elements of its channel.
FusionKind ShiftSumOp::getFusionKind() { return FusionKind::Stencil; }
FusionKind ShiftSumGradWeightOp::getFusionKind() { return FusionKind::Stencil; }
// An affinity reads the labels at its voxel and at the voxel one offset away.
FusionKind AffinitiesOp::getFusionKind() { return FusionKind::Stencil; }
FusionKind SliceOp::getFusionKind() { return FusionKind::Gather; }
FusionKind SpatialTransformOp::getFusionKind() { return FusionKind::Gather; }
FusionKind RandomOp::getFusionKind() { return FusionKind::Generate; }
// Dropout reads its input elementwise, but its mask depends on the element's index, as a
// random draw does: it fuses where random numbers do (the kernel's index is its counter).
FusionKind DropoutOp::getFusionKind() { return FusionKind::Generate; }
