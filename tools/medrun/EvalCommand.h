//===- EvalCommand.h - `medrun eval`: score predictions against labels ---------------===//
#ifndef MEDRUN_TOOL_EVALCOMMAND_H
#define MEDRUN_TOOL_EVALCOMMAND_H

#include <cstdint>
#include <string>
#include <vector>

namespace medrun {

struct EvalOptions {
  std::string prediction; ///< `medrun infer`'s output, or an instance segmentation
  std::string labels;     ///< ground truth: instance ids or class indices
  std::string mode = "auto"; ///< auto, affinities, segmentation, instances
  std::vector<double> thresholds; ///< affinities: empty for the default sweep
  int64_t minSize = 0;    ///< objects below this many voxels become background
  std::string json;       ///< write the results here
  std::string out;        ///< write the best segmentation (or the class map) here
  int progress = 0;       ///< 0 auto, 1 bar, 2 lines
  /// Folders (prediction and labels folders of label maps): dataset.json for the labels,
  /// regions and ignore label ("" = the labels folder's dataset's, if any), and the
  /// file ending ("" = dataset.json's, else .nii.gz). `json` is summary.json's path
  /// ("" = PRED_FOLDER/summary.json).
  std::string datasetJson, fileEnding;
  /// Instances and affinities: ground-truth skeletons (docs/skeletons.md) for ERL and NERL.
  std::string skeletons;
  /// Affinities: sweep the threshold on this (validation) volume and choose; without it,
  /// the parameters come from `params` or `run` (or one given threshold), never a sweep.
  bool tune = false;
  std::string params;     ///< recorded parameters to apply (--tune's --save-params file)
  std::string saveParams; ///< --tune: write the chosen parameters here
  /// A run directory: --tune records into RUN/segmentation_params.json, otherwise they are
  /// read from there.
  std::string run;
  std::string select;     ///< the sweep's rule: nerl or voi ("" = nerl with skeletons)
  /// Affinities: components (BANIS's, default) or mean-agglomeration (Segmentation.h);
  /// recorded parameters carry their own.
  std::string method;
  /// mean-agglomeration: block by block as medrun segment --block (N or Z,Y,X; "" whole).
  std::string block;
  /// Affinities: the channels' offsets ("1,0,0;..." or JSON, as medrun segment), so that
  /// the short-range channels are found whatever their order and sign; default: the run's
  /// loss.affinities.offsets (--run), else the first 3 channels are +1 along z, y, x.
  std::string offsets;
};

/// Reads the prediction and the ground truth, segments (affinities: recorded parameters,
/// or with --tune a threshold sweep that chooses and records them; class scores: argmax),
/// scores (Metrics.h, Skeleton.h), prints a table and writes JSON. A prediction
/// folder is scored case by case against a labels folder as nnU-Net's
/// evaluate_predictions.py does, into its summary.json.
int evalCommand(const EvalOptions &options);

/// "0.5,0.7" -> {0.5, 0.7}; throws Error naming --thresholds.
std::vector<double> parseThresholds(const std::string &text);

} // namespace medrun

#endif // MEDRUN_TOOL_EVALCOMMAND_H
