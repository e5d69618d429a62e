//===- GradientReducer.h - how gradient buckets are summed over the ranks ----------===//
//
// A training step compiled with `medc compile --data-parallel` sums each gradient bucket
// over the ranks of the job (`med.all_reduce`, docs/data-parallel.md). The executors hand
// each bucket to a GradientReducer: the CPU backend a host buffer (stream null), the CUDA
// backend a device pointer and the step's stream (a CUstream), in the order of the buckets,
// the same on every rank. Alone, a process reduces with singleRankReducer(), which changes
// nothing; a data-parallel job passes its DataParallel (Distributed.h), which sums each
// bucket on a stream of its own while backward goes on, and which the CUDA backend joins
// (join) before the first kernel that touches a bucket's memory again.
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
  /// Makes `stream` wait, on the device, for the sums enqueued so far (a reducer that sums
  /// on a stream of its own); the step calls it before the first kernel that touches a
  /// bucket it handed over. Default: nothing (the sums are done when allReduceSum returns).
  virtual void join(void *stream) {}
  /// The training loop brackets each step (its run and the sums it takes after it): a
  /// reducer that watches the job times the step. stepEnded() throws Error when the job
  /// failed during the step (a rank died, hung or failed): its results are then not to be
  /// used. Default: nothing.
  virtual void stepStarts() {}
  virtual void stepEnded() {}
  /// Replaces `count` host values by their sum over the ranks (for the training loop's
  /// loss and its decisions between steps: every rank takes the same). Default: unchanged.
  virtual void sumOverRanks(float *values, size_t count) {}
};

/// The reducer of a job of one rank: the sums are the values themselves.
GradientReducer &singleRankReducer();

} // namespace medrun

#endif // MEDRUN_GRADIENTREDUCER_H
