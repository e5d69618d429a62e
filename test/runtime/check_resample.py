"""nnU-Net's resampling (medrun/Resample.h) against SciPy.

nnU-Net resizes with skimage.transform.resize(order, mode='edge', anti_aliasing=False),
which is scipy.ndimage.zoom(zoom=out/in, order, mode='nearest', grid_mode=True) clipped to
the input's range; with a separate z axis every slice is resized in-plane so and the axis
is sampled by map_coordinates(order=0, mode='nearest') at (i + 0.5) * in / out - 0.5;
segmentations resize each label's 0/1 mask with order 1 and keep >= 0.5 (later labels win).
Those are written again here with SciPy and compared with the helper's outputs on odd
sizes (up and down, each axis), for orders 3, 1 and 0, separate z on each axis, and label
maps. Wrong variants (grid_mode off, no clipping, no prefilter padding, order 1 for 3,
linear along the separate axis, labels by nearest) must be told apart.

  check_resample.py --helper PATH --dir DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
from scipy.ndimage import map_coordinates, zoom


def resize(x, shape, order, wrong=None):
    z = np.array(shape) / np.array(x.shape)
    grid = wrong != "no-grid"
    if wrong == "no-prepad" and order > 1:
        from scipy.ndimage import spline_filter
        f = spline_filter(x.astype(np.float64), order, mode="nearest")
        r = zoom(f, z, order=order, mode="nearest", grid_mode=grid, prefilter=False)
    else:
        r = zoom(x.astype(np.float64), z, order=1 if wrong == "order1" and order == 3 else order,
                 mode="nearest", grid_mode=grid)
    assert r.shape == tuple(shape), (r.shape, shape)
    return r if wrong == "no-clip" else np.clip(r, x.min(), x.max())


def along(x, axis, n, order):
    coords = np.meshgrid(*[np.arange(s, dtype=float) if a != axis else
                           (np.arange(n) + 0.5) * x.shape[axis] / n - 0.5
                           for a, s in enumerate(x.shape)], indexing="ij")
    return map_coordinates(x, np.array(coords), order=order, mode="nearest")


def resample(x, shape, order, axis, wrong=None):
    if tuple(x.shape) == tuple(shape):
        return x.astype(np.float64)
    if axis < 0:
        return resize(x, shape, order, wrong)
    mid = list(shape)
    mid[axis] = x.shape[axis]
    planes = np.stack([resize(np.take(x, k, axis), [s for a, s in enumerate(mid) if a != axis], order, wrong)
                       for k in range(x.shape[axis])], axis)
    if planes.shape[axis] == shape[axis]:
        return planes
    return along(planes, axis, shape[axis], 1 if wrong == "linear-z" else 0)


def resample_seg(x, shape, axis, wrong=None):
    if wrong == "nearest-labels":
        return along_all(x, shape)
    mid = list(shape)
    if axis >= 0:
        mid[axis] = x.shape[axis]
    out = np.zeros(mid, np.int64)
    for label in np.unique(x):
        r = resample((x == label).astype(np.float64), mid, 1, axis)
        out[r >= 0.5] = label
    if axis < 0 or mid[axis] == shape[axis]:
        return out
    return along(out, axis, shape[axis], 0).astype(np.int64)


def along_all(x, shape):
    return zoom(x, np.array(shape) / np.array(x.shape), order=0, mode="nearest", grid_mode=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helper", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    rng = np.random.default_rng(5)
    failures = 0

    def run(x, shape, order, axis, seg=False):
        src, dst = os.path.join(a.dir, "in.npy"), os.path.join(a.dir, "out.npy")
        np.save(src, x)
        args = [a.helper, src, dst, ",".join(map(str, shape)), str(order), str(axis)] + (["seg"] if seg else [])
        subprocess.run(args, check=True)
        return np.load(dst)

    def report(ok, what):
        nonlocal failures
        print("%s  %s" % ("ok  " if ok else "FAIL", what), flush=True)
        failures += not ok

    cases = [((7, 11, 9), (13, 6, 9)), ((5, 8, 13), (9, 15, 7)), ((9, 10, 6), (4, 10, 11))]
    for src, dst in cases:
        # a smooth field plus noise, CT-like range, float32 as nnU-Net's data
        x = (np.indices(src).sum(0) * 20.0 + rng.normal(0, 30, src) - 500).astype(np.float32)
        for order in (3, 1, 0):
            for axis in (-1, 0, 1, 2):
                got = run(x, dst, order, axis)
                want = resample(x, dst, order, axis)
                err = np.abs(got - want).max() / (x.max() - x.min())
                report(err < 1e-9, "image %s -> %s order %d axis %2d: max error %.1e of the range"
                       % (src, dst, order, axis, err))
        seg = rng.integers(-1, 4, src)  # -1 outside the crop, as nnU-Net's cropped segmentations
        seg[: src[0] // 2] = np.where(seg[: src[0] // 2] == 3, 1, seg[: src[0] // 2])
        for axis in (-1, 0, 2):
            got = run(seg, dst, 1, axis, seg=True)
            want = resample_seg(seg, dst, axis)
            report(np.array_equal(got, want), "labels %s -> %s axis %2d: %d of %d voxels differ"
                   % (src, dst, axis, int((got != want).sum()), got.size))
    # Negative controls: each wrong variant differs from the helper's output.
    x = (np.indices((7, 11, 9)).sum(0) * 20.0 + rng.normal(0, 30, (7, 11, 9))).astype(np.float32)
    x[3, 5, 4] = 900  # a spike: the cubic spline overshoots, clipping shows
    for wrong, order, axis in (("no-grid", 3, -1), ("no-clip", 3, -1), ("no-prepad", 3, -1),
                               ("order1", 3, -1), ("linear-z", 3, 0)):
        got = run(x, (13, 6, 9), order, axis)
        err = np.abs(got - resample(x, (13, 6, 9), order, axis, wrong)).max() / (x.max() - x.min())
        report(err > 1e-6, "negative control: the comparison rejects %s (difference %.1e)" % (wrong, err))
    seg = rng.integers(0, 4, (7, 11, 9))
    got = run(seg, (13, 6, 9), 1, -1, seg=True)
    report(not np.array_equal(got, resample_seg(seg, (13, 6, 9), -1, "nearest-labels")),
           "negative control: the comparison rejects labels by nearest")
    print("resample: %s" % ("all checks passed" if not failures else "%d FAILED" % failures))
    sys.exit(1 if failures else 0)


main()
