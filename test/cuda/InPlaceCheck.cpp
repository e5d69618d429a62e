//===- InPlaceCheck.cpp - a failed step leaves the resident state as it was --------------===//
//
// in-place.test runs this under the fake driver on Inputs/in_place.mlir compiled for CUDA:
// the update of @w is written straight into the resident tensor (an `in_place` assign). A
// step whose dice_ce finds a target that is no class index must fail and leave @w as it was;
// a good step must change it to what the CPU backend computes.
//
//   cuda-in-place-check ARTIFACT
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Artifact.h"
#include "medrun/Cuda.h"
#include "medrun/Error.h"
#include "medrun/Executor.h"

#include <cmath>
#include <cstdio>
#include <cstring>

using namespace medrun;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cuda-in-place-check ARTIFACT\n");
    return 2;
  }
  try {
    Artifact a = Artifact::load(argv[1]);
    const Function &fn = a.function("step");
    Tensor x(DType::F32, {1, 3, 4, 4, 2}), good(DType::F32, {1, 1, 4, 4, 2}), s(DType::F32, {});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = 0.1f * static_cast<float>(i % 7);
    std::memset(good.raw(), 0, good.nbytes());
    good.data<float>()[3] = 2;
    Tensor bad = good.clone();
    bad.data<float>()[5] = 5; // three classes: 5 is no class index
    s.data<float>()[0] = 2;
    Tensor w(DType::F32, {5});
    for (int i = 0; i < 5; ++i)
      w.data<float>()[i] = 1.0f + static_cast<float>(i);
    CudaSession session(a);
    session.setState({{"w", w}});
    bool failed = false;
    try {
      session.run(fn, {x, bad, s}, {});
    } catch (const Error &e) {
      failed = true;
      std::printf("bad step: %s\n", e.what());
    }
    const Tensor after = session.state().at("w");
    const bool kept = std::memcmp(after.raw(), w.raw(), w.nbytes()) == 0;
    std::printf("bad step %s; state %s\n", failed ? "failed" : "did not fail",
                kept ? "kept" : "CHANGED");
    session.run(fn, {x, good, s}, {});
    session.commit();
    TensorMap updates;
    runCpu(a, fn, {x, good, s}, {{"w", w}}, Precision::F32, nullptr, &updates);
    const Tensor next = session.state().at("w");
    double worst = 0;
    for (int i = 0; i < 5; ++i)
      worst = std::max(worst, std::fabs(double(next.data<float>()[i]) - updates.at("w").data<float>()[i]));
    std::printf("good step: state %s the CPU backend's (max abs %.1e)\n",
                worst <= 1e-6 ? "equals" : "DIFFERS from", worst);
    return failed && kept && worst <= 1e-6 ? 0 : 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cuda-in-place-check: %s\n", e.what());
    return 1;
  }
}
