//===- ModelStats.h - parameter, FLOP and memory counts of a function ----------===//
#ifndef MED_ANALYSIS_MODELSTATS_H
#define MED_ANALYSIS_MODELSTATS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

#include <string>

namespace mlir::med {

/// What one execution of a function costs. Requires static shapes (see med-specialize).
struct ModelStats {
  int64_t parameterCount = 0;   ///< elements of the distinct parameters the function reads
  int64_t parameterTensors = 0; ///< number of distinct parameters read
  int64_t parameterBytes = 0;
  double convMacs = 0;          ///< multiply-adds of all convolutions
  /// FLOPs (2 per multiply-add) per op family, in a fixed order.
  llvm::MapVector<llvm::StringRef, double> flopsByFamily;
  int64_t activationBytes = 0;  ///< bytes of every op result (no parameters, no constants)
  int64_t peakLiveBytes = 0;    ///< most bytes alive at once when run in program order
  /// medc's memory plan over the ops in program order (MemoryPlan.h): the arena of the
  /// values, and the resident state the function reads (parameters, moments, EMA).
  int64_t plannedArenaBytes = 0;
  int64_t residentBytes = 0;
  int64_t memoryBudgetBytes = 0; ///< medc stats --memory-budget (0: none)

  double totalFlops() const;
};

/// The family an op's FLOPs are reported under ("conv 1x1x1", "normalization", ...).
llvm::StringRef opFamily(Operation *op);

/// Counts `f`; reports an error at the first value of non-static shape.
FailureOr<ModelStats> computeModelStats(func::FuncOp f);

} // namespace mlir::med

#endif // MED_ANALYSIS_MODELSTATS_H
