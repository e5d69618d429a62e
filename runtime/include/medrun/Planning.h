//===- Planning.h - nnU-Net's dataset fingerprint and 3d_fullres plan ----------------===//
//
// `medrun plan DATASET` (an nnU-Net raw dataset folder) does what nnU-Net v2's
// nnUNetv2_extract_fingerprint and ExperimentPlanner do for the 3d_fullres configuration
// (../shared/reference/nnunet-pipeline.md §2-3):
//
//  - fingerprint, per case and on all cores: the spacing (z, y, x), the shape after
//    cropping to the non-zero region of the channels (OR over channels of x != 0; filling
//    holes, as nnU-Net does, leaves the box alone), its size relative to the whole image,
//    and per channel the foreground (label > 0) intensities: mean, median, std, min, max and
//    the 0.5 and 99.5 percentiles over the dataset. nnU-Net draws 1e8 / N samples with
//    replacement per case; here every foreground voxel counts (the distribution those
//    samples estimate).
//  - plan: target spacing (the median per axis; a strongly anisotropic axis takes its 10th
//    percentile), transpose_forward/backward, the median shape after resampling, the patch
//    (256^3 voxels shaped by the spacing, clipped to the median shape), the topology
//    (get_pool_and_conv_props: strides, kernels, patch a multiple of 2^pools), the patch
//    shrunk and the batch chosen for a GPU memory target by PlainConvUNet's feature-map
//    count against nnU-Net's reference (560e6 for 8 GB, batch 2), capped at 5% of the
//    dataset's voxels; normalisation per channel name (CT, zscore, noNorm, rescale_to_0_1,
//    rgb_to_0_1; others z-score) and whether the non-zero mask is used.
//
// Both are written as nnU-Net writes them (dataset_fingerprint.json; nnUNetPlans.json with
// the 3d_fullres configuration), so that nnU-Net and medrun read the same setup.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_PLANNING_H
#define MEDRUN_PLANNING_H

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace medrun {

struct PlanOptions {
  std::string dataset;     ///< the raw dataset folder (dataset.json, imagesTr/, labelsTr/)
  double gpuMemoryGb = 8;  ///< nnU-Net's gpu_memory_target_in_gb
  FILE *progress = stderr; ///< progress bar or lines
  int progressMode = 0;    ///< 0 auto, 1 bar, 2 lines
};

/// nnU-Net's dataset_fingerprint.json of the dataset. Throws Error naming the case and the
/// rule for a missing channel file, an image and label of different shapes or spacings.
nlohmann::ordered_json datasetFingerprint(const PlanOptions &options);

/// nnUNetPlans.json (3d_fullres) from the fingerprint and dataset.json.
nlohmann::ordered_json planExperiment(const nlohmann::json &fingerprint,
                                      const nlohmann::json &datasetJson,
                                      const std::string &datasetName, double gpuMemoryGb);

/// nnU-Net's get_pool_and_conv_props (network_topology.py), exposed for tests: for the
/// spacing and patch of a configuration, the pools per axis, the strides of each stage
/// (the first [1, 1, 1]), the kernels of each stage and the patch padded to a multiple of
/// 2^pools. The patch may be fractional (nnU-Net's patch clipped to a median shape).
struct Topology {
  std::array<int64_t, 3> pools{};
  std::vector<std::array<int64_t, 3>> strides, kernels;
  std::array<int64_t, 3> patch{}, divisibleBy{};
};
Topology poolAndConvProps(const std::array<double, 3> &spacing, const std::array<double, 3> &patch,
                          int64_t minFeatureMap = 4);

} // namespace medrun

#endif // MEDRUN_PLANNING_H
