#!/usr/bin/env python3
"""Cross-checks medrun's .npy and safetensors files against NumPy.

1. Runs `HELPER write DIR/ours`, then reads every file it wrote: .npy with np.load,
   safetensors with json + struct + numpy (validating the format rules on the way), and
   compares with the contents the helper documents (write_tensor_files.cpp).
2. Writes .npy files with numpy (np.save, format versions 1.0/2.0/3.0) and a safetensors
   file with a small writer below, runs `HELPER read FILE` on each and compares dtypes,
   shapes and checksums; files medrun must reject (Fortran order, big-endian, truncated)
   must make the helper fail with a clear message.

Usage: check_tensor_files.py --helper PATH --dir DIR
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

# safetensors dtype -> (numpy dtype used to hold the raw bytes, element size)
ST_DTYPES = {
    "F32": (np.dtype("<f4"), 4), "F64": (np.dtype("<f8"), 8), "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2), "I8": (np.dtype("i1"), 1), "I16": (np.dtype("<i2"), 2),
    "I32": (np.dtype("<i4"), 4), "I64": (np.dtype("<i8"), 8), "U8": (np.dtype("u1"), 1),
    "BOOL": (np.dtype("?"), 1),
}
NP_TO_ST = {"float32": "F32", "float64": "F64", "float16": "F16", "int8": "I8",
            "int16": "I16", "int32": "I32", "int64": "I64", "uint8": "U8", "bool": "BOOL"}

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)
    return cond


def expected_values(dtype, shape):
    """The documented contents of write_tensor_files.cpp, as float64."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    if dtype in ("F32", "F64", "F16", "BF16"):
        v = (i % 200) * 0.5 - 10
    elif dtype == "I8":
        v = i % 100 - 50
    elif dtype == "I16":
        v = i * 37 % 60000 - 30000
    elif dtype == "I32":
        v = i * 100003 - 7
    elif dtype == "I64":
        v = (1 << 40) * (i % 5) - i
    elif dtype == "U8":
        v = i * 7 % 256
    elif dtype == "BOOL":
        v = (i % 3 == 0).astype(np.int64)
    else:
        raise ValueError(dtype)
    return v.astype(np.float64)


def bf16_to_f64(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def as_f64(array, st_dtype):
    flat = np.ascontiguousarray(array).reshape(-1)
    if st_dtype == "BF16":
        return bf16_to_f64(flat)
    return flat.astype(np.float64)


def checksum(values):
    """sum_i values[i] * (i % 7 + 1), summed in order as the helper does."""
    w = (np.arange(values.size) % 7 + 1).astype(np.float64)
    total = 0.0
    for x in (values * w).tolist():
        total += x
    return total


def parse_shape(text):
    return [int(d) for d in text.split(",")] if text else []


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys in %s" % keys)
    return pairs  # keep the order


def read_safetensors(path):
    """Strict reader: returns (metadata, [(name, dtype, shape, array)] in header order)."""
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) >= 8, "shorter than 8 bytes"
    (n,) = struct.unpack("<Q", data[:8])
    assert n <= 100_000_000, "header too large"
    assert 8 + n <= len(data), "header beyond the file"
    assert n % 8 == 0, "header length %d is not a multiple of 8" % n
    raw = data[8:8 + n]
    assert raw[:1] == b"{", "header does not start with '{'"
    body = raw.rstrip(b" ")
    assert body.endswith(b"}"), "header padding is not spaces only"
    pairs = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
    buf = data[8 + n:]
    meta = {}
    entries = []
    for name, info in pairs:
        if name == "__metadata__":
            meta = dict(info)
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
            continue
        info = dict(info)
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        assert dtype in ST_DTYPES, "unknown dtype %s" % dtype
        assert all(isinstance(d, int) and d >= 0 for d in shape), shape
        npdt, size = ST_DTYPES[dtype]
        numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
        assert end - begin == numel * size, "%s: %d bytes for %s %s" % (name, end - begin, dtype, shape)
        entries.append((begin, end, name, dtype, shape, npdt))
    covered = 0
    for begin, end, name, *_ in sorted(entries, key=lambda e: (e[0], e[1])):
        assert begin == covered, "%s: begins at %d, expected %d (hole or overlap)" % (name, begin, covered)
        covered = end
    assert covered == len(buf), "tensor data ends at %d, buffer has %d bytes" % (covered, len(buf))
    tensors = [(name, dtype, shape, np.frombuffer(buf[b:e], dtype=npdt).reshape(shape))
               for b, e, name, dtype, shape, npdt in entries]
    return meta, tensors


def check_ours(helper, out):
    os.makedirs(out)
    subprocess.run([helper, "write", out], check=True)
    manifest = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "manifest.txt"))]
    st_cache = {}

    def st(fname, path):
        if fname not in st_cache:
            st_cache[fname] = read_safetensors(path)
        return st_cache[fname]

    n_checked = 0
    for row in manifest:
        kind, fname = row[0], row[1]
        path = os.path.join(out, fname)
        if kind == "meta":
            meta, _ = st(fname, path)
            check(meta.get(row[2]) == row[3], "%s: metadata %s=%r, expected %r"
                  % (fname, row[2], meta.get(row[2]), row[3]))
            check(meta.get("format") == "pt", "%s: metadata format is not 'pt'" % fname)
            continue
        name, dtype, shape = row[2], row[3], parse_shape(row[4])
        want = expected_values(dtype, shape)
        if kind == "npy":
            a = np.load(path)
            check(NP_TO_ST.get(a.dtype.name) == dtype, "%s: dtype %s, expected %s" % (fname, a.dtype, dtype))
            check(list(a.shape) == shape, "%s: shape %s, expected %s" % (fname, a.shape, shape))
            check(a.flags["C_CONTIGUOUS"], "%s: not C order" % fname)
            got = as_f64(a, dtype)
        else:
            _, tensors = st(fname, path)
            found = [t for t in tensors if t[0] == name]
            if not check(len(found) == 1, "%s: tensor %s missing" % (fname, name)):
                continue
            _, got_dtype, got_shape, a = found[0]
            check(got_dtype == dtype, "%s/%s: dtype %s, expected %s" % (fname, name, got_dtype, dtype))
            check(got_shape == shape, "%s/%s: shape %s, expected %s" % (fname, name, got_shape, shape))
            got = as_f64(a, dtype)
        check(got.shape == want.shape and np.array_equal(got, want),
              "%s/%s: values differ from the documented contents" % (fname, name))
        n_checked += 1
    # Header order is the order the tensors were given in.
    for fname, (_, tensors) in st_cache.items():
        written = [r[2] for r in manifest if r[0] == "safetensors" and r[1] == fname]
        check([t[0] for t in tensors] == written, "%s: header order %s, expected %s"
              % (fname, [t[0] for t in tensors], written))
    print("checked %d tensors written by medrun" % n_checked)


def write_safetensors(path, tensors, metadata):
    """Reference-style writer: data sorted by alignment (desc) then name, header padded."""
    order = sorted(tensors, key=lambda t: (-ST_DTYPES[t[1]][1], t[0]))
    offsets, blobs, pos = {}, [], 0
    for name, dtype, array in order:
        b = np.ascontiguousarray(array).tobytes()
        offsets[name] = (pos, pos + len(b))
        blobs.append(b)
        pos += len(b)
    header = {"__metadata__": metadata}
    for name, dtype, array in tensors:  # header in the given order, not data order
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": list(offsets[name])}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_reader(helper, path):
    r = subprocess.run([helper, "read", path], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def parse_reader_output(text):
    meta, tensors = {}, []
    for line in text.splitlines():
        parts = line.split("\t")
        if parts[0] == "meta":
            meta[parts[1]] = parts[2]
        elif parts[0] == "tensor":
            tensors.append((parts[1], parts[2], parse_shape(parts[3]), float(parts[4])))
    return meta, tensors


def same_sum(a, b):
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def check_theirs(helper, out):
    os.makedirs(out)
    rng = np.random.default_rng(0)
    arrays = {
        "f64_3x4x5": np.arange(60, dtype=np.float64).reshape(3, 4, 5) * 0.25 - 3,
        "f32_scalar": np.array(2.5, dtype=np.float32),
        "f32_random": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "f16_6": (np.arange(6) * 1.5 - 4).astype(np.float16),
        "i8_10": (np.arange(10) - 5).astype(np.int8),
        "i16_2x2": np.array([[-300, 2], [3, 30000]], dtype=np.int16),
        "i32_4": np.array([-(2 ** 31), 0, 7, 2 ** 31 - 1], dtype=np.int32),
        "i64_empty": np.zeros((0, 3), dtype=np.int64),
        "i64_3": np.array([-(2 ** 40), 5, 2 ** 45], dtype=np.int64),
        "u8_2x3": np.array([[0, 1, 2], [253, 254, 255]], dtype=np.uint8),
        "bool_5": np.array([True, False, True, True, False]),
        "f32_transposed": np.ascontiguousarray(np.arange(12, dtype=np.float32).reshape(3, 4).T),
    }
    n_checked = 0
    for key, a in arrays.items():
        for version in (None, (2, 0), (3, 0)):
            path = os.path.join(out, "%s%s.npy" % (key, "" if version is None else "_v%d" % version[0]))
            if version is None:
                np.save(path, a)
            else:
                with open(path, "wb") as f:
                    np.lib.format.write_array(f, a, version=version)
            rc, stdout, stderr = run_reader(helper, path)
            if not check(rc == 0, "medrun failed to read numpy's %s: %s" % (path, stderr.strip())):
                continue
            _, got = parse_reader_output(stdout)
            st_dtype = NP_TO_ST[a.dtype.name]
            want = checksum(as_f64(a, st_dtype))
            ok = (len(got) == 1 and got[0][1] == st_dtype and got[0][2] == list(a.shape)
                  and same_sum(got[0][3], want))
            check(ok, "%s: medrun read %s, expected %s %s checksum %r" % (path, got, st_dtype, list(a.shape), want))
            n_checked += 1

    # A safetensors file from the reference-style writer, with every supported dtype.
    f32 = np.arange(2 * 1 * 3 * 3 * 3, dtype=np.float32).reshape(2, 1, 3, 3, 3) * 0.5 - 3
    bf16 = (np.array([1.0, -2.5, 3.25, 0.0], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    tensors = [
        ("enc_block_0.0.conv1.weight", "F32", f32),
        ("enc_block_0.0.conv1.bias", "F32", np.array([0.5, -1, 2, 4], dtype=np.float32)),
        ("enc_block_0.0.norm.weight", "BF16", bf16),
        ("half", "F16", np.array([[1.5, -0.25]], dtype=np.float16)),
        ("stem.weight", "F64", np.linspace(-1, 1, 8).reshape(2, 4)),
        ("num_batches_tracked", "I64", np.array(123456789012, dtype=np.int64)),
        ("i8", "I8", np.array([-128, 127], dtype=np.int8)),
        ("i16", "I16", np.array([-32768, 3, 32767], dtype=np.int16)),
        ("i32", "I32", np.array([[1, -2], [3, -4]], dtype=np.int32)),
        ("u8", "U8", np.arange(7, dtype=np.uint8)),
        ("mask", "BOOL", np.array([True, False, True])),
        ("empty", "F32", np.zeros((4, 0), dtype=np.float32)),
        ("dummy_tensor", "F32", np.zeros((1,), dtype=np.float32)),
    ]
    path = os.path.join(out, "theirs.safetensors")
    write_safetensors(path, tensors, {"format": "pt", "source": "check_tensor_files.py"})
    read_safetensors(path)  # our own writer obeys our own checks
    rc, stdout, stderr = run_reader(helper, path)
    if check(rc == 0, "medrun failed to read %s: %s" % (path, stderr.strip())):
        meta, got = parse_reader_output(stdout)
        check(meta == {"format": "pt", "source": "check_tensor_files.py"}, "%s: metadata %r" % (path, meta))
        want = [(n, d, list(a.shape), checksum(as_f64(a, d))) for n, d, a in tensors]
        check([g[0] for g in got] == [w[0] for w in want], "%s: order %s" % (path, [g[0] for g in got]))
        for g, w in zip(got, want):
            check(g[:3] == w[:3] and same_sum(g[3], w[3]), "%s: medrun read %s, expected %s" % (path, g, w))
            n_checked += 1

    # Files medrun must refuse, with a message naming the file and the problem.
    bad = os.path.join(out, "fortran.npy")
    np.save(bad, np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    bigend = os.path.join(out, "bigendian.npy")
    np.save(bigend, np.arange(3, dtype=">f4"))
    truncated = os.path.join(out, "truncated.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[:-3])
    for p, phrase in ((bad, "fortran_order is True"), (bigend, "big-endian"),
                      (truncated, "truncated: expected")):
        rc, stdout, stderr = run_reader(helper, p)
        check(rc == 1 and p in stderr and phrase in stderr,
              "%s: expected a clean error containing %r, got rc=%d stderr=%r" % (p, phrase, rc, stderr))
    print("checked %d tensors written by numpy/Python" % n_checked)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--helper", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    try:
        check_ours(args.helper, os.path.join(args.dir, "ours"))
    except AssertionError as e:
        check(False, "a file written by medrun violates the format: %s" % e)
    check_theirs(args.helper, os.path.join(args.dir, "theirs"))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all tensor file checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
