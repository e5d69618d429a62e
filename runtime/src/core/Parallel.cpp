//===- Parallel.cpp - deterministic parallel loops ----------------------------===//
//
// A fixed pool of threads pulls chunk indices from an atomic counter. Which thread runs a
// chunk varies; what a chunk computes does not.
//
// A thread that cannot be started (the process's thread or memory limit) is not an error:
// the loop runs on the threads that did start, with the same results, and the shortfall is
// reported once; later loops start no more than that many.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
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

/// A loop could start only `started` of the `wanted` threads it asked for: later loops ask
/// for no more, and the first shortfall is reported on stderr.
void threadsFellShort(int wanted, int started, const std::string &why) {
  const int set = threadCount.load() > 0 ? threadCount.load() : defaultThreads();
  int n = threadCount.load();
  while ((n <= 0 || n > started) && !threadCount.compare_exchange_weak(n, started)) {
  }
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true))
    std::fprintf(stderr,
                 "medrun: warning: %d threads set (--threads or MEDRUN_THREADS), but only %d of "
                 "a loop's %d could be started (%s); continuing on %d threads (the results do "
                 "not depend on their number)\n",
                 set, started, wanted, why.c_str(), started);
}

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
  // Every thread that started is joined, also when a later one fails to start (a
  // std::thread destroyed unjoined would terminate the process).
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (int t = 1; t < workers; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error &e) {
      threadsFellShort(workers, t, e.code().message());
      break;
    } catch (const std::bad_alloc &) {
      threadsFellShort(workers, t, "out of memory");
      break;
    }
  }
  work();
  for (auto &t : threads)
    t.join();
  if (error)
    std::rethrow_exception(error);
}

} // namespace medrun
