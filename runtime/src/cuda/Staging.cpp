//===- Staging.cpp - the CUDA backend: uploads ahead of a run, from pinned host memory ---===//
#include "Session.h"

namespace medrun {

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

} // namespace medrun
