//===- CudaExecutor.cpp - the CUDA backend: driver API through dlopen ------------===//
//
// libcuda.so.1 is opened at run time and the few driver functions the executor needs are
// resolved by name (the `_v2` names where the API versioned them), so nothing here links
// against the driver. A run:
//
//   1. places every buffer of the function (values, uploaded inputs and parameters,
//      scratch) in one device arena at the offsets medc planned, checked against the
//      buffers' lives (MemoryPlan.h), once per function; the arena is kept and reused by
//      later runs;
//   2. uploads inputs and the parameters that are not resident, zeroes the status word;
//   3. launches every step of the plan in order on one stream, without synchronizing;
//   4. synchronizes once, checks the status word, downloads outputs and assigned values.
//
// Resident state (setState) stays on the device between runs: parameters, optimizer
// moments and EMA are neither uploaded nor downloaded per step; commit() copies a run's
// assignments into them on the device. Inputs staged ahead (stage(), e.g. the next
// training batch, born in pinned host memory) are copied on a second stream while the
// current step runs, then moved into place on the device by the run that uses them.
//
// MEDRUN_CUDA_SYNC=1 synchronizes after every launch, so an error is reported at the
// kernel that caused it; MEDRUN_LIBCUDA=PATH loads another driver library;
// MEDRUN_CUDA_POISON=1 fills the arena with NaN first, so an output
// element no kernel writes shows up in comparisons.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/ConvView.h"
#include "medrun/Cuda.h"
#include "Cublaslt.h"
#include "Cudnn.h"
#include "medrun/Error.h"
#include "medrun/GradientReducer.h"
#include "medrun/MemoryPlan.h"
#include "SharedLibrary.h"

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

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
  SharedLibrary lib;
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
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice) = nullptr; // optional: messages
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
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
  // Optional: CUDA graphs (a step captured once and replayed).
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, void **) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(void **, void *, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(void *, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(void *) = nullptr;
  CUresult (*cuGraphDestroy)(void *) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char **) = nullptr;
  // Optional: pinned host memory and inputs uploaded ahead on a second stream (stage()).
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned) = nullptr;
  CUresult (*cuMemFreeHost)(void *) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;

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

/// Device memory that frees itself.
struct DeviceBuffer {
  const Driver *d = nullptr;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }
  void release() {
    if (ptr)
      d->cuMemFree(ptr);
    ptr = 0;
    bytes = 0;
  }
};

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

std::string inputName(const Function &fn, size_t i) {
  return i < fn.inputNames.size() ? fn.inputNames[i] : str("arg", i);
}

std::string byteSize(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, b >= (size_t(1) << 30) ? "%.2f GiB" : "%.1f MiB",
                b >= (size_t(1) << 30) ? b / 1073741824.0 : b / 1048576.0);
  return buf;
}

/// Where a function's buffers live, computed once per function (and again when the set of
/// resident tensors changes).
struct Layout {
  uint64_t stateGeneration = 0;
  std::vector<int> home;            ///< buffer id -> the buffer id whose memory it uses
  std::vector<size_t> shift;        ///< buffer id -> its byte offset in its home (placed values)
  std::vector<std::string> resident; ///< per home buffer: the resident tensor, or ""
  std::vector<size_t> offset;        ///< per home buffer: offset in the arena
  std::vector<DType> type;           ///< per value: as stored on the device
  /// bf16/f16 values bound to f32 resident parameters: converted copies made before the
  /// plan runs.
  std::vector<std::pair<std::string, int>> residentCopies;
  size_t arenaBytes = 0, naiveBytes = 0;
  /// Per op: its cuDNN call, replacing the op's kernel launches (null: the kernels run).
  std::vector<std::unique_ptr<cudnn::Conv>> convs;
  /// Per op: its cuBLASLt products (1x1x1 convolutions), chosen over `convs` when set.
  std::vector<std::unique_ptr<cublaslt::Gemm>> gemms;
  /// Ones of each storage type (f32, bf16, f16, 256-byte aligned) for the biases of gemms.
  std::unique_ptr<DeviceBuffer> ones;
  size_t onesCount = 0;
  bool algorithmsChosen = false;
  size_t workspaceBytes = 0; ///< the largest workspace of the chosen algorithms
  /// The step as one CUDA graph, captured on its second run (the first chooses algorithms)
  /// and replayed while the buffers it was captured with stay where they are.
  void *graph = nullptr;
  std::array<uint64_t, 4> graphBuffers{}; ///< arena, workspace, staging, state allocations
  int runs = 0;
  std::string graphNote; ///< why the step runs without a graph, if it does
  bool captureFailed = false;
};

/// A tensor kept on the device. A member of a flat buffer (Artifact::flatBuffers) owns no
/// memory: it is a view into its buffer's, so that one kernel updates all members.
struct Resident {
  DeviceBuffer buffer;
  CUdeviceptr view = 0; ///< a member: where it lies in its flat buffer
  size_t viewBytes = 0;
  Shape shape;
  DType dtype = DType::F32;
  CUdeviceptr address() const { return view ? view : buffer.ptr; }
  size_t bytes() const { return view ? viewBytes : buffer.bytes; }
};

struct Pending {
  std::string name;
  CUdeviceptr from = 0;
};

/// Uploads ahead (stage()). The step's graph reads its inputs at fixed addresses in the arena,
/// which the running step is still reading, so the next inputs are copied into a slot of
/// their own on a second stream, and the run that uses them moves them into place with
/// device-to-device copies on the compute stream before its graph (about 0.1 ms for 218 MB
/// on an H200). The alternative, one graph captured per slot, would bake the slot's address
/// into each and double the captures and their recaptures for a saving of 0.1 ms.
/// Two slots: one filling for the next run while the other is read by the current one.
struct UploadSlot {
  DeviceBuffer buffer;
  CUevent filled = nullptr;  ///< recorded on the copy stream after the slot's copies
  CUevent drained = nullptr; ///< recorded on the compute stream after the run copied it out
};

struct Staged {
  const Function *fn = nullptr;
  std::vector<Tensor> inputs;  ///< per input of fn: the host tensor, or undefined
  std::vector<size_t> offset;  ///< per input: where it lies in the slot
  size_t bytes = 0;
  int slot = 0;
  bool issued = false; ///< its copies are enqueued on the copy stream
};

} // namespace


namespace {
int deviceOrdinal = 0; // setCudaDevice
} // namespace

void setCudaDevice(int ordinal) { deviceOrdinal = ordinal; }

bool cudaAvailable(std::string *why) {
  const Driver &d = driver();
  if (why)
    *why = d.lib.error;
  return d.lib.error.empty();
}

struct CudaSession::Impl {
  const Artifact &artifact;
  const Driver &d;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  std::vector<CUmodule> modules; ///< one per module of the artifact, in its order (null:
                                 ///< an sm_90a module this GPU did not load)
  // Kernel variants (sm_90a wgmma kernels beside their mma.sync ones), by MEDRUN_MMA.
  enum class Mma { Auto, MmaSync, Wgmma } mma = Mma::Auto;
  std::string sm90aNote; ///< why the sm_90a module is not loaded, if it is not
  std::unique_ptr<cudnn::AlgoCache> variantCache; ///< measured choices, per GPU
  std::unordered_map<const CudaStep *, std::string> variantOf; ///< the kernel a step runs
  std::unordered_set<const Function *> variantsChosen; ///< functions whose steps have theirs
  CUstream stream = nullptr;
  bool fromPtx = false;
  std::unordered_map<std::string, CUfunction> functions;
  std::map<std::string, Resident> state;
  uint64_t stateGeneration = 1;
  std::unordered_map<const Function *, Layout> layouts;
  GradientReducer *reducer = &singleRankReducer(); ///< sums the buckets of all_reduce steps
  bool graphsOn = true; ///< setGraphs
  DeviceBuffer arena;
  std::vector<Pending> pending;
  // Convolutions: cuDNN when it loads and makes a handle, else the generated kernels.
  cudnn::Mode convMode = cudnn::Mode::Off;
  std::unique_ptr<cudnn::Handle> dnn;
  std::string convBackend;
  std::unique_ptr<cudnn::AlgoCache> algoCache;
  // 1x1x1 convolutions: cuBLASLt when it loads (and MEDRUN_CUBLASLT is not off).
  std::unique_ptr<cublaslt::Handle> lt;
  std::string gemmBackend;
  std::unique_ptr<cudnn::AlgoCache> gemmCache;
  DeviceBuffer workspace;
  DeviceBuffer staging; // f32 inputs on their way to bf16 values
  uint64_t stateAllocations = 0; // changes when a resident buffer moves
  // Uploads ahead (stage()): a non-blocking second stream, so that the synchronous copies
  // and memsets of a run (legacy default stream) do not wait for it.
  CUstream copyStream = nullptr;
  std::array<UploadSlot, 2> slots;
  std::deque<Staged> staged; ///< in the order their runs come
  int nextSlot = 0;
  int64_t runs = 0, stagedRuns = 0; ///< for uploads()
  // Pinned host memory handed out by pinnedTensor().
  std::mutex pinMutex;
  size_t pinnedBytes = 0;
  std::string pinFailure; ///< why pinning failed, if it did (warned once)

  Impl(const Artifact &a) : artifact(a), d(driver()) {
    arena.d = &d;
    workspace.d = &d;
    staging.d = &d;
    for (UploadSlot &s : slots)
      s.buffer.d = &d;
  }

  /// The flat buffer `name` is a member of, and its entry there (nulls if none).
  std::pair<const FlatBuffer *, const FlatBuffer::Member *> memberOf(const std::string &name) const {
    for (const FlatBuffer &f : artifact.flatBuffers)
      for (const FlatBuffer::Member &m : f.members)
        if (m.name == name)
          return {&f, &m};
    return {nullptr, nullptr};
  }

  /// The resident flat buffer, allocated and zeroed the first time a member is set.
  Resident &flatResident(const FlatBuffer &f) {
    auto [it, fresh] = state.try_emplace(f.name);
    Resident &r = it->second;
    if (fresh) {
      r.buffer.d = &d;
      ++stateGeneration;
      ++stateAllocations;
      const size_t bytes = static_cast<size_t>(f.size) * 4;
      CUresult e = d.cuMemAlloc(&r.buffer.ptr, std::max<size_t>(bytes, 4));
      if (e == 2)
        throw Error(str("flat buffer '", f.name, "' (", byteSize(bytes),
                        "): out of device memory keeping the training state on the GPU"));
      check(e, str("cuMemAlloc for flat buffer '", f.name, "'"));
      r.buffer.bytes = bytes;
      r.shape = {f.size};
      if (bytes)
        check(d.cuMemsetD32(r.buffer.ptr, 0u, bytes / 4), str("zeroing flat buffer '", f.name, "'"));
    }
    return r;
  }

  void check(CUresult r, const std::string &what) const {
    if (r != CUDA_SUCCESS)
      throw Error(str(what, ": ", d.errorString(r)));
  }

  CUfunction function(const std::string &name, const OpInfo &op) {
    auto it = functions.find(name);
    if (it != functions.end())
      return it->second;
    CUfunction f = nullptr;
    auto m = artifact.cuda->kernelModule.find(name);
    if (m == artifact.cuda->kernelModule.end())
      throw Error(str("kernel ", name, " of ", op.describe(), ": in no module of the artifact"));
    if (!modules.at(m->second))
      throw Error(str("kernel ", name, " of ", op.describe(), ": its ",
                      artifact.cuda->modules[m->second].arch, " module is not loaded (",
                      sm90aNote, ")"));
    check(d.cuModuleGetFunction(&f, modules.at(m->second), name.c_str()),
          str("kernel ", name, " of ", op.describe(), ": not in its loaded module ", m->second));
    functions.emplace(name, f);
    return f;
  }

  Layout &layout(const Function &fn);
  void dropGraph(Layout &l) {
    if (l.graph)
      d.cuGraphExecDestroy(l.graph);
    l.graph = nullptr;
  }
  void reserveArena(const Function &fn, const Layout &l);
  void setUpConvolutions(const std::string &deviceName);
  /// The cache file of `library`'s choices on this GPU ("" when there is no cache directory).
  std::string cacheFile(const std::string &deviceName, const std::string &library) const;
  void chooseAlgorithms(const Function &fn, Layout &l, const std::function<uint64_t(int)> &ptr);
  /// The kernel each launch step with variants runs, chosen once per step (MEDRUN_MMA).
  void chooseVariants(const Function &fn, const Layout &l, const std::function<uint64_t(int)> &ptr);
  bool loaded(const std::string &kernel) const {
    auto m = artifact.cuda->kernelModule.find(kernel);
    return m != artifact.cuda->kernelModule.end() && modules.at(m->second);
  }
  bool generatedFaster(const Function &fn, size_t i, const Layout &l,
                       const std::function<uint64_t(int)> &ptr);
  /// Enqueues one generated kernel of the plan on the stream, its buffers from `ptr`.
  CUresult launch(const CudaStep &s, const OpInfo &op, const std::function<uint64_t(int)> &ptr);
  /// Hands the bucket of an all_reduce step to the reducer, on the stream.
  void allReduce(const Function &fn, const Layout &l, const CudaStep &s,
                 const std::function<uint64_t(int)> &ptr);
  std::vector<CUdeviceptr> launchValues; ///< launch's argument buffers
  std::vector<void *> launchArgs;
  cublaslt::Buffers gemmBuffers(const Function &fn, const Layout &l,
                                const std::function<uint64_t(int)> &ptr, const cublaslt::Gemm &g,
                                const OpInfo &op);
  double timeMs(const std::function<void()> &enqueue); ///< per call, with CUDA events
  void allocate(DeviceBuffer &b, size_t bytes, const std::string &what);
  void issue(Staged &s);
  void finishCopies();
};

/// Enqueues a staged upload's copies on the copy stream, after the last run that read its slot
/// has moved the slot's previous contents out.
void CudaSession::Impl::issue(Staged &s) {
  UploadSlot &slot = slots[s.slot];
  check(d.cuStreamWaitEvent(copyStream, slot.drained, 0), "cuStreamWaitEvent (upload slot)");
  for (size_t i = 0; i < s.inputs.size(); ++i)
    if (s.inputs[i].defined() && s.inputs[i].nbytes())
      check(d.cuMemcpyHtoDAsync(slot.buffer.ptr + s.offset[i], s.inputs[i].raw(),
                                s.inputs[i].nbytes(), copyStream),
            str("uploading input '", inputName(*s.fn, i), "' of function '", s.fn->name,
                "' ahead"));
  check(d.cuEventRecord(slot.filled, copyStream), "cuEventRecord (upload slot)");
  s.issued = true;
}

/// Waits for the copies in flight on the copy stream (their host memory may go after it).
void CudaSession::Impl::finishCopies() {
  if (copyStream)
    check(d.cuStreamSynchronize(copyStream), "waiting for the copy stream");
}

void CudaSession::Impl::allocate(DeviceBuffer &b, size_t bytes, const std::string &what) {
  b.release();
  CUresult r = d.cuMemAlloc(&b.ptr, std::max<size_t>(bytes, 256));
  if (r == 2) // CUDA_ERROR_OUT_OF_MEMORY
    throw Error(str(what, " (", byteSize(bytes), "): out of device memory; lower data.batch or "
                          "data.patch"));
  check(r, str("cuMemAlloc of ", bytes, " bytes for ", what));
  b.bytes = bytes;
}

// Chosen algorithms are kept per library version and GPU, beside the compiled recipes.
std::string CudaSession::Impl::cacheFile(const std::string &deviceName,
                                         const std::string &library) const {
  std::string dir;
  if (const char *e = std::getenv("MEDRUN_CACHE"); e && *e)
    dir = e;
  else if (const char *h = std::getenv("HOME"); h && *h)
    dir = str(h, "/.cache/medrun");
  std::string gpu = deviceName;
  for (char &c : gpu)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return dir.empty() ? std::string() : str(dir, "/", library, "-", gpu, ".txt");
}

/// Launch steps with variants: MEDRUN_MMA=mma.sync runs the step's own kernel, wgmma its
/// sm_90a variant where loaded, auto (the default) the faster of the loaded ones, measured
/// once per kernel and GPU on the arena's buffers before anything is uploaded (their
/// contents are overwritten) and kept in the variant cache, so that later runs make the
/// same choice (the same bits). A step whose results live in resident state (written in
/// place) is not measured: it runs its own kernel.
void CudaSession::Impl::chooseVariants(const Function &fn, const Layout &l,
                                       const std::function<uint64_t(int)> &ptr) {
  if (!variantsChosen.insert(&fn).second)
    return; // once per function, not on every run
  for (const CudaStep &s : fn.cuda->steps) {
    if (s.kind != CudaStep::Kind::Launch || s.variants.empty())
      continue;
    std::vector<std::string> candidates{s.kernel};
    for (const std::string &v : s.variants)
      if (loaded(v))
        candidates.push_back(v);
    std::string pick = s.kernel;
    const OpInfo &op = fn.ops.at(s.op);
    bool resident = false;
    for (int id : op.results)
      resident = resident || !l.resident.at(l.home.at(id)).empty();
    if (candidates.size() > 1 && mma == Mma::Wgmma) {
      pick = candidates[1];
    } else if (candidates.size() > 1 && mma == Mma::Auto && !resident) {
      std::string key = "variant";
      for (const std::string &c : candidates)
        key += ":" + c;
      int choice = -1;
      size_t unused = 0;
      if (!variantCache || !variantCache->find(key, &choice, &unused) || choice < 0 ||
          choice >= static_cast<int>(candidates.size())) {
        double best = 0;
        for (size_t c = 0; c < candidates.size(); ++c) {
          CudaStep timed = s;
          timed.kernel = candidates[c];
          timed.variants.clear();
          const double ms = timeMs([&] {
            check(launch(timed, op, ptr), str("timing kernel ", timed.kernel, " of ", op.describe()));
          });
          if (c == 0 || ms < best) {
            best = ms;
            choice = static_cast<int>(c);
          }
        }
        if (variantCache)
          variantCache->put(key, choice, 0);
      }
      pick = candidates[choice];
    }
    variantOf.emplace(&s, pick);
  }
}

void CudaSession::Impl::setUpConvolutions(const std::string &deviceName) {
  convMode = cudnn::modeFromEnv();
  const bool gemmsOn = cublaslt::enabledFromEnv();
  std::string why;
  if (convMode == cudnn::Mode::Off) {
    convBackend = "generated kernels (MEDRUN_CUDNN=off)";
    return;
  }
  auto cacheFile = [&](const std::string &library) { return this->cacheFile(deviceName, library); };
  if (!cudnn::available(&why)) {
    convBackend = str("generated kernels (", why, ")");
  } else {
    try {
      dnn = std::make_unique<cudnn::Handle>(stream);
      convBackend = str("cuDNN ", cudnn::version(), " (", cudnn::modeName(convMode), ")");
      algoCache = std::make_unique<cudnn::AlgoCache>(cacheFile(str("cudnn-", cudnn::version())));
    } catch (const Error &e) {
      convBackend = str("generated kernels (", e.what(), ")");
    }
  }
  if (!gemmsOn) {
    gemmBackend = "cuBLASLt off (MEDRUN_CUBLASLT=off)";
  } else if (!cublaslt::available(&why)) {
    gemmBackend = str("no cuBLASLt (", why, ")");
  } else {
    try {
      lt = std::make_unique<cublaslt::Handle>();
      gemmBackend = str("1x1x1 through cuBLASLt ", cublaslt::version(), " (",
                        cudnn::modeName(convMode), ")");
      gemmCache =
          std::make_unique<cudnn::AlgoCache>(cacheFile(str("cublaslt-", cublaslt::version())));
    } catch (const Error &e) {
      gemmBackend = str("no cuBLASLt (", e.what(), ")");
    }
  }
}

cublaslt::Buffers CudaSession::Impl::gemmBuffers(const Function &fn, const Layout &l,
                                                  const std::function<uint64_t(int)> &ptr,
                                                  const cublaslt::Gemm &g, const OpInfo &op) {
  cublaslt::Buffers b;
  b.ptr = ptr;
  b.workspace = workspace.ptr;
  if (l.ones) { // f32, then bf16, then f16 ones
    const size_t f32 = align256(l.onesCount * 4), half = align256(l.onesCount * 2);
    b.ones = l.ones->ptr + (g.type() == DType::BF16 ? f32 : g.type() == DType::F16 ? f32 + half : 0);
  }
  b.narrow = [this, &fn, &op, type = g.type()](uint64_t from, uint64_t to, int64_t n) {
    CUfunction f = function(type == DType::F16 ? "med_f32_to_f16" : "med_f32_to_bf16", op);
    long long count = n;
    void *args[] = {&from, &to, &count, nullptr};
    check(d.cuLaunchKernel(f, static_cast<unsigned>((n + 255) / 256), 1, 1, 256, 1, 1, 0, stream,
                           args, nullptr),
          str("converting the f32 sums of ", op.describe(), " in function '", fn.name, "'"));
  };
  return b;
}

double CudaSession::Impl::timeMs(const std::function<void()> &enqueue) {
  constexpr int kReps = 3;
  enqueue(); // warm-up: the first call may load kernels
  CUevent e[2] = {nullptr, nullptr};
  struct Guard {
    const Driver &d;
    CUevent *e;
    ~Guard() {
      for (int i = 0; i < 2; ++i)
        if (e[i])
          d.cuEventDestroy(e[i]);
    }
  } guard{d, e};
  for (CUevent &x : e)
    check(d.cuEventCreate(&x, 0), "cuEventCreate");
  check(d.cuEventRecord(e[0], stream), "cuEventRecord");
  for (int i = 0; i < kReps; ++i)
    enqueue();
  check(d.cuEventRecord(e[1], stream), "cuEventRecord");
  check(d.cuStreamSynchronize(stream), "measuring a convolution");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, e[0], e[1]), "cuEventElapsedTime");
  return ms / kReps;
}

/// Is `op` (a convolution or its weight gradient) depthwise: one input channel per group?
static bool depthwise(const Function &fn, const OpInfo &op) {
  if (op.kind == "shift_sum" || op.kind == "shift_sum_grad_weight")
    return true;
  const int w = op.kind == "conv3d_grad_weight" ? op.results.at(0) : op.single("weight");
  const Shape &ws = fn.values.at(w).shape; // O × I/groups × k × k × k
  return ws.size() == 5 && op.intAttr("groups") > 1 && ws[1] == 1 &&
         op.intAttr("groups") == ws[0];
}

/// MEDRUN_CUDNN=benchmark: whether the generated kernels of convolution `i` (forward,
/// backward data, or a depthwise weight gradient) beat its cuDNN call, measured on the
/// arena's buffers once per shape and cached with cuDNN's algorithms (1: the generated
/// kernels). cuDNN's depthwise algorithms can lose to a plain stencil and to the split
/// reduction of the depthwise weight gradient; other weight gradients are left to cuDNN (the
/// generated ones are plain reductions, far slower, and measuring them would cost seconds).
bool CudaSession::Impl::generatedFaster(const Function &fn, size_t i, const Layout &l,
                                        const std::function<uint64_t(int)> &ptr) {
  const cudnn::Conv &conv = *l.convs[i];
  const OpInfo &op = fn.ops[i];
  // A shift-sum runs the tiled stencil templates (lib/Target/Cuda/Stencil.cpp): their tag
  // keeps choices measured against earlier generated kernels from being reused.
  const bool stencil = op.kind == "shift_sum" || op.kind == "shift_sum_grad_weight";
  const std::string key = conv.cacheKey() + (stencil ? ":stencil1" : "") + ":generated";
  int choice = 0;
  size_t unused = 0;
  if (algoCache->find(key, &choice, &unused))
    return choice == 1;
  const std::function<void()> generated = [&] {
    for (const CudaStep &s : fn.cuda->steps)
      if (s.kind == CudaStep::Kind::Launch && s.op == static_cast<int>(i))
        check(launch(s, op, ptr), str("timing kernel ", s.kernel, " of ", op.describe()));
  };
  const double dnnMs = timeMs([&] { conv.run(*dnn, ptr, workspace.ptr); });
  choice = timeMs(generated) < dnnMs ? 1 : 0;
  algoCache->put(key, choice, 0);
  return choice == 1;
}

// One call for the whole bucket where its values lie in one buffer as the bucket says (each
// gradient's producer wrote it into its slice of the packed gradients, the gaps zero); else
// one call per value, each reduced once.
void CudaSession::Impl::allReduce(const Function &fn, const Layout &l, const CudaStep &s,
                                  const std::function<uint64_t(int)> &ptr) {
  const OpInfo &op = fn.ops.at(s.op);
  const std::vector<int64_t> offsets = op.intsAttr("offsets");
  const DType t = l.type.at(s.args.at(0));
  const size_t es = dtypeSize(t);
  bool contiguous = offsets.size() == s.args.size();
  for (size_t i = 0; contiguous && i < s.args.size(); ++i)
    contiguous = l.type[s.args[i]] == t && l.home[s.args[i]] == l.home[s.args[0]] &&
                 ptr(s.args[i]) - offsets[i] * es == ptr(s.args[0]) - offsets[0] * es;
  auto reduce = [&](uint64_t at, int64_t count, DType dtype) {
    try {
      reducer->allReduceSum(reinterpret_cast<void *>(static_cast<uintptr_t>(at)),
                            static_cast<size_t>(count), dtype, stream);
    } catch (const Error &e) {
      throw Error(str(op.describe(), " (bucket ", op.intAttr("bucket"), ") in function '",
                      fn.name, "': ", e.what()));
    }
  };
  if (contiguous) {
    reduce(ptr(s.args[0]) - offsets[0] * es, op.intAttr("size"), t);
    return;
  }
  std::set<uint64_t> done; // a value passed twice is one buffer
  for (int id : s.args)
    if (done.insert(ptr(id)).second)
      reduce(ptr(id), numElements(fn.values[id].shape), l.type[id]);
}

CUresult CudaSession::Impl::launch(const CudaStep &s, const OpInfo &op,
                                   const std::function<uint64_t(int)> &ptr) {
  const size_t n = s.args.size() + s.scalars.size();
  launchValues.assign(n, 0); // reused: a step enqueues thousands of launches
  launchArgs.assign(n + 1, nullptr); // null-terminated (the driver reads only the args)
  for (size_t j = 0; j < n; ++j) {
    // A scalar sits in the low bytes of its 8-byte slot: the driver copies the 4 bytes of
    // an `unsigned` parameter from there (little-endian).
    launchValues[j] = j < s.args.size() ? ptr(s.args[j]) : s.scalars[j - s.args.size()];
    launchArgs[j] = &launchValues[j];
  }
  const std::string *kernel = &s.kernel;
  if (!s.variants.empty())
    if (auto v = variantOf.find(&s); v != variantOf.end())
      kernel = &v->second;
  return d.cuLaunchKernel(function(*kernel, op), s.grid[0], s.grid[1], s.grid[2], s.block[0],
                          s.block[1], s.block[2], s.shared, stream, launchArgs.data(), nullptr);
}

/// On a function's first run: measures (or looks up) each convolution's algorithm on the
/// arena's buffers, before anything is uploaded, then sizes the shared workspace. A 1x1x1
/// convolution both libraries run goes to the faster under MEDRUN_CUDNN=benchmark, to
/// cuBLASLt under deterministic and heuristic (cublaslt::choose).
void CudaSession::Impl::chooseAlgorithms(const Function &fn, Layout &l,
                                         const std::function<uint64_t(int)> &ptr) {
  if (l.algorithmsChosen)
    return;
  size_t freeBytes = 0, totalBytes = 0;
  if (d.cuMemGetInfo)
    d.cuMemGetInfo(&freeBytes, &totalBytes);
  // The search may use up to half of what is free (at most 4 GiB) as workspace.
  size_t budget = std::min<size_t>(freeBytes / 2, size_t(4) << 30);
  if (!d.cuMemGetInfo)
    budget = size_t(256) << 20;
  if (l.onesCount && !l.ones) { // the bias broadcasts' ones, in each storage type
    const size_t n = l.onesCount, f32 = align256(n * 4), half = align256(n * 2);
    std::vector<uint8_t> host(f32 + 2 * half);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t one = 0x3f800000u;
      const uint16_t bf16 = 0x3f80, f16 = 0x3c00;
      std::memcpy(&host[i * 4], &one, 4);
      std::memcpy(&host[f32 + i * 2], &bf16, 2);
      std::memcpy(&host[f32 + half + i * 2], &f16, 2);
    }
    l.ones = std::make_unique<DeviceBuffer>();
    l.ones->d = &d;
    allocate(*l.ones, host.size(), "the ones of the 1x1x1 convolutions' biases");
    check(d.cuMemcpyHtoD(l.ones->ptr, host.data(), host.size()), "uploading the biases' ones");
  }
  bool searching = false;
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    std::unique_ptr<cudnn::Conv> *conv = i < l.convs.size() && l.convs[i] ? &l.convs[i] : nullptr;
    std::unique_ptr<cublaslt::Gemm> *gemm = i < l.gemms.size() && l.gemms[i] ? &l.gemms[i] : nullptr;
    if (!conv && !gemm)
      continue;
    if (!searching && workspace.bytes < budget) {
      allocate(workspace, budget, "the convolution workspace of the algorithm search");
      searching = true;
    }
    const bool measure = convMode == cudnn::Mode::Benchmark;
    if (conv && (!gemm || measure))
      (*conv)->select(*dnn, convMode, *algoCache, ptr, workspace.ptr, workspace.bytes);
    if (!gemm)
      continue;
    const OpInfo &op = fn.ops[i];
    const std::function<void()> runGemm = [&] {
      (*gemm)->run(*lt, stream, gemmBuffers(fn, l, ptr, **gemm, op));
    };
    const std::function<void()> runConv = [&] { (*conv)->run(*dnn, ptr, workspace.ptr); };
    const bool useGemm = cublaslt::choose(
        **gemm, *lt, convMode, *gemmCache, workspace.bytes,
        [this](const std::function<void()> &f) { return timeMs(f); }, runGemm,
        conv ? &runConv : nullptr, dnn ? str("cudnn-", cudnn::version()) : std::string());
    if (useGemm) {
      if (conv)
        conv->reset();
    } else {
      gemm->reset();
      if (conv && !measure)
        (*conv)->select(*dnn, convMode, *algoCache, ptr, workspace.ptr, workspace.bytes);
    }
  }
  if (convMode == cudnn::Mode::Benchmark)
    for (size_t i = 0; i < fn.ops.size() && i < l.convs.size(); ++i)
      if (l.convs[i] &&
          (fn.ops[i].kind != "conv3d_grad_weight" || depthwise(fn, fn.ops[i])) &&
          generatedFaster(fn, i, l, ptr))
        l.convs[i].reset();
  size_t need = 0;
  for (auto &c : l.convs)
    if (c)
      need = std::max(need, c->workspaceBytes());
  for (auto &g : l.gemms)
    if (g)
      need = std::max(need, g->workspaceBytes());
  if (searching)
    workspace.release();
  l.workspaceBytes = need;
  l.algorithmsChosen = true;
}

Layout &CudaSession::Impl::layout(const Function &fn) {
  Layout &l = layouts[&fn];
  if (l.stateGeneration == stateGeneration)
    return l;
  dropGraph(l);
  const CudaPlan &plan = *fn.cuda;
  const size_t V = fn.values.size(), B = V + plan.scratch.size();
  l = Layout();
  l.stateGeneration = stateGeneration;
  l.home.resize(B);
  l.shift.assign(B, 0);
  for (size_t i = 0; i < B; ++i)
    l.home[i] = static_cast<int>(i);
  // Values placed inside another value's buffer (a gradient in its slice of the packed
  // gradients) before anything else: aliases of them and launches then find them there.
  for (const CudaStep &s : plan.steps)
    if (s.kind == CudaStep::Kind::Place) {
      l.home[s.value] = s.from;
      l.shift[s.value] = s.offset;
    }
  l.resident.assign(B, "");
  l.type.resize(V);
  for (size_t i = 0; i < V; ++i) // as med-assign-storage decided (bf16/f16 activations)
    l.type[i] = fn.values[i].storage;
  // Which values live in resident state tensors, for the state this session holds; the
  // lives (MemoryPlan.h) follow from that and the plan's steps.
  for (const CudaStep &s : plan.steps) {
    switch (s.kind) {
    case CudaStep::Kind::Param:
      if (state.count(s.name) && l.type[s.value] != state.at(s.name).dtype)
        l.residentCopies.emplace_back(s.name, s.value); // read as bf16/f16: a converted copy per run
      else if (state.count(s.name))
        l.resident[s.value] = s.name;
      break;
    case CudaStep::Kind::Alias:
      l.home[s.value] = l.home[s.from];
      l.shift[s.value] = l.shift[s.from];
      break;
    case CudaStep::Kind::Assign:
      if (s.inPlace && state.count(s.name) && state.at(s.name).dtype == l.type[s.value] &&
          l.home[s.value] == s.value && l.resident[s.value].empty())
        l.resident[s.value] = s.name; // its producer writes the resident tensor itself
      break;
    default:
      break;
    }
  }
  const std::vector<BufferLife> life =
      bufferLives(fn, [&](const CudaStep &s) { return l.resident[s.value] == s.name; });
  // medc's offsets; a buffer it planned no bytes for (a parameter this session does not
  // hold, an update it cannot write in place) goes after them. Then the whole is checked.
  std::vector<int64_t> offset(B, 0);
  size_t end = static_cast<size_t>(plan.arenaBytes);
  for (size_t i = 0; i < B; ++i) {
    if (!life[i].bytes)
      continue;
    l.naiveBytes += align256(life[i].bytes);
    if (plan.offsets[i] >= 0) {
      offset[i] = plan.offsets[i];
    } else {
      offset[i] = static_cast<int64_t>(end);
      end += align256(life[i].bytes);
    }
  }
  checkArena(fn, life, offset, end);
  if (dnn || lt) {
    l.convs.resize(fn.ops.size());
    l.gemms.resize(fn.ops.size());
    for (size_t i = 0; i < fn.ops.size(); ++i) {
      if (dnn && cudnn::handles(fn.ops[i], l.type))
        l.convs[i] = std::make_unique<cudnn::Conv>(fn, fn.ops[i], l.type);
      if (lt && cublaslt::handles(fn, fn.ops[i], l.type)) {
        l.gemms[i] = std::make_unique<cublaslt::Gemm>(fn, fn.ops[i], l.type);
        l.onesCount = std::max(l.onesCount, l.gemms[i]->onesNeeded());
      }
    }
  }
  l.offset.assign(offset.begin(), offset.end());
  l.arenaBytes = std::max<size_t>(end, 256);
  return l;
}

void CudaSession::Impl::reserveArena(const Function &fn, const Layout &l) {
  if (arena.bytes >= l.arenaBytes)
    return;
  arena.release();
  // Out of memory is said before anything runs: how much the plan needs, how much is free.
  std::string need = str("function '", fn.name, "' needs ", byteSize(l.arenaBytes),
                         " of device memory for its values (", byteSize(l.naiveBytes),
                         " without reuse)");
  size_t freeBytes = 0, totalBytes = 0;
  if (d.cuMemGetInfo && d.cuMemGetInfo(&freeBytes, &totalBytes) == CUDA_SUCCESS &&
      l.arenaBytes > freeBytes)
    throw Error(str(need, ", but the GPU has ", byteSize(freeBytes), " free of ",
                    byteSize(totalBytes), "; lower data.batch or data.patch"));
  CUresult r = d.cuMemAlloc(&arena.ptr, l.arenaBytes);
  if (r == 2) // CUDA_ERROR_OUT_OF_MEMORY
    throw Error(str(need, ": out of device memory; lower data.batch or data.patch"));
  check(r, str("cuMemAlloc of ", l.arenaBytes, " bytes for function '", fn.name, "'"));
  arena.bytes = l.arenaBytes;
}

CudaSession::CudaSession(const Artifact &artifact) : impl(std::make_unique<Impl>(artifact)) {
  const Driver &d = impl->d;
  if (!d.lib.error.empty())
    throw Error(str("no CUDA driver or GPU found; use --device cpu (", d.lib.error, ")"));
  if (!artifact.cuda)
    throw Error(str(artifact.path, ": the artifact has no CUDA kernels; compile it with `medc "
                                   "compile ... --target cuda`"));
  impl->check(d.cuDeviceGet(&impl->device, deviceOrdinal), "cuDeviceGet");
  impl->check(d.cuDevicePrimaryCtxRetain(&impl->ctx, impl->device), "cuDevicePrimaryCtxRetain");
  impl->check(d.cuCtxSetCurrent(impl->ctx), "cuCtxSetCurrent");
  // Each module's cubin first; its PTX (JIT-compiled by the driver) if the GPU cannot run it.
  // An sm_90a module loads on sm_90 GPUs only; elsewhere its kernels' mma.sync forms run.
  int major = 0, minor = 0;
  if (!d.cuDeviceGetAttribute || d.cuDeviceGetAttribute(&major, 75, impl->device) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&minor, 76, impl->device) != CUDA_SUCCESS)
    major = minor = 0;
  const std::vector<CudaModule> &modules = artifact.cuda->modules;
  for (size_t m = 0; m < modules.size(); ++m) {
    const std::string which =
        modules.size() == 1 ? std::string() : str(" (module ", m, " of ", modules.size(), ")");
    CUmodule module = nullptr;
    if (modules[m].arch == "sm_90a") {
      if (major != 9 || minor != 0) {
        impl->sm90aNote = major ? str("the GPU is sm_", major, minor) : "the GPU's architecture is unknown";
      } else if (CUresult r = d.cuModuleLoadData(&module, modules[m].cubin.data()); r != CUDA_SUCCESS) {
        impl->sm90aNote = str("its cubin does not load: ", d.errorString(r));
        module = nullptr;
      }
      impl->modules.push_back(module);
      continue;
    }
    CUresult r = d.cuModuleLoadData(&module, modules[m].cubin.data());
    if (r != CUDA_SUCCESS && modules[m].ptx.empty()) {
      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
      int major = 0, minor = 0;
      std::string sm = "an unknown architecture";
      if (d.cuDeviceGetAttribute &&
          d.cuDeviceGetAttribute(&major, 75, impl->device) == CUDA_SUCCESS &&
          d.cuDeviceGetAttribute(&minor, 76, impl->device) == CUDA_SUCCESS)
        sm = str("sm_", major, minor);
      throw Error(str(artifact.path, ": its kernels are an ", artifact.cuda->arch,
                      " cubin without PTX, which ", deviceName(), " (", sm, ") cannot run (",
                      d.errorString(r), "); recompile it with `medc compile ... --target cuda",
                      major ? str(" --cuda-arch ", major, minor) : std::string(), "`"));
    }
    if (r != CUDA_SUCCESS) {
      std::string ptx = modules[m].ptx; // NUL-terminated copy
      CUresult p = d.cuModuleLoadData(&module, ptx.c_str());
      if (p != CUDA_SUCCESS)
        throw Error(str(artifact.path, ": neither the ", artifact.cuda->arch, " cubin nor the PTX",
                        which, " loads on ", deviceName(), ": cubin: ", d.errorString(r),
                        "; PTX: ", d.errorString(p)));
      impl->fromPtx = true;
    }
    impl->modules.push_back(module);
  }
  impl->check(d.cuStreamCreate(&impl->stream, 0), "cuStreamCreate");
  impl->setUpConvolutions(deviceName());
  if (const char *e = std::getenv("MEDRUN_MMA"); e && *e) {
    const std::string v = e;
    if (v == "auto")
      impl->mma = Impl::Mma::Auto;
    else if (v == "mma.sync")
      impl->mma = Impl::Mma::MmaSync;
    else if (v == "wgmma")
      impl->mma = Impl::Mma::Wgmma;
    else
      throw Error(str("MEDRUN_MMA is '", v, "'; expected auto (measure each kernel's variants), "
                      "mma.sync or wgmma"));
  }
  if (std::string file = impl->cacheFile(deviceName(), "kernels"); !file.empty())
    impl->variantCache = std::make_unique<cudnn::AlgoCache>(file);
}

CudaSession::~CudaSession() {
  const Driver &d = impl->d;
  if (impl->ctx)
    d.cuCtxSetCurrent(impl->ctx);
  if (impl->copyStream) {
    d.cuStreamSynchronize(impl->copyStream); // the staged host tensors may go after this
    impl->staged.clear();
    for (UploadSlot &s : impl->slots) {
      s.buffer.release();
      d.cuEventDestroy(s.filled);
      d.cuEventDestroy(s.drained);
    }
    d.cuStreamDestroy(impl->copyStream);
  }
  impl->arena.release();
  impl->workspace.release();
  impl->staging.release();
  for (auto &[fn, l] : impl->layouts)
    impl->dropGraph(l);
  impl->layouts.clear();
  impl->dnn.reset();
  impl->lt.reset();
  impl->state.clear();
  if (impl->stream)
    d.cuStreamDestroy(impl->stream);
  for (CUmodule m : impl->modules)
    d.cuModuleUnload(m);
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

void CudaSession::setState(const TensorMap &tensors) {
  const Driver &d = impl->d;
  impl->check(d.cuCtxSetCurrent(impl->ctx), "cuCtxSetCurrent");
  impl->check(d.cuStreamSynchronize(impl->stream), "waiting for the stream");
  impl->pending.clear();
  for (const auto &[name, t] : tensors) {
    Tensor host = isFloat(t.dtype()) && t.dtype() != DType::F32 ? t.to(DType::F32) : t;
    auto it = impl->state.find(name);
    if (it == impl->state.end()) {
      it = impl->state.try_emplace(name).first;
      it->second.buffer.d = &d;
      ++impl->stateGeneration;
    }
    Resident &r = it->second;
    if (auto [flat, member] = impl->memberOf(name); flat) {
      Resident &f = impl->flatResident(*flat);
      if (host.dtype() != DType::F32 || numElements(host.shape()) != numElements(member->shape))
        throw Error(str("tensor '", name, "': expected ", shapeStr(member->shape), " f32 (a member "
                        "of flat buffer '", flat->name, "'), got ", shapeStr(host.shape()), " ",
                        dtypeName(host.dtype())));
      r.buffer.release();
      r.view = f.buffer.ptr + static_cast<size_t>(member->offset) * 4;
      r.viewBytes = host.nbytes();
    } else if (r.buffer.bytes != host.nbytes()) {
      r.buffer.release();
      ++impl->stateAllocations;
      CUresult e = d.cuMemAlloc(&r.buffer.ptr, std::max<size_t>(host.nbytes(), 4));
      if (e == 2)
        throw Error(str("tensor '", name, "' (", byteSize(host.nbytes()),
                        "): out of device memory keeping the training state on the GPU"));
      impl->check(e, str("cuMemAlloc for tensor '", name, "'"));
      r.buffer.bytes = host.nbytes();
    }
    r.shape = host.shape();
    r.dtype = host.dtype();
    if (host.nbytes())
      impl->check(d.cuMemcpyHtoD(r.address(), host.raw(), host.nbytes()),
                  str("uploading tensor '", name, "'"));
  }
}

void CudaSession::setReducer(GradientReducer &reducer) { impl->reducer = &reducer; }
void CudaSession::setGraphs(bool on) { impl->graphsOn = on; }

TensorMap CudaSession::state() const {
  const Driver &d = impl->d;
  impl->check(d.cuCtxSetCurrent(impl->ctx), "cuCtxSetCurrent");
  impl->check(d.cuStreamSynchronize(impl->stream), "waiting for the stream");
  TensorMap out;
  for (const auto &[name, r] : impl->state) {
    if (impl->artifact.flatBuffer(name)) // its members are the state
      continue;
    Tensor t(r.dtype, r.shape);
    if (t.nbytes())
      impl->check(d.cuMemcpyDtoH(t.raw(), r.address(), t.nbytes()),
                  str("downloading tensor '", name, "'"));
    out.emplace(name, std::move(t));
  }
  return out;
}

void CudaSession::commit() {
  const Driver &d = impl->d;
  for (const Pending &p : impl->pending) {
    const Resident &r = impl->state.at(p.name);
    if (p.from != r.address() && r.bytes())
      impl->check(d.cuMemcpyDtoDAsync(r.address(), p.from, r.bytes(), impl->stream),
                  str("updating tensor '", p.name, "' on the device"));
  }
  impl->pending.clear();
}

size_t CudaSession::arenaBytes() const { return impl->arena.bytes; }

void CudaSession::releaseMemory() {
  impl->check(impl->d.cuCtxSetCurrent(impl->ctx), "cuCtxSetCurrent");
  impl->finishCopies();
  impl->check(impl->d.cuStreamSynchronize(impl->stream), "waiting for the stream");
  impl->pending.clear(); // they lived in the arena
  impl->staged.clear();  // they lived in the slots: their runs upload them
  impl->arena.release();
  impl->workspace.release();
  impl->staging.release();
  for (UploadSlot &s : impl->slots)
    s.buffer.release();
}
size_t CudaSession::workspaceBytes() const { return impl->workspace.bytes; }
size_t CudaSession::deviceBytes() const {
  return impl->arena.bytes + stateBytes() + impl->workspace.bytes + impl->staging.bytes +
         impl->slots[0].buffer.bytes + impl->slots[1].buffer.bytes;
}

Tensor CudaSession::pinnedTensor(DType dtype, const Shape &shape) {
  const Driver &d = impl->d;
  for (int64_t n : shape)
    if (n < 0)
      return Tensor(dtype, shape); // says what is wrong
  size_t bytes = static_cast<size_t>(numElements(shape)) * dtypeSize(dtype);
  std::lock_guard<std::mutex> lock(impl->pinMutex);
  std::string failure;
  if (!d.cuMemHostAlloc || !d.cuMemFreeHost)
    failure = "the driver has no cuMemHostAlloc";
  void *p = nullptr;
  CUcontext ctx = nullptr;
  if (failure.empty()) {
    // The buffer keeps the primary context alive (it may outlive the session) and may be
    // allocated on any thread (the DataLoader's), so the context is made current here.
    if (CUresult r = d.cuDevicePrimaryCtxRetain(&ctx, impl->device); r != CUDA_SUCCESS)
      failure = str("cuDevicePrimaryCtxRetain: ", d.errorString(r));
    else if (CUresult r = d.cuCtxSetCurrent(ctx); r != CUDA_SUCCESS)
      failure = str("cuCtxSetCurrent: ", d.errorString(r));
    else if (CUresult r = d.cuMemHostAlloc(&p, std::max<size_t>(bytes, 1), 0); r != CUDA_SUCCESS)
      failure = str("cuMemHostAlloc of ", byteSize(bytes), ": ", d.errorString(r));
    if (!failure.empty() && ctx)
      d.cuDevicePrimaryCtxRelease(impl->device);
  }
  if (!failure.empty()) {
    if (impl->pinFailure.empty())
      std::fprintf(stderr, "medrun: warning: host memory is not pinned, uploads to the GPU are "
                           "slower (%s)\n", failure.c_str());
    impl->pinFailure = failure;
    return Tensor(dtype, shape);
  }
  std::memset(p, 0, bytes);
  impl->pinnedBytes += bytes;
  const CUdevice device = impl->device;
  std::shared_ptr<void> memory(p, [&d, ctx, device](void *q) {
    d.cuCtxSetCurrent(ctx);
    d.cuMemFreeHost(q);
    d.cuDevicePrimaryCtxRelease(device);
  });
  return Tensor(dtype, shape, std::move(memory));
}

bool CudaSession::canStage() const {
  const Driver &d = impl->d;
  return d.cuMemcpyHtoDAsync && d.cuStreamWaitEvent && !envFlag("MEDRUN_CUDA_NO_PREFETCH");
}

bool CudaSession::stage(const Function &fn, const std::vector<Tensor> &inputs) {
  const Driver &d = impl->d;
  if (!fn.cuda)
    throw Error(str(impl->artifact.path, ": function '", fn.name, "' has no CUDA plan"));
  if (inputs.size() != fn.inputs.size())
    throw Error(str("staging inputs of function '", fn.name, "': it takes ", fn.inputs.size(),
                    " inputs, got ", inputs.size()));
  Staged s;
  s.fn = &fn;
  s.offset.assign(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &t = inputs[i];
    if (!t.defined())
      continue;
    const ValueInfo &info = fn.values[fn.inputs[i]];
    if (t.shape() != info.shape || t.dtype() != info.dtype)
      throw Error(str("staging input '", inputName(fn, i), "' of function '", fn.name,
                      "': expected ", shapeStr(info.shape), " ", dtypeName(info.dtype), ", got ",
                      shapeStr(t.shape()), " ", dtypeName(t.dtype())));
    s.offset[i] = s.bytes;
    s.bytes += align256(t.nbytes());
  }
  if (impl->staged.size() == impl->slots.size())
    throw Error(str("staging inputs of function '", fn.name, "': ", impl->staged.size(),
                    " staged uploads are already waiting for their runs"));
  if (!canStage() || s.bytes == 0)
    return false;
  s.inputs = inputs;
  impl->check(d.cuCtxSetCurrent(impl->ctx), "cuCtxSetCurrent");
  if (!impl->copyStream) {
    impl->check(d.cuStreamCreate(&impl->copyStream, 1 /* CU_STREAM_NON_BLOCKING */),
                "cuStreamCreate (copy stream)");
    for (UploadSlot &slot : impl->slots) {
      impl->check(d.cuEventCreate(&slot.filled, 2 /* CU_EVENT_DISABLE_TIMING */), "cuEventCreate");
      impl->check(d.cuEventCreate(&slot.drained, 2), "cuEventCreate");
    }
  }
  // The slot is free: the waiting upload, if any, is in the other one, and the runs that
  // read this one have finished (run() returns after its step).
  s.slot = impl->nextSlot;
  UploadSlot &slot = impl->slots[s.slot];
  if (slot.buffer.bytes < s.bytes) {
    impl->finishCopies();
    impl->allocate(slot.buffer, s.bytes, str("the staged inputs of function '", fn.name, "'"));
  }
  impl->staged.push_back(std::move(s));
  impl->nextSlot = 1 - impl->nextSlot;
  return true;
}

std::string CudaSession::uploads() const {
  std::string s = str(impl->stagedRuns, " of ", impl->runs, " runs' inputs copied ahead");
  if (!canStage())
    s += impl->d.cuMemcpyHtoDAsync && impl->d.cuStreamWaitEvent
             ? " (MEDRUN_CUDA_NO_PREFETCH)"
             : " (the driver has no asynchronous copies)";
  else
    s += " on a copy stream";
  std::lock_guard<std::mutex> lock(impl->pinMutex);
  if (impl->pinnedBytes)
    s += str("; ", byteSize(impl->pinnedBytes), " of pinned host memory");
  if (!impl->pinFailure.empty())
    s += str("; pageable host memory (", impl->pinFailure, ")");
  return s;
}
std::string CudaSession::convolutions() const {
  return impl->gemmBackend.empty() ? impl->convBackend
                                   : str(impl->convBackend, "; ", impl->gemmBackend);
}

std::string CudaSession::convolutions(const Function &fn) const {
  auto it = impl->layouts.find(&fn);
  if (it == impl->layouts.end() || it->second.runs == 0)
    return "not run yet";
  const Layout &l = it->second;
  int gemms = 0, convs = 0, kernels = 0;
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    if (!convView(fn, fn.ops[i]))
      continue;
    if (i < l.gemms.size() && l.gemms[i])
      ++gemms;
    else if (i < l.convs.size() && l.convs[i])
      ++convs;
    else
      ++kernels;
  }
  return str(gemms, " through cuBLASLt, ", convs, " through cuDNN, ", kernels,
             " through generated kernels");
}

std::string CudaSession::variants(const Function &fn) const {
  size_t steps = 0, variant = 0;
  for (const CudaStep &s : fn.cuda->steps) {
    if (s.kind != CudaStep::Kind::Launch || s.variants.empty())
      continue;
    ++steps;
    auto v = impl->variantOf.find(&s);
    variant += v != impl->variantOf.end() && v->second != s.kernel;
  }
  if (!steps)
    return "none";
  const char *mode = impl->mma == Impl::Mma::Auto      ? "measured"
                     : impl->mma == Impl::Mma::Wgmma   ? "MEDRUN_MMA=wgmma"
                                                       : "MEDRUN_MMA=mma.sync";
  return str(variant, " of ", steps, " launches run their sm_90a variant (", mode,
             impl->sm90aNote.empty() ? std::string() : str("; not loaded: ", impl->sm90aNote), ")");
}

std::string CudaSession::graphs(const Function &fn) const {
  auto it = impl->layouts.find(&fn);
  if (it == impl->layouts.end() || it->second.runs == 0)
    return "not run yet";
  const Layout &l = it->second;
  if (l.graph)
    return "one CUDA graph per run (captured on run 2)";
  return l.graphNote.empty() ? "launched one by one so far (captured on run 2)"
                             : str("launched one by one (", l.graphNote, ")");
}

size_t CudaSession::stateBytes() const {
  size_t n = 0;
  for (const auto &[name, r] : impl->state)
    n += r.buffer.bytes; // members own nothing: their flat buffer is counted
  return n;
}

std::string profileKey(const Function &fn, const OpInfo &op) {
  if (op.kind == "fusion" && op.body) // one generated kernel per template instance
    return "fusion:" + op.body->fusionTemplate;
  if (op.kind == "shift_sum") // forward, or the input gradient (mirrored)
    return op.boolAttr("mirrored") ? "shift_sum mirrored" : op.kind;
  if (op.kind != "conv3d" && op.kind != "conv3d_transpose" && op.kind != "conv3d_grad_weight")
    return op.kind;
  const int w = op.kind == "conv3d_grad_weight" ? op.results.at(0) : op.single("weight");
  const Shape &ws = fn.values.at(w).shape; // O × I/groups × k × k × k
  const int64_t groups = op.intAttr("groups");
  if (ws.size() != 5)
    return op.kind;
  if (groups > 1 && ws[1] == 1)
    return op.kind + " depthwise";
  if (ws[2] == 1 && ws[3] == 1 && ws[4] == 1)
    return op.kind + " 1x1x1";
  return str(op.kind, " ", ws[2], "x", ws[3], "x", ws[4]);
}

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
  impl->pending.clear(); // a previous run's assignments not committed are dropped

  // Host tensors to upload into buffers: inputs, then parameters that are not resident.
  std::vector<std::pair<int, Tensor>> uploads;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo &info = fn.values[fn.inputs[i]];
    const Tensor &t = inputs[i];
    if (t.shape() != info.shape || isFloat(info.dtype) != isFloat(t.dtype()) ||
        (!isFloat(info.dtype) && t.dtype() != info.dtype))
      throw Error(str("function '", fn.name, "' argument arg", i, ": expected ",
                      shapeStr(info.shape), " ", dtypeName(info.dtype), ", got ",
                      shapeStr(t.shape()), " ", dtypeName(t.dtype())));
    uploads.emplace_back(fn.inputs[i], t);
  }
  // Inputs staged for this run (the same tensors): uploaded ahead into a slot, moved into
  // place below. A run of other tensors uploads them itself, unless they were staged for a
  // later run or only some of them were staged.
  Staged *ahead = nullptr;
  for (size_t k = 0; k < impl->staged.size(); ++k) {
    Staged &st = impl->staged[k];
    if (st.fn != &fn)
      continue;
    int same = 0, other = 0;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (st.inputs[i].defined())
        ++(inputs[i].raw() == st.inputs[i].raw() && inputs[i].shape() == st.inputs[i].shape() &&
                   inputs[i].dtype() == st.inputs[i].dtype()
               ? same
               : other);
    if (same == 0)
      continue;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (other && st.inputs[i].defined() && inputs[i].raw() != st.inputs[i].raw())
        throw Error(str("function '", fn.name, "' input '", inputName(fn, i),
                        "': not the tensor staged with the run's other inputs"));
    if (k != 0 || impl->staged.front().fn != &fn)
      throw Error(str("function '", fn.name, "': run with inputs staged for a later run (runs "
                      "use staged inputs in the order they were staged)"));
    ahead = &st;
    break;
  }
  for (const ValueInfo &v : fn.values)
    if (isFloat(v.dtype) && v.dtype != DType::F32)
      throw Error(str("function '", fn.name, "' has ", dtypeName(v.dtype),
                      " values; the CUDA backend runs programs of f32 values (mixed-precision "
                      "steps store bf16 or f16 on the device by their plan)"));
  for (const CudaStep &s : plan.steps) {
    if (s.kind != CudaStep::Kind::Param)
      continue;
    const ValueInfo &info = fn.values[s.value];
    if (auto r = impl->state.find(s.name); r != impl->state.end()) {
      if (r->second.shape != info.shape || r->second.dtype != DType::F32)
        throw Error(str("parameter '", s.name, "': expected ", shapeStr(info.shape), " f32, the "
                        "device holds ", shapeStr(r->second.shape), " ", dtypeName(r->second.dtype)));
      continue;
    }
    if (const FlatBuffer *flat = a.flatBuffer(s.name)) { // its members, laid out
      uploads.emplace_back(s.value, gatherFlat(*flat, params, DType::F32));
      continue;
    }
    auto it = params.find(s.name);
    if (it == params.end())
      throw Error(str(fn.ops[s.op].describe(), ": parameter '", s.name, "' is missing"));
    if (it->second.shape() != info.shape || !isFloat(it->second.dtype()))
      throw Error(str("parameter '", s.name, "': expected ", shapeStr(info.shape), ", got ",
                      shapeStr(it->second.shape()), " ", dtypeName(it->second.dtype())));
    uploads.emplace_back(s.value, it->second);
  }

  Layout &l = impl->layout(fn);
  impl->reserveArena(fn, l);
  const CUdeviceptr base = impl->arena.ptr;
  const std::function<uint64_t(int)> ptr = [&](int id) -> uint64_t {
    int h = l.home[id];
    if (!l.resident[h].empty())
      return impl->state.at(l.resident[h]).address();
    return base + l.offset[h] + l.shift[id];
  };
  impl->chooseVariants(fn, l, ptr);
  if (impl->dnn || impl->lt) {
    impl->chooseAlgorithms(fn, l, ptr);
    if (impl->workspace.bytes < l.workspaceBytes)
      impl->allocate(impl->workspace, l.workspaceBytes,
                     str("the convolution workspace of function '", fn.name, "'"));
  }
  if (envFlag("MEDRUN_CUDA_POISON"))
    impl->check(d.cuMemsetD32(base, 0x7fc00000u, l.arenaBytes / 4), "cuMemsetD32 (poison)");
  // f32 → bf16/f16 on the device: f32 inputs of such values are copied as they are into a
  // staging buffer and converted by the module's med_f32_to_bf16/_f16 (converting 200 MB of
  // batch on one host core took longer than the copy); f32 resident parameters likewise.
  std::vector<std::pair<CUdeviceptr, int>> conversions; // (f32 source, bf16/f16 value)
  size_t staged = 0;
  auto onDevice = [&](const Tensor &host, int id) { // converted by a kernel
    return host.dtype() == DType::F32 && (l.type[id] == DType::BF16 || l.type[id] == DType::F16);
  };
  for (auto &[id, host] : uploads)
    if (onDevice(host, id))
      staged += align256(host.nbytes());
  if (impl->staging.bytes < staged)
    impl->allocate(impl->staging, staged, "the staging buffer of bf16/f16 inputs");
  staged = 0;
  if (ahead) { // the compute stream waits for the slot's copies (issued now if not yet)
    if (!ahead->issued)
      impl->issue(*ahead);
    impl->check(d.cuStreamWaitEvent(impl->stream, impl->slots[ahead->slot].filled, 0),
                "cuStreamWaitEvent (staged inputs)");
  }
  for (size_t k = 0; k < uploads.size(); ++k) {
    auto &[id, host] = uploads[k];
    CUdeviceptr to = ptr(id);
    const Tensor *t = &host;
    Tensor converted;
    if (onDevice(host, id)) {
      to = impl->staging.ptr + staged;
      staged += align256(host.nbytes());
      conversions.emplace_back(to, id);
    } else if (host.dtype() != l.type[id]) {
      converted = host.to(l.type[id]);
      t = &converted;
    }
    if (k < inputs.size() && ahead && ahead->inputs[k].defined()) {
      // Staged with the input's exact dtype: stored as it is, or converted on the device.
      if (t->nbytes())
        impl->check(d.cuMemcpyDtoDAsync(to, impl->slots[ahead->slot].buffer.ptr + ahead->offset[k],
                                        t->nbytes(), impl->stream),
                    str("moving staged input '", inputName(fn, k), "' of function '", fn.name,
                        "' into place"));
      continue;
    }
    if (t->nbytes())
      impl->check(d.cuMemcpyHtoD(to, t->raw(), t->nbytes()),
                  str("uploading value ", id, " of function '", fn.name, "'"));
  }
  if (ahead) // the slot may be refilled after this point of the compute stream
    impl->check(d.cuEventRecord(impl->slots[ahead->slot].drained, impl->stream),
                "cuEventRecord (staged inputs)");
  for (auto &[name, id] : l.residentCopies)
    conversions.emplace_back(impl->state.at(name).address(), id);
  const int statusId = static_cast<int>(fn.values.size());
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
  // Everything the GPU does for the step, in stream order: bf16 conversions, then the plan.
  auto enqueue = [&] {
    for (auto &[from, id] : conversions) {
      CUfunction f = impl->function(
          l.type[id] == DType::F16 ? "med_f32_to_f16" : "med_f32_to_bf16", fn.ops.at(0));
      CUdeviceptr src = from, dst = ptr(id);
      long long n = numElements(fn.values[id].shape);
      void *args[] = {&src, &dst, &n, nullptr};
      impl->check(d.cuLaunchKernel(f, static_cast<unsigned>((n + 255) / 256), 1, 1, 256, 1, 1, 0,
                                   impl->stream, args, nullptr),
                  str("converting value ", id, " of function '", fn.name, "' to ",
                      dtypeName(l.type[id])));
    }
    int libraryOp = -1; // the op whose cuDNN or cuBLASLt call was enqueued last
    // The buckets handed to the reducer that the stream has not joined yet (device byte
    // ranges): a reducer may sum them on a stream of its own while backward goes on, so the
    // first kernel that touches one waits for the sums on the device (join).
    std::vector<std::pair<uint64_t, uint64_t>> reducing;
    auto bytes = [&](int id) -> uint64_t {
      return id < static_cast<int>(fn.values.size())
                 ? numElements(fn.values[id].shape) * dtypeSize(l.type[id])
                 : 0;
    };
    for (const CudaStep &s : plan.steps) {
      if (s.kind == CudaStep::Kind::AllReduce) {
        impl->allReduce(fn, l, s, ptr);
        for (int id : s.args)
          reducing.emplace_back(ptr(id), ptr(id) + bytes(id));
        continue;
      }
      if (s.kind != CudaStep::Kind::Launch)
        continue;
      for (size_t a = 0; a < s.args.size() && !reducing.empty(); ++a)
        for (auto [lo, hi] : reducing)
          if (ptr(s.args[a]) < hi && lo < ptr(s.args[a]) + bytes(s.args[a])) {
            impl->reducer->join(impl->stream);
            reducing.clear();
            break;
          }
      const OpInfo &op = fn.ops[s.op];
      const cublaslt::Gemm *gemm = l.gemms.empty() ? nullptr : l.gemms[s.op].get();
      if (gemm || (!l.convs.empty() && l.convs[s.op])) {
        if (libraryOp == s.op)
          continue; // the op's other kernels: the one call replaces them all
        libraryOp = s.op;
        if (gemm)
          gemm->run(*impl->lt, impl->stream, impl->gemmBuffers(fn, l, ptr, *gemm, op));
        else
          l.convs[s.op]->run(*impl->dnn, ptr, impl->workspace.ptr);
        if (syncEach)
          if (CUresult r = d.cuStreamSynchronize(impl->stream); r != CUDA_SUCCESS)
            throw Error(str(gemm ? gemm->describe() : l.convs[s.op]->describe(), " in function '",
                            fn.name, "': ", d.errorString(r)));
        if (profile) {
          record();
          timedOps.push_back(s.op);
        }
        continue;
      }
      CUresult r = impl->launch(s, op, ptr);
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
    if (!reducing.empty()) // what follows the plan (downloads, commits) sees the sums
      impl->reducer->join(impl->stream);
  };
  // A CUDA graph replays the step with one launch; captured on the second run (the first
  // measures cuDNN's algorithms), recaptured when a buffer it uses has moved.
  const std::array<uint64_t, 4> buffers{impl->arena.ptr, impl->workspace.ptr, impl->staging.ptr,
                                        impl->stateAllocations};
  if (l.graph && l.graphBuffers != buffers)
    impl->dropGraph(l);
  const bool graphs = d.cuGraphLaunch && !profile && !syncEach && impl->graphsOn &&
                      !envFlag("MEDRUN_CUDA_NO_GRAPH");
  if (!graphs && impl->graphsOn && !l.captureFailed)
    l.graphNote = !d.cuGraphLaunch ? "the driver has no graph API"
                  : profile         ? "profiled runs launch one by one"
                                    : "MEDRUN_CUDA_SYNC or MEDRUN_CUDA_NO_GRAPH";
  if (graphs && !l.graph && l.runs > 0 && !l.captureFailed) {
    impl->check(d.cuStreamBeginCapture(impl->stream, 1 /* thread-local mode */),
                str("capturing function '", fn.name, "' as a CUDA graph"));
    try {
      enqueue();
    } catch (...) {
      void *broken = nullptr;
      d.cuStreamEndCapture(impl->stream, &broken);
      if (broken)
        d.cuGraphDestroy(broken);
      throw;
    }
    void *g = nullptr;
    CUresult r = d.cuStreamEndCapture(impl->stream, &g);
    if (r == CUDA_SUCCESS)
      r = d.cuGraphInstantiateWithFlags(&l.graph, g, 0);
    if (g)
      d.cuGraphDestroy(g);
    if (r != CUDA_SUCCESS) { // nothing of the capture ran: run the step as it is
      l.graph = nullptr;
      l.captureFailed = true;
      l.graphNote = str("capture failed: ", d.errorString(r));
    } else {
      l.graphBuffers = buffers;
    }
  }
  if (graphs && l.graph)
    impl->check(d.cuGraphLaunch(l.graph, impl->stream), str("launching the graph of '", fn.name, "'"));
  else
    enqueue();
  ++l.runs;
  ++impl->runs;
  // Uploads staged for later runs start now, on the copy stream, while this step runs: not
  // earlier, so that this run's own uploads above did not queue behind them.
  for (Staged &later : impl->staged)
    if (!later.issued)
      impl->issue(later);
  if (CUresult r = d.cuStreamSynchronize(impl->stream); r != CUDA_SUCCESS)
    throw Error(str("function '", fn.name, "' failed on the GPU: ", d.errorString(r),
                    " (MEDRUN_CUDA_SYNC=1 finds the kernel)"));
  if (ahead) { // the compute stream waited for its copies: done, its host tensors may go
    impl->staged.pop_front();
    ++impl->stagedRuns;
  }
  if (profile)
    for (size_t i = 0; i < timedOps.size(); ++i) {
      float ms = 0;
      impl->check(d.cuEventElapsedTime(&ms, events[i], events[i + 1]), "cuEventElapsedTime");
      (*profile)[profileKey(fn, fn.ops[timedOps[i]])] += ms / 1000.0;
    }
  uint32_t status = 0;
  impl->check(d.cuMemcpyDtoH(&status, ptr(statusId), 4), "reading the status word");
  if (status != 0) {
    const OpInfo &op = fn.ops.at(status - 1);
    auto why = [](const std::string &kind) -> const char * {
      return kind.rfind("dice_ce", 0) == 0 ? "a target voxel is not a class index"
             : kind == "adamw"             ? "the step is below 1"
                                           : nullptr;
    };
    const char *reason = why(op.kind);
    if (op.kind == "fusion" && op.body) // the body op that can fail
      for (const OpInfo &inner : op.body->ops)
        if (!reason)
          reason = why(inner.kind);
    throw Error(str(op.describe(), " in function '", fn.name, "': invalid data on the GPU (",
                    reason ? reason : "see docs/architecture.md", ")"));
  }

  auto download = [&](int id) {
    const ValueInfo &info = fn.values[id];
    Tensor t(l.type[id], info.shape);
    if (t.nbytes())
      impl->check(d.cuMemcpyDtoH(t.raw(), ptr(id), t.nbytes()),
                  str("downloading value ", id, " of function '", fn.name, "'"));
    return t;
  };
  std::vector<Tensor> outputs;
  for (int id : fn.outputs)
    outputs.push_back(download(id));
  for (const CudaStep &s : plan.steps) {
    if (s.kind != CudaStep::Kind::Assign)
      continue;
    bool resident = impl->state.count(s.name) != 0;
    if (resident && l.type[s.value] != impl->state.at(s.name).dtype)
      throw Error(str(fn.ops[s.op].describe(), ": assigns a ", dtypeName(l.type[s.value]),
                      " value to the f32 tensor '", s.name, "'"));
    if (resident)
      impl->pending.push_back({s.name, ptr(s.value)});
    if (updates && a.flatBuffer(s.name)) // each member its slice
      scatterFlat(*a.flatBuffer(s.name), download(s.value), *updates);
    else if (updates)
      (*updates)[s.name] = download(s.value);
    else if (!resident)
      throw Error(str(fn.ops[s.op].describe(), ": assigns parameter '", s.name,
                      "', but the caller takes no parameter updates"));
  }
  return outputs;
}

std::vector<Tensor> runCuda(const Artifact &artifact, const Function &fn,
                            const std::vector<Tensor> &inputs, const TensorMap &params,
                            std::map<std::string, double> *profile, TensorMap *updates) {
  CudaSession session(artifact);
  return session.run(fn, inputs, params, profile, updates);
}

std::unique_ptr<CudaSession> openCudaSession(const Artifact &artifact, const Function &fn,
                                             FILE *console) {
  if (!artifact.cuda)
    throw Error(str(artifact.path, ": compiled without CUDA kernels (medc compile --target cuda)"));
  auto gpu = std::make_unique<CudaSession>(artifact);
  std::fprintf(console, "device: %s%s; convolutions: %s\n", gpu->deviceName().c_str(),
               gpu->loadedFromPtx() ? " (kernels from PTX)" : "", gpu->convolutions().c_str());
  return gpu;
}

} // namespace medrun
