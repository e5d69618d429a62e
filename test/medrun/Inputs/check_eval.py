"""`medrun eval` against a direct NumPy implementation of the definitions (eval.test).

CREMI (cremi/evaluation/voi.py, rand.py): with X the segmentation and Y the ground truth,
VOI split = H(X|Y), merge = H(Y|X), in bits, over the voxels where Y > 0 (Y <= 0 is
background: CREMI's 0, and negative "no label" ids); the adapted Rand error is
1 - 2PR/(P+R) with the SNEMI3D sums over the contingency table n_ij (rows: ground-truth
objects i > 0, columns: predicted ids j, with j = 0 the predicted background):
sumA = sum_i (sum_j n_ij)^2, sumB = sum_{j>0} (sum_{i>0} n_ij)^2 + c/N,
sumAB = sum_{i>0,j>0} n_ij^2 + c/N, c = sum_{i>0} n_i0, N = all voxels; P = sumAB/sumB,
R = sumAB/sumA. BANIS's instances: connected components of the short-range affinities
above the threshold, numbered by first voxel in C order. nnU-Net's Dice per class, NaN for
a class in neither. Each is computed here from the formula (no shared code with medrun) on
random volumes of odd sizes and compared with `medrun eval --json`; deliberately wrong
variants (split and merge swapped, natural log, the background counted, the SNEMI3D term
left out) must each be told apart by the same comparison (the negative control).

  check_eval.py --medrun MEDRUN --dir DIR
  check_eval.py --inputs --dir DIR     the files of eval.test's infer -> eval path
  check_eval.py --same-best DIR        the best row of eval.json = best.json's scores
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--medrun")
p.add_argument("--dir", required=True)
p.add_argument("--inputs", action="store_true")
p.add_argument("--same-best", action="store_true")
a = p.parse_args()
os.makedirs(a.dir, exist_ok=True)
os.chdir(a.dir)
failures = []

if a.inputs:
    # A 13x9x20 image (not a multiple of the 5x6x7 window) and its instance labels in one
    # CREMI-style HDF5 file; class indices; bad labels for the error messages.
    import h5py
    r = np.random.default_rng(1)
    seg = np.zeros((13, 9, 20), np.uint64)
    seg[:, :, :10] = 1
    seg[:, :, 10:] = 2
    seg[:6, :4] = 3
    seg[:, :, 0] = np.uint64(2**64 - 1)  # CREMI's "no label": background
    img = (r.random(seg.shape) * 60 + 100 * (seg % 3)).astype(np.uint8)
    with h5py.File("data.h5", "w") as f:
        f.create_dataset("raw", data=img).attrs["resolution"] = [40.0, 4.0, 4.0]
        f.create_dataset("seg", data=seg).attrs["resolution"] = [40.0, 4.0, 4.0]
        f.create_dataset("seg_30nm", data=seg).attrs["resolution"] = [30.0, 4.0, 4.0]
        f.create_dataset("empty", data=np.zeros(seg.shape, np.uint64))
        f.create_dataset("small", data=seg[:, :, :19])
        f.create_dataset("halves", data=seg.astype(np.float32) / 2)
    np.save("classes.npy", (seg.astype(np.int64) % 3))
    np.save("classes_bad.npy", np.full(seg.shape, 7, np.int64))
    np.save("two.npy", r.random((2,) + seg.shape).astype(np.float32) + 1)
    np.save("one.npy", r.random(seg.shape).astype(np.float32))
    sys.exit(0)

if a.same_best:
    best = json.load(open("eval.json"))["best"]
    again = json.load(open("best.json"))
    keys = ["voi_split", "voi_merge", "arand"]
    ok = all(abs(best[k] - again["scores"][k]) < 1e-12 for k in keys) and best["objects"] == again["objects"]
    print("the written best segmentation scores as its row:", ok, {k: best[k] for k in keys})
    sys.exit(0 if ok else 1)


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else "  " + detail), flush=True)
    if not ok:
        failures.append(name)


def medrun_eval(*args):
    r = subprocess.run([a.medrun, "eval", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("medrun eval %s failed: %s" % (" ".join(args), r.stderr))
    return r


def table(pred, gt):
    """Contingency counts over all voxels: rows ground truth (0 = background), columns pred."""
    g = np.where(gt <= 0, 0, gt).ravel()
    _, gi = np.unique(g, return_inverse=True)
    gi = gi + (0 if (g == 0).any() else 1)  # row 0 is the background, present or not
    pv, pi = np.unique(pred.ravel(), return_inverse=True)
    zero = np.flatnonzero(pv == 0)
    n = np.zeros((gi.max() + 1, len(pv)), np.int64)
    np.add.at(n, (gi, pi), 1)
    if zero.size:  # predicted background to column 0
        order = [zero[0]] + [k for k in range(len(pv)) if k != zero[0]]
        n = n[:, order]
    else:
        n = np.concatenate([np.zeros((n.shape[0], 1), np.int64), n], axis=1)
    return n


def cremi(pred, gt, log=np.log2, swap=False, keep_background=False, snemi_term=True):
    n = table(pred, gt).astype(np.float64)
    fg = n if keep_background else n[1:]
    p = fg / fg.sum()
    pg, pp = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
    nz = p > 0
    h_pred_given_gt = -(p[nz] * log((p / np.where(pg > 0, pg, 1))[nz])).sum()
    h_gt_given_pred = -(p[nz] * log((p / np.where(pp > 0, pp, 1))[nz])).sum()
    split, merge = h_pred_given_gt, h_gt_given_pred
    if swap:
        split, merge = merge, split
    N = n.sum()
    rows = n[1:]
    c = rows[:, 0].sum() / N if snemi_term else 0.0
    sum_a = (rows.sum(1) ** 2).sum()
    sum_b = (rows[:, 1:].sum(0) ** 2).sum() + c
    sum_ab = (rows[:, 1:] ** 2).sum() + c
    prec, rec = sum_ab / sum_b, sum_ab / sum_a
    return {"voi_split": split, "voi_merge": merge, "arand": 1 - 2 * prec * rec / (prec + rec),
            "rand_precision": prec, "rand_recall": rec}


def agrees(ours, theirs, tol=1e-9):
    return all(abs(ours[k] - theirs[k]) <= tol * max(1.0, abs(theirs[k])) for k in ours)


def components(aff, t):
    """Union-find over the edges above t (forward: aff[a][v] joins v and v + e_a)."""
    shape = aff.shape[1:]
    size = int(np.prod(shape))
    parent = list(range(size))

    def find(v):
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    on = np.zeros(size, bool)
    idx = np.arange(size).reshape(shape)
    for ax in range(3):
        src = [slice(None)] * 3
        dst = [slice(None)] * 3
        src[ax], dst[ax] = slice(0, -1), slice(1, None)
        edges = aff[ax][tuple(src)] > t
        for u, v in zip(idx[tuple(src)][edges], idx[tuple(dst)][edges]):
            on[u] = on[v] = True
            parent[find(u)] = find(v)
    out = np.zeros(size, np.int64)
    ids = {}
    for v in range(size):
        if on[v]:
            out[v] = ids.setdefault(find(v), len(ids) + 1)
    return out.reshape(shape)


def drop_small(seg, min_size):
    out = np.zeros_like(seg)
    ids, first, counts = np.unique(seg.ravel(), return_index=True, return_counts=True)
    kept = [(f, i) for i, f, c in zip(ids, first, counts) if i > 0 and c >= min_size]
    for new, (_, i) in enumerate(sorted(kept), 1):
        out[seg == i] = new
    return out


rng = np.random.default_rng(0)
WRONG = {"split and merge swapped": dict(swap=True), "natural log": dict(log=np.log),
         "background counted": dict(keep_background=True), "no SNEMI3D term": dict(snemi_term=False)}
caught = {name: False for name in WRONG}

# 1. Segmentations scored as they are (--mode auto: integer volumes), odd sizes; ground
# truth with background 0, "no label" -1 and sparse 40-bit ids; blocky predictions with
# predicted background.
for k, shape in enumerate([(7, 9, 11), (5, 13, 3), (1, 17, 19), (9, 5, 7)]):
    gt = rng.integers(-1, 6, shape)
    gt[rng.random(shape) < 0.3] = 0
    gt = np.where(gt > 0, gt + (1 << 40), gt)
    coarse = rng.integers(0, 5, (shape[0], (shape[1] + 1) // 2, (shape[2] + 2) // 3))
    pred = coarse.repeat(2, 1).repeat(3, 2)[:, :shape[1], :shape[2]]
    noise = rng.random(shape) < 0.2
    pred = np.where(noise, rng.integers(0, 9, shape), pred)
    np.save("seg%d.npy" % k, pred.astype(np.int64))
    np.save("gt%d.npy" % k, gt.astype(np.int64))
    medrun_eval("seg%d.npy" % k, "--labels", "gt%d.npy" % k, "--json", "seg%d.json" % k)
    ours = json.load(open("seg%d.json" % k))["scores"]
    want = cremi(pred, gt)
    got = {key: ours[key] for key in want}
    check("instances %s: CREMI VOI and adapted Rand" % (shape,), agrees(got, want),
          "medrun %s, numpy %s" % (got, want))
    for name, variant in WRONG.items():
        if not agrees(got, cremi(pred, gt, **variant)):
            caught[name] = True
for name, seen in caught.items():
    check("negative control: the comparison rejects %s" % name, seen)

# 2. Affinities: a threshold sweep with small objects removed; every row and the written
# best segmentation against union-find components here.
for k, (shape, channels) in enumerate([((6, 7, 9), 3), ((5, 9, 7), 6)]):
    gt = np.zeros(shape, np.int64)
    gt[:, :, : shape[2] // 2] = 1
    gt[:, :, shape[2] // 2:] = 2
    gt[: shape[0] // 2, : shape[1] // 2] = 3
    gt[0, 0, :] = 0
    aff = rng.random((channels,) + shape).astype(np.float32)
    for ax in range(3):  # high inside objects, so the sweep has structure
        same = np.zeros(shape, bool)
        src = [slice(None)] * 3
        dst = [slice(None)] * 3
        src[ax], dst[ax] = slice(0, -1), slice(1, None)
        same[tuple(src)] = (gt[tuple(src)] == gt[tuple(dst)]) & (gt[tuple(src)] > 0)
        aff[ax] = np.where(same, 0.5 + 0.5 * aff[ax], 0.6 * aff[ax])
    np.save("aff%d.npy" % k, aff)
    np.save("agt%d.npy" % k, gt)
    thresholds = [0.3, 0.55, 0.8]
    medrun_eval("aff%d.npy" % k, "--labels", "agt%d.npy" % k, "--tune", "--thresholds",
                ",".join(map(str, thresholds)), "--min-size", "2", "--json", "aff%d.json" % k,
                "-o", "best%d.npy" % k)
    res = json.load(open("aff%d.json" % k))
    check("affinities %d: mode" % k, res["mode"] == "affinities", res["mode"])
    sums = []
    for row, t in zip(res["sweep"], thresholds):
        seg = drop_small(components(aff, t), 2)
        want = cremi(seg, gt)
        got = {key: row[key] for key in want}
        check("affinities %d at %g: objects" % (k, t), row["objects"] == seg.max(),
              "%d vs %d" % (row["objects"], seg.max()))
        check("affinities %d at %g: CREMI scores" % (k, t), agrees(got, want), "%s vs %s" % (got, want))
        sums.append(want["voi_split"] + want["voi_merge"])
    best = int(np.argmin(sums))
    check("affinities %d: the best is the lowest VOI sum" % k, res["best"]["threshold"] == thresholds[best])
    check("affinities %d: the written segmentation" % k,
          np.array_equal(np.load("best%d.npy" % k), drop_small(components(aff, thresholds[best]), 2)))

# 3. Class scores: Dice per class of the argmax, NaN (null) for a class in neither.
shape = (5, 7, 9)
labels = rng.integers(0, 3, shape)
scores = rng.random((4,) + shape).astype(np.float32)
scores[3] = -1  # class 3: never predicted, never labelled
scores[:3] = np.where(rng.random(shape) < 0.6, np.eye(3)[labels].transpose(3, 0, 1, 2) + scores[:3], scores[:3])
np.save("scores.npy", scores)
np.save("classes.npy", labels)
medrun_eval("scores.npy", "--labels", "classes.npy", "--mode", "segmentation", "--json", "dice.json",
            "-o", "classmap.npy")
res = json.load(open("dice.json"))
am = scores.argmax(0)
check("segmentation: the class map is the argmax", np.array_equal(np.load("classmap.npy"), am))
for c in range(4):
    tp = int(((am == c) & (labels == c)).sum())
    fp = int(((am == c) & (labels != c)).sum())
    fn = int(((am != c) & (labels == c)).sum())
    got = res["per_class"][c]
    if tp + fp + fn == 0:
        check("segmentation: class %d in neither is null (NaN)" % c, got["dice"] is None, str(got))
    else:
        check("segmentation: class %d Dice" % c,
              (got["tp"], got["fp"], got["fn"]) == (tp, fp, fn) and
              abs(got["dice"] - 2 * tp / (2 * tp + fp + fn)) < 1e-12, str(got))
dices = [2 * ((am == c) & (labels == c)).sum() / ((am == c).sum() + (labels == c).sum()) for c in (1, 2)]
check("segmentation: foreground mean", abs(res["foreground_mean_dice"] - np.mean(dices)) < 1e-12)

if failures:
    sys.exit("FAIL: %d checks: %s" % (len(failures), ", ".join(failures)))
print("eval: all checks passed")
