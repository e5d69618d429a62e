//===- CudaTrainBackend.cpp - the training loop's steps on the CUDA backend --------===//
//
// Parameters, moments and EMA stay resident on the GPU; batches are born in pinned host
// memory, and the next one is uploaded on a second stream while the current step runs.
// Validation runs `infer` in a second session that holds the weights validated.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Cuda.h"
#include "medrun/Error.h"
#include "medrun/Train.h"
#include "medrun/TrainBackend.h"

namespace medrun {
namespace {

class CudaTrainBackend final : public TrainBackend {
public:
  CudaTrainBackend(const Artifact &artifact, GradientReducer &reducer, FILE *console)
      : artifact_(artifact), fn_(artifact.function("train_step")),
        gpu_(openCudaSession(artifact, fn_, console)) {
    gpu_->setReducer(reducer);
  }

  void setState(const TensorMap &state) override {
    params_ = state;
    gpu_->setState(state);
  }
  TensorMap state() override { return gpu_->state(); }

  std::vector<Tensor> run(const std::vector<Tensor> &inputs) override {
    return gpu_->run(fn_, inputs, params_);
  }
  void commit() override { gpu_->commit(); }

  BatchAllocator batchAllocator() override {
    CudaSession *gpu = gpu_.get();
    return [gpu](DType dtype, const Shape &shape) { return gpu->pinnedTensor(dtype, shape); };
  }
  bool canStage() const override { return gpu_->canStage(); } // MEDRUN_CUDA_NO_PREFETCH=1: off
  void stage(const std::vector<Tensor> &batchInputs) override { gpu_->stage(fn_, batchInputs); }

  WindowPredictor predictor(const Function &fn, const TensorMap &weights) override {
    if (!validation_)
      validation_ = std::make_unique<CudaSession>(artifact_);
    validation_->setState(weights);
    CudaSession *v = validation_.get();
    return [v, &fn, weights](const Tensor &batch) { return v->run(fn, {batch}, weights)[0]; };
  }

  std::string afterFirstStep() const override {
    return str("device memory: ", gpu_->deviceBytes() >> 20, " MiB (values ",
               gpu_->arenaBytes() >> 20, " MiB, state ", gpu_->stateBytes() >> 20,
               " MiB, cuDNN workspace ", gpu_->workspaceBytes() >> 20, " MiB)");
  }
  std::string atEnd() const override {
    return str("uploads: ", gpu_->uploads(), "\nsteps: ", gpu_->graphs(fn_));
  }

private:
  const Artifact &artifact_;
  const Function &fn_;
  std::unique_ptr<CudaSession> gpu_;
  std::unique_ptr<CudaSession> validation_; ///< infer's own session: the weights validated
  TensorMap params_; ///< what run() reads where a tensor is not resident
};

} // namespace

std::unique_ptr<TrainBackend> cudaTrainBackend(const Artifact &artifact, GradientReducer &reducer,
                                               FILE *console) {
  return std::make_unique<CudaTrainBackend>(artifact, reducer, console);
}

} // namespace medrun
