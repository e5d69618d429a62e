//===- SlidingWindow.h - whole-volume prediction from a network of fixed window --------===//
//
// nnU-Net's sliding-window inference (predict_sliding_window_return_logits): windows of
// the network's patch size step over the volume with an overlap (0.5 by default), the
// last window of each axis aligned to the volume's end; a volume smaller than the window
// is padded (zeros, centred) and cropped back. Each window's prediction is weighted by a
// Gaussian importance map (sigma = 1/8 of the window per axis, maximum 1, no zeros) and
// the sum divided by the summed weights, so overlapping windows blend smoothly and a
// constant prediction stays that constant. Mirror test-time augmentation predicts each
// window under all 8 flips of the three spatial axes, flips the outputs back and averages.
//
// Windows (and their flips) go to the network `batch` at a time; they are accumulated in a
// fixed order, so the result does not depend on the batch size.
//
// Block by block (volumes larger than memory): slidingWindowBlock predicts one box of the
// output from the windows of the whole volume's grid that touch it, reading only the input
// those windows cover (the block and a halo of up to a window less one voxel). Each voxel
// adds the same windows' weighted predictions in the same order as the whole volume does,
// so the blocks together equal slidingWindow bit for bit. Windows across a block's border
// are predicted once for each block they touch.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SLIDINGWINDOW_H
#define MEDRUN_SLIDINGWINDOW_H

#include "medrun/Tensor.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace medrun {

/// Corners of the windows along one axis of `size` voxels, size >= window: as nnU-Net's
/// compute_steps_for_sliding_window, ceil((size - window) / (window * (1 - overlap))) + 1
/// corners evenly spaced (rounded) from 0 to size - window. `overlap` in [0, 1).
std::vector<int64_t> windowStarts(int64_t size, int64_t window, double overlap);

/// The importance map of a window (D, H, W): exp(-d²/2σ²) around the centre with
/// σ = window / 8 per axis, scaled to a maximum of 1, zeros raised to the smallest
/// non-zero weight (nnU-Net's compute_gaussian). C order.
std::vector<float> gaussianImportance(const std::array<int64_t, 3> &window);

struct SlidingWindowOptions {
  std::array<int64_t, 3> window{}; ///< D, H, W of the network's input
  double overlap = 0.5;            ///< fraction of the window two neighbours share, [0, 1)
  int64_t batch = 1;               ///< windows per call of the predictor
  bool mirror = false;             ///< average over the 8 flips of the spatial axes
  bool gaussian = true;            ///< false: every voxel of a window weighs 1
};

/// Runs the network on a batch: input f32 [batch, Cin, window], output f32
/// [batch, Cout, window]. A last, partial batch is filled with zero windows.
using WindowPredictor = std::function<Tensor(const Tensor &)>;

/// Predicts the whole `image` (f32 [Cin, D, H, W], any D, H, W >= 1): f32 [Cout, D, H, W],
/// the blended raw outputs. `progress(done, total)` is called after each batch. Throws Error
/// for bad options or a predictor output of the wrong shape.
Tensor slidingWindow(const Tensor &image, const SlidingWindowOptions &options,
                     const WindowPredictor &predict,
                     const std::function<void(int64_t, int64_t)> &progress = {});

/// The number of predictor calls slidingWindow makes for an image of `shape` (D, H, W).
int64_t slidingWindowBatches(const std::array<int64_t, 3> &shape,
                             const SlidingWindowOptions &options);

/// Reads the input box [lo, lo + size) (inside the image, image coordinates) of every
/// input channel into `dst`: f32 [Cin, size...], C order, normalised as the network expects.
using InputReader = std::function<void(const std::array<int64_t, 3> &lo,
                                       const std::array<int64_t, 3> &size, float *dst)>;

/// Predicts the box [lo, lo + size) of an image of `shape` with `cin` channels read through
/// `read`: f32 [Cout, size...], equal to that box of slidingWindow's whole-volume result.
/// Throws Error for a box outside the image, bad options or a wrong predictor output.
Tensor slidingWindowBlock(const std::array<int64_t, 3> &shape, int64_t cin,
                          const std::array<int64_t, 3> &lo, const std::array<int64_t, 3> &size,
                          const SlidingWindowOptions &options, const InputReader &read,
                          const WindowPredictor &predict,
                          const std::function<void(int64_t, int64_t)> &progress = {});

/// The predictor calls slidingWindowBlock makes for that box.
int64_t slidingWindowBlockBatches(const std::array<int64_t, 3> &shape,
                                  const std::array<int64_t, 3> &lo,
                                  const std::array<int64_t, 3> &size,
                                  const SlidingWindowOptions &options);

/// An upper bound of the host bytes slidingWindowBlock holds for a box of `size` anywhere in
/// an image of `shape`: the input with its halo, the weighted sums, the weights, the result
/// and one batch of windows in and out (not the network's own working memory).
int64_t slidingWindowBlockBytes(const std::array<int64_t, 3> &shape, int64_t cin, int64_t cout,
                                const std::array<int64_t, 3> &size,
                                const SlidingWindowOptions &options);

/// Applies `activation` over the channel axis of `t` (f32 [C, ...]) in place: "sigmoid"
/// (each channel), "softmax" (across channels, per voxel) or "none". Error otherwise.
void applyActivation(Tensor &t, const std::string &activation);

} // namespace medrun

#endif // MEDRUN_SLIDINGWINDOW_H
