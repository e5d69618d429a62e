//===- OpTableTest.cpp - the plan verifier covers the op table --------------------===//
//
// Every op of the generated table (med/OpTable.h) has a shape rule in the plan verifier;
// missingPieces' negative control is in test/unit/OpTableTest.cpp. The CPU backend's dispatch
// is a switch over OpKind built with -Werror=switch.
//
//===----------------------------------------------------------------------------------===//
#include "../../runtime/src/artifact/PlanVerifier.h"
#include "med/OpTable.h"

#include "gtest/gtest.h"

namespace {

TEST(OpTable, PlanVerifierHasEveryShapeRule) {
  std::vector<std::string> missing =
      med::ops::missingPieces({{"plan verifier shape rule", medrun::hasShapeRule}});
  EXPECT_TRUE(missing.empty()) << missing.front();
}

// Negative control: a verifier without med.gelu's rule is named as incomplete.
TEST(OpTable, PlanVerifierMissingRuleIsNamed) {
  auto without = [](med::ops::OpKind k) {
    return k != med::ops::OpKind::Gelu && medrun::hasShapeRule(k);
  };
  std::vector<std::string> missing =
      med::ops::missingPieces({{"plan verifier shape rule", without}});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], "op 'gelu': no plan verifier shape rule");
}

} // namespace
