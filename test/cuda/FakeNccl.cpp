//===- FakeNccl.cpp - a stand-in for libnccl.so.2 across processes (tests only) --------===//
//
// The subset of NCCL's C ABI medrun calls (ncclGetVersion, ncclGetUniqueId,
// ncclCommInitRank, ncclAllReduce with ncclSum on f32 and bf16, ncclCommGetAsyncError,
// ncclCommAbort, ncclCommDestroy, ncclGetErrorString, ncclGetLastError), for processes on
// one host under the emulated driver (FakeCuda.cpp: device memory is host memory, so a
// device pointer is read and written directly). The ranks of a communicator meet in POSIX
// shared memory named by the unique id: each posts its buffer in its own slot, waits for the
// others', and sums the slots in rank order, rank 0 + rank 1 + ..., in f32 (bf16 rounded
// once at the end), so every rank gets bit-identical results whatever the order they
// arrive in. Under the emulated driver (MEDRUN_LIBCUDA, already loaded by medrun) a
// collective is a host function on its stream (cuLaunchHostFunc): it runs in that stream's
// order, at once on a blocking stream, when waited for on a deferred one, and a CUDA graph
// captures it and runs it at each replay, as NCCL's kernels are. Without a stream or a
// driver it runs when called.
//
// FAKE_NCCL_DELAY_MS=T makes each all-reduce take T ms more (slow communication, for the
// measure of exposed communication time).
//
// FAKE_NCCL_SKIP=RANK:CALL makes that rank's CALL-th all-reduce (1-based) keep its own
// values instead of the sum (it still takes part, so no peer waits): a reducer that skips
// a bucket on one rank, for tests that must notice.
//
// Faults behave as NCCL's do: a peer that exits, or one that does not arrive within
// FAKE_NCCL_TIMEOUT_MS (default 10000), or a peer that called ncclCommAbort, makes the
// collective stop; the call still returns ncclSuccess and the error shows in
// ncclCommGetAsyncError (ncclRemoteError), the reason in ncclGetLastError. Larger buffers go
// through the slots in pieces of FAKE_NCCL_SLOT_BYTES (default 1 MiB). As NCCL allows,
// ncclCommAbort may come from another thread while a collective runs (a watchdog): the
// collective stops, and the communicator's memory stays mapped for it.
//
//===----------------------------------------------------------------------------------===//
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kMaxRanks = 64;
constexpr int kSuccess = 0, kSystemError = 2, kInvalidArgument = 4, kInvalidUsage = 5,
              kRemoteError = 6;
constexpr int kFloat32 = 7, kBfloat16 = 9, kSum = 0;

struct RankState {
  std::atomic<int> pid;
  std::atomic<uint64_t> posted; ///< pieces whose data this rank has put in its slot
  std::atomic<uint64_t> done;   ///< pieces it has finished reading all slots of
};

struct Shared {
  std::atomic<int> nranks;
  std::atomic<int> joined;
  std::atomic<int> aborted; ///< 1 + the rank that aborted, or 0
  RankState ranks[kMaxRanks];
};

struct Comm;
/// One enqueued all-reduce (kept while the communicator lives: a graph replays it).
struct Job {
  Comm *comm;
  const void *send;
  void *recv;
  size_t count;
  int type;
};

struct Comm {
  Shared *shared = nullptr;
  size_t mapped = 0, slotBytes = 0;
  int rank = 0, nranks = 0;
  uint64_t pieces = 0, calls = 0;
  std::atomic<int> asyncError{kSuccess}; ///< set after lastError (another thread reads both)
  std::atomic<bool> abortedHere{false};
  std::string lastError;
  std::vector<Job *> jobs;
  char *slot(int r) const { return reinterpret_cast<char *>(shared + 1) + slotBytes * size_t(r); }
};

long envLong(const char *name, long fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

/// Gone: no such process, or a zombie not yet reaped.
bool processGone(int pid) {
  if (pid <= 0)
    return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return true;
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = std::fopen(path, "r");
  if (!f)
    return true;
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char *close = std::strrchr(buf, ')'); // "pid (name) S ..."
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

std::string shmName(const char *id) {
  char name[64] = "/fakenccl-";
  for (int i = 0; i < 12; ++i)
    std::snprintf(name + 10 + 2 * i, 3, "%02x", static_cast<unsigned char>(id[8 + i]));
  return name;
}

/// Waits until `ready(r)` for every rank; false (with the reason set) when a peer is gone,
/// aborted, or the timeout passes.
template <typename Ready> bool waitAll(Comm *c, Ready ready, const char *what) {
  auto start = std::chrono::steady_clock::now();
  long timeoutMs = envLong("FAKE_NCCL_TIMEOUT_MS", 10000);
  for (int spin = 0;; ++spin) {
    int missing = -1;
    for (int r = 0; r < c->nranks && missing < 0; ++r)
      if (!ready(r))
        missing = r;
    if (missing < 0)
      return true;
    if (c->abortedHere) {
      c->lastError = "this rank aborted the communicator";
      return false;
    }
    int aborted = c->shared->aborted.load();
    if (aborted) {
      c->lastError = "rank " + std::to_string(aborted - 1) + " aborted the communicator";
      return false;
    }
    int pid = c->shared->ranks[missing].pid.load();
    if (spin % 64 == 0 && processGone(pid)) {
      c->lastError = "rank " + std::to_string(missing) + " (pid " + std::to_string(pid) +
                     ") exited during " + what;
      return false;
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start).count();
    if (ms > timeoutMs) {
      c->lastError = "rank " + std::to_string(missing) + " did not arrive for " + what + " within " +
                     std::to_string(timeoutMs) + " ms";
      return false;
    }
    if (spin > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    else
      std::this_thread::yield();
  }
}

float toFloat(const char *p, int type) {
  if (type == kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint32_t u = uint32_t(*reinterpret_cast<const uint16_t *>(p)) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void store(char *p, float f, int type) {
  if (type == kFloat32) {
    std::memcpy(p, &f, 4);
    return;
  }
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t b = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40)
                                               : uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  std::memcpy(p, &b, 2);
}

thread_local std::string globalError;

// The all-reduce itself, when its stream gets to it.
void runJob(void *arg) {
  const Job &job = *static_cast<Job *>(arg);
  Comm *c = job.comm;
  if (c->asyncError || c->abortedHere)
    return;
  const int type = job.type;
  const size_t count = job.count;
  const size_t elem = type == kFloat32 ? 4 : 2, per = c->slotBytes / elem;
  const char *in = static_cast<const char *>(job.send);
  char *out = static_cast<char *>(job.recv);
  Shared *s = c->shared;
  ++c->calls;
  // FAKE_NCCL_DELAY_MS: each all-reduce takes that much longer (a slow network).
  if (long delay = envLong("FAKE_NCCL_DELAY_MS", 0); delay > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  bool skip = false;
  if (const char *spec = std::getenv("FAKE_NCCL_SKIP"); spec && *spec) {
    int rank = -1;
    unsigned long long call = 0;
    skip = std::sscanf(spec, "%d:%llu", &rank, &call) == 2 && rank == c->rank && call == c->calls;
  }
  for (size_t begin = 0; begin < count; begin += per) {
    size_t n = std::min(per, count - begin);
    uint64_t piece = ++c->pieces;
    // Every rank has read the slots of the previous piece: this rank's slot is free.
    bool ok = waitAll(c, [&](int r) { return s->ranks[r].done.load() >= piece - 1; }, "an all-reduce");
    if (ok) {
      std::memcpy(c->slot(c->rank), in + begin * elem, n * elem);
      s->ranks[c->rank].posted.store(piece);
      ok = waitAll(c, [&](int r) { return s->ranks[r].posted.load() >= piece; }, "an all-reduce");
    }
    if (!ok) {
      c->asyncError = kRemoteError; // as NCCL: the failure shows in ncclCommGetAsyncError
      return;
    }
    for (size_t i = 0; i < n && !skip; ++i) {
      float sum = toFloat(c->slot(0) + i * elem, type);
      for (int r = 1; r < c->nranks; ++r)
        sum += toFloat(c->slot(r) + i * elem, type);
      store(out + (begin + i) * elem, sum, type);
    }
    if (skip && out != in)
      std::memcpy(out + begin * elem, in + begin * elem, n * elem);
    s->ranks[c->rank].done.store(piece);
  }
}

// The emulated driver's cuLaunchHostFunc, where medrun has loaded it.
int (*hostFuncLauncher())(void *, void (*)(void *), void *) {
  static int (*fn)(void *, void (*)(void *), void *) = [] {
    const char *path = std::getenv("MEDRUN_LIBCUDA");
    void *lib = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return lib ? reinterpret_cast<int (*)(void *, void (*)(void *), void *)>(
                     dlsym(lib, "cuLaunchHostFunc"))
               : nullptr;
  }();
  return fn;
}

} // namespace

// As nccl.h declares it (the caller's function types must match these exactly).
typedef struct {
  char internal[128];
} ncclUniqueId;

extern "C" {

int ncclGetVersion(int *v) {
  *v = 22809;
  return kSuccess;
}

const char *ncclGetErrorString(int r) {
  switch (r) {
  case kSuccess: return "no error";
  case kSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case kInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case kInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case kRemoteError: return "remote process exited or there was a network error";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(void *comm) {
  return comm ? static_cast<Comm *>(comm)->lastError.c_str() : globalError.c_str();
}

int ncclGetUniqueId(ncclUniqueId *unique) {
  char *id = unique->internal;
  std::memset(id, 0, 128);
  std::memcpy(id, "fakenccl", 8);
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0 && ::read(fd, id + 8, 12) == 12;
  if (fd >= 0)
    ::close(fd);
  return ok ? kSuccess : kSystemError;
}

int ncclCommInitRank(void **out, int nranks, ncclUniqueId id, int rank) {
  if (std::memcmp(id.internal, "fakenccl", 8) != 0) {
    globalError = "the unique id was not made by this library's ncclGetUniqueId";
    return kInvalidArgument;
  }
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    globalError = "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " is out of range";
    return kInvalidArgument;
  }
  auto *c = new Comm();
  c->rank = rank;
  c->nranks = nranks;
  c->slotBytes = static_cast<size_t>(envLong("FAKE_NCCL_SLOT_BYTES", 1 << 20)) / 8 * 8;
  c->mapped = sizeof(Shared) + c->slotBytes * size_t(nranks);
  std::string name = shmName(id.internal);
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(c->mapped)) != 0) {
    globalError = "shm_open/ftruncate " + name + ": " + std::strerror(errno);
    delete c;
    return kSystemError;
  }
  void *m = ::mmap(nullptr, c->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) {
    globalError = std::string("mmap: ") + std::strerror(errno);
    delete c;
    return kSystemError;
  }
  c->shared = static_cast<Shared *>(m);
  int expected = 0;
  if (!c->shared->nranks.compare_exchange_strong(expected, nranks) && expected != nranks) {
    globalError = "rank " + std::to_string(rank) + " says " + std::to_string(nranks) +
                  " ranks, another said " + std::to_string(expected);
    ::munmap(m, c->mapped);
    delete c;
    return kInvalidUsage;
  }
  int noPid = 0;
  if (!c->shared->ranks[rank].pid.compare_exchange_strong(noPid, static_cast<int>(getpid()))) {
    globalError = "rank " + std::to_string(rank) + " joined twice";
    ::munmap(m, c->mapped);
    delete c;
    return kInvalidUsage;
  }
  c->shared->joined.fetch_add(1);
  bool all = waitAll(c, [&](int r) { return c->shared->ranks[r].pid.load() != 0; }, "ncclCommInitRank");
  if (rank == 0 || !all)
    ::shm_unlink(name.c_str()); // mapped by all: the name is no longer needed
  if (!all) {
    globalError = c->lastError;
    c->shared->aborted.store(rank + 1);
    ::munmap(m, c->mapped);
    delete c;
    return kRemoteError;
  }
  *out = c;
  return kSuccess;
}

int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, void *comm,
                  void *stream) {
  auto *c = static_cast<Comm *>(comm);
  if (type != kFloat32 && type != kBfloat16) {
    c->lastError = "only f32 and bf16 are summed by the stand-in";
    return kInvalidArgument;
  }
  if (op != kSum) {
    c->lastError = "only ncclSum is supported by the stand-in";
    return kInvalidArgument;
  }
  if (int e = c->asyncError)
    return e;
  auto *job = new Job{c, send, recv, count, type};
  c->jobs.push_back(job);
  if (int (*launchHostFunc)(void *, void (*)(void *), void *) = hostFuncLauncher(); stream && launchHostFunc)
    return launchHostFunc(stream, runJob, job) == 0 ? kSuccess : kSystemError;
  runJob(job);
  return kSuccess;
}

int ncclCommGetAsyncError(void *comm, int *error) {
  *error = static_cast<Comm *>(comm)->asyncError;
  return kSuccess;
}

int ncclCommAbort(void *comm) {
  auto *c = static_cast<Comm *>(comm);
  c->shared->aborted.store(c->rank + 1); // peers waiting in a collective stop
  c->abortedHere = true;                 // and this rank's own, maybe on another thread
  return kSuccess;
}

int ncclCommDestroy(void *comm) {
  auto *c = static_cast<Comm *>(comm);
  ::munmap(c->shared, c->mapped);
  for (Job *j : c->jobs)
    delete j;
  delete c;
  return kSuccess;
}

} // extern "C"
