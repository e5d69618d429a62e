//===- Session.h - the CUDA backend's internals, shared by its files -------------===//
//
// Internal to runtime/src/cuda: the driver API loaded with dlopen (Driver.cpp), the buffers
// and layouts of a session, and CudaSession::Impl, whose members are defined by concern:
// CudaExecutor.cpp (the session and a run), Arena.cpp (where buffers live), Staging.cpp
// (uploads ahead of a run), Algorithms.cpp (convolution algorithms and kernel variants).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SRC_CUDA_SESSION_H
#define MEDRUN_SRC_CUDA_SESSION_H

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
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace medrun {
namespace cudaexec {

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
  // Optional: raises a kernel's dynamic shared memory above 48 KiB (a launch that asks for
  // more fails with a message without it).
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
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
const Driver &driver();
/// The device setCudaDevice chose.
int deviceOrdinal();

bool envFlag(const char *name);

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

inline size_t align256(size_t n) { return (n + 255) / 256 * 256; }

std::string inputName(const Function &fn, size_t i);

std::string byteSize(size_t b);

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
  /// The f32 → bf16/f16 conversions before the plan as one launch per storage type: their
  /// segment table on the device (med_f32_to_*_segments) and the table last uploaded.
  std::unique_ptr<DeviceBuffer> conversionTable;
  std::vector<int64_t> conversionHost;
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

} // namespace cudaexec
using namespace cudaexec;

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
  /// Kernels whose dynamic shared memory limit was raised, to how many bytes.
  std::map<CUfunction, uint32_t> sharedLimits;
  /// Lets kernel f (`name`) take `bytes` of dynamic shared memory: above the 48 KiB every
  /// kernel may take, its limit must be raised first (once per kernel).
  void allowShared(CUfunction f, uint32_t bytes, const std::string &name, const OpInfo &op) {
    constexpr uint32_t kDefaultShared = 48 * 1024;
    if (bytes <= kDefaultShared)
      return;
    uint32_t &limit = sharedLimits[f];
    if (limit >= bytes)
      return;
    if (!d.cuFuncSetAttribute)
      throw Error(str("kernel ", name, " of ", op.describe(), " needs ", bytes,
                      " bytes of shared memory, and this driver has no cuFuncSetAttribute to "
                      "allow more than ", kDefaultShared));
    constexpr int kMaxDynamicSharedSizeBytes = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(d.cuFuncSetAttribute(f, kMaxDynamicSharedSizeBytes, static_cast<int>(bytes)),
          str("kernel ", name, " of ", op.describe(), ": allowing ", bytes,
              " bytes of shared memory"));
    limit = bytes;
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

} // namespace medrun

#endif // MEDRUN_SRC_CUDA_SESSION_H
