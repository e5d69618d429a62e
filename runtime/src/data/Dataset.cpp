//===- Dataset.cpp - training data from volume files -----------------------------===//
//
// Cases are found (listed, or by nnU-Net's raw layout), split, opened once, and scanned
// once by slabs for the foreground locations and intensity statistics. A patch is then a
// box read through the shared chunk cache: the image normalised, the labels relabelled to
// small ids (instances) or checked as class indices, and the targets computed on the box
// as the synthetic source computes them on a whole volume.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Dataset.h"
#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/TrainLog.h"
#include "medrun/Volume.h"

#include "DataRandom.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

namespace medrun {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr uint32_t kTagSplit = 6, kTagReservoir = 7;
constexpr size_t kLocations = 10000; // foreground voxels kept per class and volume (nnU-Net)
constexpr size_t kIntensities = 10000; // foreground intensities per volume for CT statistics

std::string withKey(const std::string &file, const std::string &key) {
  return key.empty() ? file : file + "/" + key;
}

bool endsWith(const std::string &s, const std::string &e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

/// nnU-Net raw: dataset.json, imagesTr/CASE_0000<ending>, labelsTr/CASE<ending>.
std::vector<Case> nnunetCases(const DatasetSpec &spec, DatasetSplit &split) {
  const std::string dir = spec.path;
  if (dir.empty())
    throw Error("data.path: data.source nnunet needs the dataset folder (holding dataset.json, "
                "imagesTr/ and labelsTr/)");
  const std::string meta = (fs::path(dir) / "dataset.json").string();
  if (!fs::exists(meta))
    throw Error(str(meta, ": no such file (data.path must be an nnU-Net raw dataset folder)"));
  json d = readJsonFile(meta);
  if (!d.is_object() || !d.contains("channel_names") || !d["channel_names"].is_object() ||
      !d.contains("labels") || !d["labels"].is_object())
    throw Error(str(meta, ": expected the keys channel_names and labels (nnU-Net v2 format)"));
  const json &channels = d["channel_names"];
  if (channels.empty())
    throw Error(str(meta, ": channel_names lists no channel (expected {\"0\": \"CT\", ...})"));
  std::vector<std::string> modalities;
  for (size_t k = 0; k < channels.size(); ++k) {
    const std::string key = std::to_string(k);
    if (!channels.contains(key))
      throw Error(str(meta, ": channel_names has no \"", key, "\" (expected the keys 0..",
                      channels.size() - 1, ")"));
    modalities.push_back(channels[key].is_string() ? channels[key].get<std::string>() : "");
  }
  for (auto &[name, value] : d["labels"].items()) {
    if (name == "ignore") { // nnU-Net's ignore label: checked below, not a class
      if (!value.is_number_integer())
        throw Error(str(meta, ": labels.ignore = ", value.dump(), ": expected an integer label"));
      split.ignoreLabel = value.get<int64_t>();
      continue;
    }
    if (value.is_array())
      throw Error(str(meta, ": labels.", name, " is a region ", value.dump(),
                      "; region-based training needs a sigmoid loss per region, and medrun "
                      "trains softmax classes: expected integer labels"));
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 255)
      throw Error(str(meta, ": labels.", name, " = ", value.dump(),
                      ": expected an integer class index in 0..255"));
    split.maxLabel = std::max(split.maxLabel, value.get<int64_t>());
    split.labels.push_back({name, value.get<int64_t>()});
  }
  std::stable_sort(split.labels.begin(), split.labels.end(),
                   [](const auto &a, const auto &b) { return a.second < b.second; });
  // nnU-Net's rule (label_handling.py): the ignore label is the highest label value, the
  // classes below it 0..K-1.
  if (split.ignoreLabel && *split.ignoreLabel != split.maxLabel + 1)
    throw Error(str(meta, ": labels.ignore = ", *split.ignoreLabel,
                    ": nnU-Net's ignore label must be the highest label value, one above the "
                    "classes (expected ", split.maxLabel + 1, ")"));
  split.channelNames = modalities;
  if (d.contains("regions_class_order"))
    throw Error(str(meta, ": regions_class_order: region-based datasets are not supported "
                          "(expected integer labels)"));
  const std::string ending = d.value("file_ending", ".nii.gz");
  if (fs::exists(fs::path(dir) / "preprocess.json")) {
    // `medrun preprocess`'s cache: CASE.zarr/data_XXXX (normalised already) and seg, where
    // -1 (outside the non-zero region) is background, as nnU-Net trains it.
    json manifest = readJsonFile((fs::path(dir) / "preprocess.json").string());
    if (spec.normalization != "auto" && spec.normalization != "none")
      throw Error(str("data.normalization: ", dir,
                      " is a preprocessed cache, normalised by its "
                      "plan already; expected auto or none, got ",
                      spec.normalization));
    const json listed = manifest.value("cases", json::object());
    if (!listed.is_object())
      throw Error(str(dir, "/preprocess.json: cases: expected an object (run medrun preprocess "
                           "again)"));
    std::vector<Case> cases;
    for (const auto &[name, stamp] : listed.items()) {
      Case c;
      c.name = name;
      const fs::path zarr = fs::path(dir) / (name + ".zarr");
      c.label = (zarr / "seg").string();
      for (size_t k = 0; k < modalities.size(); ++k) {
        char key[32];
        std::snprintf(key, sizeof key, "data_%04zu", k);
        c.images.push_back((zarr / key).string());
        if (!fs::exists(fs::path(c.images.back()) / ".zarray"))
          throw Error(str("case ", name, ": ", c.images.back(),
                          " is missing from the "
                          "preprocessed cache (run medrun preprocess again)"));
      }
      cases.push_back(c);
    }
    if (cases.empty())
      throw Error(str(dir, "/preprocess.json: no case (run medrun preprocess again)"));
    split.normalizations.assign(modalities.size(), "none");
    split.preprocessed = manifest.value("plans", std::string("?"));
    return cases;
  }
  const fs::path labelsDir = fs::path(dir) / "labelsTr", imagesDir = fs::path(dir) / "imagesTr";
  if (!fs::is_directory(labelsDir) || !fs::is_directory(imagesDir))
    throw Error(str(dir, ": expected the folders imagesTr/ and labelsTr/ (nnU-Net raw layout)"));
  std::vector<Case> cases;
  for (const auto &entry : fs::directory_iterator(labelsDir)) {
    std::string name = entry.path().filename().string();
    if (!endsWith(name, ending) || name[0] == '.')
      continue;
    Case c;
    c.name = name.substr(0, name.size() - ending.size());
    c.label = entry.path().string();
    for (size_t k = 0; k < modalities.size(); ++k) {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "_%04zu", k);
      c.images.push_back((imagesDir / (c.name + suffix + ending)).string());
      if (!fs::exists(c.images.back()))
        throw Error(str("case ", c.name, ": channel ", k, " (", modalities[k],
                        ") is missing: ", c.images.back(), " (dataset.json lists ",
                        modalities.size(), " channel(s); the case is labelled in ", c.label, ")"));
    }
    cases.push_back(c);
  }
  if (cases.empty())
    throw Error(str(labelsDir.string(), ": no label files ending in ", ending));
  // auto: nnU-Net's scheme of each channel's name.
  for (const std::string &m : modalities) {
    std::string lower = m;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    split.normalizations.push_back(spec.normalization != "auto" ? spec.normalization
                                   : lower == "ct"              ? "ct"
                                   : lower == "nonorm"          ? "none"
                                                                : "zscore");
  }
  return cases;
}

std::vector<Case> listedCases(const DatasetSpec &spec) {
  if (spec.images.empty())
    throw Error("data.images: data.source files needs the image volumes (a list of files, "
                "with data.labels or data.label_key for their labels)");
  if (!spec.labels.empty() && spec.labels.size() != spec.images.size())
    throw Error(str("data.labels: ", spec.labels.size(), " label volumes for ",
                    spec.images.size(), " images (expected one per image)"));
  if (spec.labels.empty() && spec.labelKey.empty())
    throw Error("data.labels: name the label volumes (a list as long as data.images), or "
                "data.label_key for the labels inside each image's container");
  std::vector<Case> cases;
  for (size_t i = 0; i < spec.images.size(); ++i) {
    Case c;
    c.images = {withKey(spec.images[i], spec.imageKey)};
    c.label = spec.labels.empty() ? withKey(spec.images[i], spec.labelKey)
                                  : withKey(spec.labels[i], spec.labelKey);
    c.name = spec.images[i];
    cases.push_back(c);
  }
  return cases;
}

/// MT19937 as NumPy's legacy RandomState(seed) runs it: an integer seed goes through
/// init_genrand, and each draw is genrand_int32.
class Mt19937 {
public:
  explicit Mt19937(uint32_t seed) {
    mt_[0] = seed;
    for (uint32_t k = 1; k < 624; ++k)
      mt_[k] = 1812433253u * (mt_[k - 1] ^ (mt_[k - 1] >> 30)) + k;
  }
  uint32_t next() {
    if (i_ >= 624) {
      for (int k = 0; k < 624; ++k) {
        const uint32_t y = (mt_[k] & 0x80000000u) | (mt_[(k + 1) % 624] & 0x7fffffffu);
        mt_[k] = mt_[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfu : 0u);
      }
      i_ = 0;
    }
    uint32_t y = mt_[i_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }
  /// NumPy's random_interval: uniform in [0, max] by masked rejection.
  uint32_t interval(uint32_t max) {
    if (max == 0)
      return 0;
    uint32_t mask = max;
    for (int s = 1; s < 32; s *= 2)
      mask |= mask >> s;
    uint32_t v;
    while ((v = next() & mask) > max) {
    }
    return v;
  }

private:
  uint32_t mt_[624];
  int i_ = 624;
};

} // namespace

std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> kfoldSplits(size_t n, size_t folds,
                                                                             uint32_t seed) {
  if (folds < 2 || n < folds)
    throw Error(
        str("a ", folds, "-fold split of ", n, " cases: expected at least ", folds, " cases"));
  // sklearn's KFold(shuffle=True, random_state=seed): RandomState(seed).shuffle(arange(n)),
  // then consecutive test folds, the first n % folds one larger; both sides in index order.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i)
    order[i] = i;
  Mt19937 rng(seed);
  for (size_t i = n - 1; i > 0; --i)
    std::swap(order[i], order[rng.interval(static_cast<uint32_t>(i))]);
  std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> out;
  size_t at = 0;
  for (size_t f = 0; f < folds; ++f) {
    const size_t size = n / folds + (f < n % folds ? 1 : 0);
    std::vector<bool> test(n, false);
    for (size_t k = at; k < at + size; ++k)
      test[order[k]] = true;
    at += size;
    std::pair<std::vector<size_t>, std::vector<size_t>> split;
    for (size_t i = 0; i < n; ++i)
      (test[i] ? split.second : split.first).push_back(i);
    out.push_back(std::move(split));
  }
  return out;
}

namespace {

std::array<double, 3> readSpacing(const json &j, const std::string &what) {
  std::array<double, 3> s{};
  if (!j.is_array() || j.size() != 3)
    throw Error(str(what, ": spacing: expected three numbers [z, y, x], got ", j.dump()));
  for (int a = 0; a < 3; ++a) {
    if (!j[a].is_number() || !(j[a].get<double>() > 0))
      throw Error(str(what, ": spacing: expected positive numbers, got ", j.dump()));
    s[a] = j[a].get<double>();
  }
  return s;
}

} // namespace

void ChannelNormalization::apply(float *x, int64_t n) const {
  if (scheme == "none")
    return;
  if (scheme == "divide255") {
    for (int64_t i = 0; i < n; ++i)
      x[i] = x[i] / 255.0f;
    return;
  }
  if (scheme != "zscore" && scheme != "ct")
    throw Error(str("normalization: unknown scheme '", scheme,
                    "' (expected none, divide255, "
                    "zscore or ct)"));
  const double inv = 1.0 / std::max(std, 1e-8);
  const double l = scheme == "ct" ? lo : -INFINITY, h = scheme == "ct" ? hi : INFINITY;
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<float>((std::clamp<double>(x[i], l, h) - mean) * inv);
}

void ChannelNormalization::useVolumeStatistics(const float *x, int64_t n) {
  // The sums in voxel order, as the training scan adds them slab after slab.
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sq += static_cast<double>(x[i]) * x[i];
  }
  const double count = static_cast<double>(n);
  mean = sum / count;
  std = std::sqrt(std::max(0.0, sq / count - mean * mean));
}

std::string ChannelNormalization::describe() const {
  if (scheme == "ct")
    return str("ct (clip ", lo, "..", hi, ", mean ", mean, ", std ", std, ")");
  if (scheme == "zscore")
    return "zscore (each volume by its own mean and std)";
  return scheme;
}

nlohmann::ordered_json DataContract::toJson() const {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["format"] = "medrun data contract 1";
  j["source"] = source;
  if (!dataset.empty())
    j["dataset"] = dataset;
  j["channels"] = ojson::array();
  for (const ChannelNormalization &c : channels) {
    ojson k = {{"name", c.name}, {"normalization", c.scheme}};
    if (c.scheme == "ct") {
      k["mean"] = c.mean;
      k["std"] = c.std;
      k["percentile_00_5"] = c.lo;
      k["percentile_99_5"] = c.hi;
    }
    j["channels"].push_back(k);
  }
  j["spacing"] = spacing ? ojson(*spacing) : ojson(nullptr);
  if (!preprocessed.empty())
    j["preprocessed_by"] = preprocessed;
  ojson l = ojson::object();
  for (const auto &[name, value] : labels)
    l[name] = value;
  j["labels"] = l;
  if (ignoreLabel)
    j["ignore_label"] = *ignoreLabel;
  return j;
}

DataContract DataContract::fromJson(const json &j, const std::string &what) {
  if (!j.is_object())
    throw Error(str(what, ": the data contract is not a JSON object"));
  auto need = [&](const char *key) -> const json & {
    auto it = j.find(key);
    if (it == j.end())
      throw Error(str(what, ": the data contract has no '", key, "'"));
    return *it;
  };
  DataContract c;
  if (!need("format").is_string() || need("format").get<std::string>() != "medrun data contract 1")
    throw Error(
        str(what, ": format: expected \"medrun data contract 1\", got ", need("format").dump()));
  if (!need("source").is_string())
    throw Error(str(what, ": source: expected a string"));
  c.source = need("source").get<std::string>();
  if (j.contains("dataset") && !j["dataset"].is_string())
    throw Error(str(what, ": dataset: expected the dataset folder's path"));
  c.dataset = j.value("dataset", "");
  const json &channels = need("channels");
  if (!channels.is_array() || channels.empty())
    throw Error(str(what, ": channels: expected a list of one entry per input channel"));
  for (size_t k = 0; k < channels.size(); ++k) {
    const json &ch = channels[k];
    const std::string at = str(what, ": channels[", k, "]");
    if (!ch.is_object() || !ch.contains("normalization") || !ch["normalization"].is_string())
      throw Error(str(at, ": expected {\"name\", \"normalization\", ...}"));
    ChannelNormalization n;
    if (ch.contains("name") && !ch["name"].is_string())
      throw Error(str(at, ": name: expected the channel's name (a string)"));
    n.name = ch.value("name", "");
    n.scheme = ch["normalization"].get<std::string>();
    if (n.scheme == "ct") {
      double *fields[] = {&n.mean, &n.std, &n.lo, &n.hi};
      const char *keys[] = {"mean", "std", "percentile_00_5", "percentile_99_5"};
      for (int f = 0; f < 4; ++f) {
        if (!ch.contains(keys[f]) || !ch[keys[f]].is_number())
          throw Error(str(at, ": normalization ct needs the statistic '", keys[f],
                          "' (a number), which is missing"));
        *fields[f] = ch[keys[f]].get<double>();
      }
      if (!(n.lo <= n.hi) || !std::isfinite(n.mean) || !(n.std >= 0))
        throw Error(
            str(at, ": ct statistics out of range (clip ", n.lo, "..", n.hi, ", std ", n.std, ")"));
    } else if (n.scheme != "none" && n.scheme != "divide255" && n.scheme != "zscore") {
      throw Error(
          str(at, ": normalization: expected none, divide255, zscore or ct, got '", n.scheme, "'"));
    }
    c.channels.push_back(n);
  }
  if (j.contains("spacing") && !j["spacing"].is_null())
    c.spacing = readSpacing(j["spacing"], what);
  if (j.contains("labels")) {
    if (!j["labels"].is_object())
      throw Error(str(what, ": labels: expected {\"name\": value}"));
    for (auto &[name, value] : j["labels"].items()) {
      if (!value.is_number_integer())
        throw Error(str(what, ": labels.", name, ": expected an integer"));
      c.labels.push_back({name, value.get<int64_t>()});
    }
    std::stable_sort(c.labels.begin(), c.labels.end(),
                     [](const auto &a, const auto &b) { return a.second < b.second; });
  }
  if (j.contains("preprocessed_by")) {
    if (!j["preprocessed_by"].is_string())
      throw Error(str(what, ": preprocessed_by: expected the plan's path"));
    c.preprocessed = j["preprocessed_by"].get<std::string>();
  }
  if (j.contains("ignore_label") && !j["ignore_label"].is_null()) {
    if (!j["ignore_label"].is_number_integer())
      throw Error(str(what, ": ignore_label: expected an integer"));
    c.ignoreLabel = j["ignore_label"].get<int64_t>();
  }
  return c;
}

DatasetSplit splitDataset(const DatasetSpec &spec) {
  DatasetSplit split;
  std::vector<Case> cases;
  if (spec.source == "nnunet")
    cases = nnunetCases(spec, split);
  else if (spec.source == "files") {
    cases = listedCases(spec);
    split.normalizations = {spec.normalization};
    split.channelNames = {""};
  } else
    throw Error(str("data.source: expected synthetic, files or nnunet, got '", spec.source, "'"));
  std::sort(cases.begin(), cases.end(), [](const Case &a, const Case &b) { return a.name < b.name; });

  if (spec.allCases) {
    // nnU-Net's fold all: every case trains, and validation (a check, not a held-out score)
    // runs on the same cases.
    split.train = cases;
    split.validation = cases;
    split.how = "fold all (every case trains; validation on the training cases)";
    if (split.train.empty())
      throw Error("data: fold all: the dataset has no case");
    return split;
  }
  std::string splits = spec.splits;
  json generated;
  if (splits.empty() && spec.source == "nnunet") {
    splits = (fs::path(spec.path) / "splits_final.json").string();
    if (!fs::exists(splits)) {
      // As nnU-Net does without the file: 5 folds by KFold with its seed over the sorted
      // case names, written to the dataset so that every fold's run reads the same split.
      if (cases.size() < 5)
        throw Error(str(spec.path,
                        ": no splits_final.json, and nnU-Net's 5-fold split needs "
                        "at least 5 cases; the dataset has ",
                        cases.size(),
                        " (write a splits_final.json: [{\"train\": [...], \"val\": [...]}])"));
      generated = json::array();
      for (const auto &[train, val] : kfoldSplits(cases.size(), 5, 12345)) {
        json fold = {{"train", json::array()}, {"val", json::array()}};
        for (size_t i : train)
          fold["train"].push_back(cases[i].name);
        for (size_t i : val)
          fold["val"].push_back(cases[i].name);
        generated.push_back(fold);
      }
      const std::string tmp = splits + ".tmp";
      std::ofstream out(tmp);
      out << generated.dump(4) << "\n";
      out.close();
      std::error_code ec;
      if (!out || (fs::rename(tmp, splits, ec), ec))
        throw Error(str(splits, ": cannot write nnU-Net's 5-fold split there (",
                        ec ? ec.message() : "write failed",
                        "): make the dataset folder writable, or give data.splits"));
    }
  }
  if (!splits.empty()) {
    // nnU-Net: a list of folds, each {"train": [cases], "val": [cases]}.
    json s = generated.is_array() ? generated : readJsonFile(splits);
    if (!s.is_array() || s.empty())
      throw Error(str(splits, ": expected a list of folds [{\"train\": [...], \"val\": [...]}]"));
    if (spec.fold < 0 || spec.fold >= static_cast<int64_t>(s.size()))
      throw Error(str("data.fold: fold ", spec.fold, " does not exist: ", splits, " has ", s.size(),
                      " fold(s), 0..", s.size() - 1, " (or fold all: every case)"));
    const json &fold = s[spec.fold];
    auto names = [&](const char *key) {
      if (!fold.is_object() || !fold.contains(key) || !fold[key].is_array())
        throw Error(str(splits, ": fold ", spec.fold, " has no list '", key, "'"));
      std::vector<std::string> out;
      for (const json &n : fold[key]) {
        if (!n.is_string())
          throw Error(str(splits, ": fold ", spec.fold, ".", key, ": expected case names"));
        out.push_back(n.get<std::string>());
      }
      return out;
    };
    for (const char *key : {"train", "val"})
      for (const std::string &n : names(key)) {
        auto it = std::find_if(cases.begin(), cases.end(), [&](const Case &c) { return c.name == n; });
        if (it == cases.end())
          throw Error(str(splits, ": fold ", spec.fold, ".", key, " names case '", n,
                          "', which the dataset does not have"));
        (std::string(key) == "train" ? split.train : split.validation).push_back(*it);
      }
    split.how = str(fs::path(splits).filename().string(),
                    generated.is_array() ? " (written now)" : "", " fold ", spec.fold);
  } else {
    if (!(spec.valFraction >= 0 && spec.valFraction < 1))
      throw Error(str("data.val_fraction: expected a fraction in [0, 1), got ", spec.valFraction));
    const size_t n = cases.size();
    size_t nval = static_cast<size_t>(std::llround(spec.valFraction * static_cast<double>(n)));
    nval = std::min(nval, n - 1); // at least one training case
    // A seeded permutation (Fisher-Yates on Philox): the first nval cases validate.
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i)
      order[i] = i;
    data::Stream s(spec.seed, kTagSplit, 0, 0);
    for (size_t i = n; i > 1; --i)
      std::swap(order[i - 1], order[s.below(i)]);
    std::vector<bool> val(n, false);
    for (size_t i = 0; i < nval; ++i)
      val[order[i]] = true;
    for (size_t i = 0; i < n; ++i)
      (val[i] ? split.validation : split.train).push_back(cases[i]);
    split.how = str("val_fraction ", spec.valFraction, ", seed ", spec.seed);
  }
  if (split.train.empty())
    throw Error(str("data: the split (", split.how, ") leaves no training case"));
  return split;
}

namespace {

struct FileVolume {
  Case c;
  std::vector<std::unique_ptr<VolumeReader>> images; ///< one per channel
  std::unique_ptr<VolumeReader> label;
  Index3 shape;
  std::vector<ChannelNormalization> norms; ///< per channel
  std::vector<int64_t> classes;
  std::vector<std::vector<int64_t>> foreground;
  /// Sampled foreground intensities per channel (the same voxels), for CT statistics.
  std::vector<std::vector<float>> fgIntensities;
};

class FileSource : public PatchSource {
public:
  /// The training cases of `split`, or with `training` its validation cases, normalised
  /// as `training`'s (CT: with the training cases' statistics).
  FileSource(const DatasetSpec &spec, const DatasetSplit &split, FILE *log,
             const FileSource *training = nullptr, const DataContract *stored = nullptr)
      : classMode_(spec.classes), maxLabel_(split.maxLabel), split_(split),
        outsideIsBackground_(!split.preprocessed.empty()) {
    auto cache = std::make_shared<ChunkCache>(static_cast<size_t>(spec.cacheMb) << 20);
    const std::vector<Case> &cases = training ? split.validation : split.train;
    vols_.resize(cases.size());
    for (size_t i = 0; i < vols_.size(); ++i) {
      FileVolume &v = vols_[i];
      v.c = cases[i];
      v.label = openVolume(v.c.label);
      v.label->assumeSpacing(spec.spacing, "data.spacing");
      const VolumeInfo &b = v.label->info();
      if (!isIntegerVoxel(b.type))
        throw Error(str(b.name(), ": labels are ", voxelTypeName(b.type),
                        "; expected an integer type (instance ids or class indices)"));
      for (const std::string &path : v.c.images) {
        v.images.push_back(openVolume(path));
        v.images.back()->assumeSpacing(spec.spacing, "data.spacing");
        // A volume that states no geometry is in its partner's grid (BANIS's seg has no
        // attributes beside an img that may have them).
        v.label->assumeGeometry(v.images.back()->info(),
                                str("the image ", v.images.back()->info().name(), "'s ",
                                    v.images.back()->info().spacingFrom, " (the labels state none)"));
        v.images.back()->assumeGeometry(b, str("the labels ", b.name(), "'s ", b.spacingFrom,
                                               " (the image states none)"));
        const VolumeInfo &a = v.images.back()->info();
        if (a.shape != b.shape)
          throw Error(str("data: case ", v.c.name, ": the image ", a.name(), " is ", a.shape[0],
                          "x", a.shape[1], "x", a.shape[2], " but the labels ", b.name(), " are ",
                          b.shape[0], "x", b.shape[1], "x", b.shape[2],
                          " (expected one shape, z x y x x)"));
        for (int k = 0; k < 3; ++k)
          if (std::abs(a.spacing[k] - b.spacing[k]) > 1e-3 * std::max(a.spacing[k], b.spacing[k]))
            throw Error(str("data: case ", v.c.name, ": the image ", a.name(), " has spacing ",
                            a.spacing[0], " x ", a.spacing[1], " x ", a.spacing[2], " (",
                            a.spacingFrom, ") but the labels ", b.name(), " have ", b.spacing[0],
                            " x ", b.spacing[1], " x ", b.spacing[2], " (", b.spacingFrom,
                            ") (expected the same spacing)"));
        if (std::string g = geometryMismatch(a, b); !g.empty())
          throw Error(str("data: case ", v.c.name, ": the labels ", b.name(),
                          " are not where the image ", a.name(), " is: ", g,
                          " (expected the same origin and direction)"));
        v.images.back()->setCache(cache);
      }
      v.shape = b.shape;
      v.label->setCache(cache);
      // A chunk larger than the cache is decoded again for every patch that touches it.
      std::vector<const VolumeInfo *> infos;
      for (const auto &r : v.images)
        infos.push_back(&r->info());
      infos.push_back(&b);
      for (const VolumeInfo *info : infos) {
        const double mib = static_cast<double>(info->chunk[0] * info->chunk[1] * info->chunk[2] *
                                               static_cast<int64_t>(voxelSize(info->type))) /
                           (1 << 20);
        if (log && mib > static_cast<double>(spec.cacheMb) / 2)
          std::fprintf(log,
                       "data: warning: %s decodes in chunks of %.0f MiB, more than half of "
                       "data.cache_mb = %lld: patches will decode them again and again (raise "
                       "data.cache_mb, or store the volume chunked or uncompressed)\n",
                       info->name().c_str(), mib, static_cast<long long>(spec.cacheMb));
      }
    }
    // The scheme of each channel.
    schemes_ = training ? training->schemes_ : split.normalizations;
    const size_t C = schemes_.size();
    for (std::string &norm : schemes_) {
      if (norm == "auto")
        norm = vols_[0].images[0]->info().type == VoxelType::U8 ? "divide255" : "zscore";
      if (norm != "none" && norm != "divide255" && norm != "zscore" && norm != "ct")
        throw Error(str("data.normalization: expected auto, none, divide255, zscore or ct, got '",
                        norm, "'"));
    }
    if (stored) {
      bool same = stored->channels.size() == C;
      for (size_t c = 0; same && c < C; ++c)
        same = stored->channels[c].scheme == schemes_[c];
      if (!same) {
        std::string was, now;
        for (size_t c = 0; c < stored->channels.size(); ++c)
          was += (c ? ", " : "") + stored->channels[c].describe();
        for (size_t c = 0; c < C; ++c)
          now += (c ? ", " : "") + schemes_[c];
        throw Error(str("data.normalization: the run's stored data contract normalises ", was,
                        ", but the recipe now gives ", now,
                        " (a resumed run normalises as it started: train a new run with --out)"));
      }
    }
    // One pass over each volume, by slabs: foreground locations, statistics. A stored
    // contract's statistics are the ones used: no sampling for them.
    std::vector<bool> sample(C);
    bool anySample = false;
    for (size_t c = 0; c < C; ++c) {
      sample[c] = schemes_[c] == "ct" && !training && !stored;
      anySample = anySample || sample[c];
    }
    std::vector<std::exception_ptr> errors(vols_.size());
    // The scan reads every volume once: on large datasets it takes a while, so it shows.
    std::optional<Progress> bar;
    if (log) {
      Progress::Options po;
      po.total = static_cast<int64_t>(vols_.size());
      po.desc = "data scan";
      po.everySeconds = 5;
      bar.emplace(log, po);
    }
    std::mutex barLock;
    int64_t scanned = 0;
    parallelFor(static_cast<int64_t>(vols_.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        try {
          scan(i, spec.seed, sample, anySample);
        } catch (...) {
          errors[i] = std::current_exception();
        }
        std::lock_guard<std::mutex> hold(barLock);
        ++scanned;
        if (bar)
          bar->update(scanned);
      }
    });
    if (bar)
      bar->finish();
    for (auto &e : errors)
      if (e)
        std::rethrow_exception(e);
    globals_.resize(C);
    for (size_t c = 0; c < C; ++c) {
      ChannelNormalization &global = globals_[c];
      global.name = c < split.channelNames.size() ? split.channelNames[c] : "";
      global.scheme = schemes_[c];
      if (training) {
        global = training->globals_[c];
      } else if (stored) {
        global = stored->channels[c];
      } else if (schemes_[c] == "ct") {
        // nnU-Net's CTNormalization: clip to the 0.5 and 99.5 percentiles of the foreground
        // intensities of the dataset, then subtract their mean and divide by their std.
        std::vector<float> all;
        for (const FileVolume &v : vols_)
          all.insert(all.end(), v.fgIntensities[c].begin(), v.fgIntensities[c].end());
        if (all.empty())
          throw Error("data.normalization ct: the training cases have no foreground voxel to "
                      "take the intensity statistics from");
        std::sort(all.begin(), all.end());
        auto pct = [&](double q) { // NumPy's linear percentile
          double pos = q / 100.0 * static_cast<double>(all.size() - 1);
          size_t k = static_cast<size_t>(pos);
          double f = pos - static_cast<double>(k);
          return k + 1 < all.size() ? all[k] * (1 - f) + all[k + 1] * f : all[k];
        };
        double sum = 0, sq = 0;
        for (float x : all)
          sum += x;
        global.mean = sum / static_cast<double>(all.size());
        for (float x : all)
          sq += (x - global.mean) * (x - global.mean);
        global.std = std::sqrt(sq / static_cast<double>(all.size()));
        global.lo = pct(0.5);
        global.hi = pct(99.5);
      }
      for (FileVolume &v : vols_)
        if (schemes_[c] != "zscore")
          v.norms[c] = global;
    }
    if (log && !training) {
      int64_t voxels = 0;
      for (const FileVolume &v : vols_)
        voxels += v.shape[0] * v.shape[1] * v.shape[2];
      std::fprintf(
          log,
          "data: %zu training, %zu validation cases (%s), %.1f Mvoxels; "
          "normalization %s%s; chunk cache %lld MiB\n",
          split.train.size(), split.validation.size(), split.how.c_str(), voxels / 1e6,
          [&] {
            std::string d;
            for (size_t c = 0; c < C; ++c)
              d += str(c       ? "; channel "
                       : C > 1 ? "channel "
                               : "",
                       C > 1 ? str(c, " ") : "", globals_[c].describe());
            return d;
          }()
              .c_str(),
          stored ? " (the run's stored data contract)" : "", static_cast<long long>(spec.cacheMb));
    }
  }

  int64_t size() const override { return static_cast<int64_t>(vols_.size()); }
  Index3 shape(int64_t v) const override { return vols_[v].shape; }
  const std::vector<int64_t> &classes(int64_t v) const override { return vols_[v].classes; }
  const std::vector<std::vector<int64_t>> &foreground(int64_t v) const override {
    return vols_[v].foreground;
  }

  const Volume &read(int64_t index, const Index3 &corner, const Index3 &extent, Volume &view,
                     Index3 &origin) const override {
    const FileVolume &v = vols_[index];
    Index3 size;
    for (int a = 0; a < 3; ++a) {
      origin[a] = std::clamp<int64_t>(corner[a], 0, v.shape[a] - 1);
      size[a] = std::clamp<int64_t>(corner[a] + extent[a], origin[a] + 1, v.shape[a]) - origin[a];
    }
    const int64_t n = size[0] * size[1] * size[2];
    const int64_t C = static_cast<int64_t>(v.images.size());
    view.image = Tensor(DType::F32, {C, size[0], size[1], size[2]});
    for (int64_t c = 0; c < C; ++c) {
      float *dst = view.image.data<float>() + c * n;
      v.images[c]->read(origin, size, dst);
      v.norms[c].apply(dst, n);
    }
    std::vector<int64_t> ids(static_cast<size_t>(n));
    v.label->read(origin, size, ids.data());
    view.labels = Tensor(DType::I32, {1, size[0], size[1], size[2]});
    int32_t *lab = view.labels.data<int32_t>();
    if (classMode_) {
      view.segmentation = Tensor(DType::U8, {1, size[0], size[1], size[2]});
      uint8_t *seg = view.segmentation.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) {
        if (ids[i] == -1 && outsideIsBackground_)
          ids[i] = 0; // outside the cropped non-zero region: background
        if (ids[i] < 0 || ids[i] > 255)
          throw Error(str(v.c.label, ": label value ", ids[i],
                          " is not a class index (expected 0..255)"));
        seg[i] = static_cast<uint8_t>(ids[i]);
        lab[i] = static_cast<int32_t>(ids[i]);
      }
    } else {
      // Instance ids (uint64 in CREMI) become small ids; equal stays equal. Negative ids
      // (CREMI's uint64(-1), "no label") are background.
      std::unordered_map<int64_t, int32_t> small;
      for (int64_t i = 0; i < n; ++i) {
        if (ids[i] <= 0) {
          lab[i] = 0;
          continue;
        }
        auto [it, fresh] = small.emplace(ids[i], static_cast<int32_t>(small.size() + 1));
        lab[i] = it->second;
      }
      computeAffinities(view.labels, view.affinity, view.affinityMask);
    }
    return view;
  }

private:
  void scan(int64_t index, uint64_t seed, const std::vector<bool> &sampleChannel, bool sample) {
    FileVolume &v = vols_[index];
    const size_t C = v.images.size();
    v.norms.assign(C, ChannelNormalization{});
    v.fgIntensities.assign(C, {});
    const Index3 V = v.shape;
    const int64_t plane = V[1] * V[2];
    const int64_t slab = std::clamp<int64_t>(v.label->info().chunk[0], 1, V[0]);
    std::vector<int64_t> ids(static_cast<size_t>(slab * plane));
    std::vector<std::vector<float>> img(C, std::vector<float>(static_cast<size_t>(slab * plane)));
    std::vector<bool> wantImage(C);
    std::vector<double> sum(C, 0.0), sq(C, 0.0);
    for (size_t c = 0; c < C; ++c)
      wantImage[c] = schemes_[c] == "zscore" || sampleChannel[c];
    // Reservoir samples (Algorithm R on Philox, keyed by volume and class).
    std::unordered_map<int64_t, std::vector<int64_t>> kept;
    std::unordered_map<int64_t, int64_t> seen;
    std::unordered_map<int64_t, data::Stream> streams;
    data::Stream fgStream(seed, kTagReservoir, static_cast<uint32_t>(index), 0xffffffffu);
    int64_t fgSeen = 0;
    bool annotated = false; // any voxel labelled, the ignore label included
    for (int64_t z0 = 0; z0 < V[0]; z0 += slab) {
      const int64_t d = std::min(slab, V[0] - z0);
      v.label->read({z0, 0, 0}, {d, V[1], V[2]}, ids.data());
      for (size_t c = 0; c < C; ++c)
        if (wantImage[c])
          v.images[c]->read({z0, 0, 0}, {d, V[1], V[2]}, img[c].data());
      for (int64_t k = 0; k < d * plane; ++k) {
        for (size_t c = 0; c < C; ++c)
          if (wantImage[c]) {
            sum[c] += img[c][k];
            sq[c] += static_cast<double>(img[c][k]) * img[c][k];
          }
        int64_t id = ids[k];
        if (id <= 0)
          continue;
        const bool ignored = split_.ignoreLabel && id == *split_.ignoreLabel;
        if (classMode_ && !ignored && (id > 255 || (maxLabel_ >= 0 && id > maxLabel_)))
          throw Error(str(v.c.label, ": label value ", id, " at voxel (z, y, x) = (",
                          z0 + k / plane, ", ", k / V[2] % V[1], ", ", k % V[2], "): expected a "
                          "class index in 0..", maxLabel_ >= 0 ? maxLabel_ : 255,
                          maxLabel_ >= 0 ? " (dataset.json labels)" : ""));
        const int64_t cls = classMode_ ? id : 1;
        const int64_t flat = z0 * plane + k;
        annotated = true;
        // The ignore label is no class to oversample (nnU-Net's foreground_labels), but its
        // voxels are foreground for the intensity statistics (the fingerprint's seg > 0).
        if (!ignored) {
          auto &list = kept[cls];
          int64_t &count = seen[cls];
          ++count;
          if (list.size() < kLocations) {
            list.push_back(flat);
          } else {
            auto it = streams.try_emplace(cls, seed, kTagReservoir, static_cast<uint32_t>(index),
                                          static_cast<uint32_t>(cls)).first;
            uint64_t r = it->second.below(static_cast<uint64_t>(count));
            if (r < kLocations)
              list[r] = flat;
          }
        }
        if (sample) { // the same voxels of every channel
          ++fgSeen;
          if (static_cast<size_t>(fgSeen) <= kIntensities) {
            for (size_t c = 0; c < C; ++c)
              if (sampleChannel[c])
                v.fgIntensities[c].push_back(img[c][k]);
          } else {
            uint64_t r = fgStream.below(static_cast<uint64_t>(fgSeen));
            if (r < kIntensities)
              for (size_t c = 0; c < C; ++c)
                if (sampleChannel[c])
                  v.fgIntensities[c][r] = img[c][k];
          }
        }
      }
    }
    if (!annotated)
      throw Error(str(v.c.label, ": the label volume is empty (every voxel 0): expected at "
                                 "least one labelled voxel"));
    std::vector<int64_t> classes;
    for (auto &[cls, list] : kept)
      classes.push_back(cls);
    std::sort(classes.begin(), classes.end());
    for (int64_t cls : classes) {
      std::vector<int64_t> list = std::move(kept[cls]);
      std::sort(list.begin(), list.end());
      v.classes.push_back(cls);
      v.foreground.push_back(std::move(list));
    }
    for (size_t c = 0; c < C; ++c)
      if (schemes_[c] == "zscore") {
        // nnU-Net's ZScoreNormalization: each image by its own mean and std.
        const double n = static_cast<double>(V[0] * plane);
        ChannelNormalization &z = v.norms[c];
        z.name = c < split_.channelNames.size() ? split_.channelNames[c] : "";
        z.scheme = "zscore";
        z.mean = sum[c] / n;
        z.std = std::sqrt(std::max(0.0, sq[c] / n - z.mean * z.mean));
      }
  }

public:
  /// The contract of this (training) source.
  DataContract contract(const DatasetSpec &spec) const {
    DataContract c;
    c.source = spec.source;
    if (spec.source == "nnunet")
      c.dataset = fs::absolute(spec.path).lexically_normal().string();
    for (ChannelNormalization ch : globals_) {
      if (ch.scheme == "zscore") // per volume: no statistics of the training data
        ch.mean = 0, ch.std = 1;
      c.channels.push_back(ch);
    }
    // The median spacing per axis of the training cases that state one (1 x 1 x 1 of a
    // file that says nothing is no spacing).
    std::array<std::vector<double>, 3> sp;
    for (const FileVolume &v : vols_)
      if (!v.label->info().spacingFrom.empty())
        for (int a = 0; a < 3; ++a)
          sp[a].push_back(v.label->info().spacing[a]);
    if (!sp[0].empty()) {
      std::array<double, 3> median;
      for (int a = 0; a < 3; ++a) {
        std::sort(sp[a].begin(), sp[a].end());
        const size_t n = sp[a].size();
        median[a] = n % 2 ? sp[a][n / 2] : 0.5 * (sp[a][n / 2 - 1] + sp[a][n / 2]);
      }
      c.spacing = median;
    }
    c.labels = split_.labels; // nnunet's dataset.json; listed files name no classes
    c.ignoreLabel = split_.ignoreLabel;
    c.preprocessed = split_.preprocessed;
    return c;
  }

private:
  std::vector<FileVolume> vols_;
  bool classMode_;
  int64_t maxLabel_;
  DatasetSplit split_;
  bool outsideIsBackground_ = false;          ///< a preprocessed cache: label -1 is background
  std::vector<std::string> schemes_;          ///< the resolved normalization of each channel
  std::vector<ChannelNormalization> globals_; ///< of every volume, but under zscore
};

} // namespace

std::shared_ptr<const PatchSource> openDataset(const DatasetSpec &spec, const DatasetSplit &split,
                                               FILE *log, const DataContract *stored) {
  if (spec.cacheMb < 1)
    throw Error(str("data.cache_mb: expected at least 1 MiB, got ", spec.cacheMb));
  return std::make_shared<FileSource>(spec, split, log, nullptr, stored);
}

DataContract dataContract(const DatasetSpec &spec, const PatchSource *training) {
  if (const auto *files = dynamic_cast<const FileSource *>(training))
    return files->contract(spec);
  DataContract c; // the synthetic volumes are fed as generated
  c.source = "synthetic";
  c.channels.push_back(ChannelNormalization{});
  return c;
}

std::shared_ptr<const PatchSource> openValidationDataset(const DatasetSpec &spec,
                                                         const DatasetSplit &split,
                                                         const PatchSource &training) {
  const auto *train = dynamic_cast<const FileSource *>(&training);
  if (!train)
    throw Error("openValidationDataset: the training source is not one of volume files");
  if (split.validation.empty())
    return nullptr;
  return std::make_shared<FileSource>(spec, split, nullptr, train);
}

json readJsonFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw Error(str(path, ": cannot read"));
  try {
    return json::parse(in);
  } catch (const json::exception &e) {
    throw Error(str(path, ": malformed JSON (", e.what(), ")"));
  }
}

} // namespace medrun
