"""Volume files whose declared sizes are hostile (reliability-hdf5.test, reliability-zarr.test),
made at test time and a few KB each; and running a command with a file-size limit
(reliability-atomic.test): a write past it fails as on a full disk (SIGXFSZ ignored, write
returns EFBIG) or kills the writer (SIGXFSZ's default)."""
import json
import os
import resource
import signal
import subprocess
import sys

import numpy as np

SHAPE = (16, 18, 20)


def recipe(path, image, image_key, label_key):
    """A training recipe reading `image` (tiny_1to3.mlir beside it)."""
    open(path, "w").write(
        "model: tiny_1to3.mlir\n"
        "data: {batch: 2, patch: [5, 6, 7], source: files, images: [%s], labels: [%s],\n"
        "       image_key: %s, label_key: %s, val_fraction: 0, workers: 1}\n"
        "loss: {type: bce_with_logits, mask: true}\n"
        "optimizer: {type: adamw, lr: 1.0e-2}\n" % (image, image, image_key, label_key))


def hdf5(d):
    import h5py
    # The files: h5py writes only the header of a dataset never written (1.4 KB).
    with h5py.File(f"{d}/fpe.h5", "w") as f:  # 24 x 2^32 x 2^32: the product wraps to 0
        f.create_dataset("img", shape=(24, 2**32, 2**32), dtype="u1")
        f.create_dataset("seg", shape=(24, 2**32, 2**32), dtype="u1")
    with h5py.File(f"{d}/chunked.h5", "w") as f:  # 2^31 x 2^31 x 4 = 2^64
        f.create_dataset("img", shape=(2**31, 2**31, 4), dtype="u1", chunks=(1, 1, 4))
    with h5py.File(f"{d}/big.h5", "w") as f:  # 4096^3 float32 declared, nothing stored
        f.create_dataset("img", shape=(4096,) * 3, dtype="f4")
        f.create_dataset("seg", shape=(4096,) * 3, dtype="u4")
    with h5py.File(f"{d}/limit.h5", "w") as f:  # 2^49 elements: no overflow, past the limit
        f.create_dataset("img", shape=(2**20, 2**20, 2**9), dtype="u1", chunks=(1, 64, 64))
    with h5py.File(f"{d}/bigchunk.h5", "w") as f:  # one chunk of 2 GiB
        f.create_dataset("img", shape=(1024, 1024, 512), dtype="f4", chunks=(1024, 1024, 512))
    with h5py.File(f"{d}/ok.h5", "w") as f:  # the control: a small dataset that reads
        f["img"] = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
        f["empty"] = np.zeros((0, 4, 4), np.float32)
    recipe(f"{d}/fpe.yaml", "fpe.h5", "img", "seg")
    recipe(f"{d}/big.yaml", "big.h5", "img", "seg")


def zarray(d, shape, chunks, dtype="<f4", compressor=None, fill_value=0):
    os.makedirs(d, exist_ok=True)
    json.dump({"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype,
               "compressor": compressor, "fill_value": fill_value, "order": "C",
               "filters": None}, open(f"{d}/.zarray", "w"))


def zarr(d):
    import numcodecs
    # [2^21, 2^21, 2^22]: 2^64 elements.
    zarray(f"{d}/big.zarr/img", [2**21, 2**21, 2**22], [64, 64, 64])
    zarray(f"{d}/big.zarr/seg", [2**21, 2**21, 2**22], [64, 64, 64], "<u4")
    # A small array whose chunk product wraps to 0, with an empty (uncompressed) chunk file
    # of that size: the reader copied from the empty buffer.
    zarray(f"{d}/wrap.zarr/img", [8, 8, 8], [2**21, 2**21, 2**22])
    zarray(f"{d}/wrap.zarr/seg", [8, 8, 8], [2**21, 2**21, 2**22], "<u4")
    for a in ("img", "seg"):
        open(f"{d}/wrap.zarr/{a}/0.0.0", "wb").close()
    zarray(f"{d}/bigchunk.zarr/img", [8, 8, 8], [2048, 1024, 1024])  # 8 GiB decoded
    zarray(f"{d}/zero.zarr/img", [8, 0, 8], [4, 4, 4])
    zarray(f"{d}/huge_dim.zarr/img", [8, 8, 2**64], [4, 4, 4])
    zarray(f"{d}/fill.zarr/img", [8, 8, 8], [4, 4, 4], "<i4", fill_value=1e300)
    # Blosc chunks: one truncated (the header's compressed size is more than the file),
    # one of the wrong decompressed size.
    blosc = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    zarray(f"{d}/blosc.zarr/cut", [16, 16, 16], [16, 16, 16], "<f4", blosc)
    data = numcodecs.Blosc(cname="lz4").encode(np.arange(16**3, dtype="<f4").tobytes())
    open(f"{d}/blosc.zarr/cut/0.0.0", "wb").write(data[:len(data) // 2])
    zarray(f"{d}/blosc.zarr/size", [16, 16, 16], [16, 16, 16], "<f4", blosc)
    data = numcodecs.Blosc(cname="lz4").encode(np.arange(8 * 16 * 16, dtype="<f4").tobytes())
    open(f"{d}/blosc.zarr/size/0.0.0", "wb").write(data)
    zarray(f"{d}/blosc.zarr/ok", [16, 16, 16], [16, 16, 16], "<f4", blosc)  # the control
    data = numcodecs.Blosc(cname="lz4").encode(np.arange(16**3, dtype="<f4").tobytes())
    open(f"{d}/blosc.zarr/ok/0.0.0", "wb").write(data)
    recipe(f"{d}/big.yaml", "big.zarr", "img", "seg")
    recipe(f"{d}/wrap.yaml", "wrap.zarr", "img", "seg")


def noise(d):
    """Incompressible inputs: 32 x 64 x 64 float32 (512 KiB) in HDF5 and .npy (one chunk of
    512 KiB when written to Zarr), and smaller ones."""
    import h5py
    v = np.random.default_rng(0).normal(size=(32, 64, 64)).astype(np.float32)
    with h5py.File(f"{d}/noise.h5", "w") as f:
        f["raw"] = v
        f["small"] = v[:4, :4, :4]
    np.save(f"{d}/noise.npy", v)
    np.save(f"{d}/small.npy", v[:4, :4, :4])
    np.save(f"{d}/cube.npy", v[:16, :16, :16])  # for block-wise inference


def limited(kib, kill, cmd):
    """Runs cmd with files limited to `kib` KiB; prints and returns its exit status."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024, kib * 1024))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL if kill else signal.SIG_IGN)
    r = subprocess.run(cmd, preexec_fn=limit, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = r.stderr.decode(errors="replace").strip()
    status = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
    print(f"{status}: {err.splitlines()[-1] if err else ''}")


def main():
    cmd = sys.argv[1]
    if cmd == "hdf5":
        hdf5(sys.argv[2])
    elif cmd == "zarr":
        zarr(sys.argv[2])
    elif cmd == "noise":
        noise(sys.argv[2])
    elif cmd in ("full", "kill"):  # full|kill KIB -- COMMAND...
        limited(int(sys.argv[2]), cmd == "kill", sys.argv[sys.argv.index("--") + 1:])
    else:
        sys.exit(f"unknown command {cmd}")


main()
