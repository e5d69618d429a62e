"""`medrun predict` against nnU-Net's export written again with NumPy and SciPy
(preprocess.test).

`check_predict.py PRED.nii.gz RAW_0000.nii.gz CASE.json PLANS LOGITS.npy... [--wrong V]`:
the folds' logits on the preprocessed grid (`medrun infer --activation none` on the cached
case), averaged, resampled back to the cropped shape as nnU-Net's probabilities resampler
does (scipy zoom order 1 with grid_mode, mode 'nearest', clipped; a separate z axis with
map_coordinates order 0 when max/min spacing > 3), argmax, put into zeros of the uncropped
shape at the crop box, transposed back: must equal PRED, which must have the raw image's
shape, affine and uint8. --wrong computes it a wrong way (one-fold: the first fold's logits
only; shift: the box one voxel off; nearest: order 0 instead of 1); the comparison must then
fail. With --probabilities NPZ, also nnU-Net's --save_probabilities: the softmax of the
resampled logits, background 1 outside the crop box, transposed back, key `probabilities`
(--wrong no-fill: 0 outside the box)."""
import json
import sys

import nibabel as nib
import numpy as np
from scipy.ndimage import map_coordinates, zoom


def resize(x, shape, order):
    r = zoom(x, np.array(shape) / np.array(x.shape), order=order, mode="nearest", grid_mode=True)
    return np.clip(r, x.min(), x.max())


def resample(x, shape, order, axis):
    if tuple(x.shape) == tuple(shape):
        return x
    if axis is None:
        return resize(x, shape, order)
    mid = list(shape)
    mid[axis] = x.shape[axis]
    planes = np.stack([resize(np.take(x, k, axis), [s for a, s in enumerate(mid) if a != axis], order)
                       for k in range(x.shape[axis])], axis)
    if planes.shape[axis] == shape[axis]:
        return planes
    coords = np.meshgrid(*[np.arange(s, dtype=float) if a != axis else
                           (np.arange(shape[axis]) + 0.5) * planes.shape[axis] / shape[axis] - 0.5
                           for a, s in enumerate(planes.shape)], indexing="ij")
    return map_coordinates(planes, np.array(coords), order=0, mode="nearest")


def separate_axis(current, target):
    for sp in (np.array(current), np.array(target)):
        if sp.max() / sp.min() > 3:
            axes = np.flatnonzero(sp.max() / sp == 1)
            return int(axes[0]) if len(axes) == 1 else None
    return None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    wrong = sys.argv[sys.argv.index("--wrong") + 1] if "--wrong" in sys.argv else None
    if wrong:
        args.remove(wrong)
    npz = sys.argv[sys.argv.index("--probabilities") + 1] if "--probabilities" in sys.argv else None
    if npz:
        args.remove(npz)
    pred_path, raw_path, props_path, plans_path = args[:4]
    logits = [np.load(p).astype(np.float64) for p in args[4:]]
    if wrong == "one-fold":
        logits = logits[:1]
    mean = sum(logits) / len(logits)
    props, plans = json.load(open(props_path)), json.load(open(plans_path))
    target = plans["configurations"]["3d_fullres"]["spacing"]
    crop = props["shape_after_cropping_and_before_resampling"]
    axis = separate_axis(target, props["spacing"])
    back = np.stack([resample(c, crop, 0 if wrong == "nearest" else 1, axis) for c in mean])
    seg = np.zeros(props["shape_before_cropping"], np.uint8)
    box = [slice(a + (1 if wrong == "shift" and i == 1 else 0), b + (1 if wrong == "shift" and i == 1 else 0))
           for i, (a, b) in enumerate(props["bbox_used_for_cropping"])]
    seg[tuple(box)] = np.argmax(back, 0)[tuple(slice(0, s.stop - s.start) for s in box)]
    seg = seg.transpose(plans["transpose_backward"])
    raw, pred = nib.load(raw_path), nib.load(pred_path)
    got = np.asarray(pred.dataobj)
    if got.dtype != np.uint8 or pred.shape != raw.shape or not np.allclose(pred.affine, raw.affine, atol=1e-5):
        sys.exit("check_predict: %s is %s %s, affine\n%s; the input %s, affine\n%s" %
                 (pred_path, got.dtype, pred.shape, pred.affine, raw.shape, raw.affine))
    got = got.transpose(2, 1, 0)  # nibabel's (x, y, z) -> (z, y, x)
    if not np.array_equal(got, seg):
        sys.exit("check_predict: %d of %d voxels differ from NumPy's export%s" %
                 (int((got != seg).sum()), seg.size, " (" + wrong + ")" if wrong else ""))
    if npz:
        e = np.exp(back - back.max(0))
        soft = e / e.sum(0)
        probs = np.zeros((back.shape[0],) + tuple(props["shape_before_cropping"]))
        if wrong != "no-fill":
            probs[0] = 1
        probs[(slice(None),) + tuple(box)] = soft[(slice(None),) + tuple(slice(0, s.stop - s.start) for s in box)]
        probs = probs.transpose([0] + [i + 1 for i in plans["transpose_backward"]])
        got_p = np.load(npz)["probabilities"]
        if got_p.dtype != np.float32 or got_p.shape != probs.shape or not np.allclose(got_p, probs, atol=1e-6):
            sys.exit("check_predict: %s: %s %s, max difference %s from NumPy's probabilities %s%s" %
                     (npz, got_p.dtype, got_p.shape,
                      np.abs(got_p - probs).max() if got_p.shape == probs.shape else "-", probs.shape,
                      " (" + wrong + ")" if wrong else ""))
        print("predict: %s = the softmax of the exported logits, background 1 outside the crop" % npz.split("/")[-1])
    print("predict: %s = the folds' mean logits exported as nnU-Net does (%d folds, %s, classes %s)"
          % (pred_path.split("/")[-1], len(logits), "x".join(map(str, seg.shape)),
             sorted(np.unique(seg).tolist())))


main()
