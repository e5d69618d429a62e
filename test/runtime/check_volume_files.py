"""Volume readers and writers checked against h5py, nibabel, zarr and NumPy.

Writes small volumes in every format and codec medrun reads (HDF5 gzip chunks, NIfTI .nii
and .nii.gz, Zarr v2 with blosc/zstd/zlib/gzip/lz4 and '.' and '/' separators, .npy),
reads them back with `medrun volume` (whole and by boxes: a patch equals the slice of the
whole; each channel of C x D x H x W arrays with --channel), writes them with `medrun volume -o` and reads those with the Python libraries
(round trip with spacing and affine), and checks that bad files fail with a message naming
the file, the key and what was expected.

  check_volume_files.py --medrun MEDRUN --dir DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import h5py
import nibabel as nib
import numcodecs
import numpy as np
import zarr

p = argparse.ArgumentParser()
p.add_argument("--medrun", required=True)
p.add_argument("--dir", required=True)
a = p.parse_args()
shutil.rmtree(a.dir, ignore_errors=True)
os.makedirs(a.dir)
os.chdir(a.dir)
failures = []


def medrun(*args):
    return subprocess.run([a.medrun, "volume", *args], capture_output=True, text=True)


def info(path, *args):
    r = medrun(path, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def read(path, box=None, args=()):
    out = "out_%d.npy" % read.n
    read.n += 1
    r = medrun(path, "-o", out, *(["--box", box] if box else []), *args)
    assert r.returncode == 0, (path, r.stderr)
    return np.load(out)
read.n = 0


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else "  " + detail), flush=True)
    if not ok:
        failures.append(name)


def fails(name, path, *words, args=()):
    r = medrun(path, *args)
    msg = r.stderr.strip()
    good = r.returncode != 0 and all(w in msg for w in words)
    check(name, good, "exit %d, message: %s (expected %s)" % (r.returncode, msg, words))


rng = np.random.default_rng(0)
shape = (19, 23, 29)  # no axis a multiple of the chunks
img = rng.integers(0, 256, shape, dtype=np.uint8)
lab = rng.integers(0, 2**40, shape, dtype=np.uint64)
flt = rng.standard_normal(shape).astype(np.float32)
boxes = [((0, 0, 0), shape), ((3, 5, 7), (9, 11, 13)), ((18, 22, 28), (1, 1, 1)),
         ((2, 0, 1), (16, 23, 27))]


def patches(path, want, kind, args=()):
    whole = read(path, args=args)
    check("%s: whole volume" % path, whole.shape == want.shape and (whole == want).all())
    for lo, size in boxes:
        box = "%d,%d,%d:%d,%d,%d" % (*lo, *size)
        got = read(path, box, args)
        sl = tuple(slice(l, l + s) for l, s in zip(lo, size))
        check("%s: box %s = slice of the whole" % (path, box),
              got.shape == tuple(size) and (got == whole[sl]).all() and (got == want[sl]).all())
    check("%s: read as %s" % (path, kind), str(whole.dtype) == kind, str(whole.dtype))


# HDF5: CREMI layout with resolution and offset, gzip chunks; PyTorch Connectomics' single dataset.
with h5py.File("cremi.hdf", "w") as f:
    d = f.create_dataset("volumes/raw", data=img, chunks=(8, 8, 8), compression="gzip")
    d.attrs["resolution"] = [40.0, 4.0, 4.0]
    d.attrs["offset"] = [80.0, 8.0, 12.0]
    f.create_dataset("volumes/labels/neuron_ids", data=lab, chunks=(5, 16, 16), compression="gzip",
                     shuffle=True)
with h5py.File("pytc.h5", "w") as f:
    f.create_dataset("main", data=flt[None])  # 1xDxHxW: the leading axis is dropped
patches("cremi.hdf/volumes/raw", img.astype(np.int64), "int64")
patches("cremi.hdf/volumes/labels/neuron_ids", lab.astype(np.int64), "int64")
patches("pytc.h5", flt, "float32")
i = info("cremi.hdf/volumes/raw")
check("hdf5: resolution is the spacing", i["spacing"] == [40, 4, 4], str(i["spacing"]))
check("hdf5: chunks", i["chunk"] == [8, 8, 8], str(i["chunk"]))
check("hdf5: offset is the translation", i["affine"][3] == 12 and i["affine"][11] == 80, str(i["affine"]))
check("hdf5: the first dataset without a key", info("pytc.h5")["key"] == "main")

# NIfTI: x fastest on disk; nibabel's array is (x, y, z), ours (z, y, x).
aff = np.array([[-0.8, 0, 0, 10], [0, 0.8, 0, -20], [0, 0, 2.5, 30], [0, 0, 0, 1]])
for name, data in (("ct.nii.gz", img.astype(np.int16) - 100), ("mr.nii", flt), ("seg.nii.gz", img % 4)):
    nib.save(nib.Nifti1Image(np.transpose(data, (2, 1, 0)), aff), name)
    patches(name, data.astype(np.float32 if data.dtype.kind == "f" else np.int64),
            "float32" if data.dtype.kind == "f" else "int64")
i = info("ct.nii.gz")
check("nifti: spacing (z, y, x) from pixdim", np.allclose(i["spacing"], [2.5, 0.8, 0.8]), str(i["spacing"]))
check("nifti: the affine (sform)", np.allclose(np.array(i["affine"]).reshape(4, 4), aff), str(i["affine"]))
check("nifti: .nii.gz decodes as one chunk", i["chunk"] == list(shape), str(i["chunk"]))
scaled = nib.Nifti1Image(np.transpose(img.astype(np.int16), (2, 1, 0)), aff)
scaled.header.set_slope_inter(0.5, -3)
nib.save(scaled, "scaled.nii.gz")
check("nifti: scl_slope/scl_inter applied",
      np.allclose(read("scaled.nii.gz"), img.astype(np.float32) * 0.5 - 3))

# Zarr v2: every compressor numcodecs writes that medrun reads, both separators, big-endian.
root = zarr.open("data.zarr", mode="w")
codecs = {"blosc_lz4": numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
          "blosc_zstd": numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
          "blosc_zlib": numcodecs.Blosc(cname="zlib"), "zstd": numcodecs.Zstd(level=3),
          "zlib": numcodecs.Zlib(level=5), "gzip": numcodecs.GZip(level=5), "lz4": numcodecs.LZ4(),
          "raw": None}
for k, (name, codec) in enumerate(codecs.items()):
    data = [img, lab, flt][k % 3]
    sep = "/" if k % 2 else "."
    root.create_dataset(name, data=data, chunks=(7, 9, 11), compressor=codec,
                        dimension_separator=sep)
    patches("data.zarr/" + name, data.astype(np.float32 if data.dtype.kind == "f" else np.int64),
            "float32" if data.dtype.kind == "f" else "int64")
root.create_dataset("big_endian", data=flt.astype(">f4"), chunks=(8, 8, 8))
patches("data.zarr/big_endian", flt, "float32")
sparse = root.create_dataset("sparse", shape=shape, chunks=(8, 8, 8), dtype="u2", fill_value=7)
sparse[0:8, 0:8, 0:8] = 1
want = np.full(shape, 7, np.int64)
want[0:8, 0:8, 0:8] = 1
patches("data.zarr/sparse", want, "int64")  # missing chunks read as fill_value
root["img"] = zarr.array(img, chunks=(8, 8, 8))
root["img"].attrs["resolution"] = [30, 6, 6]
check("zarr: resolution in .zattrs", info("data.zarr/img")["spacing"] == [30, 6, 6])

# .npy
np.save("vol.npy", lab.astype(np.uint16))
patches("vol.npy", lab.astype(np.uint16).astype(np.int64), "int64")

# Round trips: medrun writes, the Python libraries read.
for out, load in (("rt.nii.gz", lambda: np.transpose(nib.load("rt.nii.gz").get_fdata(), (2, 1, 0))),
                  ("rt.nii", lambda: np.transpose(nib.load("rt.nii").get_fdata(), (2, 1, 0))),
                  ("rt.h5/pred/aff", lambda: h5py.File("rt.h5", "r")["pred/aff"][()]),
                  ("rt.zarr/pred", lambda: zarr.open("rt.zarr")["pred"][()]),
                  ("rt.npy", lambda: np.load("rt.npy"))):
    r = medrun("ct.nii.gz", "-o", out)
    check("write %s" % out, r.returncode == 0, r.stderr)
    check("round trip %s" % out, np.array_equal(load(), img.astype(np.int64) - 100))
    i = info(out)
    if not out.endswith(".npy"):  # NumPy files have no spacing
        check("round trip %s: spacing" % out, np.allclose(i["spacing"], [2.5, 0.8, 0.8]),
              str(i["spacing"]))
check("round trip .nii.gz: affine", np.allclose(nib.load("rt.nii.gz").affine, aff))
r = medrun("ct.nii.gz", "--box", "2,3,4:5,6,7", "-o", "box.nii.gz")
check("a box keeps its place in the world",
      np.allclose(nib.load("box.nii.gz").affine, aff @ np.array(
          [[1, 0, 0, 4], [0, 1, 0, 3], [0, 0, 1, 2], [0, 0, 0, 1]])))

# Channels (openChannel): C x D x H x W arrays as `medrun infer` writes predictions, each
# channel read whole and by boxes; Zarr and HDF5 chunks holding 2 channels; NIfTI's dim[4].
chans = rng.standard_normal((3,) + shape).astype(np.float32)
with h5py.File("pred.h5", "w") as f:
    f.create_dataset("pred", data=chans, chunks=(2, 8, 8, 8), compression="gzip")
root.create_dataset("pred", data=chans, chunks=(2, 7, 9, 11), compressor=numcodecs.Zlib())
nib.save(nib.Nifti1Image(np.transpose(chans, (3, 2, 1, 0)), aff), "pred.nii.gz")
np.save("pred.npy", chans[None])  # 1 x C x D x H x W: the leading axis is dropped
np.save("pred3d.npy", flt)
for path in ("pred.h5/pred", "data.zarr/pred", "pred.nii.gz", "pred.npy"):
    for c in range(3):
        patches(path, chans[c], "float32", ("--channel", str(c)))
    i = info(path, "--channel", "1")
    check("%s: 3 channels" % path, i["channels"] == 3 and i["shape"] == list(shape), str(i))
patches("pred3d.npy", flt, "float32", ("--channel", "0"))  # a 3-D volume is one channel
fails("channel past the last", "pred.h5/pred", "pred.h5/pred", "no channel 3 (the volume has 3 channels)",
      args=("--channel", "3"))
fails("channel past the last (NIfTI)", "pred.nii.gz", "pred.nii.gz", "no channel 5", "3 channels in dim[4]",
      args=("--channel", "5"))
fails("channel of a 3-D volume", "pred3d.npy", "pred3d.npy", "no channel 1 (the volume has 1 channel)",
      args=("--channel", "1"))
np.save("five_d.npy", np.zeros((2, 2, 3, 4, 5), np.float32))
fails("5-D with --channel", "five_d.npy", "five_d.npy", "expected channels and a volume (C x D x H x W)",
      "2x2x3x4x5", args=("--channel", "0"))

# Bad input: one clear error naming the file, the key and what was expected.
fails("missing HDF5 key", "cremi.hdf/volumes/labels/clefts", "cremi.hdf", "no dataset 'volumes/labels/clefts'",
      "volumes/raw")
fails("missing Zarr array", "data.zarr/seg", "data.zarr", "no Zarr array 'seg'", "arrays: ")
fails("missing file", "nothere.nii.gz", "nothere.nii.gz", "no such file")
fails("unknown format", "cremi.txt", "cremi.txt", "expected .h5")
with h5py.File("bad.h5", "w") as f:
    f.create_dataset("four_d", data=np.zeros((2, 3, 4, 5), np.float32))
    f.create_dataset("two_d", data=np.zeros((4, 5), np.float32))
    f.create_dataset("complex", data=np.zeros((3, 4, 5), np.complex64))
    f.create_dataset("lzf", data=np.zeros((3, 4, 5), np.float32), compression="lzf")
fails("4-D HDF5", "bad.h5/four_d", "bad.h5/four_d", "expected a 3-D volume", "2x3x4x5")
fails("2-D HDF5", "bad.h5/two_d", "bad.h5/two_d", "expected a 3-D volume", "4x5")
fails("complex HDF5", "bad.h5/complex", "bad.h5/complex", "unsupported element type")
fails("HDF5 filter without a decoder", "bad.h5/lzf", "bad.h5/lzf", "filter 32000")
nib.save(nib.Nifti1Image(np.zeros((4, 5, 6, 2), np.float32), np.eye(4)), "4d.nii.gz")
fails("4-D NIfTI", "4d.nii.gz", "4d.nii.gz", "expected a 3-D volume", "one channel per file")
nib.save(nib.Nifti1Image(np.zeros((4, 5, 6), np.complex64), np.eye(4)), "complex.nii")
fails("complex NIfTI", "complex.nii", "complex.nii", "unsupported NIfTI datatype")
with open("notnifti.nii", "wb") as f:
    f.write(b"hello" * 100)
fails("not NIfTI", "notnifti.nii", "notnifti.nii", "cannot read as a NIfTI")
root.create_dataset("bz2", data=img, chunks=(8, 8, 8), compressor=numcodecs.BZ2())
fails("Zarr codec not read", "data.zarr/bz2", "data.zarr/bz2/.zarray", "unsupported compressor 'bz2'")
root.create_dataset("complex", data=np.zeros(shape, np.complex64), chunks=(8, 8, 8))
fails("Zarr dtype not read", "data.zarr/complex", "data.zarr/complex/.zarray", "unsupported dtype '<c8'")
root.create_dataset("filtered", data=img, chunks=(8, 8, 8), filters=[numcodecs.Delta(dtype="u1")])
fails("Zarr filters", "data.zarr/filtered", "data.zarr/filtered/.zarray", "filters")
root.create_dataset("fortran", data=img, chunks=(8, 8, 8), order="F")
fails("Zarr order F", "data.zarr/fortran", "data.zarr/fortran/.zarray", "order F")
with open("data.zarr/zlib/0.0.0", "r+b") as f:  # corrupt one chunk
    f.write(b"garbage!")
fails("corrupt Zarr chunk", "data.zarr/zlib", "data.zarr/zlib/0.0.0", "cannot decode the zlib chunk",
      args=("-o", "x.npy"))
np.save("c64.npy", np.zeros(shape, np.complex64))
fails("npy dtype not read", "c64.npy", "c64.npy", "unsupported descr '<c8'")
fails("box outside", "vol.npy", "vol.npy", "not inside the volume", args=("--box", "10,0,0:10,1,1", "-o", "x.npy"))

if failures:
    sys.exit("FAIL: %d checks: %s" % (len(failures), ", ".join(failures)))
print("volume files: all checks passed")
