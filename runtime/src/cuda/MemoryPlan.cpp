//===- MemoryPlan.cpp - greedy placement of buffers by liveness ---------------------===//
#include "medrun/MemoryPlan.h"

#include <algorithm>
#include <numeric>

namespace medrun {

ArenaPlan planArena(const std::vector<BufferLife> &input, size_t alignment) {
  ArenaPlan plan;
  const size_t n = input.size();
  plan.offset.assign(n, 0);
  std::vector<BufferLife> life = input;
  auto rounded = [&](size_t b) { return (b + alignment - 1) / alignment * alignment; };
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (life[i].bytes == 0)
      continue;
    if (life[i].first > life[i].last) // never touched: keep it for the whole run
      life[i] = {life[i].bytes, BufferLife::kBeforeSteps, BufferLife::kAfterSteps};
    plan.naiveBytes += rounded(life[i].bytes);
    order.push_back(i);
  }
  // Largest first (then earliest): big buffers decide the arena's size; small ones fill gaps.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return life[a].bytes != life[b].bytes ? life[a].bytes > life[b].bytes
                                          : life[a].first < life[b].first;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy; // [offset, end) of placed buffers live together
  for (size_t i : order) {
    busy.clear();
    for (size_t j : placed)
      if (life[j].first <= life[i].last && life[i].first <= life[j].last)
        busy.emplace_back(plan.offset[j], plan.offset[j] + rounded(life[j].bytes));
    std::sort(busy.begin(), busy.end());
    const size_t need = rounded(life[i].bytes);
    size_t at = 0;
    for (auto [begin, end] : busy) {
      if (begin >= at + need)
        break; // the gap before this busy range fits
      at = std::max(at, end);
    }
    plan.offset[i] = at;
    plan.bytes = std::max(plan.bytes, at + need);
    placed.push_back(i);
  }
  return plan;
}

} // namespace medrun
