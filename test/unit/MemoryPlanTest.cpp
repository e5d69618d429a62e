// planArena: buffers live at the same time never share bytes, and reuse happens.
#include "med/Analysis/MemoryPlan.h"

#include <gtest/gtest.h>

#include <random>

using medrun::BufferLife;
using mlir::med::ArenaPlan;
using mlir::med::planArena;

namespace {

void expectDisjoint(const std::vector<BufferLife> &b, const ArenaPlan &p, size_t align) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].bytes == 0)
      continue;
    EXPECT_EQ(p.offset[i] % static_cast<int64_t>(align), 0);
    EXPECT_LE(p.offset[i] + b[i].bytes, p.bytes);
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (b[j].bytes == 0)
        continue;
      auto lo = [](const BufferLife &x) { return x.first > x.last ? BufferLife::kBeforeSteps : x.first; };
      auto hi = [](const BufferLife &x) { return x.first > x.last ? BufferLife::kAfterSteps : x.last; };
      bool together = lo(b[i]) <= hi(b[j]) && lo(b[j]) <= hi(b[i]);
      bool shared = p.offset[i] < p.offset[j] + b[j].bytes && p.offset[j] < p.offset[i] + b[i].bytes;
      EXPECT_FALSE(together && shared) << "buffers " << i << " and " << j << " overlap";
    }
  }
}

} // namespace

TEST(MemoryPlan, ChainReusesMemory) {
  // a -> b -> c -> d: each buffer is needed by the next step only, so two slots suffice.
  std::vector<BufferLife> b(4);
  for (int i = 0; i < 4; ++i) {
    b[i].bytes = 1000;
    b[i].touch(i);
    b[i].touch(i + 1);
  }
  ArenaPlan p = planArena(b, 256);
  expectDisjoint(b, p, 256);
  EXPECT_EQ(p.bytes, 2048u);
  EXPECT_EQ(p.naiveBytes, 4096u);
  EXPECT_EQ(p.offset[0], p.offset[2]);
}

TEST(MemoryPlan, UntouchedAndEmptyBuffers) {
  std::vector<BufferLife> b(3);
  b[0].bytes = 100; // never touched: lives throughout
  b[1].bytes = 0;   // not placed
  b[2].bytes = 100;
  b[2].touch(3);
  ArenaPlan p = planArena(b, 64);
  expectDisjoint(b, p, 64);
  EXPECT_EQ(p.bytes, 256u);
}

TEST(MemoryPlan, RandomLifetimes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferLife> b(200);
    int steps = 60;
    for (auto &x : b) {
      x.bytes = std::uniform_int_distribution<size_t>(0, 5000)(rng);
      int s = std::uniform_int_distribution<int>(-1, steps)(rng);
      x.touch(s);
      x.touch(std::min(steps + 5, s + std::uniform_int_distribution<int>(0, 12)(rng)));
    }
    ArenaPlan p = planArena(b, 256);
    expectDisjoint(b, p, 256);
    // At least the largest sum of buffers live at one step; at most one buffer each.
    size_t peak = 0;
    for (int s = -1; s <= steps + 5; ++s) {
      size_t live = 0;
      for (auto &x : b)
        if (x.bytes && x.first <= s && s <= x.last)
          live += x.bytes;
      peak = std::max(peak, live);
    }
    EXPECT_GE(p.bytes, peak);
    EXPECT_LE(p.bytes, p.naiveBytes);
    EXPECT_LT(p.bytes, p.naiveBytes / 2); // lifetimes are short: reuse must happen
  }
}
