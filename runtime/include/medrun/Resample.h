//===- Resample.h - nnU-Net's resampling of images and segmentations ------------------===//
//
// nnU-Net v2's resample_data_or_seg (preprocessing/resampling/default_resampling.py), on
// (z, y, x) arrays in C order:
//
//  - resize: skimage.transform.resize(order, mode='edge', anti_aliasing=False, clip=True),
//    that is scipy.ndimage.zoom(grid_mode=True, mode='nearest'): output voxel o of an axis
//    samples the input at (o + 0.5) * in / out - 0.5; order 3 is the cubic B-spline with
//    SciPy's prefilter (the axis padded by 12 edge values first), order 1 linear, order 0
//    nearest (halves up), positions outside clamped to the edge; the result is clipped to
//    the input's range. The tensor-product spline is applied axis by axis.
//  - separate z (anisotropic spacing): every slice across `axis` resized in-plane with
//    `order` (clipped per slice), then along `axis` nearest (order_z 0) at the same
//    positions, as nnU-Net's map_coordinates(order=0, mode='nearest').
//  - segmentations: each label value (sorted) as a 0/1 mask resized with order 1, the voxels
//    at >= 0.5 taking the label (later labels win); separate z: in-plane per slice so, then
//    nearest along the axis.
//  - whether z is separate: the spacing's max/min > 3 on the current spacing (its coarsest
//    axis), else on the new one; none when two or three axes share the coarsest spacing.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_RESAMPLE_H
#define MEDRUN_RESAMPLE_H

#include <array>
#include <cstdint>
#include <vector>

namespace medrun {

using Shape3 = std::array<int64_t, 3>;

/// skimage's resize of `in` (shape `from`) to `to` with `order` 0, 1 or 3, clipped to the
/// input's range.
std::vector<double> resizeImage(const std::vector<double> &in, const Shape3 &from, const Shape3 &to,
                                int order);

/// nnU-Net's separate-z decision: the axis to treat apart (0, 1, 2), or -1.
int separateAxis(const std::array<double, 3> &current, const std::array<double, 3> &target);

/// One channel of an image to `to`: resizeImage, or with `axis` >= 0 in-plane per slice
/// then nearest along `axis` (nnU-Net's order_z 0).
std::vector<double> resampleImage(const std::vector<double> &in, const Shape3 &from,
                                  const Shape3 &to, int order, int axis);

/// A label map to `to` (nnU-Net's resize_segmentation, order 1; with `axis` >= 0 in-plane
/// per slice then nearest along `axis`).
std::vector<int64_t> resampleSegmentation(const std::vector<int64_t> &in, const Shape3 &from,
                                          const Shape3 &to, int axis);

} // namespace medrun

#endif // MEDRUN_RESAMPLE_H
