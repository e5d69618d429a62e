"""Small file utilities for the medrun tests (numpy + the standard library only).

  tool.py npy OUT.npy SHAPE [SEED]          random normal f32 array (SHAPE like 1,2,3,4,5)
  tool.py same A.npy B.npy                   exit 0 iff the arrays are bit-identical
  tool.py close A.npy B.npy TOL              exit 0 iff max |a-b| <= TOL
  tool.py closeall A.safetensors B.safetensors TOL   the same keys, each max |a-b| <= TOL
  tool.py values A.safetensors KEY         prints the f32 tensor KEY's elements
  tool.py edit IN.safetensors OUT.safetensors drop=KEY | rename=KEY:NEW | reshape=KEY | add=KEY
  tool.py patch FILE OFFSET BYTE              overwrite one byte
  tool.py cut FILE N                          keep the first N bytes (negative: drop -N)
  tool.py ops A.medc                          one line per op of each function of a compiled
                                              artifact (fusion bodies' ops as fusion[T]/KIND):
                                              FUNC KIND and its flags (fp32, instance_norm)
"""
import json
import struct
import sys

import numpy as np


def load(path):
    """The f32 tensors of a safetensors file by name."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(body[b:e], np.float32).reshape(v["shape"])
    return out


cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "npy":
    shape = tuple(int(d) for d in args[1].split(","))
    seed = int(args[2]) if len(args) > 2 else 0
    np.save(args[0], np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
elif cmd == "same":
    a, b = np.load(args[0]), np.load(args[1])
    sys.exit(0 if a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes() else 1)
elif cmd == "close":
    a, b = np.load(args[0]), np.load(args[1])
    err = float(np.max(np.abs(a.astype(np.float64) - b)))
    print("max abs difference", err)
    sys.exit(0 if err <= float(args[2]) else 1)
elif cmd == "closeall":
    a, b = load(args[0]), load(args[1])
    if sorted(a) != sorted(b):
        print("keys differ:", sorted(set(a) ^ set(b)))
        sys.exit(1)
    worst = max(float(np.max(np.abs(a[k].astype(np.float64) - b[k]), initial=0)) for k in a)
    print(len(a), "tensors, max abs difference", worst)
    sys.exit(0 if worst <= float(args[2]) else 1)
elif cmd == "values":
    print(args[1], load(args[0])[args[1]].ravel().tolist())
elif cmd == "edit":
    data = open(args[0], "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    action, _, key = args[2].partition("=")
    if action == "drop":
        del tensors[key]
    elif action == "rename":
        old, new = key.split(":")
        tensors[new] = tensors.pop(old)
    elif action == "add":
        tensors[key] = dict(tensors["stem.bias"])
    elif action == "reshape":
        tensors[key]["shape"] = [int(np.prod(tensors[key]["shape"]))]
    out_header, out_body = {}, b""
    for name, info in tensors.items():
        begin, end = info["data_offsets"]
        out_header[name] = {"dtype": info["dtype"], "shape": info["shape"],
                            "data_offsets": [len(out_body), len(out_body) + end - begin]}
        out_body += body[begin:end]
    text = json.dumps(out_header).encode()
    text += b" " * (-len(text) % 8)
    open(args[1], "wb").write(struct.pack("<Q", len(text)) + text + out_body)
elif cmd == "patch":
    data = bytearray(open(args[0], "rb").read())
    data[int(args[1])] = int(args[2])
    open(args[0], "wb").write(bytes(data))
elif cmd == "cut":
    data = open(args[0], "rb").read()
    n = int(args[1])
    open(args[0], "wb").write(data[:n] if n >= 0 else data[:len(data) + n])
elif cmd == "ops":  # the container of docs/artifact.md: magic, JSON length, JSON
    data = open(args[0], "rb").read()
    n = struct.unpack("<Q", data[16:24])[0]
    doc = json.loads(data[24:24 + n])

    def flags(op):
        return "".join(" " + f for f in ("fp32", "instance_norm") if op.get(f))

    for f in doc["functions"]:
        for op in f["ops"]:
            if op["op"] == "fusion":
                body = doc["fusions"][op["attrs"]["body"]]
                for inner in body["ops"]:
                    print("%s fusion[%s]/%s%s" % (f["name"], body["template"], inner["op"],
                                                  flags(inner)))
            else:
                print("%s %s%s" % (f["name"], op["op"], flags(op)))
else:
    sys.exit("unknown command " + cmd)
