"""Block-wise `medrun infer` (infer-blocks.test): inputs, exact comparisons of outputs read by
numpy, zarr and h5py, a run killed mid-way, and edits of the progress file."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

SHAPE = (23, 19, 29)  # odd, not a multiple of the 5x6x7 window or of the chunks


def load(path):
    """A volume as medrun names it: X.npy, DIR.zarr/KEY or FILE.h5/KEY."""
    if path.endswith(".npy"):
        return np.load(path)
    if ".zarr/" in path:
        import zarr
        root, key = path.split(".zarr/")
        return zarr.open(zarr.DirectoryStore(root + ".zarr"), mode="r")[key][...]
    import h5py
    root, key = path.split(".h5/")
    with h5py.File(root + ".h5", "r") as f:
        return f[key][...]


def chunk_files(array_dir):
    return sorted(f for f in os.listdir(array_dir) if not f.startswith("."))


def main():
    cmd = sys.argv[1]
    if cmd == "inputs":
        import zarr
        d = sys.argv[2]
        img = np.random.default_rng(3).normal(size=SHAPE).astype(np.float32)
        np.save(f"{d}/img.npy", img)
        # Zarr chunks unlike the output's, no resolution attribute.
        g = zarr.open_group(zarr.DirectoryStore(f"{d}/img.zarr"), mode="w")
        g.create_dataset("img", data=img, chunks=(5, 7, 6), compressor=None)
    elif cmd == "same":
        a, b = load(sys.argv[2]), load(sys.argv[3])
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b):
            err = np.abs(a - b).max() if a.shape == b.shape else "shapes differ"
            print(f"DIFFERENT: {sys.argv[2]} {a.shape} {a.dtype} vs {sys.argv[3]} {b.shape} "
                  f"{b.dtype}: max difference {err}")
            sys.exit(1)
        print(f"same bits: {sys.argv[2]} and {sys.argv[3]} {a.shape}")
    elif cmd == "differ":
        a, b = load(sys.argv[2]), load(sys.argv[3])
        assert a.shape == b.shape and np.abs(a - b).max() > 1e-4, np.abs(a - b).max()
        print("differ:", np.abs(a - b).max())
    elif cmd == "chunks":
        # The output's chunks as asked, and the resolution it carries.
        meta = json.load(open(os.path.join(sys.argv[2], ".zarray")))
        print("chunks", meta["chunks"], "shape", meta["shape"])
    elif cmd == "crop":
        # The input of one block alone (what a block-wise run without a halo would read).
        d, lo, size = sys.argv[2], [int(v) for v in sys.argv[3].split(",")], [int(v) for v in sys.argv[4].split(",")]
        box = tuple(slice(l, l + s) for l, s in zip(lo, size))
        np.save(f"{d}/crop.npy", np.load(f"{d}/img.npy")[box])
        np.save(f"{d}/whole_crop.npy", np.load(f"{d}/whole.npy")[(slice(None),) + box])
    elif cmd == "kill":
        # Runs the command after --, kills it (SIGKILL) once the progress file records at
        # least 3 blocks and before it records them all; the rest of the blocks are absent.
        split = sys.argv.index("--")
        progress, run = sys.argv[2], sys.argv[split + 1:]
        p = subprocess.Popen(run, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        done = total = 0
        while time.time() < deadline and p.poll() is None:
            try:
                j = json.load(open(progress))
                done, total = j["done_blocks"], j["blocks"]
            except (OSError, ValueError, KeyError):
                pass
            if done >= 3:
                break
            time.sleep(0.005)
        p.send_signal(signal.SIGKILL)
        p.wait()
        j = json.load(open(progress))
        assert 3 <= j["done_blocks"] < j["blocks"], ("not killed mid-way", j["done"], j["blocks"])
        print(f"killed after {j['done_blocks']} of {j['blocks']} blocks")
    elif cmd == "forget":
        # Drops the last N blocks from the progress file and deletes every chunk file of the
        # output array that holds none of the blocks still recorded: a second run must write
        # exactly those again. With --wipe-done the recorded blocks' chunks are deleted too:
        # blocks the second run skips then stay empty (fill value 0).
        progress, array_dir, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
        wipe_done = "--wipe-done" in sys.argv
        j = json.load(open(progress))
        # "done" holds ranges [first, last] of block indices.
        blocks_done = [b for first, last in j["done"] for b in range(first, last + 1)]
        blocks_done = blocks_done[: len(blocks_done) - n]
        j["done"] = [[b, b] for b in blocks_done]  # single blocks: ranges need not be merged
        j["done_blocks"] = len(blocks_done)
        s = j["settings"]
        shape, block, chunk = s["shape"], s["block"], s["chunk"]
        grid = [(shape[a] + block[a] - 1) // block[a] for a in range(3)]
        kept = set()
        for b in blocks_done:
            bz, by, bx = b // (grid[1] * grid[2]), b // grid[2] % grid[1], b % grid[2]
            lo = (bz * block[0], by * block[1], bx * block[2])
            r = [range(lo[a] // chunk[a], (min(lo[a] + block[a], shape[a]) + chunk[a] - 1) // chunk[a])
                 for a in range(3)]
            kept.update(f"{cz}.{cy}.{cx}" for cz in r[0] for cy in r[1] for cx in r[2])
        removed = 0
        for f in chunk_files(array_dir):
            zyx = f.split(".", 1)[1]  # channel.z.y.x
            if wipe_done or zyx not in kept:
                os.remove(os.path.join(array_dir, f))
                removed += 1
        json.dump(j, open(progress, "w"))
        print(f"forgot {n} blocks; {len(blocks_done)} recorded; removed {removed} chunk files")
    else:
        sys.exit(f"unknown command {cmd}")


main()
