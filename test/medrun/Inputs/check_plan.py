"""`medrun plan` against nnU-Net's planning written again with NumPy (plan.test).

`check_plan.py make DIR`: an nnU-Net raw dataset of 6 cases, 2 channels (CT-like and
MR-like), anisotropic spacings (z 1.5 to 3.5 mm, 0.7 to 1.0 mm in-plane), odd sizes, zero borders
around the body (cropping), a cavity of zeros inside it (a hole of the non-zero mask) and
labels 1, 2.

`check_plan.py check DIR OUT [--gpu GB] [--wrong VARIANT]`: recomputes
dataset_fingerprint.json and the 3d_fullres configuration of nnUNetPlans.json from the
definitions (nnU-Net v2's fingerprint_extractor.py, default_experiment_planner.py,
network_topology.py, PlainConvUNet's compute_conv_feature_map_size; the fingerprint over
every foreground voxel) and compares every value. --wrong computes them a wrong way
(mean-spacing: the mean instead of the median; no-aniso: without the anisotropy rule;
no-crop: shapes of the whole images; fg-all: intensities of every voxel); the comparison
must then fail."""
import json
import math
import os
import sys

import numpy as np

CASES = [  # (z, y, x) shape, spacing z, spacing in-plane, body box margin
    ((15, 61, 57), 3.0, 0.8, 5), ((13, 64, 60), 3.0, 0.8, 4), ((17, 59, 63), 2.5, 0.7, 6),
    ((16, 55, 58), 1.5, 0.9, 3), ((14, 62, 61), 3.5, 1.0, 7), ((15, 60, 56), 3.0, 0.8, 0)]


def make(d):
    import nibabel as nib
    rng = np.random.default_rng(3)
    for sub in ("imagesTr", "labelsTr"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    for i, (shape, sz, sxy, m) in enumerate(CASES):
        seg = np.zeros(shape, np.uint8)
        zc, yc, xc = shape[0] // 2, shape[1] // 2, shape[2] // 2
        z, y, x = np.indices(shape)
        # an elliptic cylinder inside a margin of zeros: the crop box holds zero corners
        body = ((y - (shape[1] - 1) / 2) / (shape[1] / 2 - m)) ** 2 + \
               ((x - (shape[2] - 1) / 2) / (shape[2] / 2 - m)) ** 2 < 1
        seg[((z - zc) / 4) ** 2 + ((y - yc) / 12) ** 2 + ((x - xc) / 10) ** 2 < 1] = 1
        seg[((z - zc) / 2) ** 2 + ((y - yc - 4) / 5) ** 2 + ((x - xc) / 4) ** 2 < 1] = 2
        # a cavity of zeros inside the body (a hole of the non-zero mask, filled by cropping)
        body[2:5, yc - 12:yc - 9, xc - 2:xc + 1] = False
        seg[~body] = 0
        ct = np.where(body, -100 + 140 * (seg == 1) + 260 * (seg == 2) + rng.normal(0, 20, shape), 0)
        mr = np.where(body, 300 + 200 * (seg > 0) + rng.normal(0, 30, shape), 0)
        aff = np.diag([sxy, sxy, sz, 1.0])
        name = "case_%02d" % i
        nib.save(nib.Nifti1Image(ct.astype(np.int16).transpose(2, 1, 0), aff),
                 os.path.join(d, "imagesTr", name + "_0000.nii.gz"))
        nib.save(nib.Nifti1Image(mr.astype(np.float32).transpose(2, 1, 0), aff),
                 os.path.join(d, "imagesTr", name + "_0001.nii.gz"))
        nib.save(nib.Nifti1Image(seg.transpose(2, 1, 0), aff), os.path.join(d, "labelsTr", name + ".nii.gz"))
    json.dump({"channel_names": {"0": "CT", "1": "T2"}, "labels": {"background": 0, "organ": 1, "lesion": 2},
               "numTraining": len(CASES), "file_ending": ".nii.gz"},
              open(os.path.join(d, "dataset.json"), "w"), indent=2)


def load(path):
    import nibabel as nib
    img = nib.load(path)
    return np.asarray(img.dataobj).transpose(2, 1, 0), [float(v) for v in img.header.get_zooms()[:3][::-1]]


def fingerprint(d, wrong):
    names = sorted(f[:-7] for f in os.listdir(os.path.join(d, "labelsTr")) if f.endswith(".nii.gz"))
    channels = len(json.load(open(os.path.join(d, "dataset.json")))["channel_names"])
    spacings, shapes, rel, fg = [], [], [], [[] for _ in range(channels)]
    for n in names:
        seg, sp = load(os.path.join(d, "labelsTr", n + ".nii.gz"))
        imgs = [load(os.path.join(d, "imagesTr", "%s_%04d.nii.gz" % (n, c)))[0].astype(np.float32)
                for c in range(channels)]
        nonzero = np.any([i != 0 for i in imgs], axis=0)
        if wrong == "no-crop" or not nonzero.any():
            box = tuple(slice(0, s) for s in seg.shape)
        else:
            idx = np.argwhere(nonzero)
            box = tuple(slice(a, b + 1) for a, b in zip(idx.min(0), idx.max(0)))
        cropped = seg[box]
        spacings.append(sp)
        shapes.append(list(cropped.shape))
        rel.append(np.prod(cropped.shape) / np.prod(seg.shape))
        for c in range(channels):
            fg[c].append(imgs[c][box].ravel() if wrong == "fg-all" else imgs[c][box][cropped > 0])
    props = {}
    for c in range(channels):
        v = np.concatenate(fg[c]).astype(np.float64)
        props[str(c)] = {"max": float(v.max()), "mean": float(v.mean()), "median": float(np.median(v)),
                         "min": float(v.min()), "percentile_00_5": float(np.percentile(v, 0.5)),
                         "percentile_99_5": float(np.percentile(v, 99.5)), "std": float(v.std())}
    return {"foreground_intensity_properties_per_channel": props,
            "median_relative_size_after_cropping": float(np.median(rel)),
            "shapes_after_crop": shapes, "spacings": spacings}


def pool_and_conv_props(spacing, patch, min_fm=4):
    sp, size = list(spacing), [float(p) for p in patch]
    strides, kernels, pools, kernel = [[1, 1, 1]], [], [0, 0, 0], [1, 1, 1]
    while True:
        valid = [i for i in range(3) if size[i] >= 2 * min_fm]
        if not valid:
            break
        of_axes = [sp[i] for i in valid]
        valid = [i for i in valid if sp[i] / min(of_axes) < 2]
        if len(valid) == 1 and not size[valid[0]] >= 3 * min_fm:
            break
        if not valid:
            break
        for k in range(3):
            if kernel[k] != 3 and of_axes[k] / min(sp) < 2:
                kernel[k] = 3
        stride = [1, 1, 1]
        for v in valid:
            stride[v] = 2
            pools[v] += 1
            sp[v] *= 2
            size[v] = math.ceil(size[v] / 2)
        strides.append(stride)
        kernels.append(list(kernel))
    div = [2 ** p for p in pools]
    padded = [int(p + m - p % m - (m if p % m == 0 else 0)) for p, m in zip(patch, div)]
    return strides, kernels + [[3, 3, 3]], padded, div


def feature_maps(patch, strides, classes):
    n = len(strides)
    feats = [min(32 * 2 ** i, 320) for i in range(n)]
    size, sizes, total = list(patch), [], 0
    for s in range(n):
        size = [a // b for a, b in zip(size, strides[s])]
        sizes.append(size)
        total += 2 * feats[s] * int(np.prod(size))
    for s in range(n - 1):
        skip, f = sizes[n - 2 - s], feats[n - 2 - s]
        total += 3 * f * int(np.prod(skip))
        if s == n - 2:
            total += classes * int(np.prod(skip))
    return total


def plan(fp, ds, gpu, wrong):
    spacings, shapes = np.array(fp["spacings"]), np.array(fp["shapes_after_crop"], float)
    target = spacings.mean(0) if wrong == "mean-spacing" else np.percentile(spacings, 50, 0)
    size = np.percentile(shapes, 50, 0)
    w = int(np.argmax(target))
    others = [i for i in range(3) if i != w]
    if wrong != "no-aniso" and target[w] > 3 * max(target[others]) and size[w] * 3 < min(size[others]):
        t = np.percentile(spacings[:, w], 10)
        if t < max(target[others]):
            t = max(max(target[others]), t) + 1e-5
        target[w] = t
    fwd = [int(np.argmax(target))] + [i for i in range(3) if i != int(np.argmax(target))]
    new_shapes = [[round(a / b * c) for a, b, c in zip(s, target, sh)] for s, sh in zip(spacings, shapes)]
    median = np.median(new_shapes, 0)[fwd]
    spacing = target[fwd]
    approx = float(np.prod(median) * ds["numTraining"])
    tmp = 1 / spacing
    patch = [min(round(i), j) for i, j in zip(tmp * (256 ** 3 / np.prod(tmp)) ** (1 / 3), median)]
    strides, kernels, patch, div = pool_and_conv_props(spacing, patch)
    classes = len(ds["labels"])
    est = feature_maps(patch, strides, classes)
    ref = 560e6 * gpu / 8
    while est / 2 * 2 > ref:
        axis = int(np.argsort([p / m for p, m in zip(patch, median)], kind="stable")[-1])
        t = list(patch)
        t[axis] -= div[axis]
        div2 = pool_and_conv_props(spacing, t)[3]
        patch = list(patch)
        patch[axis] -= div2[axis]
        strides, kernels, patch, div = pool_and_conv_props(spacing, patch)
        est = feature_maps(patch, strides, classes)
    bs = round(ref / est * 2)
    bs = max(min(bs, round(approx * 0.05 / np.prod(patch, dtype=np.float64))), 2)
    return {"spacing": list(spacing), "transpose_forward": fwd, "median_image_size_in_voxels": list(median),
            "patch_size": list(patch), "batch_size": bs, "strides": strides, "kernel_sizes": kernels,
            "n_stages": len(strides),
            "normalization_schemes": ["CTNormalization", "ZScoreNormalization"],
            "use_mask_for_norm": [False, fp["median_relative_size_after_cropping"] < 0.75]}


def close(a, b):
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and sorted(a) == sorted(b) and all(close(a[k], b[k]) for k in a)
    if isinstance(a, (bool, str)) or a is None:
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2])
        return
    d, out = sys.argv[2], sys.argv[3]
    gpu = float(sys.argv[sys.argv.index("--gpu") + 1]) if "--gpu" in sys.argv else 8.0
    wrong = sys.argv[sys.argv.index("--wrong") + 1] if "--wrong" in sys.argv else None
    got_fp = json.load(open(os.path.join(out, "dataset_fingerprint.json")))
    want_fp = fingerprint(d, wrong)
    if not close(got_fp, want_fp):
        sys.exit("check_plan: dataset_fingerprint.json differs from NumPy's%s:\n got %s\nwant %s" %
                 (" (" + wrong + ")" if wrong else "", got_fp, want_fp))
    plans = json.load(open(os.path.join(out, "nnUNetPlans.json")))
    c = plans["configurations"]["3d_fullres"]
    a = c["architecture"]["arch_kwargs"]
    got = {"spacing": c["spacing"], "transpose_forward": plans["transpose_forward"],
           "median_image_size_in_voxels": c["median_image_size_in_voxels"], "patch_size": c["patch_size"],
           "batch_size": c["batch_size"], "strides": a["strides"], "kernel_sizes": a["kernel_sizes"],
           "n_stages": a["n_stages"], "normalization_schemes": c["normalization_schemes"],
           "use_mask_for_norm": c["use_mask_for_norm"]}
    want = plan(want_fp, json.load(open(os.path.join(d, "dataset.json"))), gpu, wrong)
    for k in want:
        if not close(got[k], want[k]):
            sys.exit("check_plan: 3d_fullres %s = %s, NumPy's planning gives %s%s" %
                     (k, got[k], want[k], " (" + wrong + ")" if wrong else ""))
    if plans["foreground_intensity_properties_per_channel"] != got_fp["foreground_intensity_properties_per_channel"]:
        sys.exit("check_plan: the plan's intensity properties are not the fingerprint's")
    print("plan: fingerprint of %d cases and 3d_fullres (spacing %s, patch %s, batch %d, %d stages) = NumPy's"
          % (len(got_fp["spacings"]), [round(v, 4) for v in c["spacing"]], c["patch_size"], c["batch_size"],
             a["n_stages"]))


main()
