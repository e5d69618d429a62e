//===- Parallel.cpp - deterministic parallel loops ----------------------------===//
//
// A fixed pool of threads pulls chunk indices from an atomic counter. Which thread runs a
// chunk varies; what a chunk computes does not.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace medrun {
namespace {

int defaultThreads() {
  if (const char *env = std::getenv("MEDRUN_THREADS")) {
    int n = std::atoi(env);
    if (n > 0)
      return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<int> threadCount{0};

} // namespace

int numThreads() {
  int n = threadCount.load();
  return n > 0 ? n : defaultThreads();
}

void setNumThreads(int n) { threadCount = std::max(1, n); }

void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(1, grain);
  int64_t chunks = numChunks(n, grain);
  int workers = static_cast<int>(std::min<int64_t>(numThreads(), chunks));
  if (workers <= 1) {
    for (int64_t c = 0; c < chunks; ++c)
      fn(c * grain, std::min(n, (c + 1) * grain));
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex errorMutex;
  auto work = [&] {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      try {
        fn(c * grain, std::min(n, (c + 1) * grain));
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!error)
          error = std::current_exception();
        next = chunks; // stop handing out work
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (int t = 1; t < workers; ++t)
    threads.emplace_back(work);
  work();
  for (auto &t : threads)
    t.join();
  if (error)
    std::rethrow_exception(error);
}

} // namespace medrun
