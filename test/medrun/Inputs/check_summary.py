"""`medrun eval PRED_FOLDER --labels GT_FOLDER` against NumPy (eval-folder.test).

`check_summary.py make DIR`: writes DIR/pred/ and DIR/Dataset/labelsTr/ (label maps of odd
sizes as NIfTI, uint8 and int16), DIR/Dataset/dataset.json (labels 1..3 and ignore 4), so
that: label 3 is in neither map of one case (NaN Dice), the ignore label covers predicted
foreground, and one reference is a float NIfTI of whole numbers.

`check_summary.py check SUMMARY DIR [--no-dataset-json | --regions] [--wrong VARIANT]`:
(--regions: dataset.json's regions (1, 2, 3), (2, 3) and label 3, the union scored) recomputes
nnU-Net's summary.json (evaluation/evaluate_predictions.py) with NumPy from the definitions
and compares every key and number. --wrong computes it a wrong way (nan-as-zero: Dice 0 for
an empty label; mean: np.mean over cases, not nanmean; ignore-counted; swap: FP and FN
swapped; background: label 0 in the foreground mean); the comparison must then fail."""
import json
import math
import os
import sys

import numpy as np

SHAPES = [(7, 9, 11), (5, 6, 13), (9, 4, 7), (3, 11, 5)]


def make(d):
    import nibabel as nib
    rng = np.random.default_rng(7)
    os.makedirs(os.path.join(d, "pred"), exist_ok=True)
    os.makedirs(os.path.join(d, "Dataset", "labelsTr"), exist_ok=True)
    for i, shape in enumerate(SHAPES):
        ref = rng.integers(0, 4, shape)
        pred = np.where(rng.random(shape) < 0.7, ref, rng.integers(0, 4, shape))
        if i == 1:  # label 3 in neither: NaN
            ref[ref == 3] = 1
            pred[pred == 3] = 2
        if i == 2:  # label 3 only in the prediction: Dice 0
            ref[ref == 3] = 0
        ign = rng.random(shape) < 0.1
        ref[ign] = 4
        aff = np.diag([0.7, 0.8, 2.5, 1.0])
        name = "case_%02d.nii.gz" % i
        ref_dtype = np.float32 if i == 3 else np.int16
        nib.save(nib.Nifti1Image(ref.astype(ref_dtype).transpose(2, 1, 0), aff),
                 os.path.join(d, "Dataset", "labelsTr", name))
        nib.save(nib.Nifti1Image(pred.astype(np.uint8).transpose(2, 1, 0), aff),
                 os.path.join(d, "pred", name))
    json.dump({"channel_names": {"0": "CT"},
               "labels": {"background": 0, "a": 1, "b": 2, "c": 3, "ignore": 4},
               "numTraining": len(SHAPES), "file_ending": ".nii.gz"},
              open(os.path.join(d, "Dataset", "dataset.json"), "w"), indent=2)


def metrics(pred, ref, label, ignore, wrong):
    keep = np.ones(ref.shape, bool) if ignore is None or wrong == "ignore-counted" else ref != ignore
    values = list(label) if isinstance(label, tuple) else [label]  # a region: the union
    p, r = np.isin(pred, values) & keep, np.isin(ref, values) & keep
    tp = int((p & r).sum())
    fp = int((p & ~r).sum())
    fn = int((~p & r).sum())
    tn = int((~p & ~r & keep).sum())
    if wrong == "swap":
        fp, fn = fn, fp
    if tp + fp + fn == 0:
        dice = iou = 0.0 if wrong == "nan-as-zero" else float("nan")
    else:
        dice, iou = 2 * tp / (2 * tp + fp + fn), tp / (tp + fp + fn)
    return {"Dice": dice, "FN": fn, "FP": fp, "IoU": iou, "TN": tn, "TP": tp,
            "n_pred": tp + fp, "n_ref": tp + fn}


def expected(d, dataset_json, wrong):
    import nibabel as nib
    pred_dir, ref_dir = os.path.join(d, "pred"), os.path.join(d, "Dataset", "labelsTr")
    files = sorted(f for f in os.listdir(pred_dir) if f.endswith(".nii.gz"))
    cases = []
    for f in files:
        pred = np.asarray(nib.load(os.path.join(pred_dir, f)).dataobj).transpose(2, 1, 0).astype(np.int64)
        ref = np.asarray(nib.load(os.path.join(ref_dir, f)).dataobj).transpose(2, 1, 0).astype(np.int64)
        cases.append((f, pred, ref))
    if dataset_json == "regions":
        labels, ignore = [(1, 2, 3), (2, 3), 3], 4
    elif dataset_json:  # dataset.json's labels without background, and its ignore label
        dl = json.load(open(os.path.join(d, "Dataset", "dataset.json")))["labels"]
        labels = sorted(v for k, v in dl.items() if k not in ("background", "ignore") and v != 0)
        ignore = dl.get("ignore")
    else:  # every value > 0 found, and no ignore label
        labels = sorted(set(np.unique(np.concatenate([np.concatenate([p.ravel(), r.ravel()])
                                                      for _, p, r in cases]))) - {0})
        ignore = None
    if wrong == "background":
        labels = [0] + labels
    per_case = []
    for f, pred, ref in cases:
        per_case.append({"metrics": {str(l): metrics(pred, ref, l, ignore, wrong) for l in labels},
                         "prediction_file": os.path.join(pred_dir, f),
                         "reference_file": os.path.join(ref_dir, f)})
    names = ["Dice", "FN", "FP", "IoU", "TN", "TP", "n_pred", "n_ref"]
    mean = {}
    for l in labels:
        mean[str(l)] = {}
        for m in names:
            v = np.array([c["metrics"][str(l)][m] for c in per_case], float)
            with np.errstate(all="ignore"):
                import warnings
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    mean[str(l)][m] = float(np.mean(v) if wrong == "mean" else np.nanmean(v))
    # nnU-Net leaves label 0 out of the foreground mean; the wrong variant keeps it.
    fg_labels = [str(l) for l in labels if l != 0 or wrong == "background"]
    foreground = {m: float(np.mean([mean[k][m] for k in fg_labels])) for m in names}
    if wrong == "background":  # label 0 is not reported per label by nnU-Net
        for c in per_case:
            del c["metrics"]["0"]
        del mean["0"]
    return {"foreground_mean": foreground, "mean": mean, "metric_per_case": per_case}


def same(a, b, path="summary"):
    if isinstance(a, dict):
        if not isinstance(b, dict) or sorted(a) != sorted(b):
            return "%s: keys %s vs %s" % (path, sorted(a) if isinstance(a, dict) else a,
                                          sorted(b) if isinstance(b, dict) else b)
        for k in a:
            r = same(a[k], b[k], path + "." + k)
            if r:
                return r
        return None
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return "%s: lengths differ" % path
        for i, (x, y) in enumerate(zip(a, b)):
            r = same(x, y, "%s[%d]" % (path, i))
            if r:
                return r
        return None
    if isinstance(a, str) or isinstance(b, str):
        return None if os.path.abspath(str(a)) == os.path.abspath(str(b)) else "%s: %r vs %r" % (path, a, b)
    if isinstance(b, float) and math.isnan(b):
        return None if isinstance(a, float) and math.isnan(a) else "%s: %r vs NaN" % (path, a)
    if isinstance(a, float) and math.isnan(a):
        return "%s: NaN vs %r" % (path, b)
    if type(a) is int and type(b) is not int and not float(b).is_integer():
        return "%s: %r vs %r" % (path, a, b)
    return None if abs(a - b) <= 1e-12 * max(1, abs(b)) else "%s: %r vs %r" % (path, a, b)


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2])
        return
    summary, d = sys.argv[2], sys.argv[3]
    wrong = sys.argv[sys.argv.index("--wrong") + 1] if "--wrong" in sys.argv else None
    text = open(summary).read()
    got = json.loads(text)  # NaN as Python writes it
    want = expected(d, "regions" if "--regions" in sys.argv else "--no-dataset-json" not in sys.argv,
                    wrong)
    diff = same(got, want)
    if diff:
        sys.exit("check_summary: %s differs from NumPy%s: %s" %
                 (summary, " (" + wrong + ")" if wrong else "", diff))
    if text != json.dumps(got, indent=4, sort_keys=True):
        sys.exit("check_summary: %s is not laid out as json.dump(indent=4, sort_keys=True)" % summary)
    nans = sum(1 for c in got["metric_per_case"] for v in c["metrics"].values() if math.isnan(v["Dice"]))
    print("summary.json: %d cases, labels %s, %d NaN Dice, = NumPy's nnU-Net definitions" %
          (len(got["metric_per_case"]), sorted(got["mean"]), nans))


main()
