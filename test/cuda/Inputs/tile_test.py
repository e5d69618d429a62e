"""Runs the tile library's test kernels (tile-kernels.cu) on the fake driver (FakeCuda.cpp)
and checks each against numpy; prints one line per piece, exits 1 if any is wrong.

usage: tile_test.py --fakecuda LIBCUDA --kernels KERNELS.so
       tile_test.py --nvrtc FILE.cu...   (compiles the files as one source for sm_90, as medc
                                          compiles its modules; prints the cubin's size)
"""
import argparse
import ctypes
import ctypes.util
import glob
import os
import sys

p = argparse.ArgumentParser()
p.add_argument("--fakecuda")
p.add_argument("--kernels")
p.add_argument("--nvrtc", nargs="+")
o = p.parse_args()


def nvrtc_compile(files):
    names = [ctypes.util.find_library("nvrtc")] + sorted(glob.glob(os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda*"), "lib*", "libnvrtc.so")))
    lib = next((ctypes.CDLL(n) for n in names if n), None)
    if lib is None:
        sys.exit("no libnvrtc")
    source = "".join(open(f).read() + "\n" for f in files).encode()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source, b"tile.cu", 0, None, None) == 0
    opts = [b"--gpu-architecture=sm_90", b"-default-device", b"--std=c++17", b"--fmad=true"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.exit("NVRTC failed:\n" + log.value.decode())
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    print("sm_90 cubin: %d bytes" % size.value)
    sys.exit(0 if size.value > 0 else 1)


if o.nvrtc:
    nvrtc_compile(o.nvrtc)

import numpy as np
os.environ["MEDRUN_FAKE_CUDA_KERNELS"] = o.kernels
cu = ctypes.CDLL(o.fakecuda)
NAMES = ("tile_fragments", "tile_ldmatrix", "tile_ldmatrix_trans", "tile_pipeline", "tile_swizzle")


def check(rc, what):
    if rc != 0:
        sys.exit("driver call %s failed: %d" % (what, rc))


check(cu.cuInit(0), "cuInit")
module = ctypes.c_void_p()
image = (".target sm_90\n" + "".join(".entry %s(\n" % n for n in NAMES)).encode() + b"\0"
check(cu.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")


def launch(name, threads, arrays, out_index):
    f = ctypes.c_void_p()
    check(cu.cuModuleGetFunction(ctypes.byref(f), module, name.encode()), name)
    ptrs = []
    for a in arrays:
        d = ctypes.c_ulonglong()
        check(cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(a.nbytes)), "cuMemAlloc")
        check(cu.cuMemcpyHtoD_v2(d, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes)), "HtoD")
        ptrs.append(d)
    args = [ctypes.c_void_p(d.value) for d in ptrs]
    params = (ctypes.c_void_p * (len(args) + 1))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args], None)
    check(cu.cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, None, params, None), name)
    out = arrays[out_index]
    check(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ptrs[out_index], ctypes.c_size_t(out.nbytes)), "DtoH")
    return out


def bf16(v):  # small integers: exact in bf16
    return (np.asarray(v, np.float32).view(np.uint32) >> 16).astype(np.uint16)


rng = np.random.default_rng(0)
failed = []
# mma.sync fragments: D = A·Bᵀ (exact: small integers).
A = rng.integers(-4, 5, (16, 32)).astype(np.float32)
B = rng.integers(-4, 5, (16, 32)).astype(np.float32)
d = launch("tile_fragments", 32, [bf16(A.T.copy()).ravel(), bf16(B).ravel(), np.zeros(256, np.float32)], 2)
ok = np.array_equal(d.reshape(16, 16).T, A @ B.T)
print("fragments (loadColumnsA, mmaTilePair, storeColumnsD):", "ok" if ok else "WRONG")
ok or failed.append("fragments")
# ldmatrix: the A fragment of mma16816 (prelude.cuh) of a row-major tile.
T = rng.integers(-100, 100, (16, 16)).astype(np.float32)
r = launch("tile_ldmatrix", 32, [bf16(T).ravel(), np.zeros(128, np.uint32)], 1).reshape(32, 4)
bits = bf16(T).astype(np.uint32)
want = np.zeros((32, 4), np.uint32)
for lane in range(32):
    g, q = lane // 4, lane % 4
    for i, (row, col) in enumerate(((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8))):
        want[lane, i] = bits[row, col] | (bits[row, col + 1] << 16)
ok = np.array_equal(r, want)
print("ldmatrixX4:", "ok" if ok else "WRONG")
ok or failed.append("ldmatrix")
# ldmatrix .trans: the B fragments of mma16816 (k: rows) of a row-major tile.
r = launch("tile_ldmatrix_trans", 32, [bf16(T).ravel(), np.zeros(128, np.uint32)], 1).reshape(32, 4)
want = np.zeros((32, 4), np.uint32)
for lane in range(32):
    g, q = lane // 4, lane % 4
    for i in range(4):
        k, n = 2 * q + 8 * (i % 2), g + 8 * (i // 2)
        want[lane, i] = bits[k, n] | (bits[k + 1, n] << 16)
ok = np.array_equal(r, want)
print("ldmatrixX4Trans:", "ok" if ok else "WRONG")
ok or failed.append("ldmatrix-trans")
# cp.async pipeline.
X = rng.standard_normal((7, 512)).astype(np.float32)
y = launch("tile_pipeline", 128, [X.ravel(), np.zeros(512, np.float32)], 1)
want = np.zeros(512, np.float32)
for k in range(7):
    want += np.roll(X[k], -4)
ok = np.array_equal(y, want)
print("cpAsync16 pipeline:", "ok" if ok else "WRONG")
ok or failed.append("pipeline")
# The swizzled tile: its layout (chunk c / 8 of row r at chunk (c / 8) ^ (r % 8)), the zero
# fill of rows 12..15, and the A fragments read back from it.
S = rng.integers(-100, 100, (16, 64)).astype(np.float32)
sb = bf16(S)
out = np.zeros(128, np.uint32)
frag = launch("tile_swizzle", 32, [sb.ravel(), out, np.zeros(16 * 64, np.uint16)], 1).reshape(32, 4)
raw = launch("tile_swizzle", 32, [sb.ravel(), out, np.zeros(16 * 64, np.uint16)], 2)
kept = sb.astype(np.uint32).copy()
kept[12:] = 0
layout = np.zeros(16 * 64, np.uint32)
for r in range(16):
    for c in range(64):
        layout[r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7)] = kept[r, c]
want = np.zeros((32, 4), np.uint32)
for lane in range(32):
    g, q = lane // 4, lane % 4
    v, c = 48 + g, 2 * q
    for i, (ch, vv) in enumerate(((c, v), (c, v + 8), (c + 8, v), (c + 8, v + 8))):
        want[lane, i] = kept[ch, vv] | (kept[ch + 1, vv] << 16)
ok = np.array_equal(raw.astype(np.uint32), layout) and np.array_equal(frag, want)
print("swizzle64, cpAsync16Zfill, loadColumnsASwizzled:", "ok" if ok else "WRONG")
ok or failed.append("swizzle")
sys.exit(1 if failed else 0)
