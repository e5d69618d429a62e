"""Volumes with and without a stated spacing (volume-spacing.test): Zarr arrays in BANIS's
layout (data.zarr/img, data.zarr/seg), a NIfTI image, an HDF5 dataset, recipes that train on
them; and the spacing a written volume or a run's data contract carries."""
import json
import os
import shutil
import sys

import numpy as np

SHAPE = (16, 18, 20)


def zarr_pair(path, img, seg, img_res=None, seg_res=None):
    import zarr
    g = zarr.open_group(zarr.DirectoryStore(path), mode="w")
    a = g.create_dataset("img", data=img, chunks=(8, 9, 10))
    b = g.create_dataset("seg", data=seg, chunks=(8, 9, 10))
    if img_res is not None:
        a.attrs["resolution"] = img_res
    if seg_res is not None:
        b.attrs["resolution"] = seg_res


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "inputs":
        r = np.random.default_rng(1)
        img = r.normal(size=SHAPE).astype(np.float32)
        # Instances: slabs of 4 voxels along each axis, one id each.
        z, y, x = np.indices(SHAPE)
        seg = (1 + z // 4 * 100 + y // 5 * 10 + x // 6).astype(np.uint32)
        zarr_pair(f"{d}/none.zarr", img, seg)                         # no spacing anywhere
        zarr_pair(f"{d}/img_only.zarr", img, seg, img_res=[40, 4, 4])  # BANIS-like: seg bare
        zarr_pair(f"{d}/both.zarr", img, seg, img_res=[40, 4, 4], seg_res=[40, 4, 4])
        zarr_pair(f"{d}/clash.zarr", img, seg, img_res=[40, 4, 4], seg_res=[30, 4, 4])
        import h5py
        with h5py.File(f"{d}/img.h5", "w") as f:
            f["raw"] = img
            f["res"] = img
            f["res"].attrs["resolution"] = [40, 4, 4]
        import nibabel
        aff = np.diag([0.8, 0.9, 2.5, 1.0])
        nibabel.save(nibabel.Nifti1Image(img.transpose(2, 1, 0).copy(), aff), f"{d}/img.nii.gz")
        shutil.copy(sys.argv[3], f"{d}/tiny_1to3.mlir")
        for name in ["none", "img_only", "both", "clash"]:
            open(f"{d}/{name}.yaml", "w").write(
                "model: tiny_1to3.mlir\n"
                "data: {batch: 2, patch: [5, 6, 7], source: files, images: [%s.zarr], labels: [%s.zarr],\n"
                "       image_key: img, label_key: seg, val_fraction: 0, workers: 1}\n"
                "loss: {type: bce_with_logits, mask: true}\n"
                "optimizer: {type: adamw, lr: 1.0e-2}\n" % (name, name))
    elif cmd == "zattrs":
        print("resolution", json.load(open(os.path.join(d, ".zattrs")))["resolution"])
    elif cmd == "h5attr":
        import h5py
        path, key = d.split(".h5/")
        with h5py.File(path + ".h5", "r") as f:
            print("resolution", [float(v) for v in f[key].attrs["resolution"]])
    elif cmd == "contract":
        c = json.load(open(os.path.join(d, "data.json")))
        print("contract spacing", c.get("spacing"))
    else:
        sys.exit(f"unknown command {cmd}")


main()
