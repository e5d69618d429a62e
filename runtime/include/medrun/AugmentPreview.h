//===- AugmentPreview.h - pictures of the augmented batches -------------------------===//
//
// `medrun augment-preview RECIPE` and the TensorBoard images of `medrun train`
// (logging.images_every) show what the recipe's augmentation pipeline (augment: in the
// recipe, the artifact's public @augment, docs/augment.md) makes of the batches the training
// loop takes.
//
// The picture of one sample (orthoSlices): the centre slice along each axis, three panels
// side by side, left to right
//
//   D = D/2 (H rows, W columns) | H = H/2 (D rows, W columns) | W = W/2 (D rows, H columns)
//
// each voxel drawn as a k x k square, k = max(1, 128 / max(D, H, W)) (integer division),
// panels 4 px apart on black, so the image is k·(2W + H) + 8 by k·max(H, D) pixels. Grey
// levels: channel 0 of the image scaled by the sample's minimum and maximum over the whole
// volume (black to white; a constant sample is black). Over it, alpha 0.45:
//
//   labels      (raw instances or classes; nnU-Net's target.0 class indices) each label
//               value > 0 in a fixed colour, kPalette[(value − 1) mod 12]; 0 (background)
//               and −1 (outside the volume) left grey;
//   affinities  (BANIS's target, several channels) red where any of the first three
//               channels (the short-range affinities along D, H, W) is below 0.5: the
//               boundaries between instances and the background; instance interiors stay
//               grey.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_AUGMENTPREVIEW_H
#define MEDRUN_AUGMENTPREVIEW_H

#include "medrun/Artifact.h"
#include "medrun/ProgressPlot.h"
#include "medrun/Tensor.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace medrun {

class StepInputs;

enum class Overlay { None, Labels, Affinities };

inline constexpr Rgb kPalette[12] = {
    {230, 25, 75},   {60, 180, 75},  {255, 225, 25}, {0, 130, 200},
    {245, 130, 48},  {145, 30, 180}, {70, 240, 240}, {240, 50, 230},
    {210, 245, 60},  {250, 190, 212}, {0, 128, 128}, {170, 110, 40}};

/// The picture of sample `n` of `image` [B, C, D, H, W] (any float type) with the overlay
/// of sample n of `labels` [B, K, D, H, W] (null or Overlay::None: none; another spatial
/// shape than the image's: none).
Raster orthoSlices(const Tensor &image, int64_t n, const Tensor *labels, Overlay overlay);

/// The overlay of an output of @augment: its first target (`target`, else `target.0`),
/// Affinities when it has several channels, else Labels; -1 when there is none.
int overlayOutput(const Function &augment, Overlay *overlay);

/// @augment's inputs (by name: image, seg, rng) taken from train_step's `inputs`.
std::vector<Tensor> augmentInputs(const Function &augment, const StepInputs &feed,
                                  const std::vector<Tensor> &stepInputs);

/// The function of the recipe's augmentation pipeline (augment.function, default augment)
/// in the artifact; Error naming the recipe when it has no `augment:` section (ending with
/// `purpose`) and the artifact when it lacks the function.
const Function &augmentFunction(const Artifact &artifact, const nlohmann::json &config,
                                const std::string &purpose = "nothing to preview");

struct AugmentPreviewOptions {
  std::string out;      ///< directory (created)
  int64_t samples = 4;  ///< samples to draw, from steps step, step + 1, ...
  int64_t step = 0;     ///< the first step
  bool cuda = false;    ///< run @augment on the CUDA backend (else the CPU backend)
  FILE *console = stderr;
};

/// Takes the batches the training loop takes at steps step, step + 1, ... (its loader and
/// keys, rank 0) until `samples` samples, runs @augment on them and writes, per sample,
/// with P = OUT/step<S>_sample<b> (b: the sample's index in its batch):
///   P_raw.png, P_augmented.png    orthoSlices of the loader's image and seg, and of the
///                                  augmented image and its first target
///   P_raw_image.npy, P_raw_seg.npy the loader's tensors, [1, ...] each
///   P_<output>.npy                 each output of @augment (image, target, ...), [1, ...]
/// and per step OUT/step<S>_rng.npy, the step's key (an int64 scalar),
/// and OUT/samples.jsonl, one line per sample (its step, sample, key, files, shapes and
/// value ranges), which it also returns.
std::vector<nlohmann::json> augmentPreview(const Artifact &artifact, const nlohmann::json &config,
                                           const AugmentPreviewOptions &options);

} // namespace medrun

#endif // MEDRUN_AUGMENTPREVIEW_H
