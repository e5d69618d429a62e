//===- Cudnn.cpp - cuDNN through dlopen ---------------------------------------------===//
//
// The three convolution directions of cuDNN's legacy API take their operands in the same
// pattern: (descriptor A, A, descriptor B, B, convolution, descriptor C, C), C written.
// Descriptors are opaque pointers, so one set of function types serves all three:
//   forward          A = x (tensor)  B = w (filter)   C = y (tensor)    conv3d
//   backward data    A = w (filter)  B = dy (tensor)  C = dx (tensor)   conv3d_transpose
//   backward filter  A = x (tensor)  B = dy (tensor)  C = dw (filter)   conv3d_grad_weight
//
//===----------------------------------------------------------------------------------===//
#include "Cudnn.h"

#include "SharedLibrary.h"
#include "medrun/ConvView.h"
#include "medrun/Error.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace medrun::cudnn {
namespace {

using Status = int;
using Ptr = void *;
constexpr int kDataFloat = 0, kDataHalf = 2, kDataBF16 = 9, kFormatNCHW = 0, kCrossCorrelation = 1;
constexpr int kTensorOpMath = 1, kFmaMath = 3;
constexpr int kDeterministic = 1;
const char *const kDirection[3] = {"Forward", "BackwardData", "BackwardFilter"};

// Whether an algorithm of a direction computes the convolution as its sums, not through an FFT
// or a Winograd transform, which round otherwise than the sums torch's f32 reference makes:
// an f32 program, the one checked against torch f32 and f64, uses only the direct ones,
// whatever timing would choose (cudnn_ops.h's enums, per direction).
bool directSums(int direction, int algo) {
  switch (direction) {
  case 0: return algo <= 3;             // implicit GEMM, precomputed, GEMM, direct
  case 1: return algo <= 1;             // ALGO_0, ALGO_1
  default: return algo <= 1 || algo == 3; // ALGO_0, ALGO_1, ALGO_3
  }
}

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
};

using FindFn = Status (*)(Ptr, Ptr, const void *, Ptr, const void *, Ptr, Ptr, void *, int, int *,
                          AlgoPerf *, void *, size_t);
using HeuristicFn = Status (*)(Ptr, Ptr, Ptr, Ptr, Ptr, int, int *, AlgoPerf *);
using WorkspaceFn = Status (*)(Ptr, Ptr, Ptr, Ptr, Ptr, int, size_t *);
using RunFn = Status (*)(Ptr, const void *, Ptr, const void *, Ptr, const void *, Ptr, int, void *,
                         size_t, const void *, Ptr, void *);

struct Library {
  SharedLibrary lib;
  size_t (*getVersion)() = nullptr;
  const char *(*errorString)(Status) = nullptr;
  Status (*create)(Ptr *) = nullptr;
  Status (*destroy)(Ptr) = nullptr;
  Status (*setStream)(Ptr, void *) = nullptr;
  Status (*createTensor)(Ptr *) = nullptr;
  Status (*destroyTensor)(Ptr) = nullptr;
  Status (*setTensorNd)(Ptr, int, int, const int *, const int *) = nullptr;
  Status (*createFilter)(Ptr *) = nullptr;
  Status (*destroyFilter)(Ptr) = nullptr;
  Status (*setFilterNd)(Ptr, int, int, int, const int *) = nullptr;
  Status (*createConv)(Ptr *) = nullptr;
  Status (*destroyConv)(Ptr) = nullptr;
  Status (*setConvNd)(Ptr, int, const int *, const int *, const int *, int, int) = nullptr;
  Status (*setGroupCount)(Ptr, int) = nullptr;
  Status (*setMathType)(Ptr, int) = nullptr;
  Status (*addTensor)(Ptr, const void *, Ptr, const void *, const void *, Ptr, void *) = nullptr;
  FindFn find[3] = {};
  HeuristicFn heuristic[3] = {};
  WorkspaceFn workspace[3] = {};
  RunFn run[3] = {};
};

const Library &library() {
  static Library l;
  static std::once_flag once;
  std::call_once(once, [] {
    l.lib.open("MEDRUN_LIBCUDNN", "libcudnn.so.9"); // tests: a missing library, a stand-in
    if (!l.lib.handle)
      return;
    auto get = [&](auto &fn, const std::string &symbol) { l.lib.require(fn, {symbol.c_str()}); };
    get(l.getVersion, "cudnnGetVersion");
    get(l.errorString, "cudnnGetErrorString");
    get(l.create, "cudnnCreate");
    get(l.destroy, "cudnnDestroy");
    get(l.setStream, "cudnnSetStream");
    get(l.createTensor, "cudnnCreateTensorDescriptor");
    get(l.destroyTensor, "cudnnDestroyTensorDescriptor");
    get(l.setTensorNd, "cudnnSetTensorNdDescriptor");
    get(l.createFilter, "cudnnCreateFilterDescriptor");
    get(l.destroyFilter, "cudnnDestroyFilterDescriptor");
    get(l.setFilterNd, "cudnnSetFilterNdDescriptor");
    get(l.createConv, "cudnnCreateConvolutionDescriptor");
    get(l.destroyConv, "cudnnDestroyConvolutionDescriptor");
    get(l.setConvNd, "cudnnSetConvolutionNdDescriptor");
    get(l.setGroupCount, "cudnnSetConvolutionGroupCount");
    get(l.setMathType, "cudnnSetConvolutionMathType");
    get(l.addTensor, "cudnnAddTensor");
    for (int d = 0; d < 3; ++d) {
      get(l.find[d], str("cudnnFindConvolution", kDirection[d], "AlgorithmEx"));
      get(l.heuristic[d], str("cudnnGetConvolution", kDirection[d], "Algorithm_v7"));
      get(l.workspace[d], str("cudnnGetConvolution", kDirection[d], "WorkspaceSize"));
      get(l.run[d], str("cudnnConvolution", kDirection[d]));
    }
    if (l.lib.error.empty() && l.getVersion() / 10000 != 9)
      l.lib.error = str(l.lib.name, " is cuDNN ", l.getVersion(), "; medrun needs cuDNN 9");
  });
  return l;
}

void check(Status s, const char *call, const std::string &what) {
  if (s != 0)
    throw Error(str(call, " failed for ", what, ": ",
                    library().errorString ? library().errorString(s) : "cuDNN error", " (", s, ")"));
}

} // namespace

Mode modeFromEnv() {
  const char *v = std::getenv("MEDRUN_CUDNN");
  std::string s = v ? v : "";
  if (s.empty() || s == "benchmark")
    return Mode::Benchmark;
  if (s == "deterministic")
    return Mode::Deterministic;
  if (s == "heuristic")
    return Mode::Heuristic;
  if (s == "off" || s == "0")
    return Mode::Off;
  throw Error(str("MEDRUN_CUDNN: expected benchmark, deterministic, heuristic or off, got '", s, "'"));
}

const char *modeName(Mode m) {
  switch (m) {
  case Mode::Benchmark:
    return "benchmark";
  case Mode::Deterministic:
    return "deterministic";
  case Mode::Heuristic:
    return "heuristic";
  case Mode::Off:
    return "off";
  }
  return "?";
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

bool handles(const OpInfo &op, const std::vector<DType> &types) {
  if (op.kind != "conv3d" && op.kind != "conv3d_transpose" && op.kind != "conv3d_grad_weight" &&
      op.kind != "shift_sum" && op.kind != "shift_sum_grad_weight")
    return false;
  const DType t = types.at(op.results.at(0));
  if (t != DType::F32 && t != DType::BF16 && t != DType::F16)
    return false;
  for (auto &[name, ids] : op.operands)
    for (int id : ids)
      if (types.at(id) != t)
        return false;
  return true;
}

AlgoCache::AlgoCache(std::string path) : file(std::move(path)) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    int algo = -1;
    size_t ws = 0;
    if (ls >> key >> algo >> ws && algo >= -1)
      entries[key] = {algo, ws};
  }
}

bool AlgoCache::find(const std::string &key, int *algo, size_t *workspace) const {
  auto it = entries.find(key);
  if (it == entries.end())
    return false;
  *algo = it->second.first;
  *workspace = it->second.second;
  return true;
}

void AlgoCache::put(const std::string &key, int algo, size_t workspace) {
  entries[key] = {algo, workspace};
  if (file.empty())
    return;
  // Written whole to a temporary file and renamed: a concurrent reader sees either version.
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(file).parent_path(), ec);
  const std::string tmp = str(file, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp);
    for (auto &[k, v] : entries)
      out << k << " " << v.first << " " << v.second << "\n";
    if (!out)
      return; // a cache that cannot be written only costs a measurement next time
  }
  fs::rename(tmp, file, ec);
}

Handle::Handle(void *stream) {
  const Library &l = library();
  if (!l.lib.error.empty())
    throw Error(l.lib.error);
  check(l.create(&handle), "cudnnCreate", "the CUDA backend");
  check(l.setStream(handle, stream), "cudnnSetStream", "the CUDA backend");
}

Handle::~Handle() {
  if (handle)
    library().destroy(handle);
}

struct Conv::Desc {
  Ptr slot[3] = {};   // descriptors of A, B, C
  bool filter[3] = {};
  Ptr conv = nullptr, bias = nullptr;
  ~Desc() {
    const Library &l = library();
    for (int i = 0; i < 3; ++i)
      if (slot[i])
        (filter[i] ? l.destroyFilter : l.destroyTensor)(slot[i]);
    if (bias)
      l.destroyTensor(bias);
    if (conv)
      l.destroyConv(conv);
  }
};

Conv::Conv(const Function &fn, const OpInfo &op, const std::vector<DType> &types)
    : desc(std::make_unique<Desc>()) {
  const Library &l = library();
  int input = op.single("input"), out = op.results.at(0);
  // A shift-sum runs as the depthwise convolution it is (medrun/ConvView.h).
  const ConvView view = *convView(fn, op);
  if (view.kind == "conv3d") {
    direction = 0;
    a = input, b = op.single("weight"), c = out;
    desc->filter[1] = true;
  } else if (view.kind == "conv3d_transpose") {
    direction = 1;
    a = op.single("weight"), b = input, c = out;
    desc->filter[0] = true;
  } else {
    direction = 2;
    a = input, b = op.single("grad_output"), c = out;
    desc->filter[2] = true;
  }
  if (view.kind != "conv3d_grad_weight")
    bias = op.optional("bias").value_or(-1);
  const Shape &as = fn.values[a].shape, &bs = fn.values[b].shape, &cs = fn.values[c].shape;
  what = str(op.describe(), " (", shapeStr(fn.values[input].shape), ", ",
             shapeStr(direction == 1 ? as : bs), " -> ", shapeStr(cs), ")");
  const Shape &pad = view.padding, &stride = view.stride, &dil = view.dilation;
  const int groups = static_cast<int>(view.groups);
  const DType type = types.at(c);
  const bool half = type != DType::F32; // bf16 or f16: tensor cores, f32 accumulation
  f32 = !half;
  const int data = type == DType::BF16 ? kDataBF16 : type == DType::F16 ? kDataHalf : kDataFloat;
  std::ostringstream k;
  k << view.kind << ":" << shapeStr(as) << ":" << shapeStr(bs) << ":" << shapeStr(cs) << ":p"
    << shapeStr(pad) << ":s" << shapeStr(stride) << ":d" << shapeStr(dil) << ":g" << groups
    << ":" << dtypeName(type);
  key = k.str();

  const Shape *shapes[3] = {&as, &bs, &cs};
  for (int i = 0; i < 3; ++i) {
    const Shape &s = *shapes[i];
    if (s.size() != 5)
      throw Error(str(what, ": cuDNN needs rank-5 operands"));
    int dims[5], strides[5];
    int64_t stride = 1;
    for (int d = 4; d >= 0; --d) {
      if (s[d] > INT32_MAX || stride > INT32_MAX)
        throw Error(str(what, ": too large for cuDNN's 32-bit sizes"));
      dims[d] = static_cast<int>(s[d]);
      strides[d] = static_cast<int>(stride);
      stride *= s[d];
    }
    if (desc->filter[i]) {
      check(l.createFilter(&desc->slot[i]), "cudnnCreateFilterDescriptor", what);
      check(l.setFilterNd(desc->slot[i], data, kFormatNCHW, 5, dims), "cudnnSetFilterNdDescriptor", what);
    } else {
      check(l.createTensor(&desc->slot[i]), "cudnnCreateTensorDescriptor", what);
      check(l.setTensorNd(desc->slot[i], data, 5, dims, strides), "cudnnSetTensorNdDescriptor", what);
    }
  }
  int p[3], s[3], d[3];
  for (int i = 0; i < 3; ++i) {
    p[i] = static_cast<int>(pad.at(i));
    s[i] = static_cast<int>(stride.at(i));
    d[i] = static_cast<int>(dil.at(i));
  }
  check(l.createConv(&desc->conv), "cudnnCreateConvolutionDescriptor", what);
  // Accumulation in f32 either way.
  check(l.setConvNd(desc->conv, 3, p, s, d, kCrossCorrelation, kDataFloat),
        "cudnnSetConvolutionNdDescriptor", what);
  check(l.setGroupCount(desc->conv, groups), "cudnnSetConvolutionGroupCount", what);
  // fp32 programs compute in fp32 (no TF32 rounding of the operands); bf16/f16 on tensor cores.
  check(l.setMathType(desc->conv, half ? kTensorOpMath : kFmaMath), "cudnnSetConvolutionMathType",
        what);
  if (bias >= 0) {
    int dims[5] = {1, static_cast<int>(cs[1]), 1, 1, 1}, strides[5] = {dims[1], 1, 1, 1, 1};
    check(l.createTensor(&desc->bias), "cudnnCreateTensorDescriptor", what);
    check(l.setTensorNd(desc->bias, data, 5, dims, strides), "cudnnSetTensorNdDescriptor", what);
  }
}

Conv::~Conv() = default;

void Conv::select(const Handle &h, Mode mode, AlgoCache &cache,
                  const std::function<uint64_t(int)> &ptr, uint64_t workspace, size_t budget) {
  const Library &l = library();
  const std::string cacheKey = str(key, ":", modeName(mode));
  if (cache.find(cacheKey, &algo, &wsBytes) && (!f32 || directSums(direction, algo)))
    return;
  const Ptr *s = desc->slot;
  constexpr int kMax = 16;
  AlgoPerf perf[kMax];
  int n = 0;
  if (mode == Mode::Heuristic) {
    check(l.heuristic[direction](h.get(), s[0], s[1], desc->conv, s[2], kMax, &n, perf),
          str("cudnnGetConvolution", kDirection[direction], "Algorithm_v7").c_str(), what);
  } else {
    auto p = [&](int id) { return reinterpret_cast<void *>(ptr(id)); };
    check(l.find[direction](h.get(), s[0], p(a), s[1], p(b), desc->conv, s[2], p(c), kMax, &n,
                            perf, reinterpret_cast<void *>(workspace), budget),
          str("cudnnFindConvolution", kDirection[direction], "AlgorithmEx").c_str(), what);
  }
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != 0 || perf[i].memory > budget)
      continue;
    if (mode == Mode::Deterministic && perf[i].determinism != kDeterministic)
      continue;
    if (f32 && !directSums(direction, perf[i].algo))
      continue;
    size_t ws = 0;
    if (l.workspace[direction](h.get(), s[0], s[1], desc->conv, s[2], perf[i].algo, &ws) != 0 ||
        ws > budget)
      continue;
    algo = perf[i].algo;
    wsBytes = ws;
    cache.put(cacheKey, algo, wsBytes);
    return;
  }
  throw Error(str("cuDNN has no ", mode == Mode::Deterministic ? "deterministic " : "",
                  "algorithm for ", what, " within ", budget >> 20,
                  " MiB of workspace (MEDRUN_CUDNN=off runs the generated kernels)"));
}

void Conv::run(const Handle &h, const std::function<uint64_t(int)> &ptr, uint64_t workspace) const {
  const Library &l = library();
  const float one = 1.0f, zero = 0.0f;
  auto p = [&](int id) { return reinterpret_cast<void *>(ptr(id)); };
  const Ptr *s = desc->slot;
  check(l.run[direction](h.get(), &one, s[0], p(a), s[1], p(b), desc->conv, algo,
                         reinterpret_cast<void *>(workspace), wsBytes, &zero, s[2], p(c)),
        str("cudnnConvolution", kDirection[direction]).c_str(), what);
  if (bias >= 0)
    check(l.addTensor(h.get(), &one, desc->bias, p(bias), &one, s[2], p(c)), "cudnnAddTensor", what);
}

} // namespace medrun::cudnn
