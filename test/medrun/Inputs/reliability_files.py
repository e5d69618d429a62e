"""Writes the malformed files of the reliability tests (test/medrun/reliability-*.test): each
declares sizes its file cannot hold or values no reader may use, next to a valid file of the
same kind (the control).

usage: reliability_files.py nifti DIR      NIfTI-1/-2 headers (.nii, .nii.gz)
       reliability_files.py npy DIR        .npy headers
       reliability_files.py pth DIR        PyTorch files whose tensors overrun their storage
       reliability_files.py safetensors DIR a tensor whose shape's product overflows
       reliability_files.py flat IN OUT    an artifact whose flat buffer member's offset wraps
"""
import collections
import gzip
import json
import os
import struct
import sys
import zlib

import numpy as np


def nifti(d):
    import nibabel as nib
    # x = 24, y = 2, z = 3; a voxel holds z * 48 + y * 24 + x.
    a = np.arange(144, dtype=np.int16).reshape(3, 2, 24).T.copy()
    nib.save(nib.Nifti1Image(a, np.eye(4)), os.path.join(d, "ok.nii"))
    nib.save(nib.Nifti2Image(a, np.eye(4)), os.path.join(d, "ok2.nii"))
    one = open(os.path.join(d, "ok.nii"), "rb").read()
    two = open(os.path.join(d, "ok2.nii"), "rb").read()

    def edit(name, raw, off, fmt, *values, gz=False):
        b = bytearray(raw)
        struct.pack_into(fmt, b, off, *values)
        if gz:
            with gzip.open(os.path.join(d, name), "wb") as f:
                f.write(bytes(b))
        else:
            open(os.path.join(d, name), "wb").write(bytes(b))

    # NIfTI-1: dim at 40 (8 x int16), pixdim at 76 (8 x f32), vox_offset 108, scl_slope 112,
    # scl_inter 116. NIfTI-2: dim at 16 (8 x int64).
    edit("huge2.nii", two, 16, "<8q", 3, 2**32, 2**32, 1, 1, 1, 1, 1)     # 2^64 voxels
    edit("wide2.nii", two, 16, "<8q", 3, 2**32, 2, 1, 1, 1, 1, 1)          # 2^33 voxels, 288 bytes
    edit("negdim.nii", one, 40, "<8h", 3, 24, -48, 3, 1, 1, 1, 1)
    edit("dim0.nii", one, 40, "<8h", 9, 24, 2, 3, 1, 1, 1, 1)
    edit("dim0zero.nii", one, 40, "<8h", 0, 24, 2, 3, 1, 1, 1, 1)
    edit("slope.nii", one, 112, "<f", 3e38)
    edit("slopenan.nii", one, 112, "<f", float("nan"))
    edit("slopeinf.nii", one, 112, "<f", float("inf"))
    edit("interinf.nii", one, 112, "<ff", 2.0, float("inf"))
    edit("slope0.nii", one, 112, "<ff", 0.0, 5.0)   # not scaled (the NIfTI rule), inter ignored
    edit("scaled.nii", one, 112, "<ff", 2.0, 1.0)   # 2 x + 1
    edit("voxoff.nii", one, 108, "<f", 1e9)
    edit("voxoffnan.nii", one, 108, "<f", float("nan"))
    edit("pixdim.nii", one, 76, "<4f", 1.0, 1.0, float("inf"), 1.0)
    edit("big.nii", one, 40, "<8h", 3, 24, 2, 3000, 1, 1, 1, 1)            # 288 of 288,000 bytes
    edit("big.nii.gz", one, 40, "<8h", 3, 4096, 4096, 4096, 1, 1, 1, 1, gz=True)
    open(os.path.join(d, "truncated.nii"), "wb").write(one[:-10])
    with gzip.open(os.path.join(d, "ok.nii.gz"), "wb") as f:
        f.write(one)


def npy_header(shape, descr="<f4"):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()


def npy(d):
    files = {
        "header-only.npy": npy_header("(100000, 100000, 100000)"),  # 4 PB declared, 0 held
        "wrap.npy": npy_header("(4294967296, 4294967296, 1)"),      # 2^64 elements
        "wrap0.npy": npy_header("(2097152, 2097152, 4194304)", "|u1"),  # 2^64 bytes: 0 mod 2^64
        "short.npy": npy_header("(3, 4, 5)") + bytes(200),           # 240 bytes declared
    }
    for name, b in files.items():
        open(os.path.join(d, name), "wb").write(b)
    np.save(os.path.join(d, "ok.npy"), np.arange(60, dtype=np.float32).reshape(3, 4, 5))


def pth(d):
    import torch

    class View:
        """A tensor over a 4-element storage with the given size and stride."""
        def __init__(self, size, stride):
            self.size, self.stride = size, stride

        def __reduce_ex__(self, proto):
            return (torch._utils._rebuild_tensor_v2,
                    (torch.zeros(4).storage(), 0, self.size, self.stride, False,
                     collections.OrderedDict()))

    torch.save({"w": View((2**40, 2**40), (1, 1))}, os.path.join(d, "overflow.pth"))
    torch.save({"w": View((2**31, 2**31), (0, 0))}, os.path.join(d, "broadcast.pth"))
    torch.save({"w": View((2, 2), (2, 1))}, os.path.join(d, "ok.pth"))


def safetensors(d):
    def write(name, header, data):
        h = json.dumps(header).encode()
        open(os.path.join(d, name), "wb").write(struct.pack("<Q", len(h)) + h + data)

    write("overflow.safetensors",
          {"w": {"dtype": "F64", "shape": [2**32, 2**32], "data_offsets": [0, 8]}}, bytes(8))
    write("wrap.safetensors",  # 2^61 elements of 8 bytes: 0 bytes modulo 2^64
          {"w": {"dtype": "F64", "shape": [2**31, 2**30], "data_offsets": [0, 0]}}, b"")


def flat(src, dst):
    d = open(src, "rb").read()
    n, = struct.unpack("<Q", d[16:24])
    doc = json.loads(d[24:24 + n])
    f = doc["flat_buffers"][0]
    m = f["members"][-1]
    a = f["alignment"]
    m["offset"] = (2**63 - 1) // a * a  # offset + size wraps past int64
    body = json.dumps(doc).encode()
    head = d[:16] + struct.pack("<Q", len(body)) + body + d[24 + n:-4]
    open(dst, "wb").write(head + struct.pack("<I", zlib.crc32(head) & 0xffffffff))
    print("flat buffer '%s' member '%s' at offset %d" % (f["name"], m["name"], m["offset"]))


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "flat":
        flat(sys.argv[2], sys.argv[3])
    else:
        os.makedirs(sys.argv[2], exist_ok=True)
        {"nifti": nifti, "npy": npy, "pth": pth, "safetensors": safetensors}[kind](sys.argv[2])
