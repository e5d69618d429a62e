//===- GradientReducer.cpp - the reducer of a job of one rank ----------------------===//
#include "medrun/GradientReducer.h"

namespace medrun {
namespace {

class SingleRank final : public GradientReducer {
public:
  int worldSize() const override { return 1; }
  void allReduceSum(void *, size_t, DType, void *) override {} // the sum of one is itself
};

} // namespace

GradientReducer &singleRankReducer() {
  static SingleRank one;
  return one;
}

} // namespace medrun
