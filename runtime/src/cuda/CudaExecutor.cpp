//===- CudaExecutor.cpp - the CUDA backend: driver API through dlopen ------------===//
//
// libcuda.so.1 is opened at run time and the few driver functions the executor needs are
// resolved by name (the `_v2` names where the API versioned them), so nothing here links
// against the driver. A run:
//
//   1. lays out one device arena: every value the plan defines, the function's inputs, the
//      parameters it reads and its scratch buffers, each 256-byte aligned (phase A: no
//      reuse between values, so nothing can be overwritten while still needed);
//   2. uploads inputs and parameters, zeroes the status word;
//   3. launches every step of the plan in order on one stream, without synchronizing;
//   4. synchronizes once, checks the status word, downloads outputs and assigned values.
//
// MEDRUN_CUDA_SYNC=1 synchronizes after every launch, so an error is reported at the
// kernel that caused it; MEDRUN_LIBCUDA=PATH loads another driver library;
// MEDRUN_CUDA_POISON=1 fills the arena with NaN first, so an output
// element no kernel writes shows up in comparisons.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Cuda.h"
#include "medrun/Error.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace medrun {
namespace {

// Driver API types (cuda.h is not needed to build medrun).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;
constexpr CUresult CUDA_SUCCESS = 0;

struct Driver {
  void *lib = nullptr;
  std::string error; // why it is unusable, empty if usable
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int *) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
  CUresult (*cuDeviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*cuMemGetInfo)(size_t *, size_t *) = nullptr; // optional: the plan-time check
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemsetD32)(CUdeviceptr, unsigned, size_t) = nullptr;
  CUresult (*cuStreamCreate)(CUstream *, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **) = nullptr;
  CUresult (*cuEventCreate)(CUevent *, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char **) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char **) = nullptr;

  std::string errorString(CUresult r) const {
    const char *name = nullptr, *text = nullptr;
    if (cuGetErrorName)
      cuGetErrorName(r, &name);
    if (cuGetErrorString)
      cuGetErrorString(r, &text);
    return str(name ? name : "CUDA error", " (", r, "): ", text ? text : "unknown error");
  }
};

/// Loads the driver once per process.
const Driver &driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    // MEDRUN_LIBCUDA names another driver library (tests: a missing one, an emulator).
    const char *env = std::getenv("MEDRUN_LIBCUDA");
    const std::string name = env && *env ? env : "libcuda.so.1";
    d.lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!d.lib) {
      const char *e = dlerror();
      d.error = str(name, " does not load: ", e ? e : "unknown reason");
      return;
    }
    auto get = [&](auto &fn, std::initializer_list<const char *> names) {
      for (const char *n : names)
        if (void *p = dlsym(d.lib, n)) {
          fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
          return;
        }
      if (d.error.empty())
        d.error = str("libcuda.so.1 lacks ", *names.begin());
    };
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
    get(d.cuMemAlloc, {"cuMemAlloc_v2"});
    get(d.cuMemFree, {"cuMemFree_v2"});
    get(d.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
    get(d.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
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
    d.cuMemGetInfo = reinterpret_cast<decltype(d.cuMemGetInfo)>(dlsym(d.lib, "cuMemGetInfo_v2"));
    if (!d.error.empty())
      return;
    if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
      d.error = str("cuInit failed: ", d.errorString(r));
      return;
    }
    int count = 0;
    if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS || count < 1)
      d.error = r != CUDA_SUCCESS ? str("cuDeviceGetCount failed: ", d.errorString(r))
                                  : std::string("the driver reports no GPU");
  });
  return d;
}

bool envFlag(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

} // namespace

bool cudaAvailable(std::string *why) {
  const Driver &d = driver();
  if (why)
    *why = d.error;
  return d.error.empty();
}

struct CudaSession::Impl {
  const Artifact &artifact;
  const Driver &d;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUstream stream = nullptr;
  bool fromPtx = false;
  std::unordered_map<std::string, CUfunction> functions;

  Impl(const Artifact &a) : artifact(a), d(driver()) {}

  void check(CUresult r, const std::string &what) const {
    if (r != CUDA_SUCCESS)
      throw Error(str(what, ": ", d.errorString(r)));
  }

  CUfunction function(const std::string &name, const OpInfo &op) {
    auto it = functions.find(name);
    if (it != functions.end())
      return it->second;
    CUfunction f = nullptr;
    check(d.cuModuleGetFunction(&f, module, name.c_str()),
          str("kernel ", name, " of ", op.describe(), ": not in the loaded module"));
    functions.emplace(name, f);
    return f;
  }
};

CudaSession::CudaSession(const Artifact &artifact) : impl(std::make_unique<Impl>(artifact)) {
  const Driver &d = impl->d;
  if (!d.error.empty())
    throw Error(str("no CUDA driver or GPU found; use --device cpu (", d.error, ")"));
  if (!artifact.cuda)
    throw Error(str(artifact.path, ": the artifact has no CUDA kernels; compile it with `medc "
                                   "compile ... --target cuda`"));
  impl->check(d.cuDeviceGet(&impl->device, 0), "cuDeviceGet");
  impl->check(d.cuDevicePrimaryCtxRetain(&impl->ctx, impl->device), "cuDevicePrimaryCtxRetain");
  impl->check(d.cuCtxSetCurrent(impl->ctx), "cuCtxSetCurrent");
  // The cubin first; the PTX (JIT-compiled by the driver) if the GPU cannot run it.
  CUresult r = d.cuModuleLoadData(&impl->module, artifact.cuda->cubin.data());
  if (r != CUDA_SUCCESS) {
    std::string ptx = artifact.cuda->ptx; // NUL-terminated copy
    CUresult p = d.cuModuleLoadData(&impl->module, ptx.c_str());
    if (p != CUDA_SUCCESS)
      throw Error(str(artifact.path, ": neither the ", artifact.cuda->arch,
                      " cubin nor the PTX loads on ", deviceName(), ": cubin: ",
                      d.errorString(r), "; PTX: ", d.errorString(p)));
    impl->fromPtx = true;
  }
  impl->check(d.cuStreamCreate(&impl->stream, 0), "cuStreamCreate");
}

CudaSession::~CudaSession() {
  const Driver &d = impl->d;
  if (impl->stream)
    d.cuStreamDestroy(impl->stream);
  if (impl->module)
    d.cuModuleUnload(impl->module);
  if (impl->ctx)
    d.cuDevicePrimaryCtxRelease(impl->device);
}

std::string CudaSession::deviceName() const {
  char name[256] = {0};
  if (impl->d.cuDeviceGetName && impl->d.cuDeviceGetName(name, sizeof(name) - 1, impl->device) ==
                                     CUDA_SUCCESS)
    return name;
  return "GPU 0";
}

bool CudaSession::loadedFromPtx() const { return impl->fromPtx; }

std::vector<Tensor> CudaSession::run(const Function &fn, const std::vector<Tensor> &inputs,
                                     const TensorMap &params, std::map<std::string, double> *profile,
                                     TensorMap *updates) {
  const Driver &d = impl->d;
  const Artifact &a = impl->artifact;
  if (!fn.cuda)
    throw Error(str(a.path, ": function '", fn.name, "' has no CUDA plan"));
  const CudaPlan &plan = *fn.cuda;
  if (inputs.size() != fn.inputs.size())
    throw Error(str(a.path, ": function '", fn.name, "' takes ", fn.inputs.size(),
                    " inputs, got ", inputs.size()));
  impl->check(d.cuCtxSetCurrent(impl->ctx), "cuCtxSetCurrent");

  const size_t V = fn.values.size();
  // Host tensors to upload into buffers: inputs, then parameters (as f32).
  std::vector<std::pair<int, Tensor>> uploads;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo &info = fn.values[fn.inputs[i]];
    const Tensor &t = inputs[i];
    if (t.shape() != info.shape || isFloat(info.dtype) != isFloat(t.dtype()) ||
        (!isFloat(info.dtype) && t.dtype() != info.dtype))
      throw Error(str("function '", fn.name, "' argument arg", i, ": expected ",
                      shapeStr(info.shape), " ", dtypeName(info.dtype), ", got ",
                      shapeStr(t.shape()), " ", dtypeName(t.dtype())));
    uploads.emplace_back(fn.inputs[i], t.dtype() == info.dtype ? t : t.to(info.dtype));
  }
  for (const ValueInfo &v : fn.values)
    if (isFloat(v.dtype) && v.dtype != DType::F32)
      throw Error(str("function '", fn.name, "' has ", dtypeName(v.dtype),
                      " values; the CUDA backend runs f32 programs only"));

  // Which buffer each value lives in: its own, a parameter's upload, or an alias.
  std::vector<int> home(V + plan.scratch.size());
  for (size_t i = 0; i < home.size(); ++i)
    home[i] = static_cast<int>(i);
  for (const CudaStep &s : plan.steps) {
    if (s.kind == CudaStep::Kind::Param) {
      auto it = params.find(s.name);
      if (it == params.end())
        throw Error(str(fn.ops[s.op].describe(), ": parameter '", s.name, "' is missing"));
      const ValueInfo &info = fn.values[s.value];
      if (it->second.shape() != info.shape || !isFloat(it->second.dtype()))
        throw Error(str("parameter '", s.name, "': expected ", shapeStr(info.shape), ", got ",
                        shapeStr(it->second.shape()), " ", dtypeName(it->second.dtype())));
      uploads.emplace_back(s.value, it->second.dtype() == DType::F32 ? it->second
                                                                     : it->second.to(DType::F32));
    } else if (s.kind == CudaStep::Kind::Alias) {
      home[s.value] = home[s.from];
    }
  }
  std::vector<size_t> offset(home.size(), 0), bytes(home.size(), 0);
  size_t total = 0;
  for (size_t i = 0; i < home.size(); ++i) {
    if (home[i] != static_cast<int>(i))
      continue;
    bytes[i] = i < V ? static_cast<size_t>(numElements(fn.values[i].shape)) *
                           dtypeSize(fn.values[i].dtype)
                     : static_cast<size_t>(plan.scratch[i - V]);
    offset[i] = total;
    total += align256(std::max<size_t>(bytes[i], 4));
  }
  struct Arena {
    const Driver &d;
    CUdeviceptr base = 0;
    ~Arena() {
      if (base)
        d.cuMemFree(base);
    }
  } arena{d};
  // Out of memory is said before anything runs: how much the plan needs, how much is free.
  auto size = [](size_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, b >= (size_t(1) << 30) ? "%.2f GiB" : "%.1f MiB",
                  b >= (size_t(1) << 30) ? b / 1073741824.0 : b / 1048576.0);
    return std::string(buf);
  };
  std::string need = str("function '", fn.name, "' needs ", size(total),
                         " of device memory (one arena: every value, the parameters it reads "
                         "and scratch; no reuse yet)");
  size_t freeBytes = 0, totalBytes = 0;
  if (d.cuMemGetInfo && d.cuMemGetInfo(&freeBytes, &totalBytes) == CUDA_SUCCESS &&
      total > freeBytes)
    throw Error(str(need, ", but the GPU has ", size(freeBytes), " free of ", size(totalBytes),
                    "; lower data.batch or data.patch"));
  CUresult allocated = d.cuMemAlloc(&arena.base, std::max<size_t>(total, 256));
  if (allocated == 2) // CUDA_ERROR_OUT_OF_MEMORY
    throw Error(str(need, ": out of device memory; lower data.batch or data.patch"));
  impl->check(allocated, str("cuMemAlloc of ", total, " bytes for function '", fn.name, "'"));
  auto ptr = [&](int id) { return arena.base + offset[home[id]]; };
  if (envFlag("MEDRUN_CUDA_POISON"))
    impl->check(d.cuMemsetD32(arena.base, 0x7fc00000u, std::max<size_t>(total, 256) / 4),
                "cuMemsetD32 (poison)");
  for (auto &[id, t] : uploads)
    if (t.nbytes())
      impl->check(d.cuMemcpyHtoD(ptr(id), t.raw(), t.nbytes()),
                  str("uploading value ", id, " of function '", fn.name, "'"));
  const int statusId = static_cast<int>(V);
  impl->check(d.cuMemsetD32(ptr(statusId), 0u, 1), "cuMemsetD32 (status word)");

  // Launch the plan.
  const bool syncEach = envFlag("MEDRUN_CUDA_SYNC");
  std::vector<CUevent> events;
  std::vector<int> timedOps;
  auto record = [&]() {
    CUevent e = nullptr;
    impl->check(d.cuEventCreate(&e, 0), "cuEventCreate");
    events.push_back(e);
    impl->check(d.cuEventRecord(e, impl->stream), "cuEventRecord");
  };
  struct EventGuard {
    const Driver &d;
    std::vector<CUevent> &events;
    ~EventGuard() {
      for (CUevent e : events)
        d.cuEventDestroy(e);
    }
  } eventGuard{d, events};
  if (profile)
    record();
  std::vector<CUdeviceptr> argValues;
  std::vector<void *> argPtrs;
  for (const CudaStep &s : plan.steps) {
    if (s.kind != CudaStep::Kind::Launch)
      continue;
    const OpInfo &op = fn.ops[s.op];
    CUfunction f = impl->function(s.kernel, op);
    argValues.assign(s.args.size(), 0);
    argPtrs.assign(s.args.size() + 1, nullptr); // null-terminated (the driver reads only the args)
    for (size_t i = 0; i < s.args.size(); ++i) {
      argValues[i] = ptr(s.args[i]);
      argPtrs[i] = &argValues[i];
    }
    CUresult r = d.cuLaunchKernel(f, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1],
                                  s.block[2], s.shared, impl->stream, argPtrs.data(), nullptr);
    if (r == CUDA_SUCCESS && syncEach)
      r = d.cuStreamSynchronize(impl->stream);
    if (r != CUDA_SUCCESS)
      throw Error(str("kernel ", s.kernel, " of ", op.describe(), " in function '", fn.name,
                      "': ", d.errorString(r)));
    if (profile) {
      record();
      timedOps.push_back(s.op);
    }
  }
  if (CUresult r = d.cuStreamSynchronize(impl->stream); r != CUDA_SUCCESS)
    throw Error(str("function '", fn.name, "' failed on the GPU: ", d.errorString(r),
                    " (MEDRUN_CUDA_SYNC=1 finds the kernel)"));
  if (profile)
    for (size_t i = 0; i < timedOps.size(); ++i) {
      float ms = 0;
      impl->check(d.cuEventElapsedTime(&ms, events[i], events[i + 1]), "cuEventElapsedTime");
      (*profile)[fn.ops[timedOps[i]].kind] += ms / 1000.0;
    }
  uint32_t status = 0;
  impl->check(d.cuMemcpyDtoH(&status, ptr(statusId), 4), "reading the status word");
  if (status != 0) {
    const OpInfo &op = fn.ops.at(status - 1);
    throw Error(str(op.describe(), " in function '", fn.name, "': invalid data on the GPU (",
                    op.kind.rfind("dice_ce", 0) == 0 ? "a target voxel is not a class index"
                    : op.kind == "adamw"             ? "the step is below 1"
                                                     : "see docs/architecture.md",
                    ")"));
  }

  auto download = [&](int id) {
    const ValueInfo &info = fn.values[id];
    Tensor t(info.dtype, info.shape);
    if (t.nbytes())
      impl->check(d.cuMemcpyDtoH(t.raw(), ptr(id), t.nbytes()),
                  str("downloading value ", id, " of function '", fn.name, "'"));
    return t;
  };
  std::vector<Tensor> outputs;
  for (int id : fn.outputs)
    outputs.push_back(download(id));
  for (const CudaStep &s : plan.steps)
    if (s.kind == CudaStep::Kind::Assign) {
      if (!updates)
        throw Error(str(fn.ops[s.op].describe(), ": assigns parameter '", s.name,
                        "', but the caller takes no parameter updates"));
      (*updates)[s.name] = download(s.value);
    }
  return outputs;
}

std::vector<Tensor> runCuda(const Artifact &artifact, const Function &fn,
                            const std::vector<Tensor> &inputs, const TensorMap &params,
                            std::map<std::string, double> *profile, TensorMap *updates) {
  CudaSession session(artifact);
  return session.run(fn, inputs, params, profile, updates);
}

} // namespace medrun
