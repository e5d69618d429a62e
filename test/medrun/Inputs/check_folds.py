"""nnU-Net's folds (folds.test).

`check_folds.py make DIR N [--ignore]`: writes a tiny nnU-Net raw dataset of N CT cases
(names not in creation order) without splits_final.json; --ignore adds nnU-Net's ignore label.

`check_folds.py check DIR [--wrong VARIANT]`: DIR/splits_final.json must be nnU-Net's 5 folds:
sklearn's KFold(n_splits=5, shuffle=True, random_state=12345) over the sorted case ids, here
re-implemented with NumPy (RandomState(12345).shuffle of the indices, consecutive test folds,
the first n % 5 one larger, both sides in index order) and, where sklearn is installed,
compared with sklearn itself. --wrong computes the expectation a wrong way (seed 12346, no
shuffle, ids in reverse order, sizes the other way round); the comparison must reject it."""
import json
import os
import sys

import numpy as np


def make(root, n, ignore):
    import nibabel as nib
    rng = np.random.default_rng(n)
    for sub in ("imagesTr", "labelsTr"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    names = ["pt%02d" % i for i in rng.permutation(n)]  # written out of order
    for name in names:
        seg = np.zeros((6, 7, 8), np.uint8)
        seg[1:4, 2:5, 2:6] = 1
        seg[4:, 1:3, 5:] = 2
        if ignore:
            seg[0, 0, :] = 3
        ct = (-900 + 1000 * (seg == 1) + 1300 * (seg == 2) + rng.normal(0, 30, seg.shape)).astype(np.int16)
        aff = np.diag([0.8, 0.8, 3.0, 1.0])
        nib.save(nib.Nifti1Image(ct.transpose(2, 1, 0), aff), os.path.join(root, "imagesTr", name + "_0000.nii.gz"))
        nib.save(nib.Nifti1Image(seg.transpose(2, 1, 0), aff), os.path.join(root, "labelsTr", name + ".nii.gz"))
    labels = {"background": 0, "liver": 1, "tumour": 2}
    if ignore:
        labels["ignore"] = 3
    json.dump({"channel_names": {"0": "CT"}, "labels": labels, "numTraining": n,
               "file_ending": ".nii.gz"}, open(os.path.join(root, "dataset.json"), "w"), indent=2)


def expected(ids, wrong=None):
    ids = sorted(ids, reverse=wrong == "unsorted")
    n = len(ids)
    idx = np.arange(n)
    if wrong != "no-shuffle":
        np.random.RandomState(12346 if wrong == "seed" else 12345).shuffle(idx)
    sizes = np.full(5, n // 5)
    if wrong == "sizes":
        sizes[5 - n % 5:] += 1
    else:
        sizes[:n % 5] += 1
    folds, at = [], 0
    for s in sizes:
        test = np.zeros(n, bool)
        test[idx[at:at + s]] = True
        at += s
        folds.append({"train": [ids[i] for i in np.flatnonzero(~test)],
                      "val": [ids[i] for i in np.flatnonzero(test)]})
    return folds


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), "--ignore" in sys.argv)
        return
    root = sys.argv[2]
    wrong = sys.argv[sys.argv.index("--wrong") + 1] if "--wrong" in sys.argv else None
    # Case ids as nnU-Net takes them: the label files, in directory order (then sorted).
    ids = [f[:-len(".nii.gz")] for f in os.listdir(os.path.join(root, "labelsTr"))]
    got = json.load(open(os.path.join(root, "splits_final.json")))
    want = expected(ids, wrong)
    if got != want:
        sys.exit("check_folds: splits_final.json differs from the NumPy KFold%s:\n got %s\nwant %s" %
                 (" (" + wrong + ")" if wrong else "", got, want))
    try:
        from sklearn.model_selection import KFold
    except ImportError:
        print("folds: %d cases, splits_final.json = NumPy's KFold (sklearn not installed)" % len(ids))
        return
    keys = np.sort(ids)
    ref = [{"train": list(keys[tr]), "val": list(keys[te])}
           for tr, te in KFold(n_splits=5, shuffle=True, random_state=12345).split(keys)]
    if got != ref:
        sys.exit("check_folds: splits_final.json differs from sklearn's KFold")
    print("folds: %d cases, splits_final.json = NumPy's KFold = sklearn's" % len(ids))


main()
