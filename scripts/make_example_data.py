#!/usr/bin/env python3
"""Writes two small example datasets for configs/example_hdf5.yaml and
configs/example_nnunet.yaml (default DIR: data/example):

  DIR/cremi_{0,1,2}.hdf            CREMI layout: /volumes/raw (uint8), /volumes/labels/neuron_ids
                                   (uint64, with CREMI's uint64(-1) for "no label"), `resolution`
  DIR/Dataset001_Example/          nnU-Net raw: dataset.json, imagesTr/case_XXX_0000.nii.gz,
                                   labelsTr/case_XXX.nii.gz (classes 0, 1, 2), splits_final.json

Volumes hold random ellipsoids in noise; needs numpy, h5py and nibabel (Debian python3-*).

  scripts/make_example_data.py [DIR]
"""
import json
import os
import sys

import h5py
import nibabel as nib
import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "data/example"
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)


def objects(shape, count):
    """Instance ids 1..count: ellipsoids painted over each other."""
    z, y, x = np.indices(shape)
    ids = np.zeros(shape, np.int64)
    for k in range(1, count + 1):
        c = rng.uniform(0, shape)
        r = rng.uniform(3, 8, 3)
        ids[((z - c[0]) / r[0]) ** 2 + ((y - c[1]) / r[1]) ** 2 + ((x - c[2]) / r[2]) ** 2 < 1] = k
    return ids


for i in range(3):
    ids = objects((24, 48, 48), 12)
    raw = np.clip(60 + 120 * (ids > 0) + rng.normal(0, 20, ids.shape), 0, 255).astype(np.uint8)
    labels = ids.astype(np.uint64)
    labels[:, :, :2] = np.uint64(2**64 - 1)  # "no label", read as background
    with h5py.File(os.path.join(out, "cremi_%d.hdf" % i), "w") as f:
        f.attrs["file_format"] = "0.2"
        for key, data in (("volumes/raw", raw), ("volumes/labels/neuron_ids", labels)):
            d = f.create_dataset(key, data=data, chunks=(8, 16, 16), compression="gzip")
            d.attrs["resolution"] = [40.0, 4.0, 4.0]

root = os.path.join(out, "Dataset001_Example")
for sub in ("imagesTr", "labelsTr"):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
cases = ["case_%03d" % i for i in range(5)]
affine = np.diag([0.8, 0.8, 2.0, 1.0])  # x, y, z spacing in mm
for name in cases:
    ids = objects((20, 40, 40), 6)
    seg = np.where(ids == 0, 0, 1 + ids % 2).astype(np.uint8)  # classes 1 and 2
    ct = (-800 + 900 * (seg == 1) + 1200 * (seg == 2) + rng.normal(0, 50, seg.shape)).astype(np.int16)
    # nibabel arrays are (x, y, z); ours (z, y, x).
    nib.save(nib.Nifti1Image(ct.transpose(2, 1, 0), affine),
             os.path.join(root, "imagesTr", name + "_0000.nii.gz"))
    nib.save(nib.Nifti1Image(seg.transpose(2, 1, 0), affine),
             os.path.join(root, "labelsTr", name + ".nii.gz"))
with open(os.path.join(root, "dataset.json"), "w") as f:
    json.dump({"channel_names": {"0": "CT"}, "labels": {"background": 0, "even": 1, "odd": 2},
               "numTraining": len(cases), "file_ending": ".nii.gz"}, f, indent=2)
with open(os.path.join(root, "splits_final.json"), "w") as f:
    json.dump([{"train": [c for c in cases if c != v], "val": [v]} for v in cases], f, indent=2)
print("wrote %s/cremi_{0,1,2}.hdf and %s" % (out, root))
