//===- Algorithms.cpp - the CUDA backend: convolution algorithms and kernel variants, measured once ---===//
#include "Session.h"

namespace medrun {

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

} // namespace medrun
