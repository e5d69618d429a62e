//===- Arena.cpp - the CUDA backend: where a function's buffers live on the device ---===//
#include "Session.h"

namespace medrun {

void CudaSession::Impl::allocate(DeviceBuffer &b, size_t bytes, const std::string &what) {
  b.release();
  CUresult r = d.cuMemAlloc(&b.ptr, std::max<size_t>(bytes, 256));
  if (r == 2) // CUDA_ERROR_OUT_OF_MEMORY
    throw Error(str(what, " (", byteSize(bytes), "): out of device memory; lower data.batch or "
                          "data.patch"));
  check(r, str("cuMemAlloc of ", bytes, " bytes for ", what));
  b.bytes = bytes;
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

size_t CudaSession::stateBytes() const {
  size_t n = 0;
  for (const auto &[name, r] : impl->state)
    n += r.buffer.bytes; // members own nothing: their flat buffer is counted
  return n;
}

} // namespace medrun
