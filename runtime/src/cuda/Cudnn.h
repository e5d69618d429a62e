//===- Cudnn.h - convolutions of a plan as cuDNN calls -----------------------------===//
//
// The CUDA executor runs conv3d, conv3d_transpose and conv3d_grad_weight through cuDNN
// when libcudnn.so.9 loads and a handle can be made; otherwise it launches the generated
// kernels the plan holds for them (same results, slower). cuDNN is opened with dlopen, like
// libcuda: the runtime builds without the CUDA toolkit (the GPU machine has cuDNN only as
// shared libraries) and starts where cuDNN is absent. The legacy convolution API is used:
// one call per op, with algorithms chosen per shape.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_CUDA_CUDNN_H
#define MEDRUN_CUDA_CUDNN_H

#include "medrun/Artifact.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace medrun::cudnn {

/// How algorithms are chosen (MEDRUN_CUDNN): `benchmark` measures every algorithm once per
/// shape (cudnnFind*Ex) and caches the choice on disk; `deterministic` does the same among
/// algorithms whose results do not depend on scheduling (bitwise reproducible runs);
/// `heuristic` takes cuDNN's first suggestion without measuring; `off` uses the generated
/// kernels.
enum class Mode { Benchmark, Deterministic, Heuristic, Off };
Mode modeFromEnv();
const char *modeName(Mode m);

/// True if cuDNN loads; otherwise false with the reason.
bool available(std::string *why);
/// "9.19.0"
std::string version();

/// Whether cuDNN runs `op`: a convolution whose operands are stored (`types`, per value id
/// on the device) all in f32, all in bf16 or all in f16.
bool handles(const OpInfo &op, const std::vector<DType> &types);

/// Chosen algorithms by shape, kept in a text file (one "key algo workspace" line each; the
/// cuBLASLt choices use -1 for "cuDNN is faster").
class AlgoCache {
public:
  explicit AlgoCache(std::string path);
  bool find(const std::string &key, int *algo, size_t *workspace) const;
  void put(const std::string &key, int algo, size_t workspace); ///< and saves the file
  const std::string &path() const { return file; }

private:
  std::string file;
  std::map<std::string, std::pair<int, size_t>> entries;
};

/// A cuDNN handle on a stream.
class Handle {
public:
  explicit Handle(void *stream); ///< throws Error when cuDNN cannot make one
  ~Handle();
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  void *get() const { return handle; }

private:
  void *handle = nullptr;
};

/// One convolution op of a function as a cuDNN call (plus cudnnAddTensor for a bias).
class Conv {
public:
  Conv(const Function &fn, const OpInfo &op, const std::vector<DType> &types);
  ~Conv();
  Conv(const Conv &) = delete;
  Conv &operator=(const Conv &) = delete;

  /// Chooses the algorithm: from the cache, else by `mode`, measuring on the buffers `ptr`
  /// gives (their contents are overwritten) with at most `budget` bytes of workspace.
  void select(const Handle &h, Mode mode, AlgoCache &cache,
              const std::function<uint64_t(int)> &ptr, uint64_t workspace, size_t budget);
  size_t workspaceBytes() const { return wsBytes; }
  /// Enqueues the op on the handle's stream.
  void run(const Handle &h, const std::function<uint64_t(int)> &ptr, uint64_t workspace) const;
  /// "'med.conv3d' at f:1:2 (input 2x32x8x8x8, weight 64x32x3x3x3 -> 2x64x8x8x8)"
  const std::string &describe() const { return what; }
  /// The shape key its algorithm is cached under.
  const std::string &cacheKey() const { return key; }

private:
  struct Desc;
  int direction = 0;         // 0 forward, 1 backward data, 2 backward filter
  int a = -1, b = -1, c = -1; // value ids in cuDNN's argument order; c is written
  int bias = -1;
  std::unique_ptr<Desc> desc;
  std::string key, what;
  int algo = -1;
  size_t wsBytes = 0;
  bool f32 = false; // an f32 program: no FFT or Winograd algorithm (Cudnn.cpp: directSums)
};

} // namespace medrun::cudnn

#endif // MEDRUN_CUDA_CUDNN_H
