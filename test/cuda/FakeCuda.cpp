//===- FakeCuda.cpp - a CPU stand-in for libcuda.so.1 (tests only) -----------------===//
//
// Implements the driver functions medrun's CUDA executor resolves, on the host: device
// memory is host memory, a "module" is a shared object compiled from the artifact's CUDA
// source with emu.h (its path in MEDRUN_FAKE_CUDA_KERNELS, since the cubin cannot run here),
// and a launch runs every block's threads as fibers (ucontext) that switch at
// __syncthreads. medrun loads it through MEDRUN_LIBCUDA, so the whole CUDA path (plan,
// arena, arguments, status word, downloads) runs in CI and is compared with the CPU backend.
// FAKE_CUDA_REJECT_CUBIN=1 makes the cubin fail to load, to exercise the PTX fallback;
// FAKE_CUDA_MEM_BYTES sets the device memory it reports.
//
//===----------------------------------------------------------------------------------===//
#include <dlfcn.h>
#include <ucontext.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// Fibers of the block being run.
ucontext_t scheduler;
std::vector<ucontext_t> fibers;
std::vector<std::vector<char>> stacks;
std::vector<bool> done;
unsigned current = 0;
using Kernel = void (*)(void *, void *, void *, void *, void *, void *, void *, void *, void *,
                        void *, void *, void *, void *, void *, void *, void *);
Kernel runKernel;
void *runArgs[16];

void yieldToScheduler() { swapcontext(&fibers[current], &scheduler); }

void fiberMain() {
  runKernel(runArgs[0], runArgs[1], runArgs[2], runArgs[3], runArgs[4], runArgs[5], runArgs[6],
            runArgs[7], runArgs[8], runArgs[9], runArgs[10], runArgs[11], runArgs[12],
            runArgs[13], runArgs[14], runArgs[15]);
  done[current] = true;
  // returning switches to uc_link (the scheduler)
}

struct Event {
  std::chrono::steady_clock::time_point t;
};
} // namespace

extern "C" {
int cuInit(unsigned) { return 0; }
int cuDeviceGetCount(int *n) {
  *n = 1;
  return 0;
}
int cuDeviceGet(int *d, int) {
  *d = 0;
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
  *module = kernels.lib;
  return 0;
}
int cuModuleUnload(void *) { return 0; }
int cuModuleGetFunction(void **f, void *module, const char *name) {
  *f = dlsym(module, name);
  return *f ? 0 : 500; // CUDA_ERROR_NOT_FOUND
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
  std::free(reinterpret_cast<void *>(p));
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
int cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *) {
  std::memmove(reinterpret_cast<void *>(d), reinterpret_cast<void *>(s), n);
  return 0;
}
int cuMemsetD32_v2(unsigned long long d, unsigned v, size_t n) {
  unsigned *p = reinterpret_cast<unsigned *>(d);
  for (size_t i = 0; i < n; ++i)
    p[i] = v;
  return 0;
}
int cuStreamCreate(void **s, unsigned) {
  static int st;
  *s = &st;
  return 0;
}
int cuStreamDestroy_v2(void *) { return 0; }
int cuStreamSynchronize(void *) { return 0; }

// Stream capture: launches are recorded (function, sizes, argument values) and a graph
// replays them in order.
struct Recorded {
  void *f;
  unsigned gx, bx;
  std::vector<void *> args;
};
using Graph = std::vector<Recorded>;
Graph *capturing = nullptr;

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned, void *, void **params, void **) {
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || bx > 1024)
    return 1; // CUDA_ERROR_INVALID_VALUE: the plans use 1-D grids and blocks
  if (capturing) {
    Recorded r{f, gx, bx, {}};
    for (unsigned n = 0; params[n]; ++n)
      r.args.push_back(*static_cast<void **>(params[n]));
    capturing->push_back(std::move(r));
    return 0;
  }
  // medrun passes one more, null, entry after the arguments.
  unsigned n = 0;
  for (; params[n]; ++n) {
    if (n == 16)
      return 1;
    runArgs[n] = *static_cast<void **>(params[n]);
  }
  for (unsigned i = n; i < 16; ++i)
    runArgs[i] = nullptr;
  runKernel = reinterpret_cast<Kernel>(f);
  *kernels.gridDim = {gx, 1, 1};
  *kernels.blockDim = {bx, 1, 1};
  fibers.resize(bx);
  done.assign(bx, false);
  while (stacks.size() < bx)
    stacks.emplace_back(64 * 1024);
  for (unsigned b = 0; b < gx; ++b) {
    *kernels.blockIdx = {b, 0, 0};
    for (unsigned t = 0; t < bx; ++t) {
      getcontext(&fibers[t]);
      fibers[t].uc_stack.ss_sp = stacks[t].data();
      fibers[t].uc_stack.ss_size = stacks[t].size();
      fibers[t].uc_link = &scheduler;
      makecontext(&fibers[t], fiberMain, 0);
      done[t] = false;
    }
    // Round-robin: every pass runs each live fiber to its next barrier or its end.
    for (bool live = true; live;) {
      live = false;
      for (unsigned t = 0; t < bx; ++t) {
        if (done[t])
          continue;
        current = t;
        *kernels.threadIdx = {t, 0, 0};
        swapcontext(&scheduler, &fibers[t]);
        live = live || !done[t];
      }
    }
  }
  return 0;
}

int cuStreamBeginCapture_v2(void *, int) {
  capturing = new Graph();
  return 0;
}
int cuStreamEndCapture(void *, void **graph) {
  *graph = capturing;
  capturing = nullptr;
  return 0;
}
int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long) {
  *exec = new Graph(*static_cast<Graph *>(graph));
  return 0;
}
int cuGraphLaunch(void *exec, void *stream) {
  for (Recorded &r : *static_cast<Graph *>(exec)) {
    if (r.bx == 0) { // a host function (cuLaunchHostFunc)
      reinterpret_cast<void (*)(void *)>(r.f)(r.args.at(0));
      continue;
    }
    std::vector<void *> values = r.args, ptrs;
    for (void *&v : values)
      ptrs.push_back(&v);
    ptrs.push_back(nullptr);
    if (int e = cuLaunchKernel(r.f, r.gx, 1, 1, r.bx, 1, 1, 0, stream, ptrs.data(), nullptr))
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

// Host functions (the stand-in cuBLASLt enqueues its products so): run at once, or recorded
// into the graph being captured (as a launch of no threads, which cuGraphLaunch calls).
int cuLaunchHostFunc(void *, void (*fn)(void *), void *data) {
  if (capturing)
    capturing->push_back({reinterpret_cast<void *>(fn), 0, 0, {data}});
  else
    fn(data);
  return 0;
}

int cuEventCreate(void **e, unsigned) {
  *e = new Event();
  return 0;
}
int cuEventDestroy_v2(void *e) {
  delete static_cast<Event *>(e);
  return 0;
}
int cuEventRecord(void *e, void *) {
  static_cast<Event *>(e)->t = std::chrono::steady_clock::now();
  return 0;
}
int cuEventElapsedTime_v2(float *ms, void *a, void *b) {
  *ms = std::chrono::duration<float, std::milli>(static_cast<Event *>(b)->t -
                                                 static_cast<Event *>(a)->t)
            .count();
  return 0;
}
int cuGetErrorName(int r, const char **s) {
  *s = r == 200 ? "CUDA_ERROR_INVALID_IMAGE" : r == 500 ? "CUDA_ERROR_NOT_FOUND" : "CUDA_ERROR";
  return 0;
}
int cuGetErrorString(int r, const char **s) {
  *s = r == 200 ? "device kernel image is invalid" : r == 500 ? "named symbol not found"
                                                               : "fake driver error";
  return 0;
}
}
