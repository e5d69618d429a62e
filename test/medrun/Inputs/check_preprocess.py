"""`medrun preprocess` against nnU-Net's DefaultPreprocessor written again with NumPy and
SciPy (preprocess.test).

`check_preprocess.py DATASET PLANS CACHE [--wrong VARIANT]`: for every case, from the raw
files and the plan: transpose_forward; crop to the box of the non-zero mask (OR over
channels, scipy's binary_fill_holes), label 0 outside the filled mask -> -1; normalise
each channel before resampling (CTNormalization with the plan's statistics, ZScore with the
mask seg >= 0 where use_mask_for_norm); resample to round(spacing / target * shape) with
skimage's resize = scipy.ndimage.zoom(grid_mode=True, mode='nearest'), clipped, order 3 for
images and per-label order-1 masks for labels, a separate z axis (slices in-plane, then
map_coordinates order 0) when max/min spacing > 3; compares data (float32, 1e-6 of the
channel's range) and seg (exactly) and the properties. --wrong computes it a wrong way
(normalise-after: normalisation after resampling; no-fill: holes of the mask left; no-minus1:
no -1 outside the mask; no-separate-z: one 3-D resize); the comparison must then fail."""
import json
import os
import sys

import numpy as np
from scipy.ndimage import binary_fill_holes, map_coordinates, zoom


def resize(x, shape, order):
    r = zoom(x.astype(np.float64), np.array(shape) / np.array(x.shape), order=order, mode="nearest",
             grid_mode=True)
    return np.clip(r, x.min(), x.max())


def along(x, axis, n):
    coords = np.meshgrid(*[np.arange(s, dtype=float) if a != axis else
                           (np.arange(n) + 0.5) * x.shape[axis] / n - 0.5
                           for a, s in enumerate(x.shape)], indexing="ij")
    return map_coordinates(x, np.array(coords), order=0, mode="nearest")


def resample(x, shape, order, axis):
    if tuple(x.shape) == tuple(shape):
        return x.astype(np.float64)
    if axis is None:
        return resize(x, shape, order)
    mid = list(shape)
    mid[axis] = x.shape[axis]
    planes = np.stack([resize(np.take(x, k, axis), [s for a, s in enumerate(mid) if a != axis], order)
                       for k in range(x.shape[axis])], axis)
    return planes if planes.shape[axis] == shape[axis] else along(planes, axis, shape[axis])


def resample_seg(x, shape, axis):
    mid = list(shape)
    if axis is not None:
        mid[axis] = x.shape[axis]
    out = np.zeros(mid, np.int64)
    for label in np.unique(x):
        out[resample((x == label).astype(np.float64), mid, 1, axis) >= 0.5] = label
    if axis is None or mid[axis] == shape[axis]:
        return out
    return along(out, axis, shape[axis]).astype(np.int64)


def separate_axis(current, target):
    for sp in (np.array(current), np.array(target)):
        if sp.max() / sp.min() > 3:
            axes = np.flatnonzero(sp.max() / sp == 1)
            return int(axes[0]) if len(axes) == 1 else None
    return None


def normalise(img, seg, scheme, mask_for_norm, props):
    img = img.astype(np.float32)
    if scheme == "CTNormalization":
        img = np.clip(img, np.float32(props["percentile_00_5"]), np.float32(props["percentile_99_5"]))
        return (img - np.float32(props["mean"])) / np.float32(max(props["std"], 1e-8))
    if scheme == "ZScoreNormalization":
        mask = seg >= 0 if mask_for_norm else np.ones(seg.shape, bool)
        v = img[mask].astype(np.float64)
        out = np.zeros_like(img)
        out[mask] = (v - v.mean()) / max(v.std(), 1e-8)
        return out
    raise SystemExit("check_preprocess: scheme %s not covered" % scheme)


def expected(dataset, plans, name, wrong):
    import nibabel as nib
    ds = json.load(open(os.path.join(dataset, "dataset.json")))
    conf = plans["configurations"]["3d_fullres"]
    fwd = plans["transpose_forward"]
    target = np.array(conf["spacing"])

    def load(path):
        img = nib.load(path)
        return np.asarray(img.dataobj).transpose(2, 1, 0), np.array(img.header.get_zooms()[:3][::-1], float)

    chans = []
    for c in range(len(ds["channel_names"])):
        x, sp = load(os.path.join(dataset, "imagesTr", "%s_%04d.nii.gz" % (name, c)))
        chans.append(x.astype(np.float32).transpose(fwd))
    seg, sp = load(os.path.join(dataset, "labelsTr", name + ".nii.gz"))
    seg = seg.astype(np.int64).transpose(fwd)
    sp = sp[fwd]
    mask = np.any([c != 0 for c in chans], 0)
    if wrong != "no-fill":
        mask = binary_fill_holes(mask)
    idx = np.argwhere(mask)
    box = tuple(slice(a, b + 1) for a, b in zip(idx.min(0), idx.max(0)))
    chans = [c[box] for c in chans]
    seg = seg[box].copy()
    if wrong != "no-minus1":
        seg[(seg == 0) & ~mask[box]] = -1
    shape = [int(round(a / b * c)) for a, b, c in zip(sp, target, seg.shape)]
    axis = None if wrong == "no-separate-z" else separate_axis(sp, target)
    props = plans["foreground_intensity_properties_per_channel"]
    data = []
    for c, x in enumerate(chans):
        scheme, m = conf["normalization_schemes"][c], conf["use_mask_for_norm"][c]
        if wrong == "normalise-after":
            r = resample(x, shape, 3, axis).astype(np.float32)
            data.append(normalise(r, resample_seg(seg, shape, axis), scheme, m, props[str(c)]))
        else:
            data.append(resample(normalise(x, seg, scheme, m, props[str(c)]), shape, 3, axis).astype(np.float32))
    return data, resample_seg(seg, shape, axis), {
        "bbox_used_for_cropping": [[s.start, s.stop] for s in box],
        "shape_after_cropping_and_before_resampling": list(seg.shape),
        "shape_after_resampling": shape}


def main():
    import zarr
    dataset, plans_path, cache = sys.argv[1:4]
    wrong = sys.argv[sys.argv.index("--wrong") + 1] if "--wrong" in sys.argv else None
    plans = json.load(open(plans_path))
    names = sorted(f[:-7] for f in os.listdir(os.path.join(dataset, "labelsTr")) if f.endswith(".nii.gz"))
    worst = 0.0
    for name in names:
        data, seg, props = expected(dataset, plans, name, wrong)
        got_props = json.load(open(os.path.join(cache, name + ".json")))
        for k, v in props.items():
            if got_props[k] != v:
                sys.exit("check_preprocess: %s %s = %s, expected %s%s" % (name, k, got_props[k], v,
                         " (" + wrong + ")" if wrong else ""))
        root = os.path.join(cache, name + ".zarr")
        got_seg = zarr.open(os.path.join(root, "seg"), mode="r")[...]
        if got_seg.dtype != np.int8 or not np.array_equal(got_seg, seg):
            sys.exit("check_preprocess: %s seg (%s) differs in %d voxels%s" % (
                name, got_seg.dtype, int((got_seg != seg).sum()) if got_seg.shape == seg.shape else -1,
                " (" + wrong + ")" if wrong else ""))
        for c, want in enumerate(data):
            got = zarr.open(os.path.join(root, "data_%04d" % c), mode="r")[...]
            err = np.abs(got.astype(np.float64) - want).max() / (want.max() - want.min())
            worst = max(worst, err)
            if got.dtype != np.float32 or err > 1e-6:
                sys.exit("check_preprocess: %s channel %d differs by %.2e of its range%s" % (
                    name, c, err, " (" + wrong + ")" if wrong else ""))
    print("preprocess: %d cases = NumPy/SciPy's DefaultPreprocessor (data within %.0e of the range, "
          "seg exact)" % (len(names), max(worst, 1e-12)))


main()
