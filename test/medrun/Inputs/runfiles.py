"""Safetensors and artifact files with numpy and the standard library only (test helpers)."""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "BF16": np.uint16, "I64": np.int64}


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    buf = data[8 + n:]
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(buf[a:b], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def write_safetensors(path, tensors):
    """f32 tensors only, in the given order."""
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        b = np.ascontiguousarray(t, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def artifact_document(path):
    data = open(path, "rb").read()
    assert data[:8] == b"MEDCART\0", path
    (n,) = struct.unpack("<Q", data[16:24])  # magic, version, reserved, size
    return json.loads(data[24:24 + n])


def artifact_parameters(path):
    return {p["name"]: p["shape"] for p in artifact_document(path)["parameters"]}
