//===- PlanCommand.h - `medrun plan`: nnU-Net's fingerprint and plan -------------------===//
#ifndef MEDRUN_TOOL_PLANCOMMAND_H
#define MEDRUN_TOOL_PLANCOMMAND_H

#include <string>

namespace medrun {

struct PlanCommandOptions {
  std::string dataset;    ///< the nnU-Net raw dataset folder
  std::string out;        ///< where the JSON files go ("" = the dataset folder)
  double gpuMemoryGb = 8; ///< nnU-Net's GPU memory target
  /// nnU-Net's own nnUNetPlans.json: checked against the dataset and taken instead of a
  /// plan of ours (the fingerprint is not made then).
  std::string nnunetPlans;
  int progress = 0;       ///< 0 auto, 1 bar, 2 lines
};

/// Writes OUT/dataset_fingerprint.json and OUT/nnUNetPlans.json (Planning.h) and prints
/// the 3d_fullres configuration.
int planCommand(const PlanCommandOptions &options);

} // namespace medrun

#endif // MEDRUN_TOOL_PLANCOMMAND_H
