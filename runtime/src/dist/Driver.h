//===- Driver.h - the CUDA driver functions of the distributed code (private) -------===//
//
// `medrun dist-check` and the data-parallel reducer need a few driver functions of their
// own (a context on the rank's GPU, a stream for the collectives, events, small copies).
// They are resolved from the same library the CUDA backend opens (MEDRUN_LIBCUDA, else
// libcuda.so.1), so they act on the same contexts.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_DIST_DRIVER_H
#define MEDRUN_DIST_DRIVER_H

#include "../cuda/SharedLibrary.h"
#include "medrun/Error.h"

namespace medrun::dist {

using CUresult = int;
using CUdeviceptr = unsigned long long;
constexpr CUresult kNotReady = 600; // CUDA_ERROR_NOT_READY

struct Driver {
  SharedLibrary lib;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int *) = nullptr;
  CUresult (*cuDeviceGet)(int *, int) = nullptr;
  CUresult (*cuDeviceGetName)(char *, int, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(void **, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(int) = nullptr;
  CUresult (*cuCtxSetCurrent)(void *) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuStreamCreate)(void **, unsigned) = nullptr;
  CUresult (*cuStreamQuery)(void *) = nullptr;
  CUresult (*cuStreamSynchronize)(void *) = nullptr;
  CUresult (*cuStreamDestroy)(void *) = nullptr;
  CUresult (*cuStreamWaitEvent)(void *, void *, unsigned) = nullptr;
  CUresult (*cuEventCreate)(void **, unsigned) = nullptr;
  CUresult (*cuEventRecord)(void *, void *) = nullptr;
  CUresult (*cuEventDestroy)(void *) = nullptr;
  CUresult (*cuEventElapsedTime)(float *, void *, void *) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char **) = nullptr;

  /// Throws Error starting with `who` when the library or a function is missing.
  explicit Driver(const char *who) {
    lib.open("MEDRUN_LIBCUDA", "libcuda.so.1");
    if (!lib.handle)
      throw Error(str(who, " needs a CUDA driver: ", lib.error));
    lib.require(cuInit, {"cuInit"});
    lib.require(cuDeviceGetCount, {"cuDeviceGetCount"});
    lib.require(cuDeviceGet, {"cuDeviceGet"});
    lib.require(cuDeviceGetName, {"cuDeviceGetName"});
    lib.require(cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
    lib.require(cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
    lib.require(cuCtxSetCurrent, {"cuCtxSetCurrent"});
    lib.require(cuMemAlloc, {"cuMemAlloc_v2"});
    lib.require(cuMemFree, {"cuMemFree_v2"});
    lib.require(cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
    lib.require(cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
    lib.require(cuStreamCreate, {"cuStreamCreate"});
    lib.require(cuStreamQuery, {"cuStreamQuery"});
    lib.require(cuStreamSynchronize, {"cuStreamSynchronize"});
    lib.require(cuStreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"});
    lib.require(cuStreamWaitEvent, {"cuStreamWaitEvent"});
    lib.require(cuEventCreate, {"cuEventCreate"});
    lib.require(cuEventRecord, {"cuEventRecord"});
    lib.require(cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"});
    lib.require(cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
    lib.require(cuGetErrorString, {"cuGetErrorString"});
    if (!lib.error.empty())
      throw Error(str(who, ": ", lib.error));
  }

  void check(CUresult r, const char *call) const {
    if (r == 0)
      return;
    const char *text = nullptr;
    cuGetErrorString(r, &text);
    throw Error(str(call, " failed: ", text ? text : "unknown CUDA error", " (", r, ")"));
  }
};

} // namespace medrun::dist

#endif // MEDRUN_DIST_DRIVER_H
