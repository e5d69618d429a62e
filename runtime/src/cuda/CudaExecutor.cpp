//===- CudaExecutor.cpp - the CUDA backend: a session and its runs ---------------===//
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
// The session's other parts (Session.h): the driver (Driver.cpp), the arena (Arena.cpp),
// uploads ahead (Staging.cpp), algorithm and variant choices (Algorithms.cpp).
//
//===----------------------------------------------------------------------------------===//
#include "Session.h"

namespace medrun {

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
  CUfunction f = function(*kernel, op);
  allowShared(f, s.shared, *kernel, op);
  return d.cuLaunchKernel(f, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1],
                          s.block[2], s.shared, stream, launchArgs.data(), nullptr);
}

CudaSession::CudaSession(const Artifact &artifact) : impl(std::make_unique<Impl>(artifact)) {
  const Driver &d = impl->d;
  if (!d.lib.error.empty())
    throw Error(str("no CUDA driver or GPU found; use --device cpu (", d.lib.error, ")"));
  if (!artifact.cuda)
    throw Error(str(artifact.path, ": the artifact has no CUDA kernels; compile it with `medc "
                                   "compile ... --target cuda`"));
  impl->check(d.cuDeviceGet(&impl->device, deviceOrdinal()), "cuDeviceGet");
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
  // The conversions as one launch per storage type where the artifact's modules have the
  // batched kernels (an older medc's have only med_f32_to_bf16/_f16: one launch a value).
  // The table (source, destination, count, first block per segment; bf16 ones first) is
  // uploaded when it changes; a captured graph reads it where it is.
  struct Batch {
    const char *kernel;
    int64_t first = 0, count = 0, blocks = 0;
  };
  std::array<Batch, 2> batches{Batch{"med_f32_to_bf16_segments"}, Batch{"med_f32_to_f16_segments"}};
  const auto &kernels = impl->artifact.cuda->kernelModule;
  bool batched = !conversions.empty() && kernels.count(batches[0].kernel) &&
                 kernels.count(batches[1].kernel);
  if (batched) {
    std::vector<int64_t> table;
    for (size_t b = 0; b < batches.size(); ++b) {
      batches[b].first = static_cast<int64_t>(table.size() / 4);
      for (auto &[from, id] : conversions) {
        if ((l.type[id] == DType::F16) != (b == 1))
          continue;
        const int64_t n = static_cast<int64_t>(numElements(fn.values[id].shape));
        table.insert(table.end(), {static_cast<int64_t>(from), static_cast<int64_t>(ptr(id)), n,
                                   batches[b].blocks});
        batches[b].blocks += (n + 255) / 256;
        ++batches[b].count;
      }
    }
    batched = batches[0].blocks < (int64_t{1} << 31) && batches[1].blocks < (int64_t{1} << 31);
    if (batched && table != l.conversionHost) {
      const size_t bytes = table.size() * sizeof(int64_t);
      if (!l.conversionTable || l.conversionTable->bytes < bytes) {
        impl->dropGraph(l); // it reads the table where it was
        l.conversionTable = std::make_unique<DeviceBuffer>();
        l.conversionTable->d = &d;
        impl->allocate(*l.conversionTable, bytes, "the table of f32 to bf16/f16 conversions");
      }
      impl->check(d.cuMemcpyHtoD(l.conversionTable->ptr, table.data(), bytes),
                  "uploading the table of f32 to bf16/f16 conversions");
      l.conversionHost = std::move(table);
    }
  }
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
    for (const Batch &b : batches) {
      if (!batched || b.blocks == 0)
        continue;
      CUfunction f = impl->function(b.kernel, fn.ops.at(0));
      CUdeviceptr table = l.conversionTable->ptr + static_cast<CUdeviceptr>(b.first) * 32;
      int count = static_cast<int>(b.count);
      void *args[] = {&table, &count, nullptr};
      impl->check(d.cuLaunchKernel(f, static_cast<unsigned>(b.blocks), 1, 1, 256, 1, 1, 0,
                                   impl->stream, args, nullptr),
                  str("converting ", b.count, " values of function '", fn.name, "' (", b.kernel,
                      ")"));
    }
    for (auto &[from, id] : conversions) {
      if (batched)
        break;
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
