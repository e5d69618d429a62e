#!/usr/bin/env python3
"""Reads medrun's TensorBoard event files and checkpoints with an independent reader.

--only tensorboard
    Random scalar events (tags, values, steps) are written by the helper
    (`HELPER tensorboard SPEC LOGDIR`); the event file is parsed here: the record framing,
    both masked CRC-32C of every record, the protobuf fields of every Event. Copies with a
    flipped byte or cut short must be rejected by this reader.
--only checkpoint
    Random tensors named as MedNeXt v1 parameters, their EMA copies and AdamW state are
    saved by the helper (`HELPER save SPEC`) and read back with json + struct + numpy:
    state.json's own checksum, the size and CRC-32C of every file, the safetensors headers,
    the keys of each file, the values, the `latest`/`best` pointers and retention. Then a
    checkpoint written here is loaded by the helper (`HELPER load`), and damaged copies
    must make it fail with a message naming the file.

Usage: check_train_files.py --helper PATH --dir DIR --only {tensorboard,checkpoint}
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)
    return cond


# ---- CRC-32C (Castagnoli, reflected 0x82F63B78) -----------------------------------------

def _crc_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


# ---- TensorBoard ------------------------------------------------------------------------

class DataLoss(Exception):
    pass


def read_records(data):
    """The payloads of the TFRecords in `data`; DataLoss on bad framing or CRC."""
    records, i = [], 0
    while i < len(data):
        if i + 12 > len(data):
            raise DataLoss("truncated record header at offset %d" % i)
        (length,) = struct.unpack_from("<Q", data, i)
        (len_crc,) = struct.unpack_from("<I", data, i + 8)
        if masked_crc(crc32c(data[i:i + 8])) != len_crc:
            raise DataLoss("length CRC mismatch at offset %d" % i)
        if i + 12 + length + 4 > len(data):
            raise DataLoss("truncated record at offset %d" % i)
        payload = data[i + 12:i + 12 + length]
        (data_crc,) = struct.unpack_from("<I", data, i + 12 + length)
        if masked_crc(crc32c(payload)) != data_crc:
            raise DataLoss("data CRC mismatch at offset %d" % i)
        records.append(payload)
        i += 12 + length + 4
    return records


def varint(b, i):
    value, shift = 0, 0
    while True:
        if i >= len(b):
            raise DataLoss("varint runs past the end")
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        if not c & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise DataLoss("varint too long")


def proto_fields(msg):
    """[(field number, wire type, value)]: ints for varints, bytes otherwise."""
    out, i = [], 0
    while i < len(msg):
        key, i = varint(msg, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(msg, i)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, i = msg[i:i + n], i + n
        elif wire == 2:
            n, i = varint(msg, i)
            value, i = msg[i:i + n], i + n
        else:
            raise DataLoss("unexpected wire type %d" % wire)
        if i > len(msg):
            raise DataLoss("field %d runs past the end" % field)
        out.append((field, wire, value))
    return out


def decode_event(payload):
    """event.proto: wall_time 1 (double), step 2 (int64), file_version 3, summary 5."""
    ev = {"values": []}
    for field, wire, value in proto_fields(payload):
        if (field, wire) == (1, 1):
            ev["wall_time"] = struct.unpack("<d", value)[0]
        elif (field, wire) == (2, 0):
            ev["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif (field, wire) == (3, 2):
            ev["file_version"] = value.decode("utf-8")
        elif (field, wire) == (5, 2):
            ev["has_summary"] = True
            for vf, vw, v in proto_fields(value):  # Summary.value = 1
                check((vf, vw) == (1, 2), "Summary field %d/%d" % (vf, vw))
                tag, simple = None, None
                for f, w, x in proto_fields(v):  # Value: tag 1, simple_value 2 (float)
                    if (f, w) == (1, 2):
                        tag = x.decode("utf-8")
                    elif (f, w) == (2, 5):
                        simple = x
                    else:
                        check(False, "unexpected Value field %d/%d" % (f, w))
                ev["values"].append((tag, simple))
        else:
            check(False, "unexpected Event field %d/%d" % (field, wire))
    return ev


def random_value(rng):
    r = rng.random()
    if r < 0.15:
        return rng.choice(["nan", "inf", "-inf", -0.0, 0.0, 1e-45, 3.4e38, -1.5])
    return rng.gauss(0, 1) * 10.0 ** rng.randint(-8, 8)


def check_tensorboard(helper, workdir):
    rng = random.Random(20240601)
    tags = ["train/loss", "train/lr", "grad_norm", "val/dice \u2713", "x" * 300, "a b/c-d_e.f"]
    steps = [0, 1, 127, 128, 300, 16384, 1 << 40, -3, (1 << 63) - 1, -(1 << 63)]
    steps += [rng.randrange(0, 10 ** 6) for _ in range(60)]
    events = []
    for k, step in enumerate(steps):
        events.append({"step": step,
                       "scalars": [[rng.choice(tags), random_value(rng)] for _ in range(k % 4)]})
    spec = os.path.join(workdir, "tb_spec.json")
    with open(spec, "w") as f:
        json.dump({"events": events}, f)
    logdir = os.path.join(workdir, "tb")
    t0 = time.time()
    out = subprocess.run([helper, "tensorboard", spec, logdir], capture_output=True, text=True)
    t1 = time.time()
    if not check(out.returncode == 0, "helper tensorboard failed: " + out.stderr):
        return
    path = out.stdout.strip()
    check(os.listdir(logdir) == [os.path.basename(path)], "one event file in the log dir")
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)", os.path.basename(path))
    if check(m is not None, "event file name %s" % path):
        check(m.group(2) == socket.gethostname(), "host in the file name: " + m.group(2))
        check(t0 - 2 <= int(m.group(1)) <= t1 + 2, "time in the file name")

    data = open(path, "rb").read()
    try:
        records = read_records(data)
    except DataLoss as e:
        check(False, "event file: %s" % e)
        return
    check(len(records) == len(events) + 1, "%d records for %d events" % (len(records), len(events)))
    first = decode_event(records[0])
    check(first.get("file_version") == "brain.Event:2", "first record file_version: %r" % first)
    check("step" not in first and not first["values"], "first record holds no step/summary")
    check(t0 - 2 <= first.get("wall_time", 0) <= t1 + 2, "wall_time of the first record")
    for k, (payload, want) in enumerate(zip(records[1:], events)):
        ev = decode_event(payload)
        check(ev.get("step") == want["step"], "event %d: step %r, want %r" % (k, ev.get("step"), want["step"]))
        check(ev.get("has_summary", False), "event %d has a summary" % k)
        check(first["wall_time"] <= ev.get("wall_time", -1) <= t1 + 2, "event %d wall_time" % k)
        if not check(len(ev["values"]) == len(want["scalars"]), "event %d: %d values" % (k, len(ev["values"]))):
            continue
        for (tag, raw), (want_tag, want_value) in zip(ev["values"], want["scalars"]):
            check(tag == want_tag, "event %d: tag %r, want %r" % (k, tag, want_tag))
            if not check(raw is not None and len(raw) == 4, "event %d: simple_value present" % k):
                continue
            got = struct.unpack("<f", raw)[0]
            v = float(want_value)
            if math.isnan(v):
                check(math.isnan(got), "event %d %s: %r, want nan" % (k, tag, got))
            else:  # float32 rounding of the value, sign of zero included
                check(raw == struct.pack("<f", v), "event %d %s: %r, want float32(%r)" % (k, tag, got, v))

    # The reader must notice any damage: every byte is under one of the CRCs.
    for pos in [0, 3, 8, 11, 12, len(data) // 2, len(data) - 1] + [rng.randrange(len(data)) for _ in range(10)]:
        bad = bytearray(data)
        bad[pos] ^= 1 << rng.randrange(8)
        try:
            read_records(bytes(bad))
            check(False, "a flipped byte at %d went unnoticed" % pos)
        except DataLoss:
            pass
    for cut in [1, 5, len(data) - 1]:
        try:
            read_records(data[:cut])
            check(False, "a file cut to %d bytes went unnoticed" % cut)
        except DataLoss:
            pass
    print("tensorboard: %d records checked" % len(records))


# ---- Checkpoints ------------------------------------------------------------------------

ST_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8")}
NP_TO_ST = {v: k for k, v in ST_DTYPES.items()}
MARKER = b',\n  "state_crc32c": "'

# MedNeXt v1 state_dict keys (a tiny instance), with odd sizes.
MODEL = {
    "stem.weight": (7, 1, 1, 1, 1), "stem.bias": (7,),
    "enc_block_0.0.conv1.weight": (7, 1, 3, 3, 3), "enc_block_0.0.conv1.bias": (7,),
    "enc_block_0.0.norm.weight": (7,), "enc_block_0.0.norm.bias": (7,),
    "enc_block_0.0.conv2.weight": (21, 7, 1, 1, 1), "enc_block_0.0.grn_beta": (1, 21, 1, 1, 1),
    "enc_block_0.0.conv3.weight": (7, 21, 1, 1, 1),
    "down_0.conv1.weight": (7, 1, 3, 3, 3), "down_0.res_conv.weight": (13, 7, 1, 1, 1),
    "up_0.conv1.weight": (13, 1, 3, 3, 3), "out_0.conv_out.weight": (7, 3, 1, 1, 1),
}


def make_state(seed):
    rng = np.random.default_rng(seed)
    state = {}
    for name, shape in MODEL.items():
        state[name] = rng.standard_normal(shape).astype(np.float32)
        state["ema." + name] = rng.standard_normal(shape).astype(np.float32)
        state["optimizer.exp_avg." + name] = rng.standard_normal(shape).astype(np.float32)
        state["optimizer.exp_avg_sq." + name] = rng.random(shape).astype(np.float32)
    state["dummy_tensor"] = np.zeros((1,), np.float32)  # frozen, in every MedNeXt v1 state_dict
    state["enc_block_0.0.norm.stat"] = rng.standard_normal((3, 5)).astype(np.float64)
    state["optimizer.step"] = np.array(int(rng.integers(1, 1 << 40)), np.int64)
    return state


def expected_files(state):
    files = {"model.safetensors": {}, "ema.safetensors": {}, "optimizer.safetensors": {}}
    for name, a in state.items():
        if name.startswith("ema."):
            files["ema.safetensors"][name[4:]] = a
        elif name.startswith("optimizer."):
            files["optimizer.safetensors"][name] = a
        else:
            files["model.safetensors"][name] = a
    return files


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    buf = data[8 + n:]
    spans, out = [], {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = ST_DTYPES[e["dtype"]]
        shape = tuple(e["shape"])
        check(end - b == int(np.prod(shape, dtype=np.int64)) * dt.itemsize, "%s %s: size" % (path, name))
        spans.append((b, end))
        out[name] = np.frombuffer(buf[b:end], dtype=dt).reshape(shape)
    pos = 0
    for b, end in sorted(spans):
        check(b == pos, "%s: entries tile the buffer" % path)
        pos = end
    check(pos == len(buf), "%s: no trailing data" % path)
    return meta, out


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": NP_TO_ST[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_state_json(path):
    """state.json after checking its own checksum (the CRC-32C of the text up to and
    including the MARKER, stored as 8 hex digits closing the document)."""
    text = open(path, "rb").read()
    pos = text.rfind(MARKER)
    if not check(pos >= 0, "%s: no state_crc32c" % path):
        return None
    covered = pos + len(MARKER)
    stored = text[covered:covered + 8].decode()
    check(text[covered + 8:] == b'"\n}\n', "%s: ends after the checksum" % path)
    check(int(stored, 16) == crc32c(text[:covered]), "%s: state_crc32c" % path)
    return json.loads(text)


def write_state_json(path, doc):
    body = json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8")[:-2] + MARKER
    with open(path, "wb") as f:
        f.write(body + b"%08x" % crc32c(body) + b'"\n}\n')


def train_state(step, metrics):
    return {"step": step, "seed": (1 << 64) - 1, "rng_offset": 12345 + step,
            "sampler_position": 2 * step,
            "schedule": {"type": "poly", "lr": 0.01, "total_steps": 1000, "power": 0.9},
            "loss_scale": 1.0, "growth_tracker": 0, "recipe_hash": "sha256:5eed",
            "metrics": metrics, "extra": {"epoch": step // 10, "note": "r\u00e9sum\u00e9"}}


def save_with_helper(helper, workdir, root, state, ts, keep_last, best_metric):
    npy = os.path.join(workdir, "npy_%d" % ts["step"])
    os.makedirs(npy)
    tensors = {}
    for name, a in state.items():
        tensors[name] = os.path.join(npy, name + ".npy")
        np.save(tensors[name], a)
    spec = os.path.join(workdir, "save_%d.json" % ts["step"])
    with open(spec, "w") as f:
        json.dump({"root": root, "tensors": tensors, "state": ts, "keep_last": keep_last,
                   "best_metric": best_metric}, f)
    out = subprocess.run([helper, "save", spec], capture_output=True, text=True)
    check(out.returncode == 0, "helper save failed: " + out.stderr)
    return out.stdout.strip()


def check_written_checkpoint(step_dir, state, ts):
    doc = read_state_json(os.path.join(step_dir, "state.json"))
    if doc is None:
        return
    check(doc["format"] == "medrun-checkpoint" and doc["version"] == 1, "format/version")
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc.get("saved_at", "")) is not None,
          "saved_at")
    for key, value in ts.items():
        check(doc.get(key) == value, "state.json %s: %r, want %r" % (key, doc.get(key), value))
    want = expected_files(state)
    check(set(doc["files"]) == set(want), "files listed: %s" % sorted(doc["files"]))
    check(sorted(os.listdir(step_dir)) == sorted(list(want) + ["state.json"]),
          "files in %s: %s" % (step_dir, os.listdir(step_dir)))
    for fname, tensors in want.items():
        path = os.path.join(step_dir, fname)
        data = open(path, "rb").read()
        entry = doc["files"][fname]
        check(entry["size"] == len(data), "%s: size %d, listed %d" % (fname, len(data), entry["size"]))
        check(entry["crc32c"] == "%08x" % crc32c(data), "%s: CRC-32C" % fname)
        check(entry["tensors"] == len(tensors), "%s: tensor count" % fname)
        meta, got = read_safetensors(path)
        check(meta == {"format": "pt"}, "%s: metadata %r" % (fname, meta))
        check(set(got) == set(tensors), "%s keys: extra %s, missing %s" % (
            fname, sorted(set(got) - set(tensors)), sorted(set(tensors) - set(got))))
        for name, a in tensors.items():
            if name in got:
                b = got[name]
                check(b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b),
                      "%s %s: %s%s differs from %s%s" % (fname, name, b.dtype, b.shape, a.dtype, a.shape))


def run_load(helper, path, workdir):
    out_dir = tempfile.mkdtemp(dir=workdir)
    out = subprocess.run([helper, "load", path, out_dir], capture_output=True, text=True)
    return out, out_dir


def check_checkpoint(helper, workdir):
    # 1. Written by medrun, read here.
    root = os.path.join(workdir, "ckpt")
    states = {10: make_state(10), 20: make_state(20), 37: make_state(37)}
    metrics = {10: {"loss": 0.5, "val_loss": 0.125}, 20: {"loss": 0.375, "val_loss": 0.5},
               37: {"loss": 0.25, "val_loss": 0.25}}
    for step in (10, 20, 37):
        ts = train_state(step, metrics[step])
        d = save_with_helper(helper, workdir, root, states[step], ts, 1, "val_loss")
        check(d == os.path.join(root, "step_%08d" % step), "step directory %s" % d)
    check(sorted(os.listdir(root)) == ["best", "latest", "step_00000010", "step_00000037"],
          "root after keep_last=1 with best: %s" % sorted(os.listdir(root)))
    check(json.load(open(os.path.join(root, "latest"))) == {"dir": "step_00000037", "step": 37},
          "latest pointer")
    check(json.load(open(os.path.join(root, "best"))) ==
          {"dir": "step_00000010", "step": 10, "metric": "val_loss", "value": 0.125}, "best pointer")
    for step in (10, 37):
        check_written_checkpoint(os.path.join(root, "step_%08d" % step), states[step],
                                 train_state(step, metrics[step]))

    # 2. Written here, loaded by medrun (no `latest`: the highest step is taken).
    root2 = os.path.join(workdir, "ours")
    state = make_state(5)
    ts = train_state(5, {"loss": 1.5})
    step_dir = os.path.join(root2, "step_00000005")
    os.makedirs(step_dir)
    files = {}
    for fname, tensors in expected_files(state).items():
        write_safetensors(os.path.join(step_dir, fname), tensors)
        data = open(os.path.join(step_dir, fname), "rb").read()
        files[fname] = {"size": len(data), "crc32c": "%08x" % crc32c(data), "tensors": len(tensors)}
    doc = {"format": "medrun-checkpoint", "version": 1}
    doc.update(ts)
    doc["files"] = files
    write_state_json(os.path.join(step_dir, "state.json"), doc)
    os.makedirs(os.path.join(root2, "step_00000004.tmp"))  # a crashed save: ignored
    out, out_dir = run_load(helper, root2, workdir)
    if check(out.returncode == 0, "helper load failed: " + out.stderr):
        loaded = json.load(open(os.path.join(out_dir, "state.json")))
        check(loaded["dir"] == step_dir, "loaded %s" % loaded["dir"])
        check(loaded["state"] == ts, "state: %r" % loaded["state"])
        names = sorted(f[:-4] for f in os.listdir(out_dir) if f.endswith(".npy"))
        check(names == sorted(state), "loaded names: %s" % names)
        for name, a in state.items():
            if name in names:
                b = np.load(os.path.join(out_dir, name + ".npy"))
                check(b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b),
                      "loaded %s differs" % name)

    # 3. Damaged copies: the load fails and names the file.
    rng = random.Random(5)
    damages = [("model.safetensors", "flip", "corrupted: CRC-32C"),
               ("ema.safetensors", "cut", "(truncated)"),
               ("optimizer.safetensors", "flip", "corrupted: CRC-32C"),
               ("state.json", "flip", "state.json")]
    for fname, how, phrase in damages:
        bad_root = os.path.join(workdir, "bad_%s_%s" % (fname, how))
        shutil.copytree(root2, bad_root)
        path = os.path.join(bad_root, "step_00000005", fname)
        data = bytearray(open(path, "rb").read())
        if how == "flip":
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        else:
            del data[len(data) // 2:]
        open(path, "wb").write(bytes(data))
        out, _ = run_load(helper, bad_root, workdir)
        check(out.returncode == 1 and path in out.stderr and phrase in out.stderr,
              "damaged %s (%s): rc %d, %s" % (fname, how, out.returncode, out.stderr.strip()))
    print("checkpoint: checked")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helper", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--only", choices=["tensorboard", "checkpoint"], required=True)
    args = ap.parse_args()
    workdir = os.path.join(args.dir, args.only)
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    if args.only == "tensorboard":
        check_tensorboard(args.helper, workdir)
    else:
        check_checkpoint(args.helper, workdir)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
