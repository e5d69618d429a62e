//===- Cuda.h - running a function of an artifact on a CUDA GPU -------------------===//
//
// The CUDA backend's runtime half (docs/architecture.md, "CUDA backend"). libcuda is
// loaded with dlopen, never linked, so medrun starts on machines without a driver and says
// clearly that there is no GPU. The kernels come compiled in the artifact (medc compile
// --target cuda): the sm_90 cubin, or the PTX when the cubin does not load.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_CUDA_H
#define MEDRUN_CUDA_H

#include "medrun/Artifact.h"
#include "medrun/GradientReducer.h"
#include "medrun/Tensor.h"

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace medrun {

/// True if libcuda loads and reports a GPU; otherwise false with the reason in `why`.
bool cudaAvailable(std::string *why = nullptr);

/// The GPU that CudaSessions created from now on open, among those the driver reports
/// (default 0): a rank of a data-parallel job uses its own (rankDevice, Distributed.h).
void setCudaDevice(int ordinal);

/// The key under which CudaSession::run's profile adds an op's time: its kind; for a
/// convolution also its family ("conv3d 1x1x1", "conv3d depthwise", "conv3d 3x3x3"), which
/// decides which library and algorithm run it; for a shift-sum whether it is `mirrored`
/// ("shift_sum", "shift_sum mirrored": forward and input gradient); for a fusion its template
/// ("fusion:elementwise", one key per template), whose generated kernel runs it.
std::string profileKey(const Function &fn, const OpInfo &op);

/// A CUDA context on GPU 0 (setCudaDevice) with the artifact's kernels loaded, for running its functions
/// repeatedly. Throws Error "no CUDA driver or GPU found; use --device cpu (...)" where
/// there is none, and an Error naming the problem when the artifact has no CUDA kernels or
/// neither the cubin nor the PTX loads.
class CudaSession {
public:
  explicit CudaSession(const Artifact &artifact);
  ~CudaSession();
  CudaSession(const CudaSession &) = delete;
  CudaSession &operator=(const CudaSession &) = delete;

  /// Runs `fn` as runCpu does (same checks of inputs and parameters, f32 only): uploads
  /// inputs and the parameters the function reads that are not resident (setState),
  /// launches the plan on one stream with no host synchronisation between kernels, then
  /// downloads the outputs and, with `updates`, the values the function assigns. Values it
  /// assigns to resident tensors wait on the device for commit(). With `profile`, adds the
  /// seconds each op's kernels took (CUDA events) to it under the op's profileKey. Errors
  /// name the kernel, the op and the CUDA error.
  std::vector<Tensor> run(const Function &fn, const std::vector<Tensor> &inputs,
                          const TensorMap &params, std::map<std::string, double> *profile = nullptr,
                          TensorMap *updates = nullptr);

  /// A zero-filled host tensor in page-locked memory (cuMemHostAlloc): the GPU copies from
  /// it asynchronously at full bus speed. It frees itself (cuMemFreeHost) when its last copy
  /// goes, also after the session (it keeps the context alive). Where pinning fails it is
  /// ordinary memory, with a one-line warning on stderr (once per session). Thread-safe, so
  /// it can serve as the DataLoader's BatchAllocator.
  Tensor pinnedTensor(DType dtype, const Shape &shape);

  /// Starts uploading inputs of a later run of `fn` while the current work runs: `inputs`
  /// has one entry per input of `fn`, undefined where the run uploads the input itself.
  /// Each defined tensor must have the input's exact shape and dtype (Error naming the input
  /// otherwise) and must stay unchanged until that run returns. The copies go to one of two
  /// device slots on a second stream, issued as soon as the next run has launched its step
  /// (so they overlap it); the run that gets the same tensors waits for them on the device
  /// and uses them (a run of other tensors uploads them itself). Staged inputs must be run
  /// in the order they were staged (Error otherwise); at most two are waiting. Returns
  /// false, staging nothing, where canStage() is false.
  bool stage(const Function &fn, const std::vector<Tensor> &inputs);
  /// False where MEDRUN_CUDA_NO_PREFETCH=1 or the driver lacks asynchronous copies.
  bool canStage() const;
  /// How inputs reached the GPU so far, e.g. "2 of 3 runs' inputs copied ahead on a copy
  /// stream; batches in pinned host memory (1.2 MiB)".
  std::string uploads() const;

  /// Keeps `tensors` on the device (uploaded now, as f32 where floating): runs read
  /// parameters of these names from there. Replaces resident tensors of the same names.
  void setState(const TensorMap &tensors);
  /// The resident tensors, downloaded (e.g. for a checkpoint).
  TensorMap state() const;
  /// Applies the last run's assignments to the resident tensors (on the device, in stream
  /// order). Not calling it (a skipped step) leaves them as they were; the next run drops
  /// assignments not committed.
  void commit();

  /// What sums the gradient buckets of a data-parallel step (its all_reduce steps, handed
  /// a device pointer and the step's stream, inside the step's CUDA graph); by default
  /// singleRankReducer(). It must outlive the session's runs.
  void setReducer(GradientReducer &reducer);
  /// Off: the following runs launch one by one even where a graph would replay them (events
  /// a reducer records to time its sums are read back only so). On by default.
  void setGraphs(bool on);

  /// Frees the arena, the cuDNN workspace and the slots of staged inputs (the next run
  /// allocates them again), e.g. to leave the GPU to another library between runs; waits
  /// for copies in flight first and drops staged inputs not run yet (their runs upload
  /// them). Resident state stays.
  void releaseMemory();

  size_t arenaBytes() const; ///< device memory of the values of the largest plan run so far
  size_t stateBytes() const; ///< device memory of the resident tensors
  size_t workspaceBytes() const; ///< device memory of the cuDNN workspace
  /// All device memory the session holds: arena, state, workspace, the staging buffer of
  /// f32 inputs converted to bf16 on the device and the slots of staged inputs.
  size_t deviceBytes() const;
  /// What runs the convolutions: "cuDNN 9.19.0 (benchmark)", or "generated kernels (why)",
  /// then what runs the 1x1x1 ones: "; 1x1x1 through cuBLASLt 13.0.2 (benchmark)", "; no
  /// cuBLASLt (why)". MEDRUN_CUDNN=benchmark|deterministic|heuristic|off and
  /// MEDRUN_CUBLASLT=on|off choose (docs/architecture.md).
  std::string convolutions() const;
  /// How many of `fn`'s convolutions run through cuBLASLt, cuDNN and the generated kernels
  /// (known after its first run): "2 through cuBLASLt, 5 through cuDNN, 0 through ...".
  std::string convolutions(const Function &fn) const;
  /// How `fn`'s runs reach the GPU: "one CUDA graph per run ..." or "launched one by one
  /// (why)". MEDRUN_CUDA_NO_GRAPH=1 turns graphs off.
  std::string graphs(const Function &fn) const;
  /// Which kernels `fn`'s launches with variants run (known after its first run): "3 of 12
  /// launches run their sm_90a variant (measured)", or "none" when no step has variants.
  /// MEDRUN_MMA=auto|mma.sync|wgmma chooses (docs/architecture.md).
  std::string variants(const Function &fn) const;

  std::string deviceName() const;
  bool loadedFromPtx() const; ///< the cubin did not load and the driver compiled the PTX

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// One-shot form of CudaSession::run, with runCpu's interface (precision f32).
std::vector<Tensor> runCuda(const Artifact &artifact, const Function &fn,
                            const std::vector<Tensor> &inputs, const TensorMap &params,
                            std::map<std::string, double> *profile = nullptr,
                            TensorMap *updates = nullptr);

/// A CUDA session for `fn` of the artifact, after checking that the artifact has CUDA
/// kernels (Error saying what to change otherwise); prints the device to `console`.
std::unique_ptr<CudaSession> openCudaSession(const Artifact &artifact, const Function &fn,
                                             FILE *console);

} // namespace medrun

#endif // MEDRUN_CUDA_H
