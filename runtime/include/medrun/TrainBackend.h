//===- TrainBackend.h - what the training loop runs its steps on -------------------===//
//
// The training loop (Train.h) talks to one interface: it hands the backend the training
// state (parameters, optimizer moments, EMA: a checkpoint's tensors), runs `train_step` on
// a batch's inputs, commits or drops the step's assignments (a step with a non-finite loss
// is skipped), reads the state back for checkpoints and validation, and predicts validation
// windows with given weights. The CPU backend (CpuTrainBackend.cpp) keeps the state in host
// tensors; the CUDA backend (CudaTrainBackend.cpp) keeps it resident on the GPU and uploads
// the next batch during the step. Both sum the gradient buckets of a data-parallel step
// through a GradientReducer (docs/data-parallel.md).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_TRAINBACKEND_H
#define MEDRUN_TRAINBACKEND_H

#include "medrun/Artifact.h"
#include "medrun/Data.h"
#include "medrun/GradientReducer.h"
#include "medrun/SlidingWindow.h"
#include "medrun/Tensor.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace medrun {

class TrainBackend {
public:
  virtual ~TrainBackend() = default;

  /// Makes `state` (every tensor of the artifact's table) what the next step starts from.
  virtual void setState(const TensorMap &state) = 0;
  /// The state after the last committed step, on the host (for a checkpoint); its tensors
  /// are not changed by later steps.
  virtual TensorMap state() = 0;

  /// Runs `train_step` on its inputs (StepInputs::inputs) and returns its outputs; what it
  /// assigns waits for commit().
  virtual std::vector<Tensor> run(const std::vector<Tensor> &inputs) = 0;
  /// Applies the last run's assignments to the state; not calling it skips the step.
  virtual void commit() = 0;

  /// How the data loader allocates batches (empty: ordinary host memory).
  virtual BatchAllocator batchAllocator() { return {}; }
  /// Whether stage() uploads a later step's batch while the current one runs.
  virtual bool canStage() const { return false; }
  /// Starts uploading the batch inputs of the next run (StepInputs::batchInputs).
  virtual void stage(const std::vector<Tensor> &batchInputs) {}

  /// Predicts one window batch with `fn` (the artifact's `infer`) and `weights`: for
  /// validation, which uses the weights of one call for all its windows.
  virtual WindowPredictor predictor(const Function &fn, const TensorMap &weights) = 0;

  /// A line for the console after the first step ("" for none): e.g. device memory.
  virtual std::string afterFirstStep() const { return ""; }
  /// A line for the console at the end ("" for none): e.g. how batches were uploaded.
  virtual std::string atEnd() const { return ""; }
};

/// `train_step` of the artifact on the CPU backend (in its compiled precision).
std::unique_ptr<TrainBackend> cpuTrainBackend(const Artifact &artifact,
                                              GradientReducer &reducer);

/// `train_step` of the artifact on the CUDA backend, after checking that the artifact has
/// CUDA kernels (Error saying what to change otherwise); prints the device to `console`.
std::unique_ptr<TrainBackend> cudaTrainBackend(const Artifact &artifact, GradientReducer &reducer,
                                               FILE *console);

} // namespace medrun

#endif // MEDRUN_TRAINBACKEND_H
