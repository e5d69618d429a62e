"""The nnU-Net pipeline's CI dataset and its checks (pipeline.test).

`pipeline_data.py make DIR`: an nnU-Net raw dataset of 4 tiny cases in DIR: two channels
(CT-like int16 with a body of -100 HU and organs brighter, MR-like float32), spacings
z 1.5 / 2.0 / 2.0 / 2.5 mm, in-plane 0.8 mm (the plan's target is 2.0 x 0.8 x 0.8: case_00
and case_01 are not resampled, case_02 is with a separate z axis, case_03 without), odd
sizes, zero borders, labels organ 1 and lesion 2, and nnU-Net's ignore label 3 on the first
two slices of the body (unannotated slices); splits_final.json with two folds whose
validation cases are case_00 and case_01.

`pipeline_data.py geometry PRED_FOLDER RAW_FOLDER`: every prediction CASE.nii.gz has the
shape, affine and spacing of RAW_FOLDER/CASE_0000.nii.gz and holds classes 0..2 as uint8.

`pipeline_data.py same-dice RUN/log.jsonl SUMMARY CASE`: the last validation's Dice per
class (the run's only validation case CASE) equals summary.json's Dice of CASE per label."""
import json
import math
import os
import sys

import numpy as np

CASES = [  # (z, y, x) shape, spacing z, spacing in-plane, body margin
    ((12, 40, 36), 2.0, 0.8, 3), ((10, 44, 40), 2.0, 0.8, 4),
    ((14, 38, 42), 2.5, 0.8, 2), ((11, 42, 38), 1.5, 0.8, 0)]


def make(d):
    import nibabel as nib
    rng = np.random.default_rng(5)
    for sub in ("imagesTr", "labelsTr"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    for i, (shape, sz, sxy, m) in enumerate(CASES):
        seg = np.zeros(shape, np.uint8)
        zc, yc, xc = shape[0] // 2, shape[1] // 2, shape[2] // 2
        z, y, x = np.indices(shape)
        body = ((y - (shape[1] - 1) / 2) / (shape[1] / 2 - m)) ** 2 + \
               ((x - (shape[2] - 1) / 2) / (shape[2] / 2 - m)) ** 2 < 1
        seg[((z - zc) / 5) ** 2 + ((y - yc) / 10) ** 2 + ((x - xc) / 8) ** 2 < 1] = 1
        seg[((z - zc) / 3) ** 2 + ((y - yc - 3) / 5) ** 2 + ((x - xc) / 4) ** 2 < 1] = 2
        seg[~body] = 0
        seg[:2][body[:2]] = 3  # unannotated slices: nnU-Net's ignore label
        truth = np.where(seg == 3, 0, seg)
        ct = np.where(body, -100 + 150 * (truth == 1) + 300 * (truth == 2) + rng.normal(0, 15, shape), 0)
        mr = np.where(body, 300 + 250 * (truth > 0) + rng.normal(0, 20, shape), 0)
        aff = np.diag([sxy, sxy, sz, 1.0])
        aff[:3, 3] = [10.0 * i, -5.0, 2.0]
        name = "case_%02d" % i
        nib.save(nib.Nifti1Image(ct.astype(np.int16).transpose(2, 1, 0), aff),
                 os.path.join(d, "imagesTr", name + "_0000.nii.gz"))
        nib.save(nib.Nifti1Image(mr.astype(np.float32).transpose(2, 1, 0), aff),
                 os.path.join(d, "imagesTr", name + "_0001.nii.gz"))
        nib.save(nib.Nifti1Image(seg.transpose(2, 1, 0), aff), os.path.join(d, "labelsTr", name + ".nii.gz"))
    json.dump({"channel_names": {"0": "CT", "1": "T2"},
               "labels": {"background": 0, "organ": 1, "lesion": 2, "ignore": 3},
               "numTraining": len(CASES), "file_ending": ".nii.gz"},
              open(os.path.join(d, "dataset.json"), "w"), indent=2)
    names = ["case_%02d" % i for i in range(len(CASES))]
    folds = [{"train": [n for n in names if n != v], "val": [v]} for v in names[:2]]
    json.dump(folds, open(os.path.join(d, "splits_final.json"), "w"), indent=2)


def geometry(pred_dir, raw_dir):
    import nibabel as nib
    files = sorted(f for f in os.listdir(pred_dir) if f.endswith(".nii.gz"))
    if not files:
        sys.exit("geometry: no predictions in %s" % pred_dir)
    for f in files:
        p = nib.load(os.path.join(pred_dir, f))
        r = nib.load(os.path.join(raw_dir, f[:-7] + "_0000.nii.gz"))
        a = np.asarray(p.dataobj)
        if p.shape != r.shape or not np.allclose(p.affine, r.affine, atol=1e-5) or \
                not np.allclose(p.header.get_zooms(), r.header.get_zooms(), atol=1e-6):
            sys.exit("geometry: %s: shape %s affine %s, the input's %s %s"
                     % (f, p.shape, p.affine.tolist(), r.shape, r.affine.tolist()))
        if a.dtype != np.uint8 or a.min() < 0 or a.max() > 2:
            sys.exit("geometry: %s: %s values %d..%d, expected uint8 classes 0..2" % (f, a.dtype, a.min(), a.max()))
    print("geometry: %d prediction(s) with their inputs' shape, affine and spacing, uint8 classes" % len(files))


def same_dice(log, summary, case):
    vals = [json.loads(l) for l in open(log) if '"val_dice"' in l]
    if not vals:
        sys.exit("same-dice: no validation in %s" % log)
    per_class = vals[-1]["val_dice_per_class"]
    s = json.load(open(summary))
    row = [c for c in s["metric_per_case"] if os.path.basename(c["reference_file"]) == case + ".nii.gz"]
    if len(row) != 1:
        sys.exit("same-dice: %s is not in %s" % (case, summary))
    dice = {k: v["Dice"] for k, v in row[0]["metrics"].items()}
    pairs = list(per_class.items()) if isinstance(per_class, dict) else list(enumerate(per_class))
    if len(pairs) != len(dice):
        sys.exit("same-dice: validation has %d classes, summary %d" % (len(pairs), len(dice)))
    for (name, v), label in zip(pairs, sorted(dice, key=int)):
        w = dice[label]
        if not (v is None and (w is None or math.isnan(w))) and not abs(v - w) <= 1e-9:
            sys.exit("same-dice: class %s (label %s): validation %r, predict + eval %r" % (name, label, v, w))
    print("same-dice: %s: validation's Dice = predict's per class %s" % (case, [dice[k] for k in sorted(dice, key=int)]))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "geometry":
        geometry(sys.argv[2], sys.argv[3])
    elif cmd == "same-dice":
        same_dice(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: pipeline_data.py make DIR | geometry PRED RAW | same-dice LOG SUMMARY CASE")
