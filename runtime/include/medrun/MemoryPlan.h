//===- MemoryPlan.h - the lives of a function's device buffers, and their check ------===//
//
// The CUDA executor keeps every buffer of a function (values and scratch) in one device
// arena, at the offsets medc planned (lib/Analysis/MemoryPlan.cpp) and recorded in the plan
// (`cuda_plan.memory`). Two buffers may share bytes when their lifetimes do not overlap: a
// buffer lives from the first plan step that touches it to the last one (inclusive), so a
// kernel never writes over an operand it is still reading. medc computes the lives with
// bufferLives() to place the buffers; the runtime computes them again for the state it
// holds and checks the recorded offsets with checkArena() (a plan is untrusted input).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_MEMORYPLAN_H
#define MEDRUN_MEMORYPLAN_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace medrun {

struct Function;
struct CudaStep;

/// Every offset in the arena is a multiple of this (cuDNN and vector loads want 256).
constexpr size_t kArenaAlignment = 256;

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
  bool overlaps(const BufferLife &o) const { return first <= o.last && o.first <= last; }
};

/// The lives of the buffers of `fn`'s CUDA plan: values (bytes at their storage type), then
/// scratch buffers. `resident(step)` says, for a `param` step, whether its value is the
/// resident state tensor itself and, for an `assign` step marked in_place, whether its
/// producer writes the resident tensor: such values, like aliases and values placed inside
/// another one, take no arena bytes. A buffer with bytes that no step touches lives
/// throughout.
std::vector<BufferLife> bufferLives(const Function &fn,
                                    const std::function<bool(const CudaStep &)> &resident);

/// What medc plans for: the state (parameters, moments, EMA) resident on the device in
/// each value's declared type, so only parameters stored in another type (bf16 copies of
/// f32 master weights) and updates that cannot be written in place take arena bytes.
bool residentAsPlanned(const Function &fn, const CudaStep &step);

/// Checks placed buffers: every offset aligned, every buffer inside `arenaBytes`, and no
/// two buffers live at the same time sharing a byte. Throws Error naming the function and
/// the values (or scratch buffers) at fault. Buffers with 0 bytes are not checked.
void checkArena(const Function &fn, const std::vector<BufferLife> &life,
                const std::vector<int64_t> &offset, size_t arenaBytes);

} // namespace medrun

#endif // MEDRUN_MEMORYPLAN_H
