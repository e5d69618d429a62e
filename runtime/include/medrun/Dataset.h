//===- Dataset.h - training data from volume files (recipe data.source) ------------===//
//
// `data.source: files` trains on volumes listed in the recipe (data.images, data.labels:
// HDF5/Zarr containers with data.image_key / data.label_key, or NIfTI/.npy files), and
// `data.source: nnunet` on an nnU-Net raw dataset folder (data.path: dataset.json,
// imagesTr/CASE_XXXX.nii.gz per channel, labelsTr/CASE.nii.gz) or a `medrun preprocess`
// cache. The cases are split into training and validation (nnU-Net's splits_final.json
// and a fold, or a fraction with a seed), images
// are normalised (divide-255 as BANIS; z-score per volume or CT clipping with dataset
// statistics as nnU-Net), and the loader's workers read patches through a cache of
// decoded chunks bounded in bytes: no volume is decoded whole per patch.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_DATASET_H
#define MEDRUN_DATASET_H

#include "medrun/Data.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace medrun {

/// A JSON file (dataset.json, plans, a run's contract): Error naming the file when it cannot
/// be read or parsed.
nlohmann::json readJsonFile(const std::string &path);

/// The recipe's `data:` keys for volume files.
struct DatasetSpec {
  std::string source = "synthetic";       ///< [source] synthetic, files or nnunet
  std::string path;                       ///< [path] nnunet: the dataset folder
  std::vector<std::string> images, labels; ///< [images] [labels] files: volumes, in pairs
  std::string imageKey, labelKey;         ///< [image_key] [label_key] inside containers
  std::string normalization = "auto";     ///< [normalization] auto, none, divide255, zscore, ct
  std::string splits;                     ///< [splits] a splits_final.json ("" = nnunet's own)
  int64_t fold = 0;                       ///< [fold] which split of the splits file
  /// [fold] all: every case trains and validates, no split (nnU-Net's fold all).
  bool allCases = false;
  double valFraction = 0.2;               ///< [val_fraction] without a splits file
  uint64_t seed = 0;                      ///< [seed] of the fraction split
  int64_t cacheMb = 1024;                 ///< [cache_mb] decoded chunks kept, MiB
  /// [spacing] z, y, x: the voxel size of volumes whose files state none (a Zarr/HDF5
  /// array without a resolution attribute, .npy); files that state one must agree.
  std::optional<std::array<double, 3>> spacing;
  /// Targets are class maps (dice_ce: labels are class indices 0..255), not instance ids.
  bool classes = false;
};

/// One case: its name, the image volume of each input channel and the label volume (paths
/// as openVolume takes them).
struct Case {
  std::string name;
  std::vector<std::string> images;
  std::string label;
};

/// How one input channel is normalised, and with what statistics: the part of the data
/// contract (below) that turns a raw volume into what the network saw in training.
/// Schemes: none; divide255; zscore (each volume by its own mean and std: no statistics
/// stored); ct (nnU-Net's CTNormalization: clip to [lo, hi], the 0.5 and 99.5 percentiles
/// of the training foreground, then (x - mean) / max(std, 1e-8) with that foreground's
/// mean and std).
struct ChannelNormalization {
  std::string name;            ///< dataset.json's channel name ("CT"), or ""
  std::string scheme = "none"; ///< none, divide255, zscore, ct
  double mean = 0, std = 1, lo = -INFINITY, hi = INFINITY; ///< ct: the statistics used
  /// Normalises `n` voxels of this channel in place (zscore: with mean and std set by
  /// useVolumeStatistics for the volume they belong to).
  void apply(float *x, int64_t n) const;
  /// zscore: takes the mean and std of the whole volume `x` (n voxels), as training does.
  void useVolumeStatistics(const float *x, int64_t n);
  std::string describe() const; ///< "ct (clip lo..hi, mean m, std s)"
};

/// The run's data contract: what a model trained on this data expects of an input, stored
/// in the run directory (OUT/data.json) and in every checkpoint (state.json's extra.data),
/// so that validation, `medrun infer` and resumed runs apply it without being told.
struct DataContract {
  std::string source;                         ///< synthetic, files or nnunet
  std::string dataset;                        ///< nnunet: the dataset folder
  std::vector<ChannelNormalization> channels; ///< one per input channel, in order
  /// The training cases' spacing, z, y, x (mm; the median per axis), if the files give one.
  std::optional<std::array<double, 3>> spacing;
  /// Class names and values (nnunet: dataset.json's labels; empty where none are named).
  std::vector<std::pair<std::string, int64_t>> labels;
  std::optional<int64_t> ignoreLabel; ///< dataset.json's "ignore", if any
  /// The plan a `medrun preprocess` cache was made by, when the run trained on one: its
  /// inputs were cropped, normalised and resampled by that plan (channels say "none").
  std::string preprocessed;

  nlohmann::ordered_json toJson() const;
  /// Throws Error starting with `what` and naming the key that is missing or malformed.
  static DataContract fromJson(const nlohmann::json &j, const std::string &what);
};

/// The contract of the data `training` (openDataset's source for `spec`) serves; for
/// synthetic data (any other source) one raw channel.
DataContract dataContract(const DatasetSpec &spec, const PatchSource *training);

/// The cases, split. `how` says how, for the log.
struct DatasetSplit {
  std::vector<Case> train, validation;
  std::string how;
  /// The normalization of each channel (nnunet's auto: by the channel's name; files: the
  /// recipe's, auto resolved when the volumes are opened).
  std::vector<std::string> normalizations;
  int64_t maxLabel = -1;     ///< nnunet: the largest label value in dataset.json
  std::vector<std::string> channelNames; ///< nnunet: dataset.json's channel_names, in order
  /// nnunet: data.path is a `medrun preprocess` cache (preprocess.json) made by this plan.
  std::string preprocessed;
  /// nnunet: dataset.json's labels, by value (the ignore label left out).
  std::vector<std::pair<std::string, int64_t>> labels;
  /// nnunet: dataset.json's "ignore" label (the highest label value), if any.
  std::optional<int64_t> ignoreLabel;
};

/// sklearn's KFold(n_splits=folds, shuffle=True, random_state=seed) over n items, as nnU-Net
/// makes its folds (seed 12345): (train, validation) indices per fold, each ascending. The
/// permutation is NumPy's RandomState(seed).shuffle, reproduced exactly (MT19937).
std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> kfoldSplits(size_t n, size_t folds,
                                                                             uint32_t seed);

/// Finds the cases (listed, or by the nnU-Net layout) and splits them. nnunet without
/// splits_final.json: nnU-Net's 5 folds (kfoldSplits over the sorted case names, seed
/// 12345), written to DATASET/splits_final.json first. Throws Error
/// naming the file or key for a missing dataset.json, image or key, a bad split.
DatasetSplit splitDataset(const DatasetSpec &spec);

/// The training cases as a PatchSource: opens every volume, checks that image and label
/// have one shape and spacing and that labels are not empty (Error naming both files),
/// scans the labels once for the foreground classes (up to 10000 voxels per class and
/// volume, as nnU-Net's class locations) and the intensity statistics. `log` gets a line
/// per dataset.
///
/// `stored` (a resumed run's contract) replaces the statistics computed from the data: a
/// resumed run normalises as it started. Its channels' schemes must be the ones the recipe
/// resolves to (Error naming both otherwise).
std::shared_ptr<const PatchSource> openDataset(const DatasetSpec &spec, const DatasetSplit &split,
                                               FILE *log = nullptr,
                                               const DataContract *stored = nullptr);

/// The validation cases (null if the split has none), opened and checked as openDataset
/// opens the training cases and normalised as `training` (what openDataset returned for
/// the same split) normalises: CT with the training cases' statistics.
std::shared_ptr<const PatchSource> openValidationDataset(const DatasetSpec &spec,
                                                         const DatasetSplit &split,
                                                         const PatchSource &training);

} // namespace medrun

#endif // MEDRUN_DATASET_H
