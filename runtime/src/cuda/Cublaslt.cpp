//===- Cublaslt.cpp - cuBLASLt through dlopen ---------------------------------------===//
//
// cuBLASLt is column-major: a matrix of R rows and C columns with leading dimension ld has
// element (r, c) at r + c·ld. A row-major Cout×S block of an NCDHW tensor (S = D·H·W
// contiguous) is therefore the column-major S×Cout matrix with ld S, its transpose. Each op
// is written so that its output is such a transpose (E = bytes per element):
//
//   conv3d            Y[n]^T (S×Cout)  = X[n]^T (S×Cin, ld S) · W^T (Cin×Cout: W as stored, ld Cin)
//                     m = S, n = Cout, k = Cin; batched over the samples (strides Cin·S and
//                     Cout·S, W with stride 0)
//   conv3d_transpose  dX[n]^T (S×Cin) = dY[n]^T (S×Cout, ld S) · W (Cout×Cin: the stored Cin×Cout
//                     matrix, ld Cin, transposed); m = S, n = Cin, k = Cout; batched likewise
//   conv3d_grad_weight  dW^T (Cin×Cout, ld Cin: dW as stored) = Σ_n X[n] · dY[n]^T:
//                     A = the stored S×Cin matrix of X[n] transposed, B = dY[n]^T (S×Cout, ld S);
//                     m = Cin, n = Cout, k = S; one product per sample, in sample order, the
//                     later ones with beta = 1 (deterministic); bf16/f16 sums over several
//                     samples are kept in f32 in the workspace and rounded once at the end
//
// The bias of conv3d / conv3d_transpose is per output channel, i.e. per column of D.
// cuBLASLt's BIAS epilogue adds a vector per row (m) and D cannot be transposed (TRANSC
// must be N), so the epilogue does not apply to this layout (nor its GELU epilogues: the
// tanh approximation is not the erf GELU the programs use, and the GELU is another op of the
// plan). Instead the bias is broadcast into D by a rank-1 product first, D = ones (S×1) ·
// b^T (1×Cout), and the convolution's product accumulates onto it with beta = 1: the sum
// acc + b is rounded once to D's type, as in the generated kernels.
//
// Compute type CUBLAS_COMPUTE_32F with f32 alpha/beta throughout: f32 tensors are multiplied
// in f32 (no TF32), bf16/f16 tensors on tensor cores with f32 accumulation.
//
//===----------------------------------------------------------------------------------===//
#include "Cublaslt.h"

#include "SharedLibrary.h"
#include "medrun/Error.h"
#include "medrun/Tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

namespace medrun::cublaslt {
namespace {

using Status = int;
using Ptr = void *;
// Values of cublasStatus_t, cudaDataType_t, cublasComputeType_t, cublasOperation_t and the
// attribute enums (cublasLt.h, cublas_api.h, library_types.h of CUDA 12 and 13).
constexpr Status kSuccess = 0, kNotSupported = 15;
constexpr int kR32F = 0, kR16F = 2, kR16BF = 14;
constexpr int kCompute32F = 68;
constexpr int32_t kOpN = 0, kOpT = 1;
constexpr int kDescTransA = 3, kDescTransB = 4;                 // cublasLtMatmulDescAttributes_t
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;    // cublasLtMatrixLayoutAttribute_t
constexpr int kPrefMaxWorkspace = 1, kPrefAlignA = 5;           // ..._B 6, _C 7, _D 8
// cuBLASLt's workspace: enough for its split-K and stream-K kernels (NVIDIA suggests 32 MiB
// on Hopper); fixed, so that its heuristic answers the same for a shape every time.
constexpr size_t kWorkspaceLimit = size_t(32) << 20;
constexpr int kTried = 4; // benchmark: the heuristic's first few algorithms are measured

struct Algo {
  uint64_t data[8];
};
struct HeuristicResult { // cublasLtMatmulHeuristicResult_t
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(HeuristicResult) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

struct Library {
  SharedLibrary lib;
  size_t (*getVersion)() = nullptr;
  const char *(*statusName)(Status) = nullptr;
  Status (*create)(Ptr *) = nullptr;
  Status (*destroy)(Ptr) = nullptr;
  Status (*descCreate)(Ptr *, int, int) = nullptr;
  Status (*descDestroy)(Ptr) = nullptr;
  Status (*descSet)(Ptr, int, const void *, size_t) = nullptr;
  Status (*layoutCreate)(Ptr *, int, uint64_t, uint64_t, int64_t) = nullptr;
  Status (*layoutDestroy)(Ptr) = nullptr;
  Status (*layoutSet)(Ptr, int, const void *, size_t) = nullptr;
  Status (*prefCreate)(Ptr *) = nullptr;
  Status (*prefDestroy)(Ptr) = nullptr;
  Status (*prefSet)(Ptr, int, const void *, size_t) = nullptr;
  Status (*heuristic)(Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, int, HeuristicResult *, int *) = nullptr;
  Status (*matmul)(Ptr, Ptr, const void *, const void *, Ptr, const void *, Ptr, const void *,
                   const void *, Ptr, void *, Ptr, const Algo *, void *, size_t, void *) = nullptr;
};

const Library &library() {
  static Library l;
  static std::once_flag once;
  std::call_once(once, [] {
    // CUDA 13's cuBLASLt, else CUDA 12's (tests: a missing library, a stand-in).
    l.lib.open("MEDRUN_LIBCUBLASLT", "libcublasLt.so.13");
    if (!l.lib.handle && !(std::getenv("MEDRUN_LIBCUBLASLT") && *std::getenv("MEDRUN_LIBCUBLASLT"))) {
      const std::string first = l.lib.error;
      l.lib.error.clear();
      l.lib.open("MEDRUN_LIBCUBLASLT", "libcublasLt.so.12");
      if (!l.lib.handle)
        l.lib.error = str(first, "; ", l.lib.error);
    }
    if (!l.lib.handle)
      return;
    auto get = [&](auto &fn, const char *symbol) { l.lib.require(fn, {symbol}); };
    get(l.getVersion, "cublasLtGetVersion");
    get(l.statusName, "cublasLtGetStatusName");
    get(l.create, "cublasLtCreate");
    get(l.destroy, "cublasLtDestroy");
    get(l.descCreate, "cublasLtMatmulDescCreate");
    get(l.descDestroy, "cublasLtMatmulDescDestroy");
    get(l.descSet, "cublasLtMatmulDescSetAttribute");
    get(l.layoutCreate, "cublasLtMatrixLayoutCreate");
    get(l.layoutDestroy, "cublasLtMatrixLayoutDestroy");
    get(l.layoutSet, "cublasLtMatrixLayoutSetAttribute");
    get(l.prefCreate, "cublasLtMatmulPreferenceCreate");
    get(l.prefDestroy, "cublasLtMatmulPreferenceDestroy");
    get(l.prefSet, "cublasLtMatmulPreferenceSetAttribute");
    get(l.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    get(l.matmul, "cublasLtMatmul");
    // CUBLAS_VERSION = major·10000 + minor·100 + patch since cuBLAS 11.
    if (l.lib.error.empty() && l.getVersion() < 120000)
      l.lib.error = str(l.lib.name, " is cuBLASLt version ", l.getVersion(),
                        "; medrun needs cuBLASLt 12 or 13");
  });
  return l;
}

void check(Status s, const std::string &call, const std::string &what) {
  if (s != kSuccess)
    throw Error(str(call, " failed for ", what, ": ",
                    library().statusName ? library().statusName(s) : "cuBLASLt error", " (", s, ")"));
}

int dataType(DType t) { return t == DType::BF16 ? kR16BF : t == DType::F16 ? kR16F : kR32F; }

/// A column-major matrix as cuBLASLt sees it; offsets and strides in elements.
struct Matrix {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch = 1, stride = 0;
  int64_t step = 0; // grad_weight: the offset of the next sample's matrix
};

/// The largest power of two up to 256 bytes that divides every offset of the matrix: the
/// alignment cuBLASLt may assume (allocations and arena offsets are multiples of 256).
uint32_t alignment(const Matrix &m) {
  const size_t e = dtypeSize(m.type);
  uint32_t a = 256;
  for (int64_t v : {m.ld, m.batch > 1 ? m.stride : 0, m.step})
    while (a > e && (static_cast<uint64_t>(v) * e) % a != 0)
      a /= 2;
  return a;
}

} // namespace

/// One matrix product D = alpha·op(A)·op(B) + beta·C (C = D), with its descriptors and the
/// algorithms the heuristic offered.
struct Gemm::Product {
  Ptr desc = nullptr, pref = nullptr;
  Ptr layout[3] = {}; // A, B, C = D
  uint32_t align[3] = {};
  std::vector<HeuristicResult> algos;
  int chosen = 0;
  std::string what;

  Product(const std::string &what_, const Matrix &a, int32_t opA, const Matrix &b, int32_t opB,
          const Matrix &d)
      : what(what_) {
    const Library &l = library();
    check(l.descCreate(&desc, kCompute32F, kR32F), "cublasLtMatmulDescCreate", what);
    check(l.descSet(desc, kDescTransA, &opA, sizeof opA), "cublasLtMatmulDescSetAttribute", what);
    check(l.descSet(desc, kDescTransB, &opB, sizeof opB), "cublasLtMatmulDescSetAttribute", what);
    const Matrix *m[3] = {&a, &b, &d};
    for (int i = 0; i < 3; ++i) {
      const Matrix &x = *m[i];
      for (int64_t v : {x.rows, x.cols, x.ld, x.batch})
        if (v > std::numeric_limits<int32_t>::max())
          throw Error(str(what, ": too large for cuBLASLt's 32-bit sizes"));
      check(l.layoutCreate(&layout[i], dataType(x.type), static_cast<uint64_t>(x.rows),
                           static_cast<uint64_t>(x.cols), x.ld),
            "cublasLtMatrixLayoutCreate", what);
      if (x.batch > 1) {
        const int32_t count = static_cast<int32_t>(x.batch);
        const int64_t stride = x.stride; // 0: the same matrix for every sample
        check(l.layoutSet(layout[i], kLayoutBatchCount, &count, sizeof count),
              "cublasLtMatrixLayoutSetAttribute", what);
        check(l.layoutSet(layout[i], kLayoutBatchStride, &stride, sizeof stride),
              "cublasLtMatrixLayoutSetAttribute", what);
      }
      align[i] = alignment(x);
    }
    check(l.prefCreate(&pref), "cublasLtMatmulPreferenceCreate", what);
    // Alignments of A, B, C and D (C is D).
    for (int i = 0; i < 4; ++i)
      check(l.prefSet(pref, kPrefAlignA + i, &align[std::min(i, 2)], sizeof(uint32_t)),
            "cublasLtMatmulPreferenceSetAttribute", what);
  }

  ~Product() {
    const Library &l = library();
    for (Ptr p : layout)
      if (p)
        l.layoutDestroy(p);
    if (pref)
      l.prefDestroy(pref);
    if (desc)
      l.descDestroy(desc);
  }

  int query(const Handle &h, size_t budget, int max) {
    const Library &l = library();
    const uint64_t bytes = budget;
    check(l.prefSet(pref, kPrefMaxWorkspace, &bytes, sizeof bytes),
          "cublasLtMatmulPreferenceSetAttribute", what);
    std::vector<HeuristicResult> found(static_cast<size_t>(max));
    int n = 0;
    Status s = l.heuristic(h.get(), desc, layout[0], layout[1], layout[2], layout[2], pref, max,
                           found.data(), &n);
    if (s == kNotSupported)
      n = 0;
    else
      check(s, "cublasLtMatmulAlgoGetHeuristic", what);
    algos.clear();
    for (int i = 0; i < n; ++i)
      if (found[i].state == kSuccess && found[i].workspaceSize <= budget)
        algos.push_back(found[i]);
    chosen = 0;
    return static_cast<int>(algos.size());
  }

  size_t workspace() const { return algos.empty() ? 0 : algos[chosen].workspaceSize; }

  void run(const Handle &h, void *stream, uint64_t a, uint64_t b, float beta, uint64_t d,
           uint64_t ws, size_t wsBytes) const {
    const float alpha = 1.0f;
    auto p = [](uint64_t x) { return reinterpret_cast<void *>(x); };
    check(library().matmul(h.get(), desc, &alpha, p(a), layout[0], p(b), layout[1], &beta, p(d),
                           layout[2], p(d), layout[2], &algos.at(chosen).algo, p(ws), wsBytes,
                           stream),
          "cublasLtMatmul", what);
  }
};

bool enabledFromEnv() {
  const char *v = std::getenv("MEDRUN_CUBLASLT");
  std::string s = v ? v : "";
  if (s.empty() || s == "on" || s == "1")
    return true;
  if (s == "off" || s == "0")
    return false;
  throw Error(str("MEDRUN_CUBLASLT: expected on or off, got '", s, "'"));
}

bool available(std::string *why) {
  const Library &l = library();
  if (why)
    *why = l.lib.error;
  return l.lib.error.empty();
}

std::string version() {
  size_t v = library().getVersion ? library().getVersion() : 0;
  return str(v / 10000, ".", v / 100 % 100, ".", v % 100);
}

bool handles(const Function &fn, const OpInfo &op, const std::vector<DType> &types) {
  if (!cudnn::handles(op, types)) // the kinds, and one storage type for all operands
    return false;
  if (op.kind == "shift_sum" || op.kind == "shift_sum_grad_weight") // depthwise: no GEMM
    return false;
  auto all = [&](const char *attr, int64_t v) {
    for (int64_t x : op.intsAttr(attr))
      if (x != v)
        return false;
    return true;
  };
  if (op.intAttr("groups") != 1 || !all("stride", 1) || !all("padding", 0) || !all("dilation", 1))
    return false;
  if (op.kind == "conv3d_transpose" && !all("output_padding", 0))
    return false;
  const Shape &x = fn.values.at(op.single("input")).shape;
  const Shape &y = fn.values.at(op.results.at(0)).shape;
  if (x.size() != 5 || y.size() != 5)
    return false;
  if (op.kind == "conv3d_grad_weight") {
    if (!all("kernel", 1))
      return false;
    const Shape &dy = fn.values.at(op.single("grad_output")).shape;
    if (dy.size() != 5 || !std::equal(x.begin() + 2, x.end(), dy.begin() + 2))
      return false;
  } else {
    const Shape &w = fn.values.at(op.single("weight")).shape;
    if (w.size() != 5 || w[2] != 1 || w[3] != 1 || w[4] != 1)
      return false;
    if (!std::equal(x.begin() + 2, x.end(), y.begin() + 2))
      return false;
  }
  return true;
}

Handle::Handle() {
  const Library &l = library();
  if (!l.lib.error.empty())
    throw Error(l.lib.error);
  check(l.create(&handle), "cublasLtCreate", "the CUDA backend");
}

Handle::~Handle() {
  if (handle)
    library().destroy(handle);
}

Gemm::Gemm(const Function &fn, const OpInfo &op, const std::vector<DType> &types) {
  const int input = op.single("input");
  out = op.results.at(0);
  dtype = types.at(out);
  const Shape &xs = fn.values.at(input).shape, &ys = fn.values.at(out).shape;
  const int64_t N = xs[0], S = xs[2] * xs[3] * xs[4];
  Matrix A, B, D;
  A.type = B.type = D.type = dtype;
  int32_t opA = kOpN, opB = kOpN;
  std::string second;
  if (op.kind == "conv3d_grad_weight") {
    kind = 2;
    a = input, b = op.single("grad_output");
    const Shape &dys = fn.values.at(b).shape;
    second = shapeStr(dys);
    const int64_t Cin = xs[1], Cout = dys[1];
    A = {dtype, S, Cin, S, 1, 0, Cin * S};
    opA = kOpT;
    B = {dtype, S, Cout, S, 1, 0, Cout * S};
    batch = N;
    aStep = Cin * S * static_cast<int64_t>(dtypeSize(dtype));
    bStep = Cout * S * static_cast<int64_t>(dtypeSize(dtype));
    accumulate = dtype != DType::F32 && N > 1;
    outCount = Cin * Cout;
    D = {accumulate ? DType::F32 : dtype, Cin, Cout, Cin, 1, 0, 0};
    if (accumulate)
      accBytes = (static_cast<size_t>(Cin * Cout) * 4 + 255) / 256 * 256;
  } else {
    a = input, b = op.single("weight");
    const Shape &ws = fn.values.at(b).shape; // Cout×Cin×1×1×1 (conv3d: out×in; transpose: in×out)
    second = shapeStr(ws);
    const int64_t Cx = xs[1], Cy = ys[1];
    if (op.kind == "conv3d") {
      kind = 0;
      B = {dtype, Cx, Cy, Cx, N, 0, 0}; // W as stored is the column-major Cin×Cout W^T
    } else {
      kind = 1;
      B = {dtype, Cy, Cx, Cy, N, 0, 0}; // the stored Cin×Cout matrix, transposed
      opB = kOpT;
    }
    A = {dtype, S, Cx, S, N, Cx * S, 0};
    D = {dtype, S, Cy, S, N, Cy * S, 0};
    biasId = op.optional("bias").value_or(-1);
    if (biasId >= 0)
      ones = static_cast<size_t>(S);
  }
  what = str(op.describe(), " (", shapeStr(xs), ", ", second, " -> ", shapeStr(ys), ")");
  shapeKey = str(op.kind, ":", shapeStr(xs), ":", second, ":", shapeStr(ys), ":",
                 dtypeName(dtype), biasId >= 0 ? ":bias" : "");
  main = std::make_unique<Product>(what, A, opA, B, opB, D);
  if (biasId >= 0) {
    // ones: S×1 (ld S); b^T: the Cout×1 vector (ld Cout, better aligned than a 1×Cout row
    // with ld 1) transposed; both the same for every sample (stride 0).
    const Matrix one{dtype, D.rows, 1, D.rows, D.batch, 0, 0};
    const Matrix vec{dtype, D.cols, 1, D.cols, D.batch, 0, 0};
    bias = std::make_unique<Product>(what, one, kOpN, vec, kOpT, D);
  }
}

Gemm::~Gemm() = default;

int Gemm::candidates(const Handle &h, size_t budget, int max) {
  current = -1;
  if (budget <= accBytes)
    return 0;
  const size_t lib = std::min(budget - accBytes, kWorkspaceLimit);
  if (bias && bias->query(h, lib, 1) == 0)
    return 0;
  const int n = main->query(h, lib, max);
  if (n > 0)
    current = 0;
  return n;
}

void Gemm::use(int candidate) {
  main->chosen = candidate;
  current = candidate;
}

size_t Gemm::workspaceBytes() const {
  return accBytes + std::max(main->workspace(), bias ? bias->workspace() : size_t(0));
}

void Gemm::run(const Handle &h, void *stream, const Buffers &buf) const {
  const uint64_t ws = buf.workspace + accBytes;
  const size_t wsBytes = workspaceBytes() - accBytes;
  const uint64_t x = buf.ptr(a), y = buf.ptr(b), o = buf.ptr(out);
  if (kind != 2) {
    if (bias)
      bias->run(h, stream, buf.ones, buf.ptr(biasId), 0.0f, o, ws, wsBytes);
    main->run(h, stream, x, y, bias ? 1.0f : 0.0f, o, ws, wsBytes);
    return;
  }
  const uint64_t d = accumulate ? buf.workspace : o;
  for (int64_t n = 0; n < batch; ++n)
    main->run(h, stream, x + n * aStep, y + n * bStep, n ? 1.0f : 0.0f, d, ws, wsBytes);
  if (accumulate)
    buf.narrow(buf.workspace, o, outCount);
}

bool choose(Gemm &gemm, const Handle &h, cudnn::Mode mode, cudnn::AlgoCache &cache, size_t budget,
            const std::function<double(const std::function<void()> &)> &time,
            const std::function<void()> &runGemm, const std::function<void()> *cudnnRun,
            const std::string &rival) {
  if (mode != cudnn::Mode::Benchmark)
    return gemm.candidates(h, budget, 1) > 0;
  const std::string key =
      str(gemm.key(), ":", cudnn::modeName(mode), cudnnRun ? str(":vs-", rival) : std::string());
  int known = -1;
  size_t ws = 0;
  if (cache.find(key, &known, &ws)) {
    if (known < 0 && cudnnRun)
      return false;
    if (known >= 0 && gemm.candidates(h, budget, kTried) > known) {
      gemm.use(known);
      return true;
    }
  }
  const int n = gemm.candidates(h, budget, kTried);
  if (n == 0)
    return false;
  int best = 0;
  double bestMs = std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    gemm.use(i);
    const double ms = time(runGemm);
    if (ms < bestMs)
      best = i, bestMs = ms;
  }
  if (cudnnRun && time(*cudnnRun) < bestMs) {
    cache.put(key, -1, 0);
    return false;
  }
  gemm.use(best);
  cache.put(key, best, gemm.workspaceBytes());
  return true;
}

} // namespace medrun::cublaslt
