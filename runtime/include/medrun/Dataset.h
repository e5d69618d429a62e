//===- Dataset.h - training data from volume files (recipe data.source) ------------===//
//
// `data.source: files` trains on volumes listed in the recipe (data.images, data.labels:
// HDF5/Zarr containers with data.image_key / data.label_key, or NIfTI/.npy files), and
// `data.source: nnunet` on an nnU-Net raw dataset folder (data.path: dataset.json,
// imagesTr/CASE_0000.nii.gz, labelsTr/CASE.nii.gz). The cases are split into training and
// validation (nnU-Net's splits_final.json and a fold, or a fraction with a seed), images
// are normalised (divide-255 as BANIS; z-score per volume or CT clipping with dataset
// statistics as nnU-Net), and the loader's workers read patches through a cache of
// decoded chunks bounded in bytes: no volume is decoded whole per patch.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_DATASET_H
#define MEDRUN_DATASET_H

#include "medrun/Data.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace medrun {

/// The recipe's `data:` keys for volume files.
struct DatasetSpec {
  std::string source = "synthetic";       ///< [source] synthetic, files or nnunet
  std::string path;                       ///< [path] nnunet: the dataset folder
  std::vector<std::string> images, labels; ///< [images] [labels] files: volumes, in pairs
  std::string imageKey, labelKey;         ///< [image_key] [label_key] inside containers
  std::string normalization = "auto";     ///< [normalization] auto, none, divide255, zscore, ct
  std::string splits;                     ///< [splits] a splits_final.json ("" = nnunet's own)
  int64_t fold = 0;                       ///< [fold] which split of the splits file
  double valFraction = 0.2;               ///< [val_fraction] without a splits file
  uint64_t seed = 0;                      ///< [seed] of the fraction split
  int64_t cacheMb = 1024;                 ///< [cache_mb] decoded chunks kept, MiB
  /// Targets are class maps (dice_ce: labels are class indices 0..255), not instance ids.
  bool classes = false;
};

/// One case: its name and the image and label volumes (paths as openVolume takes them).
struct Case {
  std::string name, image, label;
};

/// The cases, split. `how` says how, for the log.
struct DatasetSplit {
  std::vector<Case> train, validation;
  std::string how;
  std::string normalization; ///< the resolved normalization (auto replaced)
  int64_t maxLabel = -1;     ///< nnunet: the largest label value in dataset.json
};

/// Finds the cases (listed, or by the nnU-Net layout) and splits them. Throws Error
/// naming the file or key for a missing dataset.json, image or key, a bad split.
DatasetSplit splitDataset(const DatasetSpec &spec);

/// The training cases as a PatchSource: opens every volume, checks that image and label
/// have one shape and spacing and that labels are not empty (Error naming both files),
/// scans the labels once for the foreground classes (up to 10000 voxels per class and
/// volume, as nnU-Net's class locations) and the intensity statistics. `log` gets a line
/// per dataset.
std::shared_ptr<const PatchSource> openDataset(const DatasetSpec &spec, const DatasetSplit &split,
                                               FILE *log = nullptr);

/// The validation cases (null if the split has none), opened and checked as openDataset
/// opens the training cases and normalised as `training` (what openDataset returned for
/// the same split) normalises: CT with the training cases' statistics.
std::shared_ptr<const PatchSource> openValidationDataset(const DatasetSpec &spec,
                                                         const DatasetSplit &split,
                                                         const PatchSource &training);

} // namespace medrun

#endif // MEDRUN_DATASET_H
