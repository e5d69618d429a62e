//===- PredictCommand.h - `medrun predict`: a folder of raw cases, as nnU-Net predicts ---===//
#ifndef MEDRUN_TOOL_PREDICTCOMMAND_H
#define MEDRUN_TOOL_PREDICTCOMMAND_H

#include <string>
#include <vector>

namespace medrun {

struct PredictOptions {
  std::string input;             ///< a folder of CASE_XXXX<ending> files
  std::string out;               ///< where CASE<ending> label maps go
  std::vector<std::string> runs; ///< one run directory per fold (trained on a preprocess cache)
  std::string artifact;          ///< the recipe's compiled artifact (its `infer`)
  std::string plans;             ///< "" = the plan the runs' data contract names
  std::string weights;           ///< ema, model or "" (ema where the checkpoints have it)
  bool mirror = false;
  /// nnU-Net's --save_probabilities: CASE.npz beside each label map, key `probabilities`.
  bool saveProbabilities = false;
  double overlap = 0.5;
  int progress = 0;              ///< 0 auto, 1 bar, 2 lines
};

/// nnU-Net's prediction of raw cases (predict_from_raw_data.py, export_prediction.py): each
/// case preprocessed by the plan as in training, the sliding window of every fold's best
/// checkpoint, the logits averaged over the folds, resampled back to the cropped shape
/// (order 1, a separate z axis when anisotropic), the argmax put back into the uncropped,
/// untransposed volume and written with the input's geometry as uint8 (uint16 past 254
/// classes). With saveProbabilities, also CASE.npz as nnU-Net writes it: key
/// `probabilities`, float32 (C, z, y, x) in the input's array order, the softmax of the
/// resampled averaged logits, background 1 outside the crop.
int predictCommand(const PredictOptions &options);

} // namespace medrun

#endif // MEDRUN_TOOL_PREDICTCOMMAND_H
