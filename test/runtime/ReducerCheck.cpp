//===- ReducerCheck.cpp - medrun's training loop with a stand-in GradientReducer -----===//
//
// data-parallel.test (test/medrun, test/cuda) trains a step compiled with --data-parallel
// through this program: medrun::train with a reducer that counts its calls and elements
// and, on the CPU backend, multiplies each bucket by --scale (what summing over --world
// identical ranks does when scale = world); the loop's own sums (loss, decisions) are those
// of --world identical ranks. It prints
//   reducer: world W, C calls, E elements
// after the run.
//
//   train-reducer-check RECIPE.json ARTIFACT OUT [--cuda] [--world W] [--scale S] [--steps N]
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Train.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

using namespace medrun;

namespace {

class StandIn final : public GradientReducer {
public:
  StandIn(int world, double scale, bool host) : world_(world), scale_(scale), host_(host) {}
  int worldSize() const override { return world_; }
  void allReduceSum(void *data, size_t count, DType dtype, void *stream) override {
    ++calls;
    elements += count;
    if (scale_ == 1)
      return;
    if (!host_ || dtype != DType::F32)
      throw Error("the stand-in reducer scales f32 host data only");
    float *x = static_cast<float *>(data);
    for (size_t i = 0; i < count; ++i)
      x[i] = static_cast<float>(x[i] * scale_);
  }
  void sumOverRanks(float *values, size_t count) override {
    for (size_t i = 0; i < count; ++i)
      values[i] *= static_cast<float>(world_);
  }
  int64_t calls = 0, elements = 0;

private:
  int world_;
  double scale_;
  bool host_;
};

} // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: train-reducer-check RECIPE.json ARTIFACT OUT [--cuda] "
                         "[--world W] [--scale S] [--steps N]\n");
    return 2;
  }
  bool cuda = false;
  int world = 1;
  double scale = 1;
  int64_t steps = 0;
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--cuda")
      cuda = true;
    else if (a == "--world" && i + 1 < argc)
      world = std::atoi(argv[++i]);
    else if (a == "--scale" && i + 1 < argc)
      scale = std::atof(argv[++i]);
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "train-reducer-check: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  try {
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json config = nlohmann::json::parse(text.str());
    if (steps > 0)
      config["train"]["steps"] = steps;
    Artifact artifact = Artifact::load(argv[2]);
    StandIn reducer(world, scale, !cuda);
    TrainOptions options;
    options.out = argv[3];
    options.overwrite = true;
    options.cuda = cuda;
    options.reducer = &reducer;
    options.progressMode = 2;
    train(artifact, config, options);
    std::printf("reducer: world %d, %lld calls, %lld elements\n", world,
                static_cast<long long>(reducer.calls), static_cast<long long>(reducer.elements));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "train-reducer-check: %s\n", e.what());
    return 1;
  }
  return 0;
}
