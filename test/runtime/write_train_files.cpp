//===- write_train_files.cpp - helper for the Python checks of checkpoints and logs -===//
//
//   write-train-files tensorboard SPEC LOGDIR
//       SPEC: {"events": [{"step": N, "scalars": [[TAG, VALUE], ...]}, ...]}; writes one
//       event file in LOGDIR (one Event per entry) and prints its path.
//   write-train-files save SPEC
//       SPEC: {"root": DIR, "tensors": {NAME: NPY_PATH, ...}, "state": <state.json fields
//       of the training state>, "keep_last": K, "best_metric": NAME}; saves a checkpoint and
//       prints its step directory.
//   write-train-files load PATH OUTDIR
//       loads the checkpoint PATH designates; writes OUTDIR/<name>.npy per tensor and
//       OUTDIR/state.json ({"dir": ..., "state": <training state fields>}).
//
// Errors are printed to stderr with exit status 1.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Checkpoint.h"
#include "medrun/Error.h"
#include "medrun/Npy.h"
#include "medrun/TrainLog.h"

#include <fstream>
#include <iostream>
#include <sstream>

using namespace medrun;

namespace {

Json readJson(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw Error(str(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

int run(int argc, char **argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "tensorboard" && argc == 4) {
    Json spec = readJson(argv[2]);
    TensorBoardWriter w(argv[3]);
    for (const Json &e : spec["events"]) {
      std::vector<std::pair<std::string, double>> values;
      for (const Json &tv : e["scalars"]) // NaN/inf come as strings (JSON has none)
        values.emplace_back(tv[0].get<std::string>(),
                            tv[1].is_string() ? std::stod(tv[1].get<std::string>())
                                              : tv[1].get<double>());
      w.addScalars(e["step"].get<int64_t>(), values);
    }
    w.close();
    std::cout << w.path() << "\n";
    return 0;
  }
  if (cmd == "save" && argc == 3) {
    Json spec = readJson(argv[2]);
    TensorMap tensors;
    for (const auto &[name, file] : spec["tensors"].items())
      tensors[name] = readNpy(file.get<std::string>());
    CheckpointOptions opt;
    opt.keepLast = spec.value("keep_last", 3);
    opt.bestMetric = spec.value("best_metric", "");
    std::cout << saveCheckpoint(spec["root"].get<std::string>(),
                                trainStateFromJson(spec["state"], argv[2]), tensors, opt)
              << "\n";
    return 0;
  }
  if (cmd == "load" && argc == 4) {
    Checkpoint c = loadCheckpoint(argv[2]);
    std::string out = argv[3];
    for (const auto &[name, t] : c.tensors)
      writeNpy(out + "/" + name + ".npy", t);
    std::ofstream(out + "/state.json") << Json{{"dir", c.dir}, {"state", toJson(c.state)}}.dump(2);
    return 0;
  }
  std::cerr << "usage: write-train-files tensorboard SPEC LOGDIR | save SPEC | load PATH OUTDIR\n";
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
