//===- TrainData.cpp - a training run's data and its contract ----------------------===//
#include "TrainRun.h"

#include <algorithm>
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

// nnU-Net's ignore label of the dataset must be the one the compiled loss leaves out (the
// recipe's loss.ignore_label), and the augmentation's label interpolation must carry it.
void checkIgnoreLabel(const Artifact &artifact, const DatasetSplit &split,
                      const DatasetSpec &spec) {
  const std::string meta = (fs::path(spec.path) / "dataset.json").string();
  // The step's ops and those inside its fusions' bodies.
  std::vector<const OpInfo *> ops;
  std::vector<const Function *> todo = {&artifact.function("train_step")};
  while (!todo.empty()) {
    const Function *fn = todo.back();
    todo.pop_back();
    for (const OpInfo &op : fn->ops) {
      ops.push_back(&op);
      if (op.body)
        todo.push_back(op.body.get());
    }
  }
  for (const OpInfo *o : ops) {
    const OpInfo &op = *o;
    if (op.kind == "dice_ce" || op.kind == "dice_ce_grad") {
      std::optional<int64_t> loss;
      if (op.attrs.count("ignore_index"))
        loss = op.intAttr("ignore_index");
      if (split.ignoreLabel && loss != split.ignoreLabel)
        throw Error(str(meta, ": labels.ignore = ", *split.ignoreLabel,
                        " (nnU-Net's ignore label), but ", artifact.path, "'s loss ",
                        loss ? str("leaves out ", *loss) : std::string("leaves out no label"),
                        ": set loss.ignore_label: ", *split.ignoreLabel, " in the recipe"));
      if (!split.ignoreLabel && loss)
        throw Error(str("loss.ignore_label: ", *loss, ", but ", meta,
                        " has no ignore label (labels.ignore): leave loss.ignore_label out"));
    }
    if (split.ignoreLabel && op.kind == "spatial_transform" &&
        op.strAttr("mode") == "linear_argmax") {
      const std::vector<int64_t> labels = op.intsAttr("labels");
      if (std::find(labels.begin(), labels.end(), *split.ignoreLabel) == labels.end())
        throw Error(str(meta, ": labels.ignore = ", *split.ignoreLabel, ", but ", op.describe(),
                        " (the augmentation) interpolates the labels ", json(labels).dump(),
                        " only, so the ignore label would become a class: count it among the "
                        "pipeline's labels (augment.classes: ", *split.ignoreLabel + 1,
                        ", the default with loss.ignore_label: ", *split.ignoreLabel, ")"));
    }
  }
}

// Volume files: the split goes to OUT/split.json (what validation and inference use).
void openVolumeFiles(TrainData &data, const Artifact &artifact, const StepInputs &feed,
                     const LoaderSpec &loader, int64_t first, int64_t validateEvery,
                     const BatchAllocator &allocate,
                     const std::optional<DataContract> &storedContract,
                     const TrainOptions &options, bool lead, FILE *console) {
  DatasetSplit split = splitDataset(feed.dataset());
  checkIgnoreLabel(artifact, split, feed.dataset());
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
