//===- GradientReducer.h - how gradient buckets are summed over the ranks ----------===//
//
// A training step compiled with `medc compile --data-parallel` sums each gradient bucket
// over the ranks of the job (`med.all_reduce`, docs/data-parallel.md). The executors hand
// each bucket to a GradientReducer: the CPU backend a host buffer (stream null), the CUDA
// backend a device pointer and the step's stream (a CUstream), in the order of the buckets,
// the same on every rank. Alone, a process reduces with singleRankReducer(), which changes
// nothing; a data-parallel job passes one that talks to the other ranks.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_GRADIENTREDUCER_H
#define MEDRUN_GRADIENTREDUCER_H

#include "medrun/Tensor.h"

#include <cstddef>

namespace medrun {

class GradientReducer {
public:
  virtual ~GradientReducer() = default;
  /// The number of ranks: the step divides the sums by it (its input inv_world_size).
  virtual int worldSize() const = 0;
  /// Replaces `count` elements of `dtype` at `data` by their sum over the ranks, in place.
  /// Throws Error when it cannot (the step then fails).
  virtual void allReduceSum(void *data, size_t count, DType dtype, void *stream) = 0;
};

/// The reducer of a job of one rank: the sums are the values themselves.
GradientReducer &singleRankReducer();

} // namespace medrun

#endif // MEDRUN_GRADIENTREDUCER_H
