//===- Cublaslt.h - 1x1x1 convolutions of a plan as cuBLASLt matrix products ------===//
//
// A 1x1x1 convolution (stride 1, no padding, dilation 1, one group) is a matrix product per
// sample: with S = D·H·W and NCDHW tensors, Y[n] (Cout×S) = W (Cout×Cin) · X[n] (Cin×S).
// The CUDA executor runs such convolutions (conv3d, conv3d_transpose, conv3d_grad_weight)
// through cuBLASLt when libcublasLt loads, choosing per shape between it and cuDNN
// (CudaExecutor.cpp, chooseAlgorithms). Like cuDNN, cuBLASLt is opened with dlopen: medrun
// builds without the CUDA toolkit and starts where the library is absent.
// MEDRUN_CUBLASLT=off leaves every convolution to cuDNN or the generated kernels.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_CUDA_CUBLASLT_H
#define MEDRUN_CUDA_CUBLASLT_H

#include "Cudnn.h"
#include "medrun/Artifact.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace medrun::cublaslt {

/// MEDRUN_CUBLASLT: on (the default) or off.
bool enabledFromEnv();

/// True if cuBLASLt loads; otherwise false with the reason.
bool available(std::string *why);
/// "13.0.2"
std::string version();

/// Whether cuBLASLt runs `op`: a 1x1x1 conv3d, conv3d_transpose or conv3d_grad_weight with
/// stride 1, no padding, dilation 1 and one group, whose operands are stored (`types`, per
/// value id on the device) all in f32, all in bf16 or all in f16.
bool handles(const Function &fn, const OpInfo &op, const std::vector<DType> &types);

/// A cuBLASLt handle (the stream is given per call).
class Handle {
public:
  Handle(); ///< throws Error when cuBLASLt cannot make one
  ~Handle();
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  void *get() const { return handle; }

private:
  void *handle = nullptr;
};

/// What a GEMM needs of the executor when it runs.
struct Buffers {
  std::function<uint64_t(int)> ptr; ///< value id -> device address
  uint64_t workspace = 0;           ///< at least workspaceBytes()
  uint64_t ones = 0;                ///< onesNeeded() ones of the op's type (a bias), else 0
  /// Enqueues the conversion of n f32 values at `from` to the op's type at `to`.
  std::function<void(uint64_t from, uint64_t to, int64_t n)> narrow;
};

/// One 1x1x1 convolution op as cuBLASLt matrix products (the layouts: Cublaslt.cpp).
class Gemm {
public:
  Gemm(const Function &fn, const OpInfo &op, const std::vector<DType> &types);
  ~Gemm();
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;

  /// Asks cuBLASLt's heuristic for up to `max` algorithms needing at most `budget` bytes of
  /// workspace, best first; returns how many it offers (0: cuBLASLt cannot run this shape)
  /// and uses the first.
  int candidates(const Handle &h, size_t budget, int max);
  void use(int candidate); ///< one of those
  int chosen() const { return current; }
  size_t workspaceBytes() const; ///< of the chosen algorithm, with the f32 accumulator
  size_t onesNeeded() const { return ones; }
  DType type() const { return dtype; }
  /// Enqueues the op on `stream`.
  void run(const Handle &h, void *stream, const Buffers &b) const;
  /// "'med.conv3d' at f:1:2 (input 2x32x8x8x8, weight 64x32x1x1x1 -> 2x64x8x8x8)"
  const std::string &describe() const { return what; }
  /// The op's shapes and type, for the cache of choices.
  const std::string &key() const { return shapeKey; }

private:
  struct Product;
  std::unique_ptr<Product> main, bias; // bias: the broadcast of the bias, run first
  int kind = 0;                        // 0 conv3d, 1 conv3d_transpose, 2 conv3d_grad_weight
  int a = -1, b = -1, out = -1, biasId = -1;
  int64_t batch = 1, aStep = 0, bStep = 0; // grad_weight: one product per sample (bytes)
  int64_t outCount = 0;                     // grad_weight: Cout·Cin
  bool accumulate = false; // grad_weight in bf16/f16 over several samples: sums in f32
  size_t ones = 0, accBytes = 0;
  DType dtype = DType::F32;
  int current = -1;
  std::string what, shapeKey;
};

/// Chooses between cuBLASLt's algorithms for `gemm` and, where `cudnnRun` is given (the op's
/// cuDNN call with its algorithm chosen), cuDNN: true if cuBLASLt runs the op.
///  - benchmark: from `cache` if it knows the shape, else measures the heuristic's first
///    few algorithms and cuDNN with `time` (milliseconds per call of what it is given) and
///    keeps the fastest (cached; -1 means cuDNN);
///  - deterministic and heuristic: cuBLASLt's first heuristic algorithm, without measuring
///    (a fixed algorithm gives bitwise identical results run after run on one GPU).
/// False also where cuBLASLt offers no algorithm for the shape.
bool choose(Gemm &gemm, const Handle &h, cudnn::Mode mode, cudnn::AlgoCache &cache, size_t budget,
            const std::function<double(const std::function<void()> &)> &time,
            const std::function<void()> &runGemm, const std::function<void()> *cudnnRun,
            const std::string &rival);

} // namespace medrun::cublaslt

#endif // MEDRUN_CUDA_CUBLASLT_H
