//===- PlanCommand.cpp - `medrun plan` ------------------------------------------------===//
#include "PlanCommand.h"

#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/Planning.h"
#include "medrun/Preprocess.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace medrun {
namespace {

namespace fs = std::filesystem;

/// Written once complete: a temporary file renamed over the old one.
void writeJson(const fs::path &path, const nlohmann::ordered_json &j) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(4);
    if (!out)
      throw Error(str(tmp.string(), ": cannot write"));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    throw Error(str(path.string(), ": cannot write (", ec.message(), ")"));
}

template <typename J> std::string triple(const J &v) {
  return str(v.at(0).dump(), " x ", v.at(1).dump(), " x ", v.at(2).dump());
}

} // namespace

int planCommand(const PlanCommandOptions &o) {
  if (o.dataset.empty())
    throw Error("medrun plan needs the nnU-Net raw dataset folder: medrun plan DATASET");
  if (!(o.gpuMemoryGb > 0))
    throw Error(str("--gpu-memory: expected a positive number of GB, got ", o.gpuMemoryGb));
  const fs::path out = o.out.empty() ? fs::path(o.dataset) : fs::path(o.out);
  fs::create_directories(out);
  if (!o.nnunetPlans.empty()) {
    // nnU-Net's plan for the dataset: the keys preprocessing reads, and one normalisation
    // per channel of dataset.json; then it is the plan, as written.
    const PreprocessPlan p = readPreprocessPlan(o.nnunetPlans);
    std::ifstream din(fs::path(o.dataset) / "dataset.json");
    const nlohmann::json d = nlohmann::json::parse(din, nullptr, false);
    if (d.is_discarded() || !d.contains("channel_names"))
      throw Error(str((fs::path(o.dataset) / "dataset.json").string(),
                      ": cannot read channel_names (expected an nnU-Net raw dataset folder)"));
    if (d["channel_names"].size() != p.schemes.size())
      throw Error(str(o.nnunetPlans, ": 3d_fullres normalises ", p.schemes.size(),
                      " channel(s), but ", o.dataset, "/dataset.json lists ",
                      d["channel_names"].size(), " (a plan of another dataset?)"));
    for (size_t c = 0; c < p.schemes.size(); ++c)
      if (p.schemes[c] == "CTNormalization" &&
          !p.props.contains(std::to_string(c)))
        throw Error(str(o.nnunetPlans, ": channel ", c, " is CTNormalization but "
                        "foreground_intensity_properties_per_channel has no \"", c, "\""));
    // Copied byte for byte (unless it is that file already).
    const fs::path dest = out / "nnUNetPlans.json";
    std::error_code same;
    if (!fs::equivalent(o.nnunetPlans, dest, same)) {
      std::error_code ec;
      fs::copy_file(o.nnunetPlans, dest, fs::copy_options::overwrite_existing, ec);
      if (ec)
        throw Error(str(dest.string(), ": cannot write (", ec.message(), ")"));
    }
    const nlohmann::json &plans = p.plans;
    const auto &c = plans["configurations"]["3d_fullres"];
    std::printf("plan %s: nnU-Net's %s taken as it is\n", o.dataset.c_str(),
                o.nnunetPlans.c_str());
    std::printf("  3d_fullres: spacing %s, patch %s, batch %s\n", triple(c["spacing"]).c_str(),
                triple(c["patch_size"]).c_str(), c.value("batch_size", nlohmann::json()).dump().c_str());
    std::printf("wrote %s\n", (out / "nnUNetPlans.json").string().c_str());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  PlanOptions po;
  po.dataset = o.dataset;
  po.gpuMemoryGb = o.gpuMemoryGb;
  po.progressMode = o.progress;
  std::fprintf(stderr, "plan %s: fingerprint on %d threads\n", o.dataset.c_str(), numThreads());
  const nlohmann::ordered_json fingerprint = datasetFingerprint(po);
  std::ifstream in(fs::path(o.dataset) / "dataset.json");
  const nlohmann::json d = nlohmann::json::parse(in, nullptr, false);
  std::string name = fs::path(o.dataset).lexically_normal().filename().string();
  if (name.empty())
    name = fs::path(o.dataset).lexically_normal().parent_path().filename().string();
  const nlohmann::ordered_json plans =
      planExperiment(nlohmann::json::parse(fingerprint.dump()), d, name, o.gpuMemoryGb);
  writeJson(out / "dataset_fingerprint.json", fingerprint);
  writeJson(out / "nnUNetPlans.json", plans);
  const auto &c = plans["configurations"]["3d_fullres"];
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("plan %s: %zu cases in %.1f s\n", name.c_str(), fingerprint["spacings"].size(),
              seconds);
  std::printf("  3d_fullres: spacing %s (z, y, x after transpose %s), median shape %s\n",
              triple(c["spacing"]).c_str(), plans["transpose_forward"].dump().c_str(),
              triple(c["median_image_size_in_voxels"]).c_str());
  std::printf("  patch %s, batch %s, %s stages, strides %s\n", triple(c["patch_size"]).c_str(),
              c["batch_size"].dump().c_str(),
              c["architecture"]["arch_kwargs"]["n_stages"].dump().c_str(),
              c["architecture"]["arch_kwargs"]["strides"].dump().c_str());
  std::printf("  normalization %s, non-zero mask %s\n", c["normalization_schemes"].dump().c_str(),
              c["use_mask_for_norm"].dump().c_str());
  std::printf("wrote %s and %s\n", (out / "dataset_fingerprint.json").string().c_str(),
              (out / "nnUNetPlans.json").string().c_str());
  return 0;
}

} // namespace medrun
