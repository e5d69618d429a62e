//===- ExportCommand.cpp - `medrun export`: weights for PyTorch's MedNeXt v1 --------===//
#include "ExportCommand.h"

#include "InferCommand.h"
#include "TrainCommand.h"

#include "medrun/Artifact.h"
#include "medrun/Checkpoint.h"
#include "medrun/Error.h"
#include "medrun/Interop.h"
#include "medrun/Safetensors.h"
#include "medrun/TorchFile.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

namespace medrun {
namespace {

namespace fs = std::filesystem;

bool isState(const std::string &key) {
  return key.rfind("ema.", 0) == 0 || key.rfind("optimizer.", 0) == 0;
}

// The run directory a checkpoints root belongs to (it holds config.json), or "".
std::string runOf(const fs::path &root) {
  fs::path run = root.parent_path();
  return fs::exists(run / "config.json") ? run.string() : "";
}

} // namespace

int exportCommand(const ExportOptions &o) {
  if (o.out.empty())
    throw Error("`medrun export` needs -o FILE.safetensors (where the state_dict goes)");
  if (!o.weights.empty() && o.weights != "ema" && o.weights != "model")
    throw Error(str("--weights: expected ema or model, got '", o.weights, "'"));
  if (!o.which.empty() && o.which != "last" && o.which != "best")
    throw Error(str("--which: expected last or best, got '", o.which, "'"));
  const fs::path in = o.input;
  if (!fs::exists(in))
    throw Error(str(o.input, ": no such run, checkpoint or file"));

  // 1. The tensors: a checkpoint (verified: sizes and CRC-32C) or a file.
  std::string source, run;
  std::optional<Checkpoint> ckpt;
  TensorMap tensors;
  std::string note;
  const std::string name = in.filename().string();
  if (fs::is_directory(in) || name == "latest" || name == "best") {
    fs::path root; // a checkpoints root, where --which chooses
    if (fs::is_directory(in / "checkpoints"))
      root = in / "checkpoints";
    else if (fs::is_directory(in) && !fs::exists(in / "state.json"))
      root = in;
    std::string step;
    if (root.empty()) {
      if (!o.which.empty())
        throw Error(str("--which: ", o.input, " is one checkpoint already (--which chooses in a "
                        "run or checkpoints directory)"));
      step = resolveCheckpoint(o.input);
    } else if (o.which == "best") {
      if (!fs::exists(root / "best"))
        throw Error(str(o.input, ": no best checkpoint (", (root / "best").string(),
                        " is missing); --which last exports the latest one"));
      step = resolveCheckpoint((root / "best").string());
    } else {
      step = resolveCheckpoint(root.string());
    }
    ckpt = loadCheckpoint(step);
    tensors = ckpt->tensors;
    source = str(ckpt->dir, " (step ", ckpt->state.step, ")");
    run = runOf(fs::path(ckpt->dir).parent_path());
  } else {
    tensors = isTorchFile(o.input) ? readStateDict(o.input, &note) : loadTensors(o.input);
    eraseDummyTensor(tensors);
    source = o.input;
  }

  // 2. The weights: EMA by default where there are EMA weights.
  bool hasEma = false;
  for (auto &[key, t] : tensors)
    hasEma = hasEma || key.rfind("ema.", 0) == 0;
  const std::string weights = o.weights.empty() ? (hasEma ? "ema" : "model") : o.weights;
  if (weights == "ema" && !hasEma)
    throw Error(str(source, ": no EMA weights (ema.<key>: a recipe without an ema section saves none); "
                            "--weights model exports the trained weights"));
  TensorMap chosen;
  for (auto &[key, t] : tensors) {
    if (isState(key))
      continue;
    if (weights == "model") {
      chosen[key] = t;
      continue;
    }
    auto ema = tensors.find("ema." + key);
    if (ema == tensors.end())
      throw Error(str(source, ": --weights ema: no EMA weight 'ema.", key, "' for '", key, "'"));
    chosen[key] = ema->second;
  }
  for (auto &[key, t] : chosen)
    if (!isFloat(t.dtype()))
      throw Error(str(source, ": tensor '", key, "' is ", dtypeName(t.dtype()),
                      ", expected floating point weights"));

  // 3. The model the run trained (its compiled recipe: config.json's compile hash in the
  //    recipe cache, or --artifact), then MedNeXt v1's own structure.
  std::string artifactPath = o.artifact, checkedRun;
  std::string hash;
  if (!run.empty()) {
    std::ifstream cfg(fs::path(run) / "config.json");
    nlohmann::json config = nlohmann::json::parse(cfg, nullptr, /*allow_exceptions=*/false);
    if (config.is_object())
      hash = config.value("compile_hash", "");
    if (ckpt && !hash.empty() && !ckpt->state.recipeHash.empty() && ckpt->state.recipeHash != hash)
      std::fprintf(stderr,
                   "medrun: warning: %s was written by another compiled recipe (%s) than %s/config.json "
                   "records (%s)\n",
                   ckpt->dir.c_str(), ckpt->state.recipeHash.c_str(), run.c_str(), hash.c_str());
  }
  if (artifactPath.empty() && !hash.empty())
    for (const char *suffix : {".medc", ".cuda.medc"})
      if (fs::path p = fs::path(recipeCacheDir()) / (hash + suffix); fs::exists(p)) {
        artifactPath = p.string();
        break;
      }
  if (!artifactPath.empty()) {
    Artifact a = Artifact::load(artifactPath);
    std::vector<std::pair<std::string, Shape>> expected;
    for (const ParameterInfo *p : modelParameters(a))
      expected.push_back({p->name, p->shape});
    auto recipe = a.options.find("recipe");
    checkKeys(expected, chosen,
              str(source, ": the weights do not match the model of ", artifactPath, " (",
                  recipe != a.options.end() && !recipe->second.empty() ? recipe->second : a.source,
                  ")"));
    checkedRun = str("the run's model (", artifactPath, ")");
  }
  const MedNeXtV1 net = mednextV1Of(chosen, source);

  // 4. The state_dict, in PyTorch's order, f32.
  std::vector<std::pair<std::string, Tensor>> out;
  int64_t elements = 0;
  for (auto &[key, shape] : mednextV1StateDict(net)) {
    Tensor t;
    if (key == "dummy_tensor") {
      t = Tensor(DType::F32, {1});
      t.data<float>()[0] = 1.0f; // as MedNeXt v1 initializes it
    } else {
      const Tensor &w = chosen.at(key);
      t = w.dtype() == DType::F32 ? w : w.to(DType::F32);
      elements += t.numel();
    }
    out.emplace_back(key, t);
  }
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"mednext_v1", net.json()}, {"weights", weights}, {"source", source}};
  // 5. The run's data contract travels with the weights (their metadata, and OUT's stem +
  //    .data.json beside them), so that infer and predict from the export normalise as the run
  //    did. Weights of a run need it: a checkpoint without one is refused.
  std::string contractFrom;
  std::optional<DataContract> contract = findContract(ckpt ? ckpt->dir : o.input, contractFrom);
  if (!contract && ckpt)
    throw Error(str(source, ": no data contract (", run.empty() ? "no run directory" : run + "/data.json",
                    " is missing and the checkpoint's state.json has no extra.data): without it the "
                    "export's users cannot normalise inputs as the run did; export a checkpoint of "
                    "a run that records its data (any run of this medrun)"));
  std::string contractPath;
  if (contract) {
    const std::string text = contract->toJson().dump();
    metadata[kContractMetadataKey] = text;
    contractPath = (fs::path(o.out).parent_path() / (fs::path(o.out).stem().string() + ".data.json"))
                       .string();
  }
  writeSafetensors(o.out, out, metadata);
  if (contract) {
    std::ofstream beside(contractPath);
    beside << contract->toJson().dump(2) << "\n";
    if (!beside)
      throw Error(str(contractPath, ": cannot write the run's data contract beside the weights"));
  }

  std::printf("%s: %s weights%s\n", source.c_str(), weights == "ema" ? "EMA" : "model",
              weights == "ema" ? " (--weights model for the trained weights)"
              : hasEma         ? " (--weights ema for the EMA weights)"
                               : "");
  if (!note.empty())
    std::printf("%s: %s\n", o.input.c_str(), note.c_str());
  std::printf("checked against MedNeXt v1's state_dict%s\n",
              !checkedRun.empty() ? (" and " + checkedRun).c_str()
              : run.empty()       ? ""
                                  : " (the run's compiled recipe is not in the cache: --artifact "
                                    "A compares with it too)");
  std::printf("wrote %s: %zu tensors (%lld elements) and dummy_tensor\n", o.out.c_str(),
              out.size() - 1, static_cast<long long>(elements));
  std::string factory = net.factory();
  std::printf("PyTorch (MIC-DKFZ MedNeXt v1): model = %s\n", net.python().c_str());
  if (!factory.empty())
    std::printf("  (the same network: %s)\n", factory.c_str());
  std::printf("  model.load_state_dict(safetensors.torch.load_file('%s'), strict=True)\n",
              o.out.c_str());
  if (contract)
    std::printf("data contract (from %s): in its metadata (%s) and %s; infer and predict apply it\n",
                contractFrom.c_str(), kContractMetadataKey, contractPath.c_str());
  else
    std::printf("no data contract (%s is a weights file without one): infer needs --normalization\n",
                o.input.c_str());
  return 0;
}

} // namespace medrun
