//===- TrainData.cpp - a training run's data and its contract ----------------------===//
#include "TrainRun.h"

#include <filesystem>
#include <fstream>

namespace medrun::training {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The embedded synthetic volumes; validation draws volumes of its own seed.
void openSynthetic(TrainData &data, const Artifact &artifact, const StepInputs &feed,
                   const json &config, const LoaderSpec &loader, int64_t first,
                   int64_t validateEvery, const BatchAllocator &allocate) {
  data.contract = dataContract(feed.dataset(), nullptr);
  if (loader.imageChannels != 1)
    throw Error(str("data.source synthetic: the synthetic volumes have one channel, but ",
                    artifact.path, "'s model takes ", loader.imageChannels,
                    " (train it on volume files with as many channels)"));
  data.loader = std::make_unique<DataLoader>(makeSyntheticDataset(feed.synthetic()), loader,
                                             first, allocate);
  if (validateEvery > 0) {
    const json &validationConfig = section(config, "validation");
    SyntheticSpec spec = feed.synthetic();
    spec.seed = validationConfig.value("seed", spec.seed + 1);
    spec.volumes = validationConfig.value("volumes", int64_t(2));
    data.validation = memorySource(makeSyntheticDataset(spec));
  }
}

// Volume files: the split goes to OUT/split.json (what validation and inference use).
void openVolumeFiles(TrainData &data, const Artifact &artifact, const StepInputs &feed,
                     const LoaderSpec &loader, int64_t first, int64_t validateEvery,
                     const BatchAllocator &allocate,
                     const std::optional<DataContract> &storedContract,
                     const TrainOptions &options, bool lead, FILE *console) {
  DatasetSplit split = splitDataset(feed.dataset());
  json record = {{"how", split.how}, {"train", json::array()}, {"validation", json::array()}};
  for (auto [list, key] : {std::pair{&split.train, "train"}, {&split.validation, "validation"}})
    for (const Case &c : *list)
      record[key].push_back({{"name", c.name},
                             {"image", c.images.at(0)},
                             {"images", c.images},
                             {"label", c.label}});
  if (lead) {
    std::ofstream out(fs::path(options.out) / "split.json");
    out << record.dump(2) << "\n";
    if (!out)
      throw Error(str(options.out, "/split.json: cannot write the dataset split"));
  }
  std::shared_ptr<const PatchSource> source =
      openDataset(feed.dataset(), split, console, storedContract ? &*storedContract : nullptr);
  data.contract = dataContract(feed.dataset(), source.get());
  if (static_cast<int64_t>(data.contract.channels.size()) != loader.imageChannels)
    throw Error(str("data: the dataset has ", data.contract.channels.size(), " input channel(s)",
                    feed.dataset().source == "nnunet" ? " (dataset.json's channel_names)" : "",
                    ", but ", artifact.path, "'s model takes ", loader.imageChannels,
                    " (generate the model with scripts/gen_mednext.py --in-channels ",
                    data.contract.channels.size(), ")"));
  data.loader = std::make_unique<DataLoader>(source, loader, first, allocate);
  if (validateEvery > 0) {
    data.validation = openValidationDataset(feed.dataset(), split, *source);
    if (!data.validation)
      std::fprintf(console, "validation: off: the split (%s) leaves no validation case\n",
                   split.how.c_str());
  }
}

} // namespace

TrainData openTrainData(const Artifact &artifact, const StepInputs &feed, const json &config,
                        const LoaderSpec &loader, int64_t first, int64_t validateEvery,
                        const BatchAllocator &allocate,
                        const std::optional<DataContract> &storedContract,
                        const TrainOptions &options, bool lead, FILE *console) {
  TrainData data;
  if (feed.dataset().source == "synthetic")
    openSynthetic(data, artifact, feed, config, loader, first, validateEvery, allocate);
  else
    openVolumeFiles(data, artifact, feed, loader, first, validateEvery, allocate, storedContract,
                    options, lead, console);
  // The data contract: what infer and validation apply to a raw volume (Dataset.h).
  data.contractJson = data.contract.toJson();
  if (lead) {
    const fs::path path = fs::path(options.out) / "data.json", tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp);
      out << data.contractJson.dump(2) << "\n";
      if (!out)
        throw Error(str(tmp.string(), ": cannot write the run's data contract"));
    }
    fs::rename(tmp, path);
  }
  return data;
}

} // namespace medrun::training
