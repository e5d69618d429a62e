//===- FakeCuda.cpp - a CPU stand-in for libcuda.so.1 (tests only) -----------------===//
//
// Implements the driver functions medrun's CUDA executor resolves, on the host: device
// memory is host memory, a "module" is a shared object compiled from the artifact's CUDA
// source with emu.h (its path in MEDRUN_FAKE_CUDA_KERNELS, since the cubin cannot run here)
// that offers only the kernels the loaded image defines (the cubin's symbol table, the PTX's
// entries), so a kernel looked up in another module than its own is not found, as on a GPU,
// and a launch runs every block's threads as fibers that switch at __syncthreads. medrun loads it through MEDRUN_LIBCUDA, so the whole CUDA path (plan,
// arena, arguments, status word, downloads) runs in CI and is compared with the CPU backend.
// FAKE_CUDA_REJECT_CUBIN=1 makes the cubin fail to load, to exercise the PTX fallback;
// FAKE_CUDA_DEVICES=N reports N devices (default 1); FAKE_CUDA_MEM_BYTES sets the device
// memory it reports; FAKE_CUDA_KERNEL_DELAY_MS=T makes each kernel launch take T ms more
// (to lose a measured comparison with cuDNN).
//
// Streams: a blocking stream (flags 0, the executor's compute stream) runs each operation
// when it is enqueued, as the legacy default stream does. A non-blocking stream (flags 1,
// the copy stream of inputs uploaded ahead) defers its operations to the latest moment a
// GPU may run them: until a stream waits on an event recorded after them, or the stream is
// synchronized or destroyed. An asynchronous copy reads its source when it runs, so a
// missing wait, a wrong slot or a host buffer reused before its copy ran gives wrong data.
// Pinned host memory (cuMemHostAlloc) is tracked: freeing it while a deferred copy still
// reads it aborts; FAKE_CUDA_NO_PINNED=1 makes cuMemHostAlloc fail; FAKE_CUDA_REQUIRE_PINNED=1
// refuses asynchronous copies from pageable memory (a check that batches are pinned).
// FAKE_CUDA_EAGER_STREAMS=1 makes a non-blocking stream run each operation when it is
// enqueued instead (as an idle GPU would start it at once): a collective on its own stream
// is then done before the compute stream's later work, the overlap the measure of exposed
// communication time must see.
//
//===----------------------------------------------------------------------------------===//
#include <dlfcn.h>
#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <utility>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {
struct Dim3 {
  unsigned x, y, z;
};
struct Kernels {
  void *lib = nullptr;
  Dim3 *threadIdx = nullptr, *blockIdx = nullptr, *blockDim = nullptr, *gridDim = nullptr;
  void (**syncHook)() = nullptr;
};
Kernels kernels;

// Fibers of the block being run. Each fiber is made once (ucontext) and then runs one
// thread after another; switches are _setjmp/_longjmp, which save no signal mask, where
// swapcontext makes a system call per switch (three quarters of an emulated test's time).
struct Jump {
  jmp_buf at;
};
Jump scheduler;
std::vector<Jump> parked;  ///< where each made fiber waits for its next thread or barrier
std::vector<bool> made;    ///< fiber t exists (its loop waits in parked[t])
std::vector<std::vector<char>> stacks;
std::vector<bool> done;
unsigned current = 0;
// A kernel is called with kMaxArgs pointer-sized arguments, its own first and zeros after
// (the x86-64 calling convention lets a function ignore trailing arguments; a 32-bit scalar
// parameter reads the low half of its slot).
constexpr unsigned kMaxArgs = 64;
void *runKernel;
void *runArgs[kMaxArgs];

template <size_t... I> void callKernel(std::index_sequence<I...>) {
  using Kernel = void (*)(decltype((void)I, static_cast<void *>(nullptr))...);
  reinterpret_cast<Kernel>(runKernel)(runArgs[I]...);
}

void yieldToScheduler() {
  if (!_setjmp(parked[current].at))
    _longjmp(scheduler.at, 1);
}

[[noreturn]] void fiberMain() {
  for (;;) { // one thread per turn: the scheduler resumes it with the next thread
    callKernel(std::make_index_sequence<kMaxArgs>());
    done[current] = true;
    yieldToScheduler();
  }
}

/// Runs fiber t (as thread `current`) to its next barrier or its thread's end.
void resume(unsigned t) {
  if (_setjmp(scheduler.at))
    return; // the fiber yielded
  if (made[t])
    _longjmp(parked[t].at, 1);
  made[t] = true;
  ucontext_t start;
  getcontext(&start);
  start.uc_stack.ss_sp = stacks[t].data();
  start.uc_stack.ss_size = stacks[t].size();
  start.uc_link = nullptr; // fiberMain never returns
  makecontext(&start, fiberMain, 0);
  setcontext(&start);
}

struct Stream;
struct Event {
  std::chrono::steady_clock::time_point t;
  Stream *stream = nullptr; ///< a deferred stream it was recorded on, with
  uint64_t position = 0;    ///< the number of that stream's operations before the record
  bool captured = false;    ///< recorded inside the capture, on `from` after `work` operations
  void *from = nullptr;
  uint64_t work = 0;
};

/// An operation of a deferred stream; `reads` is the host memory a copy reads, if any.
struct Op {
  std::function<void()> run;
  const char *reads = nullptr;
  size_t bytes = 0;
};

struct Stream {
  bool deferred = false; // CU_STREAM_NON_BLOCKING
  std::deque<Op> queue;
  uint64_t enqueued = 0, done = 0;
  void runUntil(uint64_t position) {
    while (done < position) {
      Op op = std::move(queue.front());
      queue.pop_front();
      ++done;
      op.run();
    }
  }
};
std::vector<Stream *> streams;

bool envSet(const char *name) {
  const char *v = std::getenv(name);
  return v && *v == '1';
}

// Pinned host allocations: start -> size.
std::map<const char *, size_t> pinned;
bool isPinned(const void *p, size_t n) {
  const char *c = static_cast<const char *>(p);
  auto it = pinned.upper_bound(c);
  if (it == pinned.begin())
    return false;
  --it;
  return c + n <= it->first + it->second;
}

// A loaded module: the kernels' shared object (one for all modules) and the names of the
// functions its image defines, read from the cubin's symbol table or the PTX's entries.
struct Module {
  void *lib;
  std::set<std::string> kernels;
};
std::deque<Module> modules;

std::set<std::string> kernelsOf(const void *image) {
  std::set<std::string> names;
  const char *b = static_cast<const char *>(image);
  auto at = [&](uint64_t offset, auto type) {
    decltype(type) v;
    std::memcpy(&v, b + offset, sizeof v);
    return v;
  };
  if (std::memcmp(b, "\x7f" "ELF", 4) == 0) { // ELF64: the defined functions of .symtab
    uint64_t shoff = at(0x28, uint64_t());
    uint16_t shentsize = at(0x3a, uint16_t()), shnum = at(0x3c, uint16_t());
    for (uint16_t i = 0; i < shnum; ++i) {
      uint64_t sh = shoff + uint64_t(i) * shentsize;
      if (at(sh + 4, uint32_t()) != 2) // SHT_SYMTAB
        continue;
      uint64_t off = at(sh + 0x18, uint64_t()), size = at(sh + 0x20, uint64_t());
      uint64_t strtab = at(shoff + uint64_t(at(sh + 0x28, uint32_t())) * shentsize + 0x18,
                           uint64_t());
      for (uint64_t sym = off; sym + 24 <= off + size; sym += 24)
        if ((at(sym + 4, uint8_t()) & 0xf) == 2 && at(sym + 6, uint16_t()) != 0) // STT_FUNC
          names.insert(b + strtab + at(sym, uint32_t()));
    }
  } else if (std::strstr(b, ".target")) { // PTX: `.entry NAME(`
    for (const char *p = std::strstr(b, ".entry "); p; p = std::strstr(p + 1, ".entry ")) {
      const char *name = p + 7, *end = std::strchr(name, '(');
      if (end)
        names.insert(std::string(name, end));
    }
  }
  return names;
}

/// Runs `op` now on a blocking (or the null) stream, later on a deferred one.
int enqueue(void *stream, std::function<void()> op, const void *reads = nullptr, size_t bytes = 0) {
  Stream *s = static_cast<Stream *>(stream);
  if (!s || !s->deferred) {
    op();
    return 0;
  }
  static const bool eager = envSet("FAKE_CUDA_EAGER_STREAMS");
  if (eager && s->queue.empty()) { // ran at once: counted as enqueued and done
    ++s->enqueued;
    ++s->done;
    op();
    return 0;
  }
  s->queue.push_back({std::move(op), static_cast<const char *>(reads), bytes});
  ++s->enqueued;
  return 0;
}
} // namespace

extern "C" {
int cuInit(unsigned) { return 0; }
// FAKE_CUDA_DEVICES: how many devices it reports (default 1), all alike (data-parallel
// tests run a rank per device).
int cuDeviceGetCount(int *n) {
  const char *env = std::getenv("FAKE_CUDA_DEVICES");
  *n = env && *env ? std::atoi(env) : 1;
  return 0;
}
int cuDeviceGet(int *d, int ordinal) {
  *d = ordinal;
  return 0;
}
int cuDeviceGetName(char *name, int len, int) {
  std::snprintf(name, len, "fake CUDA device (CPU emulation)");
  return 0;
}
int cuDevicePrimaryCtxRetain(void **ctx, int) {
  static int c;
  *ctx = &c;
  return 0;
}
int cuDevicePrimaryCtxRelease_v2(int) { return 0; }
// FAKE_CUDA_CC: the compute capability it reports, as major * 10 + minor (default 90).
int cuDeviceGetAttribute(int *v, int attribute, int) {
  const char *env = std::getenv("FAKE_CUDA_CC");
  int cc = env ? std::atoi(env) : 90;
  if (attribute != 75 && attribute != 76)
    return 1; // CUDA_ERROR_INVALID_VALUE: not emulated
  *v = attribute == 75 ? cc / 10 : cc % 10;
  return 0;
}
int cuCtxSetCurrent(void *) { return 0; }

int cuModuleLoadData(void **module, const void *image) {
  const char *reject = std::getenv("FAKE_CUDA_REJECT_CUBIN");
  if (reject && *reject == '1' && std::memcmp(image, "\x7f" "ELF", 4) == 0)
    return 200; // CUDA_ERROR_INVALID_IMAGE
  const char *path = std::getenv("MEDRUN_FAKE_CUDA_KERNELS");
  if (!path || !(kernels.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
    std::fprintf(stderr, "fake libcuda: cannot load MEDRUN_FAKE_CUDA_KERNELS (%s): %s\n",
                 path ? path : "unset", dlerror());
    return 200;
  }
  kernels.threadIdx = static_cast<Dim3 *>(dlsym(kernels.lib, "threadIdx"));
  kernels.blockIdx = static_cast<Dim3 *>(dlsym(kernels.lib, "blockIdx"));
  kernels.blockDim = static_cast<Dim3 *>(dlsym(kernels.lib, "blockDim"));
  kernels.gridDim = static_cast<Dim3 *>(dlsym(kernels.lib, "gridDim"));
  kernels.syncHook = reinterpret_cast<void (**)()>(dlsym(kernels.lib, "emuSyncHook"));
  if (!kernels.threadIdx || !kernels.syncHook)
    return 200;
  *kernels.syncHook = yieldToScheduler;
  modules.push_back({kernels.lib, kernelsOf(image)});
  *module = &modules.back();
  return 0;
}
int cuModuleUnload(void *) { return 0; }
// A function is found in the module whose image defines it, as on a GPU.
int cuModuleGetFunction(void **f, void *module, const char *name) {
  const Module *m = static_cast<const Module *>(module);
  *f = m->kernels.count(name) ? dlsym(m->lib, name) : nullptr;
  return *f ? 0 : 500; // CUDA_ERROR_NOT_FOUND
}

// Dynamic shared memory as a GPU allows it: up to 48 KiB for any kernel, up to a kernel's
// raised limit (cuFuncSetAttribute's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, at
// most 227 KiB) above that; a launch asking for more fails as on the GPU.
std::map<void *, unsigned> dynamicSharedLimit;
// FAKE_CUDA_REFUSE_SHARED=1: the driver refuses to raise the limit (a test of the message).
int cuFuncSetAttribute(void *f, int attribute, int value) {
  if (attribute != 8 || value < 0 || value > 227 * 1024 || std::getenv("FAKE_CUDA_REFUSE_SHARED"))
    return 1; // CUDA_ERROR_INVALID_VALUE
  dynamicSharedLimit[f] = static_cast<unsigned>(value);
  return 0;
}

int cuMemAlloc_v2(unsigned long long *p, size_t n) {
  void *m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m)
    return 2; // CUDA_ERROR_OUT_OF_MEMORY
  *p = reinterpret_cast<unsigned long long>(m);
  return 0;
}
// FAKE_CUDA_MEM_BYTES: the device memory it reports (default 64 GiB), for the plan-time check.
int cuMemGetInfo_v2(size_t *free, size_t *total) {
  const char *env = std::getenv("FAKE_CUDA_MEM_BYTES");
  *total = env ? std::strtoull(env, nullptr, 10) : (size_t(64) << 30);
  *free = *total;
  return 0;
}
int cuMemFree_v2(unsigned long long p) {
  for (Stream *s : streams) // cuMemFree synchronizes the device
    s->runUntil(s->enqueued);
  std::free(reinterpret_cast<void *>(p));
  return 0;
}
int cuMemHostAlloc(void **p, size_t n, unsigned) {
  if (envSet("FAKE_CUDA_NO_PINNED"))
    return 2; // CUDA_ERROR_OUT_OF_MEMORY
  *p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (!*p)
    return 2;
  pinned[static_cast<const char *>(*p)] = n;
  return 0;
}
int cuMemFreeHost(void *p) {
  auto it = pinned.find(static_cast<const char *>(p));
  if (it == pinned.end())
    return 1; // CUDA_ERROR_INVALID_VALUE
  for (Stream *s : streams)
    for (const Op &op : s->queue)
      if (op.reads && op.reads < it->first + it->second && it->first < op.reads + op.bytes) {
        std::fprintf(stderr, "fake libcuda: cuMemFreeHost of pinned memory that a copy not yet "
                             "run reads\n");
        std::abort();
      }
  pinned.erase(it);
  std::free(p);
  return 0;
}
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) {
  std::memcpy(reinterpret_cast<void *>(d), s, n);
  return 0;
}
int cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n) {
  std::memcpy(d, reinterpret_cast<void *>(s), n);
  return 0;
}
int cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *stream);
int cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *stream);
int cuMemsetD32_v2(unsigned long long d, unsigned v, size_t n) {
  unsigned *p = reinterpret_cast<unsigned *>(d);
  for (size_t i = 0; i < n; ++i)
    p[i] = v;
  return 0;
}
int cuStreamCreate(void **s, unsigned flags) {
  Stream *st = new Stream();
  st->deferred = (flags & 1) != 0; // CU_STREAM_NON_BLOCKING
  streams.push_back(st);
  *s = st;
  return 0;
}
int cuStreamSynchronize(void *stream) {
  if (Stream *s = static_cast<Stream *>(stream))
    s->runUntil(s->enqueued);
  return 0;
}
int cuStreamQuery(void *stream) {
  cuStreamSynchronize(stream); // a deferred stream's work runs when asked about
  return 0;
}
int cuStreamDestroy_v2(void *stream) {
  cuStreamSynchronize(stream); // its work completes
  for (size_t i = 0; i < streams.size(); ++i)
    if (streams[i] == stream)
      streams.erase(streams.begin() + i);
  delete static_cast<Stream *>(stream);
  return 0;
}

// Stream capture: launches (function, sizes, argument values) and asynchronous copies
// (addresses, size) are recorded, and a graph replays them in order, at those addresses.
// As in CUDA, another stream joins the capture by waiting on an event recorded in it (a
// fork), and must be joined back (the capturing stream waits on an event recorded on it
// after its last captured work) before the capture ends: else cuStreamEndCapture fails
// with CUDA_ERROR_STREAM_CAPTURE_UNJOINED.
struct Recorded {
  void *f; // null: a copy
  unsigned gx, bx;
  std::vector<void *> args;
  unsigned long long dst = 0;
  const void *src = nullptr;
  size_t bytes = 0;
  unsigned shared = 0; // the launch's dynamic shared memory
};
using Graph = std::vector<Recorded>;
Graph *capturing = nullptr;
void *captureStream = nullptr;
std::set<void *> joinedStreams;                ///< other streams in the capture
std::map<void *, uint64_t> capturedWork, rejoined; ///< per joined stream: work, and work joined back
bool inCapture(void *stream) {
  return capturing && (stream == captureStream || joinedStreams.count(stream));
}

int copyAsync(unsigned long long d, const void *s, size_t n, void *stream, bool fromHost) {
  if (fromHost && envSet("FAKE_CUDA_REQUIRE_PINNED") && !isPinned(s, n))
    return 1; // CUDA_ERROR_INVALID_VALUE: refused for the test
  if (inCapture(stream)) {
    ++capturedWork[stream];
    capturing->push_back({nullptr, 0, 0, {}, d, s, n});
    return 0;
  }
  return enqueue(stream, [=] { std::memmove(reinterpret_cast<void *>(d), s, n); },
                 fromHost ? s : nullptr, fromHost ? n : 0);
}
int cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *stream) {
  return copyAsync(d, reinterpret_cast<const void *>(s), n, stream, false);
}
int cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *stream) {
  return copyAsync(d, s, n, stream, true);
}

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void *stream, void **params, void **) {
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || bx > 1024)
    return 1; // CUDA_ERROR_INVALID_VALUE: the plans use 1-D grids and blocks
  if (shared > 48 * 1024 &&
      (!dynamicSharedLimit.count(f) || dynamicSharedLimit.at(f) < shared))
    return 1; // CUDA_ERROR_INVALID_VALUE: more shared memory than the kernel is allowed
  if (capturing) {
    ++capturedWork[stream];
    Recorded r{f, gx, bx, {}};
    r.shared = shared;
    for (unsigned n = 0; params[n]; ++n)
      r.args.push_back(*static_cast<void **>(params[n]));
    capturing->push_back(std::move(r));
    return 0;
  }
  if (Stream *s = static_cast<Stream *>(stream); s && s->deferred) {
    std::vector<void *> values;
    for (unsigned n = 0; params[n]; ++n)
      values.push_back(*static_cast<void **>(params[n]));
    return enqueue(stream, [=]() mutable {
      std::vector<void *> ptrs;
      for (void *&v : values)
        ptrs.push_back(&v);
      ptrs.push_back(nullptr);
      cuLaunchKernel(f, gx, 1, 1, bx, 1, 1, shared, nullptr, ptrs.data(), nullptr);
    });
  }
  // medrun passes one more, null, entry after the arguments.
  unsigned n = 0;
  for (; params[n]; ++n) {
    if (n == kMaxArgs)
      return 1;
    runArgs[n] = *static_cast<void **>(params[n]);
  }
  for (unsigned i = n; i < kMaxArgs; ++i)
    runArgs[i] = nullptr;
  if (const char *delay = std::getenv("FAKE_CUDA_KERNEL_DELAY_MS")) // to lose a measurement
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
  runKernel = f;
  *kernels.gridDim = {gx, 1, 1};
  *kernels.blockDim = {bx, 1, 1};
  done.assign(bx, false);
  while (stacks.size() < bx) {
    stacks.emplace_back(64 * 1024);
    parked.emplace_back();
    made.push_back(false);
  }
  for (unsigned b = 0; b < gx; ++b) {
    *kernels.blockIdx = {b, 0, 0};
    done.assign(bx, false);
    // Round-robin: every pass runs each live fiber to its next barrier or its end.
    for (bool live = true; live;) {
      live = false;
      for (unsigned t = 0; t < bx; ++t) {
        if (done[t])
          continue;
        current = t;
        *kernels.threadIdx = {t, 0, 0};
        resume(t);
        live = live || !done[t];
      }
    }
  }
  return 0;
}

int cuStreamBeginCapture_v2(void *stream, int) {
  capturing = new Graph();
  captureStream = stream;
  return 0;
}
int cuStreamEndCapture(void *, void **graph) {
  bool unjoined = false;
  for (void *s : joinedStreams)
    unjoined = unjoined || capturedWork[s] > rejoined[s];
  *graph = unjoined ? nullptr : capturing;
  if (unjoined)
    delete capturing;
  capturing = nullptr;
  captureStream = nullptr;
  joinedStreams.clear();
  capturedWork.clear();
  rejoined.clear();
  return unjoined ? 908 : 0; // CUDA_ERROR_STREAM_CAPTURE_UNJOINED
}
int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long) {
  *exec = new Graph(*static_cast<Graph *>(graph));
  return 0;
}
int cuGraphLaunch(void *exec, void *stream) {
  for (Recorded &r : *static_cast<Graph *>(exec)) {
    if (!r.f) { // a copy (cuMemcpy*Async)
      copyAsync(r.dst, r.src, r.bytes, stream, false);
      continue;
    }
    if (r.bx == 0) { // a host function (cuLaunchHostFunc)
      reinterpret_cast<void (*)(void *)>(r.f)(r.args.at(0));
      continue;
    }
    std::vector<void *> values = r.args, ptrs;
    for (void *&v : values)
      ptrs.push_back(&v);
    ptrs.push_back(nullptr);
    if (int e = cuLaunchKernel(r.f, r.gx, 1, 1, r.bx, 1, 1, r.shared, stream, ptrs.data(), nullptr))
      return e;
  }
  return 0;
}
int cuGraphExecDestroy(void *exec) {
  delete static_cast<Graph *>(exec);
  return 0;
}
int cuGraphDestroy(void *graph) {
  delete static_cast<Graph *>(graph);
  return 0;
}

// Host functions (the stand-in cuBLASLt enqueues its products so, the stand-in NCCL its
// collectives): run in stream order (at once on a blocking stream), or recorded into the
// graph being captured (as a launch of no threads, which cuGraphLaunch calls).
int cuLaunchHostFunc(void *stream, void (*fn)(void *), void *data) {
  if (capturing) {
    ++capturedWork[stream];
    capturing->push_back({reinterpret_cast<void *>(fn), 0, 0, {data}});
    return 0;
  }
  return enqueue(stream, [fn, data] { fn(data); });
}

int cuEventCreate(void **e, unsigned) {
  *e = new Event();
  return 0;
}
int cuEventDestroy_v2(void *e) {
  delete static_cast<Event *>(e);
  return 0;
}
int cuEventRecord(void *e, void *stream) {
  Event *ev = static_cast<Event *>(e);
  Stream *s = static_cast<Stream *>(stream);
  ev->captured = inCapture(stream);
  if (ev->captured) {
    ev->stream = nullptr;
    ev->from = stream;
    ev->work = capturedWork[stream];
    return 0;
  }
  int r = enqueue(stream, [ev] { ev->t = std::chrono::steady_clock::now(); });
  ev->stream = s && s->deferred ? s : nullptr;
  ev->position = s ? s->enqueued : 0; // the record included
  return r;
}
// Waiting runs the recording stream's operations up to the record: at once for a blocking
// stream, when the waiting stream gets there for a deferred one. Inside a capture only
// events of the capture may be waited on (CUDA_ERROR_STREAM_CAPTURE_ISOLATION otherwise).
int cuStreamWaitEvent(void *stream, void *e, unsigned) {
  Event *ev = static_cast<Event *>(e);
  if (capturing && ev->captured) {
    if (stream != captureStream)
      joinedStreams.insert(stream); // a fork
    else if (ev->from != captureStream)
      rejoined[ev->from] = std::max(rejoined[ev->from], ev->work); // a join
    return 0;
  }
  if (inCapture(stream))
    return 905;
  Stream *from = ev->stream;
  uint64_t position = ev->position;
  if (!from)
    return 0; // recorded on a stream that ran it already, or never recorded
  return enqueue(stream, [from, position] { from->runUntil(position); });
}
int cuEventElapsedTime_v2(float *ms, void *a, void *b) {
  *ms = std::chrono::duration<float, std::milli>(static_cast<Event *>(b)->t -
                                                 static_cast<Event *>(a)->t)
            .count();
  return 0;
}
int cuGetErrorName(int r, const char **s) {
  *s = r == 200   ? "CUDA_ERROR_INVALID_IMAGE"
       : r == 500 ? "CUDA_ERROR_NOT_FOUND"
       : r == 905 ? "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"
       : r == 908 ? "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"
       : r == 2   ? "CUDA_ERROR_OUT_OF_MEMORY"
                  : "CUDA_ERROR";
  return 0;
}
int cuGetErrorString(int r, const char **s) {
  *s = r == 200 ? "device kernel image is invalid" : r == 500 ? "named symbol not found"
                                                               : "fake driver error";
  return 0;
}
}
