//===- Validation.h - validation during training ------------------------------------===//
//
// Every `validation.every` steps `medrun train` predicts the validation volumes with the
// sliding window (SlidingWindow.h) and scores the prediction, loss-free:
//
//  - segmentation recipes (dice_ce): hard Dice of each foreground class, the argmax of the
//    logits against the label classes, as nnU-Net's pseudo Dice: true positives, false
//    positives and false negatives summed over all validation volumes, then
//    2TP / (2TP + FP + FN) per class, and the mean over the classes where that is defined;
//  - affinity recipes (bce_with_logits): the same Dice (F1) of each affinity channel,
//    thresholded at 0.5 (sigmoid(logit) > 0.5), against the affinities the labels give as
//    training computes them, on the voxels where they are defined (the mask).
//
// A volume is predicted whole, or its central box of at most `validation.box` voxels per
// axis (big volumes: bounded memory and time).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_VALIDATION_H
#define MEDRUN_VALIDATION_H

#include "medrun/Data.h"
#include "medrun/SlidingWindow.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace medrun {

/// True positives, false positives and false negatives per class or channel, summed over
/// the volumes added.
class DiceCounts {
public:
  explicit DiceCounts(std::vector<std::string> names);
  /// `logits` f32 [C, D, H, W]; `classes` u8 [1, D, H, W]. Counts classes 1..C-1 of the
  /// argmax over the channels (the first of equal maxima, as torch.argmax). Voxels whose
  /// class is `ignore` (nnU-Net's ignore label) count nowhere.
  void addSegmentation(const Tensor &logits, const Tensor &classes,
                       std::optional<int64_t> ignore = std::nullopt);
  /// `logits` f32 [C, D, H, W]; `target` and `mask` u8 [>= C, D, H, W]: channel c is on
  /// where logit > 0 (sigmoid > 0.5), counted where mask is 1.
  void addAffinities(const Tensor &logits, const Tensor &target, const Tensor &mask);
  /// 2TP / (2TP + FP + FN) per class, NaN where nothing was predicted or labelled.
  std::vector<double> dice() const;
  /// The mean of the defined values of dice(); NaN if there is none.
  double meanDice() const;
  const std::vector<std::string> &names() const { return names_; }

private:
  std::vector<std::string> names_;
  std::vector<int64_t> tp_, fp_, fn_;
};

struct ValidationOptions {
  bool affinities = false;         ///< affinity targets (bce_with_logits), else classes
  Index3 box{256, 256, 256};       ///< [box] at most this much of each volume, centred
  SlidingWindowOptions window;     ///< window = the patch, [overlap], [mirror], batch
  /// Names of the foreground classes 1..C-1 (dataset.json's labels), for the logs; empty:
  /// class1, class2, ...
  std::vector<std::string> classNames;
  /// nnU-Net's ignore label: its voxels are left out of the Dice, as nnU-Net's evaluation.
  std::optional<int64_t> ignoreLabel;
  /// The affinities' offsets (loss.affinities.offsets), one per channel; empty: the first
  /// channels of BANIS's six (the volumes' own targets).
  std::vector<Index3> offsets;
};

struct ValidationResult {
  double dice = 0;                  ///< meanDice
  std::vector<std::string> names;   ///< the classes (dataset.json's names, or class1..) or
                                    ///< the affinity channels (z1, y1, x1, ...)
  std::vector<double> perClass;     ///< Dice of each, NaN where undefined
  int64_t volumes = 0, voxels = 0;  ///< what was predicted
};

/// Validates on the volumes of `source` (the validation cases, or the synthetic
/// validation volumes) with `channels` output channels of the network.
class Validator {
public:
  Validator(std::shared_ptr<const PatchSource> source, int64_t channels, ValidationOptions options);
  /// Calls of the predictor per validation (for a progress display).
  int64_t batches() const;
  /// Predicts every volume with `predict` (the network with the weights to validate) and
  /// scores it. `progress(done, total)` after each batch of windows.
  ValidationResult run(const WindowPredictor &predict,
                       const std::function<void(int64_t, int64_t)> &progress = {}) const;

private:
  /// Volume v's validated box: corner and extent.
  std::pair<Index3, Index3> box(int64_t v) const;

  std::shared_ptr<const PatchSource> source_;
  int64_t channels_;
  ValidationOptions options_;
};

} // namespace medrun

#endif // MEDRUN_VALIDATION_H
