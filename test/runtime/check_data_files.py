#!/usr/bin/env python3
"""Cross-checks medrun's synthetic data and loader batches with NumPy.

Runs `HELPER DIR` (write_data_files.cpp), then recomputes with NumPy:
  - BANIS affinities as `data.py::comp_affinities` writes them (slices, forward
    convention, seg == 0 -> 0) and the mask (1 where v + offset lies in the volume);
  - the class map and instance labels' consistency;
  - every batch tensor from the volumes: np.pad with zeros, slice at the sample's corner,
    the first C affinity channels, segmentation/F = patch[::F, ::F, ::F];
  - nnU-Net's oversampling rule with Python's round(), and that forced samples hold the
    class they chose.

Usage: check_data_files.py --helper PATH --dir DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

OFFSETS = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (10, 0, 0), (0, 10, 0), (0, 0, 10)]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def comp_affinities(seg):
    aff = np.zeros((6,) + seg.shape, np.uint8)
    mask = np.zeros((6,) + seg.shape, np.uint8)
    for c, off in enumerate(OFFSETS):
        head = tuple(slice(0, n - o) for n, o in zip(seg.shape, off))
        tail = tuple(slice(o, None) for o in off)
        aff[c][head] = (seg[head] == seg[tail]) & (seg[head] != 0)
        mask[c][head] = 1
    return aff, mask


def crop(arr, corner, patch):
    """arr [C, D, H, W]; the patch at `corner`, zeros outside."""
    pad = [(0, 0)] + [(max(0, -c), max(0, c + p - n)) for c, p, n in
                      zip(corner, patch, arr.shape[1:])]
    padded = np.pad(arr, pad)
    start = [max(0, c) for c in corner]
    # After padding, volume voxel v sits at v + pad_before; the corner maps to max(0, c).
    return padded[:, start[0]:start[0] + patch[0], start[1]:start[1] + patch[1],
                  start[2]:start[2] + patch[2]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helper", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    subprocess.run([args.helper, args.dir], check=True)
    cfg = {}
    for line in open(os.path.join(args.dir, "config.txt")):
        key, *vals = line.split()
        cfg[key] = vals
    batch = int(cfg["batch"][0])
    foreground = float(cfg["foreground"][0])
    patch = [int(v) for v in cfg["patch"]]
    channels = int(cfg["affinity_channels"][0])
    steps = int(cfg["steps"][0])

    def load(name):
        return np.load(os.path.join(args.dir, name))

    vols = []
    i = 0
    while os.path.exists(os.path.join(args.dir, f"vol{i}_image.npy")):
        v = {k: load(f"vol{i}_{k}.npy") for k in
             ("image", "labels", "affinity", "affinity_mask", "segmentation")}
        vols.append(v)
        seg = v["labels"][0]
        aff, mask = comp_affinities(seg)
        check(v["affinity"].dtype == np.uint8 and np.array_equal(v["affinity"], aff),
              f"vol{i}: affinities differ from comp_affinities")
        check(np.array_equal(v["affinity_mask"], mask), f"vol{i}: affinity mask differs")
        check(v["image"].dtype == np.float32 and v["image"].min() >= 0 and
              v["image"].max() <= 1, f"vol{i}: image not f32 in [0, 1]")
        check(np.array_equal(v["segmentation"] == 0, v["labels"] == 0),
              f"vol{i}: background of labels and segmentation differ")
        ids = np.unique(seg)
        check(np.array_equal(ids, np.arange(len(ids))), f"vol{i}: ids not 0..N")
        for lab in ids[1:]:
            check(len(np.unique(v["segmentation"][0][seg == lab])) == 1,
                  f"vol{i}: instance {lab} has several classes")
        i += 1
    check(len(vols) == 2, f"expected 2 volumes, found {len(vols)}")

    forced_expected = [not j < round(batch * (1 - foreground)) for j in range(batch)]
    for s in range(steps):
        samples = load(f"step{s}_samples.npy")
        check(samples.shape == (batch, 6), f"step{s}: samples shape {samples.shape}")
        for j in range(batch):
            vol, c0, c1, c2, forced, cls = (int(x) for x in samples[j])
            corner = (c0, c1, c2)
            v = vols[vol]
            check(bool(forced) == forced_expected[j], f"step{s} sample {j}: forced {forced}")
            ref = {
                "image": crop(v["image"], corner, patch),
                "labels": crop(v["labels"], corner, patch).astype(np.float32),
                "affinity": crop(v["affinity"], corner, patch)[:channels],
                "affinity_mask": crop(v["affinity_mask"], corner, patch)[:channels],
                "segmentation": crop(v["segmentation"], corner, patch),
            }
            seg = ref["segmentation"]
            ref["segmentation_2"] = seg[:, ::2, ::2, ::2]
            ref["segmentation_4"] = seg[:, ::4, ::4, ::4]
            if forced:
                check(cls != 0 and (seg == cls).any(),
                      f"step{s} sample {j}: forced patch lacks class {cls}")
            for name, want in ref.items():
                got = load(f"step{s}_{name}.npy")
                check(got.dtype == np.float32, f"step{s} {name}: dtype {got.dtype}")
                check(got.shape[0] == batch and got.shape[1:] == want.shape,
                      f"step{s} {name}: shape {got.shape}, expected {want.shape}")
                if got.shape[1:] == want.shape:
                    check(np.array_equal(got[j], want.astype(np.float32)),
                          f"step{s} sample {j} {name}: values differ")
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("data files: all checks passed")


if __name__ == "__main__":
    main()
