//===- CpuTrainBackend.cpp - the training loop's steps on the CPU backend ----------===//
#include "medrun/Executor.h"
#include "medrun/TrainBackend.h"

namespace medrun {
namespace {

class CpuTrainBackend final : public TrainBackend {
public:
  CpuTrainBackend(const Artifact &artifact, GradientReducer &reducer)
      : artifact_(artifact), fn_(artifact.function("train_step")), precision_(precisionOf(fn_)),
        reducer_(reducer) {}

  void setState(const TensorMap &state) override { state_ = state; }
  // A copy of the map shares the tensors: a commit replaces a tensor, it never writes into one.
  TensorMap state() override { return state_; }

  std::vector<Tensor> run(const std::vector<Tensor> &inputs) override {
    updates_.clear();
    return runCpu(artifact_, fn_, inputs, state_, precision_, nullptr, &updates_, &reducer_);
  }
  void commit() override {
    for (auto &[name, value] : updates_)
      state_[name] = std::move(value);
    updates_.clear();
  }

  WindowPredictor predictor(const Function &fn, const TensorMap &weights) override {
    const Precision p = precisionOf(fn);
    return [this, &fn, weights, p](const Tensor &batch) {
      return runCpu(artifact_, fn, {batch}, weights, p)[0];
    };
  }

private:
  const Artifact &artifact_;
  const Function &fn_;
  const Precision precision_;
  GradientReducer &reducer_;
  TensorMap state_, updates_;
};

} // namespace

std::unique_ptr<TrainBackend> cpuTrainBackend(const Artifact &artifact, GradientReducer &reducer) {
  return std::make_unique<CpuTrainBackend>(artifact, reducer);
}

} // namespace medrun
