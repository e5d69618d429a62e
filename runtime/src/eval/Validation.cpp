//===- Validation.cpp - validation during training: sliding window and Dice ---------===//
#include "medrun/Validation.h"

#include "medrun/Error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace medrun {
namespace {

/// The box [at, at + extent) of `t` ([C, D, H, W] of any dtype), `at` relative to t's
/// voxel (0, 0, 0).
Tensor crop(const Tensor &t, const Index3 &at, const Index3 &extent) {
  if (t.dim(1) == extent[0] && t.dim(2) == extent[1] && t.dim(3) == extent[2])
    return t;
  const int64_t channels = t.dim(0);
  const size_t elem = dtypeSize(t.dtype());
  Tensor out(t.dtype(), {channels, extent[0], extent[1], extent[2]});
  const auto *src = static_cast<const char *>(t.raw());
  auto *dst = static_cast<char *>(out.raw());
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t z = 0; z < extent[0]; ++z)
      for (int64_t y = 0; y < extent[1]; ++y)
        std::memcpy(dst + (((c * extent[0] + z) * extent[1] + y) * extent[2]) * elem,
                    src + (((c * t.dim(1) + at[0] + z) * t.dim(2) + at[1] + y) * t.dim(3) + at[2]) *
                              elem,
                    extent[2] * elem);
  return out;
}

std::vector<std::string> channelNames(bool affinities, int64_t channels,
                                      const std::vector<Index3> &offsets) {
  std::vector<std::string> names;
  if (affinities) {
    // z1, y1, x1, z10, y10, x10: the axis and length of each offset along one axis;
    // z-3y1x0 for one along several.
    for (int64_t c = 0; c < channels; ++c) {
      const Index3 &o = offsets.empty() ? banisOffsets()[c] : offsets[c];
      const int along = (o[0] != 0) + (o[1] != 0) + (o[2] != 0);
      int axis = o[0] ? 0 : o[1] ? 1 : 2;
      names.push_back(along == 1 ? str("zyx"[axis], o[axis])
                                 : str("z", o[0], "y", o[1], "x", o[2]));
    }
  } else {
    for (int64_t c = 1; c < channels; ++c)
      names.push_back(str("class", c));
  }
  return names;
}

} // namespace

DiceCounts::DiceCounts(std::vector<std::string> names)
    : names_(std::move(names)), tp_(names_.size()), fp_(names_.size()), fn_(names_.size()) {}

void DiceCounts::addSegmentation(const Tensor &logits, const Tensor &classes,
                                 std::optional<int64_t> ignore) {
  const int64_t channels = logits.dim(0), voxels = logits.numel() / channels;
  if (channels != static_cast<int64_t>(names_.size()) + 1 || classes.numel() != voxels)
    throw Error(str("validation: logits ", shapeStr(logits.shape()), " and classes ",
                    shapeStr(classes.shape()), " do not fit ", names_.size(), " classes"));
  const float *p = logits.data<float>();
  const uint8_t *label = classes.data<uint8_t>();
  for (int64_t v = 0; v < voxels; ++v) {
    if (ignore && label[v] == *ignore)
      continue;
    int64_t best = 0;
    for (int64_t c = 1; c < channels; ++c)
      if (p[c * voxels + v] > p[best * voxels + v])
        best = c;
    const int64_t truth = label[v];
    if (best == truth) {
      if (best > 0)
        ++tp_[best - 1];
      continue;
    }
    if (best > 0)
      ++fp_[best - 1];
    if (truth > 0 && truth < channels)
      ++fn_[truth - 1];
  }
}

void DiceCounts::addAffinities(const Tensor &logits, const Tensor &target, const Tensor &mask) {
  const int64_t channels = logits.dim(0), voxels = logits.numel() / channels;
  if (channels != static_cast<int64_t>(names_.size()) || target.dim(0) < channels ||
      mask.dim(0) < channels || target.numel() / target.dim(0) != voxels ||
      mask.numel() / mask.dim(0) != voxels)
    throw Error(str("validation: logits ", shapeStr(logits.shape()), ", affinities ",
                    shapeStr(target.shape()), " and mask ", shapeStr(mask.shape()),
                    " do not fit ", names_.size(), " channels"));
  const float *p = logits.data<float>();
  const uint8_t *t = target.data<uint8_t>(), *m = mask.data<uint8_t>();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t v = c * voxels; v < (c + 1) * voxels; ++v) {
      if (!m[v])
        continue;
      const bool on = p[v] > 0, truth = t[v] != 0;
      tp_[c] += on && truth;
      fp_[c] += on && !truth;
      fn_[c] += !on && truth;
    }
}

std::vector<double> DiceCounts::dice() const {
  std::vector<double> d;
  for (size_t c = 0; c < names_.size(); ++c) {
    const double denominator = 2.0 * tp_[c] + fp_[c] + fn_[c];
    d.push_back(denominator > 0 ? 2.0 * tp_[c] / denominator : std::nan(""));
  }
  return d;
}

double DiceCounts::meanDice() const {
  double sum = 0;
  int64_t n = 0;
  for (double d : dice())
    if (!std::isnan(d)) {
      sum += d;
      ++n;
    }
  return n ? sum / n : std::nan("");
}

Validator::Validator(std::shared_ptr<const PatchSource> source, int64_t channels,
                     ValidationOptions options)
    : source_(std::move(source)), channels_(channels), options_(std::move(options)) {
  if (options_.affinities && options_.offsets.empty() && (channels_ < 1 || channels_ > 6))
    throw Error(str("validation: ", channels_, " affinity channels (expected 1..6)"));
  if (options_.affinities && !options_.offsets.empty() &&
      channels_ != static_cast<int64_t>(options_.offsets.size()))
    throw Error(str("validation: ", channels_, " affinity channels, but loss.affinities.offsets has ",
                    options_.offsets.size(), " offsets (one per channel)"));
  if (!options_.affinities && channels_ < 2)
    throw Error(str("validation: ", channels_, " classes (expected background and at least one)"));
  if (!options_.affinities && !options_.classNames.empty() &&
      static_cast<int64_t>(options_.classNames.size()) != channels_ - 1)
    throw Error(str("validation: ", options_.classNames.size(),
                    " foreground class names for a "
                    "network of ",
                    channels_, " classes (expected ", channels_ - 1, ")"));
}

std::pair<Index3, Index3> Validator::box(int64_t v) const {
  const Index3 shape = source_->shape(v);
  Index3 corner, extent;
  for (int a = 0; a < 3; ++a) {
    extent[a] = std::min(shape[a], options_.box[a]);
    corner[a] = (shape[a] - extent[a]) / 2;
  }
  return {corner, extent};
}

int64_t Validator::batches() const {
  int64_t total = 0;
  for (int64_t v = 0; v < source_->size(); ++v)
    total += slidingWindowBatches(box(v).second, options_.window);
  return total;
}

ValidationResult Validator::run(const WindowPredictor &predict,
                                const std::function<void(int64_t, int64_t)> &progress) const {
  DiceCounts counts(options_.affinities || options_.classNames.empty()
                        ? channelNames(options_.affinities, channels_, options_.offsets)
                        : options_.classNames);
  ValidationResult result;
  const int64_t total = batches();
  int64_t done = 0;
  for (int64_t v = 0; v < source_->size(); ++v) {
    auto [corner, extent] = box(v);
    Volume scratch;
    Index3 origin;
    const Volume &view = source_->read(v, corner, extent, scratch, origin);
    const Index3 at{corner[0] - origin[0], corner[1] - origin[1], corner[2] - origin[2]};
    Tensor image = crop(view.image, at, extent);
    Tensor logits = slidingWindow(image, options_.window, predict, [&](int64_t b, int64_t) {
      if (progress)
        progress(done + b, total);
    });
    done += slidingWindowBatches(extent, options_.window);
    if (logits.dim(0) != channels_)
      throw Error(str("validation: the network predicts ", logits.dim(0), " channels, expected ",
                      channels_));
    if (options_.affinities && !options_.offsets.empty()) {
      // The recipe's offsets: the targets of the view's labels (pairs leaving it masked).
      Tensor affinity, mask;
      computeAffinities(view.labels, options_.offsets, affinity, mask);
      counts.addAffinities(logits, crop(affinity, at, extent), crop(mask, at, extent));
    } else if (options_.affinities)
      counts.addAffinities(logits, crop(view.affinity, at, extent),
                           crop(view.affinityMask, at, extent));
    else
      counts.addSegmentation(logits, crop(view.segmentation, at, extent), options_.ignoreLabel);
    ++result.volumes;
    result.voxels += extent[0] * extent[1] * extent[2];
  }
  result.names = counts.names();
  result.perClass = counts.dice();
  result.dice = counts.meanDice();
  return result;
}

} // namespace medrun
