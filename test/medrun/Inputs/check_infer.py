"""Checks of `medrun infer` outputs (infer.test): numpy, h5py and nibabel read them."""
import json, sys, zlib
import numpy as np


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "inputs":
        r = np.random.default_rng(0)
        np.save(f"{d}/img.npy", r.normal(size=(13, 9, 20)).astype(np.float32))  # not a multiple of 5x6x7
        np.save(f"{d}/small.npy", r.normal(size=(3, 4, 20)).astype(np.float32))  # smaller than it
        one = r.normal(size=(5, 6, 7)).astype(np.float32)  # exactly one window
        np.save(f"{d}/one.npy", one)
        np.save(f"{d}/one_batch.npy", np.stack([one[None], one[None]]))
        np.save(f"{d}/bad4d.npy", np.zeros((2, 5, 6, 7), np.float32))
        import nibabel
        aff = np.array([[-0.8, 0, 0, 10], [0, 0.9, 0, -5], [0, 0, 2.5, 3], [0, 0, 0, 1]])
        # NIfTI axes are x, y, z: the (z, y, x) volume transposed.
        nibabel.save(nibabel.Nifti1Image(one.transpose(2, 1, 0).copy(), aff), f"{d}/one.nii.gz")
    elif cmd == "one":
        # A single window: the prediction is the network's output on it, after the sigmoid.
        ref = sigmoid(np.load(f"{d}/run/out0.npy")[0].astype(np.float64))
        out = np.load(f"{d}/one_pred.npy")
        assert out.shape == ref.shape == (3, 5, 6, 7), (out.shape, ref.shape)
        err = np.abs(out - ref).max()
        assert err < 1e-6, err
        raw = np.load(f"{d}/one_raw.npy")
        assert np.abs(raw - np.load(f"{d}/run/out0.npy")[0]).max() < 1e-6
        print("one window: matches medrun run, max error", err)
    elif cmd == "formats":
        import h5py, nibabel
        ref = np.load(f"{d}/pred.npy")
        assert ref.shape == (3, 13, 9, 20) and ref.dtype == np.float32, (ref.shape, ref.dtype)
        assert 0 < ref.min() and ref.max() < 1  # sigmoid
        h = h5py.File(f"{d}/pred.h5", "r")["pred"][...]
        assert h.dtype == np.float32 and np.array_equal(h, ref), h.shape
        meta = json.load(open(f"{d}/pred.zarr/pred/.zarray"))
        assert meta["shape"] == [3, 13, 9, 20] and meta["chunks"] == [1, 13, 9, 20], meta
        for c in range(3):
            raw = zlib.decompress(open(f"{d}/pred.zarr/pred/{c}.0.0.0", "rb").read())
            assert np.array_equal(np.frombuffer(raw, "<f4").reshape(13, 9, 20), ref[c]), c
        small = np.load(f"{d}/small_pred.npy")
        assert small.shape == (3, 3, 4, 20) and np.isfinite(small).all(), small.shape
        n = nibabel.load(f"{d}/one_pred.nii.gz")
        src = nibabel.load(f"{d}/one.nii.gz")
        assert n.shape == (7, 6, 5, 3), n.shape  # x, y, z, channel
        assert np.allclose(n.affine, src.affine, atol=1e-5), (n.affine, src.affine)
        assert np.allclose(n.header.get_zooms()[:3], (0.8, 0.9, 2.5), atol=1e-6), n.header.get_zooms()
        data = np.asarray(n.dataobj).transpose(3, 2, 1, 0)
        assert np.abs(data - np.load(f"{d}/one_pred.npy")).max() < 1e-6
        print("formats: npy, HDF5, Zarr and NIfTI agree; NIfTI affine kept")
    elif cmd == "differ":
        a, b = np.load(sys.argv[3]), np.load(sys.argv[4])
        assert a.shape == b.shape and np.abs(a - b).max() > 1e-4, np.abs(a - b).max()
        print("differ:", np.abs(a - b).max())
    elif cmd == "close":
        a, b = np.load(sys.argv[3]), np.load(sys.argv[4])
        err = np.abs(a - b).max()
        assert a.shape == b.shape and err < float(sys.argv[5]), err
        print("close:", err)


main()
