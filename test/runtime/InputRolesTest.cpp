//===- InputRolesTest.cpp - random inputs by each argument's role (InputRoles.h) -----===//
#include "medrun/InputRoles.h"
#include "medrun/Error.h"

#include "gtest/gtest.h"

#include <string>

using namespace medrun;

namespace {

// A function built op by op, its arguments named.
struct Builder {
  Function fn;
  int arg(const std::string &name, Shape shape, DType dtype = DType::F32) {
    int id = value(std::move(shape), dtype);
    fn.inputs.push_back(id);
    fn.inputNames.push_back(name);
    return id;
  }
  int value(Shape shape, DType dtype = DType::F32) {
    fn.values.push_back({dtype, std::move(shape), dtype});
    return static_cast<int>(fn.values.size()) - 1;
  }
  void op(const std::string &kind, std::vector<std::pair<std::string, std::vector<int>>> operands,
          std::vector<int> results) {
    OpInfo o;
    o.kind = kind;
    o.schema = med::ops::findOp(kind);
    ASSERT_NE(o.schema, nullptr) << kind;
    o.operands = std::move(operands);
    o.results = std::move(results);
    fn.ops.push_back(o);
  }
};

TEST(InputRoles, RolesFollowTheUsesAndTheStepInputNames) {
  Builder b;
  b.fn.name = "loss";
  int logits = b.arg("arg0", {2, 3, 4, 4, 4});
  int targets = b.arg("arg1", {2, 1, 4, 4, 4}, DType::I32);
  int x = b.arg("arg2", {2, 3, 4, 4, 4});
  int y = b.arg("arg3", {2, 3, 4, 4, 4});
  int mask = b.arg("arg4", {2, 3, 4, 4, 4});
  b.arg("lr", {});
  int loss = b.value({}), bce = b.value({});
  b.op("dice_ce", {{"logits", {logits}}, {"targets", {targets}}}, {loss});
  b.op("bce_with_logits", {{"input", {x}}, {"target", {y}}, {"mask", {mask}}, {"pos_weight", {}}},
       {bce});
  std::vector<ArgumentRole> roles = argumentRoles(b.fn);
  ASSERT_EQ(roles.size(), 6u);
  EXPECT_EQ(roles[0].role, InputRole::Real);
  EXPECT_EQ(roles[1].role, InputRole::ClassIndex);
  EXPECT_EQ(roles[1].classes, 3);
  EXPECT_EQ(roles[2].role, InputRole::Real);
  EXPECT_EQ(roles[3].role, InputRole::Target);
  EXPECT_EQ(roles[4].role, InputRole::Mask);
  EXPECT_EQ(roles[5].role, InputRole::LearningRate);

  std::vector<Tensor> inputs;
  randomInputs(b.fn, inputs, 7);
  const int32_t *t = inputs[1].data<int32_t>();
  for (int64_t i = 0; i < inputs[1].numel(); ++i)
    EXPECT_TRUE(t[i] >= 0 && t[i] < 3) << t[i];
  const float *m = inputs[4].data<float>();
  for (int64_t i = 0; i < inputs[4].numel(); ++i)
    EXPECT_TRUE(m[i] == 0.0f || m[i] == 1.0f) << m[i];
  EXPECT_FLOAT_EQ(inputs[5].data<float>()[0], 1e-3f);
}

// Targets a label transform and dice_ce both read are class indices (dice_ce refuses others),
// whichever op reads them first.
TEST(InputRoles, ClassIndicesWinOverLabels) {
  Builder b;
  b.fn.name = "levels";
  int logits = b.arg("arg0", {2, 3, 4, 4, 4});
  int targets = b.arg("arg1", {2, 1, 4, 4, 4});
  int small = b.value({2, 1, 2, 2, 2}), loss = b.value({});
  b.op("downsample_nearest", {{"input", {targets}}}, {small});
  b.op("dice_ce", {{"logits", {logits}}, {"targets", {targets}}}, {loss});
  std::vector<ArgumentRole> roles = argumentRoles(b.fn);
  EXPECT_EQ(roles[1].role, InputRole::ClassIndex);
  EXPECT_EQ(roles[1].classes, 3);
}

// An integer argument that no rule gives a role is an error naming the function, the
// argument and its use, not integers drawn N(0, 1) (the silent default this replaces).
TEST(InputRoles, AnIntegerWithoutARoleIsAnError) {
  Builder b;
  b.fn.name = "sum";
  int ids = b.arg("ids", {2, 1, 4, 4, 4}, DType::I32);
  int out = b.value({2, 1, 4, 4, 4}, DType::I32);
  b.op("add", {{"lhs", {ids}}, {"rhs", {ids}}}, {out});
  try {
    argumentRoles(b.fn);
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("function 'sum': argument 'ids' (i32) is read by med.add (operand 'lhs')"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("no input role"), std::string::npos) << what;
  }
  std::vector<Tensor> inputs;
  EXPECT_THROW(randomInputs(b.fn, inputs, 1), Error);
  // Given, it needs no role.
  inputs = {Tensor(DType::I32, {2, 1, 4, 4, 4})};
  EXPECT_NO_THROW(randomInputs(b.fn, inputs, 1));
  // Read by no op, its values do not matter.
  Builder unread;
  unread.fn.name = "unread";
  unread.arg("ids", {2, 1, 4, 4, 4}, DType::I32);
  EXPECT_EQ(argumentRoles(unread.fn).at(0).role, InputRole::Real);
}

// The control: the same integers read by an operand that may hold labels (the op table's
// `label`: med.mirror's input) are object ids in [-1, 4].
TEST(InputRoles, IntegersALabelOperandReadsAreObjectIds) {
  Builder b;
  b.fn.name = "flip";
  int ids = b.arg("ids", {2, 1, 4, 4, 4}, DType::I32);
  int flip = b.arg("flip", {2, 3});
  int out = b.value({2, 1, 4, 4, 4}, DType::I32);
  b.op("mirror", {{"input", {ids}}, {"flip", {flip}}}, {out});
  std::vector<ArgumentRole> roles = argumentRoles(b.fn);
  EXPECT_EQ(roles[0].role, InputRole::Label);
  EXPECT_STREQ(roleName(roles[0].role), "label");
  std::vector<Tensor> inputs;
  randomInputs(b.fn, inputs, 3);
  const int32_t *p = inputs[0].data<int32_t>();
  bool unlabelled = false;
  for (int64_t i = 0; i < inputs[0].numel(); ++i) {
    EXPECT_TRUE(p[i] >= -1 && p[i] <= 4) << p[i];
    unlabelled = unlabelled || p[i] == -1;
  }
  EXPECT_TRUE(unlabelled);
}

TEST(InputRoles, KeysUseAllSixtyFourBitsAndSeedsArePerArgument) {
  Builder b;
  b.fn.name = "noise";
  int key = b.arg("key", {}, DType::I64);
  int like = b.arg("like", {2, 1, 4, 4, 4});
  int out = b.value({2, 1, 4, 4, 4});
  b.op("random", {{"key", {key}}, {"like", {like}}}, {out});
  EXPECT_EQ(argumentRoles(b.fn)[0].role, InputRole::Key);
  std::vector<Tensor> a, c;
  randomInputs(b.fn, a, 11);
  EXPECT_GT(static_cast<uint64_t>(a[0].data<int64_t>()[0]), uint64_t(1) << 32);
  // The same argument draws the same values whatever else is given.
  c = {Tensor(), a[1]};
  randomInputs(b.fn, c, 11);
  EXPECT_EQ(c[0].data<int64_t>()[0], a[0].data<int64_t>()[0]);
}

} // namespace
