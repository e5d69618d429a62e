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
    with h5py.File(f"{d}/sparse.h5", "w") as f:  # 2^46 voxels in chunks never written: legal,
        f.create_dataset("img", shape=(2**14, 2**16, 2**16), dtype="u1", chunks=(1, 64, 64))
    with h5py.File(f"{d}/bigchunk.h5", "w") as f:  # one chunk of 2 GiB
        f.create_dataset("img", shape=(1024, 1024, 512), dtype="f4", chunks=(1024, 1024, 512))
    # gzip chunks that decode to fewer (more) bytes than a chunk holds: libhdf5 1.10 copies a
    # whole chunk out of the short one, reading past its buffer (h5py returns garbage).
    import zlib
    with h5py.File(f"{d}/gzipsize.h5", "w") as f:
        for name, n in (("short", 32), ("long", 100), ("ok", 64)):
            g = f.create_dataset(name, shape=(8, 8, 8), dtype="u1", chunks=(4, 4, 4),
                                 compression="gzip")
            g[...] = 7
            g.id.write_direct_chunk((4, 0, 4), zlib.compress(bytes(range(n))))
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


ZARR_PARTS = [".zarray", ".zattrs", "0.0.0", "0.0.1", "0.1.0", "0.1.1", "1.0.0", "1.0.1",
              "1.1.0", "1.1.1", "0/0/0", "0.0.0.0"]


def fuzz_input(array_dir):
    """A Zarr array directory as one fuzz-zarr input (test/fuzz/FuzzZarr.cpp)."""
    parts = []
    for name in ZARR_PARTS:
        path = os.path.join(array_dir, name)
        if os.path.isfile(path):
            parts.append(open(path, "rb").read())
        else:
            parts.append(b"" if name == ".zattrs" else b"-")
    while parts and parts[-1] == b"-":
        parts.pop()
    return b"\0ZARR\0".join(parts)


def fuzz_seeds(h5dir, zdir):
    """Seeds of fuzz-hdf5 and fuzz-zarr: small valid arrays of every layout, codec and dtype
    the readers take, and the crash files above."""
    import h5py
    import numcodecs
    import zarr as z
    hdf5(h5dir)
    for f in os.listdir(h5dir):
        if not f.endswith(".h5"):
            os.remove(os.path.join(h5dir, f))
    v = np.arange(8 * 9 * 10, dtype=np.float32).reshape(8, 9, 10)
    with h5py.File(f"{h5dir}/contiguous.h5", "w") as f:
        f["volumes/raw"] = v
        f["volumes/raw"].attrs["resolution"] = [40.0, 4.0, 4.0]
        f["volumes/raw"].attrs["offset"] = [0.0, 8.0, 8.0]
    with h5py.File(f"{h5dir}/gzip.h5", "w") as f:
        f.create_dataset("seg", data=(v % 7).astype(np.uint8), chunks=(4, 5, 5), compression="gzip")
    with h5py.File(f"{h5dir}/channels.h5", "w") as f:
        f.create_dataset("pred", data=np.stack([v, -v]).astype(np.int16), chunks=(1, 4, 4, 4),
                         shuffle=True, compression="gzip", fletcher32=True)
    with h5py.File(f"{h5dir}/bigendian.h5", "w") as f:
        f.create_dataset("img", data=v.astype(">f8"), chunks=(8, 9, 10), fillvalue=-1.0)
        f.create_dataset("ids", data=v.astype(np.uint64))
    with h5py.File(f"{h5dir}/compact.h5", "w") as f:
        space = h5py.h5s.create_simple((2, 3, 4))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        d = h5py.h5d.create(f.id, b"c", h5py.h5t.NATIVE_INT32, space, plist)
        d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(24, dtype=np.int32).reshape(2, 3, 4))
    with h5py.File(f"{h5dir}/old.h5", "w", libver="earliest") as f:
        f["x"] = v[:2, :3, :4]
    with h5py.File(f"{h5dir}/new.h5", "w", libver="latest") as f:
        f.create_dataset("x", data=v, chunks=(3, 3, 3), compression="gzip")

    tmp = os.path.join(zdir, "arrays")
    codecs = {"none": None, "zlib": numcodecs.Zlib(1), "gzip": numcodecs.GZip(1),
              "zstd": numcodecs.Zstd(1), "lz4": numcodecs.LZ4(),
              "blosc-lz4": numcodecs.Blosc("lz4", shuffle=1), "blosc-zstd": numcodecs.Blosc("zstd"),
              "blosc-zlib": numcodecs.Blosc("zlib", shuffle=2)}
    for name, codec in codecs.items():
        a = z.open_array(f"{tmp}/{name}", mode="w", shape=(16, 18, 20), chunks=(8, 9, 10),
                         dtype="<f4", compressor=codec, fill_value=0)
        a[:] = np.random.default_rng(0).normal(size=(16, 18, 20)).astype(np.float32)
        a.attrs["resolution"] = [40, 4, 4]
    a = z.open_array(f"{tmp}/u2-be", mode="w", shape=(8, 9, 10), chunks=(8, 9, 10), dtype=">u2",
                     compressor=None, fill_value=3)
    a[:] = (v % 1000).astype(np.uint16)
    a = z.open_array(f"{tmp}/missing", mode="w", shape=(16, 18, 20), chunks=(8, 9, 10),
                     dtype="<f8", compressor=numcodecs.Zlib(1), fill_value="NaN")
    a[:8, :9, :10] = 1.0  # one chunk of eight written
    a = z.open_array(f"{tmp}/slash", mode="w", shape=(8, 9, 10), chunks=(8, 9, 10), dtype="|u1",
                     compressor=None, fill_value=0, dimension_separator="/")
    a[:] = (v % 255).astype(np.uint8)
    a = z.open_array(f"{tmp}/channels", mode="w", shape=(2, 8, 9, 10), chunks=(2, 8, 9, 10),
                     dtype="<i4", compressor=numcodecs.Zstd(1), fill_value=0)
    a[:] = np.stack([v, -v]).astype(np.int32)
    zarr(tmp)  # the crash files
    for root, dirs, files in os.walk(tmp):
        if ".zarray" in files:
            name = os.path.relpath(root, tmp).replace("/", "-")
            open(os.path.join(zdir, name + ".bin"), "wb").write(fuzz_input(root))
    import shutil
    shutil.rmtree(tmp)


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
    elif cmd == "fuzz-seeds":  # fuzz-seeds HDF5_DIR ZARR_DIR
        fuzz_seeds(sys.argv[2], sys.argv[3])
    elif cmd in ("full", "kill"):  # full|kill KIB -- COMMAND...
        limited(int(sys.argv[2]), cmd == "kill", sys.argv[sys.argv.index("--") + 1:])
    else:
        sys.exit(f"unknown command {cmd}")


main()
