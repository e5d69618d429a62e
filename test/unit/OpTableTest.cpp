//===- OpTableTest.cpp - the op table is complete and agrees with the dialect ------===//
//
// The table (med/OpTable.h) is generated from ODS; every op in it needs a piece in each
// executor. The CPU backend and the LibTorch mapping dispatch with switches the build checks
// (-Werror=switch, see test/unit/Inputs/missing-case.cpp); the CUDA emitters and the
// dialect's own registrations are checked here, through missingPieces, whose negative
// control drops an entry.
//
//===----------------------------------------------------------------------------------===//
#include "med/IR/MedOps.h"
#include "med/OpTable.h"
#include "med/Target/Cuda.h"

#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using ::med::ops::OpKind;

namespace {

/// The registered op of the dialect for a plan name.
std::optional<RegisteredOperationName> registered(MLIRContext &ctx, const ::med::ops::OpSchema &op) {
  return RegisteredOperationName::lookup("med." + std::string(op.name), &ctx);
}

std::vector<std::pair<std::string, ::med::ops::Provides>> registries(MLIRContext &ctx) {
  return {
      {"CUDA emitter", [](OpKind k) { return mlir::med::haveCudaEmitter(::med::ops::schema(k).name); }},
      {"registered op of the dialect",
       [&](OpKind k) { return registered(ctx, ::med::ops::schema(k)).has_value(); }},
  };
}

TEST(OpTable, EveryOpHasItsPieces) {
  MLIRContext ctx;
  ctx.loadDialect<mlir::med::MedDialect>();
  std::vector<std::string> missing = ::med::ops::missingPieces(registries(ctx));
  EXPECT_TRUE(missing.empty()) << missing.front();
}

// Negative control: the same registries with one entry dropped are incomplete, by name.
TEST(OpTable, ADroppedEntryIsNamed) {
  MLIRContext ctx;
  ctx.loadDialect<mlir::med::MedDialect>();
  auto regs = registries(ctx);
  ::med::ops::Provides cuda = regs[0].second;
  regs[0].second = [cuda](OpKind k) { return k != OpKind::Gelu && cuda(k); };
  std::vector<std::string> missing = ::med::ops::missingPieces(regs);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], "op 'gelu': no CUDA emitter");
}

// The table's gradient decision is the dialect's: differentiable exactly when the op
// implements GradientOpInterface.
TEST(OpTable, DifferentiableAsTheDialect) {
  MLIRContext ctx;
  ctx.loadDialect<mlir::med::MedDialect>();
  for (const ::med::ops::OpSchema &op : ::med::ops::allOps()) {
    auto name = registered(ctx, op);
    ASSERT_TRUE(name) << op.name;
    EXPECT_EQ(name->hasInterface<mlir::med::GradientOpInterface>(), op.differentiable) << op.name;
  }
}

TEST(OpTable, LookupByName) {
  ASSERT_NE(::med::ops::findOp("group_norm"), nullptr);
  EXPECT_EQ(::med::ops::findOp("group_norm")->kind, OpKind::GroupNorm);
  EXPECT_EQ(::med::ops::findOp("relu6"), nullptr);
  const ::med::ops::OpSchema &norm = ::med::ops::schema(OpKind::GroupNorm);
  ASSERT_NE(norm.operand("gamma"), nullptr);
  EXPECT_TRUE(norm.operand("gamma")->wide);
  EXPECT_FALSE(norm.operand("input")->wide);
  EXPECT_EQ(::med::ops::schema(OpKind::Conv3d).operand("bias")->arity, ::med::ops::Arity::Optional);
}

// The FLOP rules on shapes counted by hand.
TEST(OpTable, FlopRules) {
  using Shapes = std::vector<std::vector<int64_t>>;
  auto count = [](OpKind k, std::map<std::string, Shapes> operands, Shapes results) {
    ::med::ops::OpShapes s;
    s.operand = [operands](const char *name) {
      auto it = operands.find(name);
      return it == operands.end() ? Shapes{} : it->second;
    };
    s.results = results;
    return ::med::ops::flopsOf(::med::ops::schema(k), s);
  };
  // conv3d 2→4 channels, k3, 5x6x7 output, with a bias: 2·(4·5·6·7)·(2·27) + 4·5·6·7.
  auto conv = count(OpKind::Conv3d, {{"weight", {{4, 2, 3, 3, 3}}}, {"bias", {{4}}}},
                    {{1, 4, 5, 6, 7}});
  EXPECT_DOUBLE_EQ(conv.macs, 840.0 * 54);
  EXPECT_DOUBLE_EQ(conv.flops, 2 * 840.0 * 54 + 840);
  EXPECT_DOUBLE_EQ(conv.biasAdd, 840);
  // dice_ce: 8 per logit of every deep-supervision level.
  EXPECT_DOUBLE_EQ(count(OpKind::DiceCE, {{"logits", {{1, 3, 4, 4, 4}, {1, 3, 2, 2, 2}}}}, {{}}).flops,
                   8.0 * (192 + 24));
  EXPECT_DOUBLE_EQ(count(OpKind::GroupNorm, {}, {{2, 4, 3, 3, 3}}).flops, 7.0 * 216);
  EXPECT_DOUBLE_EQ(count(OpKind::Pad, {}, {{2, 4, 3, 3, 3}}).flops, 0);
  // The weight gradient: 2 · grad_output elements · Cin/groups·k³.
  EXPECT_DOUBLE_EQ(count(OpKind::Conv3dGradWeight, {{"grad_output", {{1, 4, 5, 6, 7}}}},
                         {{4, 2, 3, 3, 3}}).flops,
                   2 * 840.0 * 54);
}

} // namespace
