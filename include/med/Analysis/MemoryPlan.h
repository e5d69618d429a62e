//===- MemoryPlan.h - placing a function's buffers in one arena by liveness -------===//
//
// medc plans device memory: each buffer of a function gets an offset in one arena, two
// buffers sharing bytes only when their lives (medrun/MemoryPlan.h) do not overlap.
// planArena is the one placement algorithm: the CUDA code generator runs it over the
// launch plan's steps and records the result in the plan (the runtime checks it), and
// planFunctionMemory runs it over a function's ops in program order, for `medc stats`
// and the test pass -test-med-print-memory-plan.
//
//===------------------------------------------------------------------------------===//
#ifndef MED_ANALYSIS_MEMORYPLAN_H
#define MED_ANALYSIS_MEMORYPLAN_H

#include "medrun/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace mlir::med {

struct ArenaPlan {
  std::vector<int64_t> offset; ///< per buffer, a multiple of the alignment; -1: no bytes
  size_t bytes = 0;            ///< the arena's size
  size_t naiveBytes = 0;       ///< what one buffer per value would take (for reports)
};

/// Places the buffers: largest first (then earliest), each at the lowest aligned offset
/// where it overlaps no placed buffer live at the same time. A buffer that is never
/// touched (first > last) and has bytes takes space for the whole run.
ArenaPlan planArena(const std::vector<medrun::BufferLife> &buffers,
                    size_t alignment = medrun::kArenaAlignment);

/// The arena of a function whose ops run in program order, one op a step: each value
/// lives from the op that defines it (arguments: from the upload) to its last reader
/// (returned and assigned values: to the download). Views (ViewLikeOpInterface) share
/// their source's buffer; parameters stored in their declared type are resident state,
/// counted apart, as are the updates written into the state in place (an assigned f32
/// fusion result that reads the parameter it replaces, which nothing reads after it).
struct FunctionMemoryPlan {
  SmallVector<Value> values;             ///< arguments, then op results in order
  std::vector<medrun::BufferLife> lives; ///< per value; steps are op indices
  ArenaPlan arena;
  int64_t residentBytes = 0; ///< distinct parameters and other state the function reads
};

/// Requires static shapes; reports an error at the first value without one.
FailureOr<FunctionMemoryPlan> planFunctionMemory(func::FuncOp f);

/// Registers the test-only pass -test-med-print-memory-plan (med-opt).
void registerTestMemoryPlanPass();

/// Bytes of a value as stored: its `med.storage` decision (mixed precision), else its type.
int64_t storedBytes(Value v);

} // namespace mlir::med

#endif // MED_ANALYSIS_MEMORYPLAN_H
