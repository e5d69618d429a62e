//===- Sides.cpp - where each side computes, and the GPU memory both share ---------===//
#include "Check.h"

#include "medrun/Parallel.h"

#include <torch/cuda.h>
#include <torch/version.h>

// Releasing the GPU memory torch's caching allocator holds (between our run and torch's on
// one GPU): through c10::getDeviceAllocator where this LibTorch has it (found by
// releaseCached below, so that no version number is assumed), else, in a CUDA build of a
// LibTorch older than 2.10, through the CUDA caching allocator itself (MEDCHECK_TORCH_CUDA
// comes from CMake: the header alone is no proof, Debian's CPU-only LibTorch ships it
// without libc10_cuda).
#if __has_include(<c10/core/CachingDeviceAllocator.h>)
#include <c10/core/CachingDeviceAllocator.h>
#endif
#if (TORCH_VERSION_MAJOR < 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 10)) && \
    defined(MEDCHECK_TORCH_CUDA) && __has_include(<c10/cuda/CUDACachingAllocator.h>) && \
    __has_include(<c10/cuda/impl/cuda_cmake_macros.h>) && __has_include(<cuda_runtime_api.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define MEDCHECK_CUDA_CACHING_ALLOCATOR 1
#endif

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

namespace medcheck {
namespace {

/// Empties the cache of the device allocator of `type` and returns true, where LibTorch has
/// c10::getDeviceAllocator (found by argument-dependent lookup, so that the overload drops
/// out where it does not exist); false otherwise.
template <typename DeviceType>
auto releaseCached(DeviceType type, int)
    -> decltype(getDeviceAllocator(type)->emptyCache(), bool()) {
  getDeviceAllocator(type)->emptyCache();
  return true;
}
template <typename DeviceType> bool releaseCached(DeviceType, long) { return false; }

/// Torch's caching allocator on GPU 0: bytes allocated and reserved (taken from the driver),
/// now and at their peak since the last resetTorchPeak, where this LibTorch tells them.
struct TorchMemory {
  int64_t allocated = 0, allocatedPeak = 0, reserved = 0, reservedPeak = 0;
};
template <typename DeviceType>
auto torchMemory(DeviceType type, int)
    -> decltype(getDeviceAllocator(type)->getDeviceStats(0), std::optional<TorchMemory>()) {
  auto s = getDeviceAllocator(type)->getDeviceStats(0);
  // index 0: StatType::AGGREGATE (both pools)
  return TorchMemory{s.allocated_bytes[0].current, s.allocated_bytes[0].peak,
                     s.reserved_bytes[0].current, s.reserved_bytes[0].peak};
}
template <typename DeviceType> std::optional<TorchMemory> torchMemory(DeviceType, long) {
#ifdef MEDCHECK_CUDA_CACHING_ALLOCATOR
  auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return TorchMemory{s.allocated_bytes[0].current, s.allocated_bytes[0].peak,
                     s.reserved_bytes[0].current, s.reserved_bytes[0].peak};
#else
  return std::nullopt;
#endif
}
template <typename DeviceType>
auto resetTorchPeak(DeviceType type, int) -> decltype(getDeviceAllocator(type)->resetPeakStats(0)) {
  getDeviceAllocator(type)->resetPeakStats(0);
}
template <typename DeviceType> void resetTorchPeak(DeviceType, long) {
#ifdef MEDCHECK_CUDA_CACHING_ALLOCATOR
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", bytes / double(size_t(1) << 30));
  return b;
}

/// Device memory in use on the GPU of the calling thread's CUDA context, as cudaMemGetInfo
/// tells it (total - free: both sides, every context, other processes), read through the
/// driver the CUDA backend loads (MEDRUN_LIBCUDA, else libcuda.so.1); and its peak over a
/// stretch of work, sampled every millisecond by a thread of its own (allocations that live
/// less than that can be missed).
class DeviceMemory {
public:
  static DeviceMemory &get() {
    static DeviceMemory m;
    return m;
  }
  ~DeviceMemory() { stop(); }
  /// (in use, total) now; false where the driver does not tell.
  bool now(size_t &used, size_t &total) const {
    size_t free = 0;
    if (!getInfo || getInfo(&free, &total) != 0)
      return false;
    used = total - free;
    return true;
  }
  /// Starts sampling on the calling thread's context (nothing where there is none).
  void start() {
    stop();
    void *ctx = nullptr;
    size_t used = 0, total = 0;
    if (!getCurrent || !setCurrent || getCurrent(&ctx) != 0 || !ctx || !now(used, total))
      return;
    peak = used;
    running = true;
    sampler = std::thread([this, ctx] {
      setCurrent(ctx);
      size_t u = 0, t = 0;
      while (running.load()) {
        if (now(u, t) && u > peak.load())
          peak = u;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  /// Stops sampling; the peak in use since start (with the reading now), 0 if unknown.
  size_t stop() {
    if (!sampler.joinable())
      return 0;
    running = false;
    sampler.join();
    size_t used = 0, total = 0;
    if (now(used, total) && used > peak.load())
      peak = used;
    return peak.load();
  }

private:
  using GetInfo = int (*)(size_t *, size_t *);
  using GetCurrent = int (*)(void **);
  using SetCurrent = int (*)(void *);
  DeviceMemory() {
    const char *path = std::getenv("MEDRUN_LIBCUDA");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return;
    getInfo = reinterpret_cast<GetInfo>(dlsym(lib, "cuMemGetInfo_v2"));
    getCurrent = reinterpret_cast<GetCurrent>(dlsym(lib, "cuCtxGetCurrent"));
    setCurrent = reinterpret_cast<SetCurrent>(dlsym(lib, "cuCtxSetCurrent"));
  }
  GetInfo getInfo = nullptr;
  GetCurrent getCurrent = nullptr;
  SetCurrent setCurrent = nullptr;
  std::thread sampler;
  std::atomic<bool> running{false};
  std::atomic<size_t> peak{0};
};

/// "torch's allocator: peak 61.20 GiB allocated, 63.00 GiB reserved" (since the last reset),
/// or "now 0.95 GiB allocated, 1.00 GiB reserved"; empty where this LibTorch does not tell.
std::string torchMemoryText(bool peaks) {
  std::optional<TorchMemory> m;
  try {
    m = torchMemory(c10::DeviceType::CUDA, 0);
  } catch (const c10::Error &) {
  }
  if (!m)
    return "";
  return peaks ? str("torch's allocator: peak ", gib(double(m->allocatedPeak)), " allocated, ",
                     gib(double(m->reservedPeak)), " reserved")
               : str("torch holds ", gib(double(m->allocated)), " allocated, ",
                     gib(double(m->reserved)), " reserved");
}

} // namespace

Recompute Sides::recomputeNow() const {
  medcheck::Recompute r = recompute;
  r.availableBytes = 0;
  if (torchDevice.is_cuda()) {
    size_t used = 0, total = 0;
    if (DeviceMemory::get().now(used, total)) {
      r.availableBytes = total - used;
      try {
        if (std::optional<TorchMemory> m = torchMemory(c10::DeviceType::CUDA, 0))
          r.availableBytes += size_t(std::max<int64_t>(0, m->reserved - m->allocated));
      } catch (const c10::Error &) {
      }
    }
  } else if (FILE *f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        r.availableBytes = size_t(kib) * 1024;
        break;
      }
    std::fclose(f);
  }
  return r;
}

std::vector<medrun::Tensor> Sides::ours(const medrun::Function &fn,
                                        const std::vector<medrun::Tensor> &inputs,
                                        const medrun::TensorMap &params,
                                        medrun::TensorMap *updates) const {
  // A function that sets state (a gradient function's forward updating BatchNorm's running
  // statistics) runs; a caller that does not compare what it sets lets it go.
  medrun::TensorMap discarded;
  if (!updates)
    updates = &discarded;
  if (cuda) {
    const bool shared = torchDevice.is_cuda(); // both sides on one GPU
    if (shared)
      DeviceMemory::get().start();
    std::vector<medrun::Tensor> out = cuda->run(fn, inputs, params, nullptr, updates);
    if (shared) {
      const size_t peak = DeviceMemory::get().stop();
      const std::string held =
          str(gib(double(cuda->deviceBytes())), " (values ", gib(double(cuda->arenaBytes())),
              ", cuDNN workspace ", gib(double(cuda->workspaceBytes())), ", resident ",
              gib(double(cuda->stateBytes())), ")");
      cuda->releaseMemory(); // torch needs the GPU next
      // What a reader needs to see that each side fits in turn: ours' peak with torch's
      // live tensors beside it, and what is left in use once ours is released.
      size_t used = 0, total = 0;
      const bool known = DeviceMemory::get().now(used, total);
      std::cout << "memory  ours " << fn.name << ": held " << held;
      if (peak)
        std::cout << "; peak " << gib(double(peak)) << " in use on the GPU";
      if (known)
        std::cout << "; after releasing ours " << gib(double(used)) << " in use of "
                  << gib(double(total));
      if (std::string t = torchMemoryText(false); !t.empty())
        std::cout << " (" << t << ")";
      std::cout << "\n" << std::flush;
    }
    return out;
  }
  return medrun::runCpu(artifact, fn, inputs, params, precision, nullptr, updates);
}

void Sides::beforeOurs() const {
  if (!torchDevice.is_cuda())
    return;
  torch::cuda::synchronize();
  std::string why = "this LibTorch offers no way to do it";
  try {
    if (releaseCached(c10::DeviceType::CUDA, 0))
      return;
#ifdef MEDCHECK_CUDA_CACHING_ALLOCATOR
    c10::cuda::CUDACachingAllocator::emptyCache();
    return;
#endif
  } catch (const c10::Error &e) {
    why = e.what_without_backtrace();
  }
  static bool told = false; // once: the check goes on, our runs get what torch leaves
  if (!told)
    std::cerr << "medcheck: torch's cached GPU memory is not released (" << why << ")\n";
  told = true;
}

void Sides::beforeTorch() const {
  if (!torchDevice.is_cuda())
    return;
  torch::cuda::synchronize();
  try {
    resetTorchPeak(c10::DeviceType::CUDA, 0);
  } catch (const c10::Error &) {
  }
  DeviceMemory::get().start();
}

void Sides::afterTorch(const std::string &what) const {
  if (!torchDevice.is_cuda())
    return;
  torch::cuda::synchronize();
  const size_t peak = DeviceMemory::get().stop();
  size_t used = 0, total = 0;
  const bool known = DeviceMemory::get().now(used, total);
  std::cout << "memory  torch " << what << ":";
  if (peak)
    std::cout << " peak " << gib(double(peak)) << " in use on the GPU"
              << (known ? str(" of ", gib(double(total))) : std::string()) << ";";
  if (std::string t = torchMemoryText(true); !t.empty())
    std::cout << " " << t << ";";
  if (cuda)
    std::cout << " ours held " << gib(double(cuda->deviceBytes())) << " meanwhile";
  std::cout << "\n" << std::flush;
}

std::string Sides::oursWhere() const {
  return cuda ? std::string("cuda") : str(medrun::numThreads(), " threads");
}

std::string Sides::torchWhere() const {
  return torchDevice.is_cuda() ? std::string("cuda") : str(torch::get_num_threads(), " threads");
}

void memoryAtError() {
  const size_t peak = DeviceMemory::get().stop();
  if (!peak)
    return;
  std::string t = torchMemoryText(true);
  std::cerr << "medcheck: memory of the run that failed: peak " << gib(double(peak))
            << " in use on the GPU" << (t.empty() ? std::string() : "; " + t) << "\n";
}

} // namespace medcheck
