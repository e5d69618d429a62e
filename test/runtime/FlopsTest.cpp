//===- FlopsTest.cpp - FLOP and byte counts of artifact functions, by hand ------===//
#include "medrun/Flops.h"
#include "medrun/Error.h"

#include "gtest/gtest.h"

#include <optional>
#include <string>

using namespace medrun;

namespace {

// A function built op by op: value(shape) adds a value, op(...) an op.
struct Builder {
  Function fn;

  // Stored as its dtype, as the plan reader has it without med-assign-storage; `storage`
  // for a mixed-precision activation.
  int value(Shape shape, DType dtype = DType::F32, std::optional<DType> storage = {}) {
    fn.values.push_back({dtype, std::move(shape), storage.value_or(dtype)});
    return static_cast<int>(fn.values.size()) - 1;
  }
  OpInfo &op(const std::string &kind,
             std::vector<std::pair<std::string, std::vector<int>>> operands,
             std::vector<int> results) {
    OpInfo o;
    o.kind = kind;
    o.schema = med::ops::findOp(kind);
    o.operands = std::move(operands);
    o.results = std::move(results);
    o.location = "t.mlir:1:1";
    fn.ops.push_back(o);
    return fn.ops.back();
  }
  OpCost cost(size_t i) const { return opCost(fn, fn.ops.at(i)); }
};

TEST(Flops, Conv3dCountsTwoPerMultiplyAdd) {
  // 2x4x9x10x11, weight 6x(4/2)x3x3x3, groups 2, stride 2, padding 1: output 2x6x5x5x6.
  // Each of the 2*6*5*5*6 = 1800 outputs takes 2*27 = 54 multiply-adds: 97200 MACs.
  // The bias adds one FLOP per output.
  Builder b;
  int x = b.value({2, 4, 9, 10, 11}), w = b.value({6, 2, 3, 3, 3}), bias = b.value({6});
  int y = b.value({2, 6, 5, 5, 6});
  b.op("conv3d", {{"input", {x}}, {"weight", {w}}, {"bias", {bias}}}, {y});
  OpCost c = b.cost(0);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 97200 + 1800); // and one add per output for the bias
  // Bytes: input 7920, weight 324, bias 6 and output 1800 floats.
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (7920 + 324 + 6 + 1800));
  EXPECT_EQ(c.count, 1);

  // Its weight gradient does the same multiply-adds: input x, grad_output shaped as y.
  int dy = b.value({2, 6, 5, 5, 6}), dw = b.value({6, 2, 3, 3, 3});
  b.op("conv3d_grad_weight", {{"input", {x}}, {"grad_output", {dy}}}, {dw});
  EXPECT_DOUBLE_EQ(b.cost(1).flops, 2.0 * 97200);
}

TEST(Flops, TransposedConvSwapsInputAndOutput) {
  // 1x4x3x4x5, weight 4x3x2x2x2 (Cin x Cout/groups), stride 2: output 1x3x6x8x10. Each of
  // the 4*60 = 240 inputs meets 3*8 = 24 weights: 5760 MACs.
  Builder b;
  int x = b.value({1, 4, 3, 4, 5}), w = b.value({4, 3, 2, 2, 2}), y = b.value({1, 3, 6, 8, 10});
  b.op("conv3d_transpose", {{"input", {x}}, {"weight", {w}}, {"bias", {}}}, {y});
  EXPECT_DOUBLE_EQ(b.cost(0).flops, 2.0 * 5760);
  // The convolution it transposes (1x3x6x8x10 -> 1x4x3x4x5 with the same weight) does
  // the same work: 240 outputs of 3*8 MACs each.
  int z = b.value({1, 4, 3, 4, 5});
  b.op("conv3d", {{"input", {y}}, {"weight", {w}}}, {z});
  EXPECT_DOUBLE_EQ(b.cost(1).flops, b.cost(0).flops);
  // The weight gradient of the transposed convolution: input and grad_output swapped, the
  // result shaped as its weight.
  int dw = b.value({4, 3, 2, 2, 2});
  b.op("conv3d_grad_weight", {{"input", {y}}, {"grad_output", {x}}}, {dw});
  EXPECT_DOUBLE_EQ(b.cost(2).flops, 2.0 * 5760);
}

TEST(Flops, ShiftSumsCountAsTheirDepthwiseConvolution) {
  // 2x5x7x9x11 (6930 elements), taps 5x1x3x5x1: each output takes 15 multiply-adds, as the
  // depthwise conv3d it is; mirrored (the input gradient) the same; the tap reduction as its
  // weight gradient, 15 per element of grad_output.
  Builder b;
  int x = b.value({2, 5, 7, 9, 11}), w = b.value({5, 1, 3, 5, 1}), y = b.value({2, 5, 7, 9, 11});
  b.op("shift_sum", {{"input", {x}}, {"weight", {w}}, {"bias", {}}}, {y});
  EXPECT_DOUBLE_EQ(b.cost(0).flops, 2.0 * 6930 * 15);
  int dx = b.value({2, 5, 7, 9, 11});
  b.op("shift_sum", {{"input", {y}}, {"weight", {w}}, {"bias", {}}}, {dx});
  b.fn.ops.back().attrs["mirrored"] = true;
  EXPECT_DOUBLE_EQ(b.cost(1).flops, 2.0 * 6930 * 15);
  int dw = b.value({5, 1, 3, 5, 1});
  b.op("shift_sum_grad_weight", {{"input", {x}}, {"grad_output", {y}}}, {dw});
  EXPECT_DOUBLE_EQ(b.cost(2).flops, 2.0 * 6930 * 15);
}

TEST(Flops, PerElementRules) {
  Builder b;
  // group_norm saving its statistics: 7 per element of the first result (2*4*27 = 216).
  int x = b.value({2, 4, 3, 3, 3}), g = b.value({4}), be = b.value({4});
  int y = b.value({2, 4, 3, 3, 3}), mean = b.value({2, 2}), rstd = b.value({2, 2});
  b.op("group_norm", {{"input", {x}}, {"gamma", {g}}, {"beta", {be}}}, {y, mean, rstd});
  EXPECT_DOUBLE_EQ(b.cost(0).flops, 7.0 * 216);
  EXPECT_DOUBLE_EQ(b.cost(0).bytes, 4.0 * (216 + 4 + 4 + 216 + 4 + 4));

  // A loss: 8 per logit (3*64 = 192); dice_ce: every level's logits (192 + 24).
  int logits = b.value({1, 3, 4, 4, 4}), t = b.value({1, 3, 4, 4, 4}), loss = b.value({});
  b.op("bce_with_logits", {{"logits", {logits}}, {"target", {t}}, {"mask", {}}, {"pos_weight", {}}},
       {loss});
  EXPECT_DOUBLE_EQ(b.cost(1).flops, 8.0 * 192);
  int small = b.value({1, 3, 2, 2, 2}), s0 = b.value({1, 1, 4, 4, 4}, DType::I64);
  int s1 = b.value({1, 1, 2, 2, 2}, DType::I64), dice = b.value({});
  b.op("dice_ce", {{"logits", {logits, small}}, {"targets", {s0, s1}}}, {dice});
  EXPECT_DOUBLE_EQ(b.cost(2).flops, 8.0 * (192 + 24));
  // Bytes in each value's own dtype: the i64 targets count 8 each.
  EXPECT_DOUBLE_EQ(b.cost(2).bytes, 4.0 * (192 + 24) + 8.0 * (64 + 8) + 4.0);

  // Elementwise in bf16: 1 per element, 2 bytes per element.
  int p = b.value({2, 3}, DType::BF16), q = b.value({2, 3}, DType::BF16), r = b.value({2, 3}, DType::BF16);
  b.op("add", {{"lhs", {p}}, {"rhs", {q}}}, {r});
  EXPECT_DOUBLE_EQ(b.cost(3).flops, 6);
  EXPECT_DOUBLE_EQ(b.cost(3).bytes, 3 * 6 * 2);
  // Under mixed precision an f32 value stored in bf16 moves 2 bytes per element: the
  // storage counts, not the declared type (the roofline would otherwise exceed 100%).
  int u = b.value({2, 3}, DType::F32, DType::BF16), u2 = b.value({2, 3}, DType::F32, DType::BF16);
  int z = b.value({2, 3}, DType::F32);
  b.op("add", {{"lhs", {u}}, {"rhs", {u2}}}, {z});
  EXPECT_DOUBLE_EQ(b.cost(4).bytes, 2 * 6 * 2 + 6 * 4);

  // Data movement computes nothing but moves bytes; param and assign move nothing.
  int padded = b.value({2, 4, 5, 5, 5});
  b.op("pad", {{"input", {x}}}, {padded});
  EXPECT_DOUBLE_EQ(b.cost(5).flops, 0);
  EXPECT_DOUBLE_EQ(b.cost(5).bytes, 4.0 * (216 + 1000));
  int w = b.value({7, 5});
  b.op("param", {}, {w});
  EXPECT_DOUBLE_EQ(b.cost(6).flops, 0);
  EXPECT_DOUBLE_EQ(b.cost(6).bytes, 0);
  b.op("assign", {{"value", {w}}}, {});
  EXPECT_DOUBLE_EQ(b.cost(7).flops, 0);
  EXPECT_DOUBLE_EQ(b.cost(7).bytes, 0);

  // A reduction counts its (small) output; adamw its first result (the new parameter).
  int sum = b.value({4});
  b.op("reduce", {{"input", {x}}}, {sum});
  EXPECT_DOUBLE_EQ(b.cost(8).flops, 4);
  int m = b.value({7, 5}), v = b.value({7, 5}), grad = b.value({7, 5}), lr = b.value({});
  int w2 = b.value({7, 5}), m2 = b.value({7, 5}), v2 = b.value({7, 5});
  b.op("adamw", {{"param", {w}}, {"grad", {grad}}, {"exp_avg", {m}}, {"exp_avg_sq", {v}},
                 {"lr", {lr}}, {"step", {lr}}},
       {w2, m2, v2});
  EXPECT_DOUBLE_EQ(b.cost(9).flops, 35);
  EXPECT_DOUBLE_EQ(b.cost(9).bytes, 4.0 * (35 * 4 + 2 + 35 * 3));

  // The function's cost is the sum, by kind.
  FunctionCost f = functionCost(b.fn);
  double flops = 0, bytes = 0;
  for (size_t i = 0; i < b.fn.ops.size(); ++i) {
    flops += b.cost(i).flops;
    bytes += b.cost(i).bytes;
  }
  EXPECT_DOUBLE_EQ(f.total.flops, flops);
  EXPECT_DOUBLE_EQ(f.total.bytes, bytes);
  EXPECT_EQ(f.total.count, 10);
  EXPECT_DOUBLE_EQ(f.byKind.at("group_norm").flops, 7.0 * 216);
  EXPECT_EQ(f.byKind.at("param").count, 1);
}

TEST(Flops, MalformedConvolutionIsAnError) {
  Builder b;
  int x = b.value({2, 4, 9, 10}), w = b.value({6, 2, 3, 3}), y = b.value({2, 6, 5, 5});
  b.op("conv3d", {{"input", {x}}, {"weight", {w}}}, {y});
  try {
    b.cost(0);
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'med.conv3d' at t.mlir:1:1: expected a rank-5 weight, got 6x2x3x3"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
