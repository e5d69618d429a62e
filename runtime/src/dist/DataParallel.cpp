//===- DataParallel.cpp - the reducer of a data-parallel training job -------------------===//
//
// The gradient buckets are summed on the communicator's own stream, ordered against the
// step's stream by events only (docs/distributed.md, "Buckets and overlap"); a watchdog
// thread keeps NCCL's error polling off the step's critical path.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Distributed.h"

#include "Driver.h"
#include "medrun/Error.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
#include <algorithm>

namespace medrun {

using namespace dist;

struct DataParallel::Impl {
  Driver d{"data-parallel training"};
  DistEnv env;
  int ordinal = 0, device = 0;
  void *ctx = nullptr;
  void *commStream = nullptr;
  void *ready = nullptr;   ///< recorded on the step's stream before a bucket's all-reduce
  void *reduced = nullptr; ///< recorded on the communicator's stream after it
  bool pending = false;    ///< sums enqueued that the step's stream has not joined yet
  CUdeviceptr hostBuffer = 0; ///< device memory for sums of host values
  size_t hostBytes = 0;
  void sumOnHost(void *values, size_t count, DType dtype);

  // Timing (timeCommunication): events with timing, reused from step to step.
  bool timing = false;
  std::vector<void *> events;
  size_t eventsUsed = 0;
  std::vector<std::pair<void *, void *>> sums; ///< each all-reduce's start and end
  std::vector<std::pair<void *, size_t>> joins; ///< the step's stream at a join; the last sum
  void *timingEvent(void *stream) {
    if (eventsUsed == events.size()) {
      void *e = nullptr;
      d.check(d.cuEventCreate(&e, 0), "cuEventCreate (timing)");
      events.push_back(e);
    }
    void *e = events[eventsUsed++];
    d.check(d.cuEventRecord(e, stream), "cuEventRecord (timing)");
    return e;
  }
  std::unique_ptr<Communicator> comm;

  // The watchdog. `mutex` orders the communicator's calls between the step's thread and it.
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::atomic<bool> failed{false};
  std::string failure; ///< why the job failed (set once, under mutex)
  using Clock = std::chrono::steady_clock;
  std::atomic<int64_t> stepSince{0}; ///< when the step in progress started (ns), 0 between steps
  std::thread watchdog;

  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }
  void watch();
  void fail(const std::string &why); // under mutex
  /// Enqueues an all-reduce on the communicator's stream; a failure ends the job.
  void allReduce(void *data, size_t count, DType dtype) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failed)
      throw Error(failure);
    try {
      comm->allReduceSum(data, count, dtype, commStream);
    } catch (const Error &e) {
      failure = e.what();
      failed = true;
      throw;
    }
  }
  [[noreturn]] void rethrow() {
    std::lock_guard<std::mutex> lock(mutex);
    throw Error(failure);
  }
};

void DataParallel::Impl::fail(const std::string &why) {
  if (failed)
    return;
  failure = comm->abortFor(why);
  failed = true;
}

void DataParallel::Impl::watch() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping && !failed) {
    wake.wait_for(lock, std::chrono::milliseconds(50));
    if (stopping)
      break;
    if (std::string why = comm->asyncError(); !why.empty()) {
      fail(why);
      break;
    }
    const int64_t since = stepSince.load();
    if (since && (now() - since) * 1e-9 > env.timeout) {
      failure = comm->timedOut("a training step");
      failed = true;
      break;
    }
  }
}

DataParallel::DataParallel(const DistEnv &env) : impl_(std::make_unique<Impl>()) {
  Impl &m = *impl_;
  const Driver &d = m.d;
  m.env = env;
  d.check(d.cuInit(0), "cuInit");
  int gpus = 0;
  d.check(d.cuDeviceGetCount(&gpus), "cuDeviceGetCount");
  m.ordinal = rankDevice(env, gpus, std::getenv("CUDA_VISIBLE_DEVICES"));
  d.check(d.cuDeviceGet(&m.device, m.ordinal), "cuDeviceGet");
  d.check(d.cuDevicePrimaryCtxRetain(&m.ctx, m.device), "cuDevicePrimaryCtxRetain");
  d.check(d.cuCtxSetCurrent(m.ctx), "cuCtxSetCurrent");
  d.check(d.cuStreamCreate(&m.commStream, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
  d.check(d.cuEventCreate(&m.ready, 2 /* CU_EVENT_DISABLE_TIMING */), "cuEventCreate");
  d.check(d.cuEventCreate(&m.reduced, 2), "cuEventCreate");
  m.comm = std::make_unique<Communicator>(env);
  m.watchdog = std::thread([&m] { m.watch(); });
}

DataParallel::~DataParallel() {
  Impl &m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.stopping = true;
  }
  m.wake.notify_all();
  if (m.watchdog.joinable())
    m.watchdog.join();
  const Driver &d = m.d;
  d.cuCtxSetCurrent(m.ctx);
  d.cuStreamDestroy(m.commStream); // its work first: it may use the communicator
  m.comm.reset();
  d.cuEventDestroy(m.ready);
  d.cuEventDestroy(m.reduced);
  for (void *e : m.events)
    d.cuEventDestroy(e);
  if (m.hostBuffer)
    d.cuMemFree(m.hostBuffer);
  d.cuDevicePrimaryCtxRelease(m.device);
}

const DistEnv &DataParallel::env() const { return impl_->env; }
int DataParallel::device() const { return impl_->ordinal; }
int DataParallel::worldSize() const { return impl_->env.worldSize; }

void DataParallel::allReduceSum(void *data, size_t count, DType dtype, void *stream) {
  Impl &m = *impl_;
  if (m.failed)
    m.rethrow();
  if (!stream) { // the CPU backend's host memory: through the GPU, which NCCL needs
    m.sumOnHost(data, count, dtype);
    return;
  }
  const Driver &d = m.d;
  d.check(d.cuEventRecord(m.ready, stream), "cuEventRecord (gradient bucket ready)");
  d.check(d.cuStreamWaitEvent(m.commStream, m.ready, 0), "cuStreamWaitEvent (gradient bucket)");
  void *start = m.timing ? m.timingEvent(m.commStream) : nullptr;
  m.allReduce(data, count, dtype);
  if (m.timing)
    m.sums.emplace_back(start, m.timingEvent(m.commStream));
  d.check(d.cuEventRecord(m.reduced, m.commStream), "cuEventRecord (gradient bucket summed)");
  m.pending = true;
}

void DataParallel::join(void *stream) {
  Impl &m = *impl_;
  if (!m.pending)
    return;
  if (m.timing && !m.sums.empty()) // where the step's stream starts to wait
    m.joins.emplace_back(m.timingEvent(stream), m.sums.size() - 1);
  // The communicator's stream runs its sums in order: the last one's event covers all.
  m.d.check(m.d.cuStreamWaitEvent(stream, m.reduced, 0), "cuStreamWaitEvent (summed gradients)");
  m.pending = false;
}

void DataParallel::stepStarts() { impl_->stepSince = Impl::now(); }

void DataParallel::stepEnded() {
  Impl &m = *impl_;
  m.stepSince = 0;
  if (m.failed)
    m.rethrow();
}

void DataParallel::timeCommunication(bool on) { impl_->timing = on; }

DataParallel::CommunicationTimes DataParallel::communicationTimes() {
  Impl &m = *impl_;
  const Driver &d = m.d;
  d.check(d.cuStreamSynchronize(m.commStream), "cuStreamSynchronize (timed sums)");
  auto ms = [&](void *from, void *to) {
    float t = 0;
    d.check(d.cuEventElapsedTime(&t, from, to), "cuEventElapsedTime");
    return static_cast<double>(t);
  };
  CommunicationTimes t;
  for (auto [start, end] : m.sums)
    t.allReduceMs += ms(start, end);
  for (auto [at, last] : m.joins)
    t.exposedMs += std::max(0.0, ms(at, m.sums[last].second));
  t.allReduces = static_cast<int64_t>(m.sums.size());
  t.joins = static_cast<int64_t>(m.joins.size());
  m.sums.clear();
  m.joins.clear();
  m.eventsUsed = 0;
  return t;
}

void DataParallel::sumOverRanks(float *values, size_t count) {
  Impl &m = *impl_;
  if (m.failed)
    m.rethrow();
  m.sumOnHost(values, count, DType::F32);
}

void DataParallel::Impl::sumOnHost(void *values, size_t count, DType dtype) {
  const size_t bytes = count * dtypeSize(dtype);
  d.check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  if (hostBytes < bytes) {
    if (hostBuffer)
      d.check(d.cuMemFree(hostBuffer), "cuMemFree");
    hostBuffer = 0;
    d.check(d.cuMemAlloc(&hostBuffer, bytes), "cuMemAlloc (sums of host values)");
    hostBytes = bytes;
  }
  d.check(d.cuMemcpyHtoD(hostBuffer, values, bytes), "cuMemcpyHtoD");
  allReduce(reinterpret_cast<void *>(hostBuffer), count, dtype);
  // Waits on the host: the caller needs the sums now. A peer that died or hangs makes the
  // watchdog abort the communicator, which ends the wait.
  CUresult r = d.cuStreamSynchronize(commStream);
  if (failed)
    rethrow();
  d.check(r, "cuStreamSynchronize (sums over the ranks)");
  d.check(d.cuMemcpyDtoH(values, hostBuffer, bytes), "cuMemcpyDtoH");
}

} // namespace medrun
