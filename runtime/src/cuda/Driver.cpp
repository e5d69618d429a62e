//===- Driver.cpp - libcuda.so.1 through dlopen ----------------------------------===//
#include "Session.h"

namespace medrun {
namespace cudaexec {

const Driver &driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.lib.open("MEDRUN_LIBCUDA", "libcuda.so.1"); // tests: a missing library, an emulator
    if (!d.lib.handle)
      return;
    auto get = [&](auto &fn, std::initializer_list<const char *> names) { d.lib.require(fn, names); };
    auto optional = [&](auto &fn, std::initializer_list<const char *> names) { d.lib.find(fn, names); };
    get(d.cuInit, {"cuInit"});
    get(d.cuDeviceGetCount, {"cuDeviceGetCount"});
    get(d.cuDeviceGet, {"cuDeviceGet"});
    get(d.cuDeviceGetName, {"cuDeviceGetName"});
    get(d.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
    get(d.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
    get(d.cuCtxSetCurrent, {"cuCtxSetCurrent"});
    get(d.cuModuleLoadData, {"cuModuleLoadData"});
    get(d.cuModuleUnload, {"cuModuleUnload"});
    get(d.cuModuleGetFunction, {"cuModuleGetFunction"});
    optional(d.cuFuncSetAttribute, {"cuFuncSetAttribute"});
    get(d.cuMemAlloc, {"cuMemAlloc_v2"});
    get(d.cuMemFree, {"cuMemFree_v2"});
    get(d.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
    get(d.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
    get(d.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"});
    get(d.cuMemsetD32, {"cuMemsetD32_v2"});
    get(d.cuStreamCreate, {"cuStreamCreate"});
    get(d.cuStreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"});
    get(d.cuStreamSynchronize, {"cuStreamSynchronize"});
    get(d.cuLaunchKernel, {"cuLaunchKernel"});
    get(d.cuEventCreate, {"cuEventCreate"});
    get(d.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"});
    get(d.cuEventRecord, {"cuEventRecord"});
    get(d.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
    get(d.cuGetErrorString, {"cuGetErrorString"});
    get(d.cuGetErrorName, {"cuGetErrorName"});
    optional(d.cuMemGetInfo, {"cuMemGetInfo_v2"});
    optional(d.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
    optional(d.cuStreamBeginCapture, {"cuStreamBeginCapture_v2", "cuStreamBeginCapture"});
    optional(d.cuStreamEndCapture, {"cuStreamEndCapture"});
    optional(d.cuGraphInstantiateWithFlags, {"cuGraphInstantiateWithFlags"});
    optional(d.cuGraphLaunch, {"cuGraphLaunch"});
    optional(d.cuGraphExecDestroy, {"cuGraphExecDestroy"});
    optional(d.cuGraphDestroy, {"cuGraphDestroy"});
    optional(d.cuMemHostAlloc, {"cuMemHostAlloc"});
    optional(d.cuMemFreeHost, {"cuMemFreeHost"});
    optional(d.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"});
    optional(d.cuStreamWaitEvent, {"cuStreamWaitEvent"});
    if (!d.lib.error.empty())
      return;
    if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
      d.lib.error = str("cuInit failed: ", d.errorString(r));
      return;
    }
    int count = 0;
    if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS || count < 1)
      d.lib.error = r != CUDA_SUCCESS ? str("cuDeviceGetCount failed: ", d.errorString(r))
                                  : std::string("the driver reports no GPU");
  });
  return d;
}

bool envFlag(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string inputName(const Function &fn, size_t i) {
  return i < fn.inputNames.size() ? fn.inputNames[i] : str("arg", i);
}

std::string byteSize(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, b >= (size_t(1) << 30) ? "%.2f GiB" : "%.1f MiB",
                b >= (size_t(1) << 30) ? b / 1073741824.0 : b / 1048576.0);
  return buf;
}

static int ordinal = 0; // setCudaDevice

int deviceOrdinal() { return ordinal; }

} // namespace cudaexec

void setCudaDevice(int device) { cudaexec::ordinal = device; }

bool cudaAvailable(std::string *why) {
  const Driver &d = driver();
  if (why)
    *why = d.lib.error;
  return d.lib.error.empty();
}

} // namespace medrun
