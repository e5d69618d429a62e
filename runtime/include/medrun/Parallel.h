//===- Parallel.h - deterministic parallel loops -------------------------------===//
//
// Work is split into chunks whose boundaries depend only on the problem size and the
// grain, never on the number of threads; a chunk is always computed by one thread in
// order. Kernels that reduce combine per-chunk partials in chunk order, so results are
// bit-identical for any thread count.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_PARALLEL_H
#define MEDRUN_PARALLEL_H

#include <cstdint>
#include <functional>

namespace medrun {

/// Number of worker threads used by parallelFor (default: hardware concurrency, or the
/// MEDRUN_THREADS environment variable).
int numThreads();
void setNumThreads(int n);

/// Calls fn(begin, end) for the chunks [0, grain), [grain, 2·grain), ... of [0, n), on
/// all threads. Returns when every chunk is done. Exceptions thrown by fn are rethrown.
/// Threads that cannot be started (a thread or memory limit) are done without: the loop
/// runs on those that started, later loops ask for no more, and a warning says so once.
void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn);

/// Number of chunks parallelFor(n, grain, ...) makes.
inline int64_t numChunks(int64_t n, int64_t grain) { return (n + grain - 1) / grain; }

} // namespace medrun

#endif // MEDRUN_PARALLEL_H
