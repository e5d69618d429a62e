//===- MemoryPlan.h - placing a step's buffers in one arena by liveness ------------===//
//
// The CUDA executor keeps every value of a function in one device arena. Two buffers may
// share bytes when their lifetimes do not overlap: a buffer lives from the first plan
// step that touches it to the last one (inclusive), so a kernel never writes over an
// operand it is still reading.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_MEMORYPLAN_H
#define MEDRUN_MEMORYPLAN_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace medrun {

/// One buffer to place: its size and the steps [first, last] during which it is live.
/// Before the first step (uploads) is kBeforeSteps; after the last (downloads) kAfterSteps.
struct BufferLife {
  static constexpr int kBeforeSteps = -1;
  static constexpr int kAfterSteps = 1 << 30;
  size_t bytes = 0; ///< 0: the buffer is not placed (offset 0, takes no space)
  int first = kAfterSteps, last = kBeforeSteps;
  void touch(int step) {
    first = step < first ? step : first;
    last = step > last ? step : last;
  }
};

struct ArenaPlan {
  std::vector<size_t> offset; ///< per buffer, a multiple of the alignment
  size_t bytes = 0;           ///< the arena's size
  size_t naiveBytes = 0;      ///< what one buffer per value would take (for reports)
};

/// Places the buffers: largest first, each at the lowest aligned offset where it overlaps
/// no placed buffer that is live at the same time. A buffer that is never touched
/// (first > last) and has bytes takes space for the whole run, as a safe default.
ArenaPlan planArena(const std::vector<BufferLife> &buffers, size_t alignment = 256);

} // namespace medrun

#endif // MEDRUN_MEMORYPLAN_H
