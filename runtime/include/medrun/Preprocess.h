//===- Preprocess.h - nnU-Net's preprocessing into a chunked cache --------------------===//
//
// `medrun preprocess DATASET --plans nnUNetPlans.json -o DIR` runs nnU-Net v2's
// DefaultPreprocessor for the plan's 3d_fullres configuration on every training case, on all
// cores with progress (../shared/reference/nnunet-pipeline.md §4):
//
//   cast to float, transpose by transpose_forward; crop to the box of the voxels non-zero in
//   any channel (mask holes filled, 6-connected, as scipy's binary_fill_holes); label voxels
//   0 outside that filled mask become -1; normalise each channel before resampling (CT: clip
//   to the plan's 0.5/99.5 percentiles, then the plan's mean and std; z-score: the case's own,
//   over seg >= 0 only with use_mask_for_norm, the rest set to 0; rescale to [0, 1]; rgb / 255;
//   none); resample to round(spacing / target × shape) (Resample.h: images order 3, labels
//   through their masks, a separate z axis where the spacing is anisotropic).
//
// Each case becomes DIR/CASE.zarr/ with data_XXXX (float32 per channel) and seg (int8, or
// int16 past 127), 64^3 zlib chunks, and DIR/CASE.json with nnU-Net's properties (spacing,
// shape_before_cropping, bbox_used_for_cropping, shape_after_cropping_and_before_resampling).
// DIR/preprocess.json records the plan and each input file's size and mtime: a case whose
// inputs and plan are unchanged is kept, any other is done again.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_PREPROCESS_H
#define MEDRUN_PREPROCESS_H

#include "medrun/Resample.h"
#include "medrun/Volume.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace medrun {

struct PreprocessOptions {
  std::string dataset; ///< the nnU-Net raw dataset folder
  std::string plans;   ///< nnUNetPlans.json ("" = DATASET/nnUNetPlans.json)
  std::string out;     ///< the cache folder
  FILE *progress = stderr;
  int progressMode = 0; ///< 0 auto, 1 bar, 2 lines
};

struct PreprocessSummary {
  int64_t cases = 0, done = 0, reused = 0;
};

/// Preprocesses every case of the dataset into the cache. Throws Error naming the case and
/// the rule (a missing channel, another shape or spacing, a plan without 3d_fullres).
PreprocessSummary preprocessDataset(const PreprocessOptions &options);

/// What preprocessing reads from nnUNetPlans.json (3d_fullres).
struct PreprocessPlan {
  std::string path;
  nlohmann::json plans;
  std::array<int, 3> forward{};   ///< transpose_forward
  std::array<double, 3> target{}; ///< the configuration's spacing (transposed)
  std::vector<std::string> schemes;
  std::vector<bool> useMask;
  nlohmann::json props; ///< foreground_intensity_properties_per_channel
};
/// Reads and checks the plan; Error naming the file and key.
PreprocessPlan readPreprocessPlan(const std::string &plansPath);

/// One case, preprocessed in memory, with what undoing it needs.
struct PreprocessedCase {
  VolumeInfo original;                  ///< the raw labels' (or first channel's) geometry
  std::vector<std::vector<float>> data; ///< per channel, `shape`
  std::vector<int64_t> seg;             ///< `shape`; all 0 and -1 without labels
  Shape3 shapeBefore{}, lo{}, hi{}, cropShape{}, shape{};
  std::array<double, 3> spacing{}; ///< the transposed original spacing
  int axis = -1;                   ///< the separate axis of the resampling, or -1
};
/// nnU-Net's preprocessing of one case (channel files in order, the label file or "" at
/// inference, where the mask for normalisation is the filled non-zero mask).
PreprocessedCase preprocessCase(const std::string &name, const std::vector<std::string> &imagePaths,
                                const std::string &labelPath, const PreprocessPlan &plan);

/// scipy.ndimage.binary_fill_holes of a (z, y, x) mask (6-connected background), in place.
void fillHoles(std::vector<uint8_t> &mask, const Shape3 &shape);

} // namespace medrun

#endif // MEDRUN_PREPROCESS_H
