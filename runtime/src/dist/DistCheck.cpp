//===- DistCheck.cpp - `medrun dist-check`: launch, rendezvous and all-reduce checked ---===//
//
// The first thing to run on a new machine or launcher: every rank opens its GPU (LOCAL_RANK),
// joins the communicator and sums a buffer whose exact sum it knows. The values are small
// integers (|sum| <= 128), exact in f32 and bf16 whatever order NCCL adds them in, so each
// rank checks every element for equality. The driver functions it needs are in Driver.h.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Distributed.h"

#include "Driver.h"
#include "medrun/Error.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace medrun {
namespace {

using namespace dist;

/// Rank r's value at element i: a small integer, so that any order of summing is exact.
float valueOf(int rank, size_t i, int iteration, int bound) {
  long v = static_cast<long>((i * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(iteration) * 5) %
                             static_cast<size_t>(2 * bound + 1));
  return static_cast<float>(v - bound);
}

uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

} // namespace

int distCheck(const DistEnv &env, const DistCheckOptions &options) {
  Driver d("dist-check");
  d.check(d.cuInit(0), "cuInit");
  int gpus = 0;
  d.check(d.cuDeviceGetCount(&gpus), "cuDeviceGetCount");
  const int ordinal = rankDevice(env, gpus, std::getenv("CUDA_VISIBLE_DEVICES"));
  int device = 0;
  d.check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  char name[256] = {};
  d.check(d.cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  void *ctx = nullptr;
  d.check(d.cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  d.check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

  const size_t n = options.count;
  CUdeviceptr f32 = 0, b16 = 0;
  d.check(d.cuMemAlloc(&f32, std::max<size_t>(n * 4, 4)), "cuMemAlloc");
  d.check(d.cuMemAlloc(&b16, std::max<size_t>(n * 2, 2)), "cuMemAlloc");
  void *stream = nullptr;
  d.check(d.cuStreamCreate(&stream, 0), "cuStreamCreate");
  std::fprintf(stderr, "dist-check: %s (pid %d) on GPU %d (%s) joins the communicator\n",
               env.describe().c_str(), static_cast<int>(getpid()), ordinal, name);

  auto started = std::chrono::steady_clock::now();
  auto comm = std::make_unique<Communicator>(env);
  double joinSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::fprintf(stderr, "dist-check: rank %d (pid %d) joined the communicator of %d ranks in %.2f s\n",
               env.rank, static_cast<int>(getpid()), env.worldSize, joinSeconds);

  const int bound = std::max(1, 128 / env.worldSize);
  std::vector<float> hostF32(n), expect(n);
  std::vector<bf16> hostB16(n);
  uint64_t checksum = 1469598103934665603ull;
  for (int it = 0; it < options.iterations; ++it) {
    if (it && options.pauseMs)
      std::this_thread::sleep_for(std::chrono::milliseconds(options.pauseMs));
    for (size_t i = 0; i < n; ++i) {
      hostF32[i] = valueOf(env.rank, i, it, bound);
      hostB16[i] = bf16(hostF32[i]);
      float sum = 0;
      for (int r = 0; r < env.worldSize; ++r)
        sum += valueOf(r, i, it, bound);
      expect[i] = sum;
    }
    d.check(d.cuMemcpyHtoD(f32, hostF32.data(), n * 4), "cuMemcpyHtoD");
    d.check(d.cuMemcpyHtoD(b16, hostB16.data(), n * 2), "cuMemcpyHtoD");
    comm->allReduceSum(reinterpret_cast<void *>(f32), n, DType::F32, stream);
    comm->allReduceSum(reinterpret_cast<void *>(b16), n, DType::BF16, stream);
    comm->wait([&] {
      CUresult r = d.cuStreamQuery(stream);
      if (r != kNotReady)
        d.check(r, "cuStreamQuery");
      return r == 0;
    });
    d.check(d.cuMemcpyDtoH(hostF32.data(), f32, n * 4), "cuMemcpyDtoH");
    d.check(d.cuMemcpyDtoH(hostB16.data(), b16, n * 2), "cuMemcpyDtoH");
    for (size_t i = 0; i < n; ++i) {
      if (hostF32[i] != expect[i] || static_cast<float>(hostB16[i]) != expect[i])
        throw Error(str(env.describe(), ": all-reduce ", it + 1, " gives element ", i, " = ",
                        hostF32[i] != expect[i] ? hostF32[i] : static_cast<float>(hostB16[i]),
                        " (", hostF32[i] != expect[i] ? "f32" : "bf16", "), expected ", expect[i]));
    }
    checksum = fnv1a(hostB16.data(), n * 2, fnv1a(hostF32.data(), n * 4, checksum));
  }
  std::printf("dist-check rank %d of %d (local rank %d, %s): %d all-reduce%s of %zu f32 and %zu "
              "bf16 elements exact, checksum %016llx\n",
              env.rank, env.worldSize, env.localRank, env.launcher.c_str(), options.iterations,
              options.iterations == 1 ? "" : "s", n, n, static_cast<unsigned long long>(checksum));
  std::fflush(stdout);
  comm.reset();
  d.cuStreamDestroy(stream);
  d.cuMemFree(f32);
  d.cuMemFree(b16);
  d.cuDevicePrimaryCtxRelease(device);
  return 0;
}

} // namespace medrun
