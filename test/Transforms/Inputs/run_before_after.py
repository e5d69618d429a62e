"""Runs every function of a med program compiled with and without one pass of medc's
pipeline on the CPU backend, on the same random inputs and initial parameters, and compares
the outputs and the parameters a step assigns: the pass must not change what a program
computes. Values compare with == (so +0 and -0 are equal, NaN never is).

usage: run_before_after.py --medc M --medrun R --pass NAME --dir D [--precision P --rtol T]
                           [--with-option OPT]... FILE.mlir [medc options]

Prints, per function, how many ops each artifact has and whether the results are the same.
With --rtol (for a pass that changes roundings, e.g. a fusion keeping in f32 what was
stored in bf16), each output and parameter agrees when max|a − b| <= rtol · max|b| instead;
the largest such ratio is printed.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--medc", required=True)
p.add_argument("--medrun", required=True)
p.add_argument("--pass", dest="pass_", required=True)
p.add_argument("--dir", required=True)
p.add_argument("--precision", default="f32")
p.add_argument("--rtol", type=float, default=None)
p.add_argument("--off-by-default", action="store_true",
               help="the pass runs fully only when requested: --enable-pass on the side with "
               "it, --disable-pass on the other (med-form-mlp-fusions runs bounded by default)")
p.add_argument("--with-option", action="append", default=[],
               help="a medc option that runs the pass (e.g. --memory-budget=0.01), for the side "
               "with it; the side without leaves it out")
p.add_argument("--with-file", help="compile this (complete) module as the side with the pass "
               "instead: a negative control feeds a deliberately broken output of the pass")
p.add_argument("file")
o, medc_opts = p.parse_known_args()
os.makedirs(o.dir, exist_ok=True)

arts = {}
sides = (("with", ["--enable-pass=" + o.pass_]), ("without", ["--disable-pass=" + o.pass_])) if o.off_by_default else \
    (("with", []), ("without", ["--disable-pass=" + o.pass_]))
if o.with_option:
    sides = (("with", o.with_option), ("without", []))
for side, extra in sides:
    art = os.path.join(o.dir, side + ".medc")
    args = [o.with_file] if side == "with" and o.with_file else [o.file, *medc_opts, *extra]
    subprocess.run([o.medc, "compile", *args, "-o", art], check=True)
    plan = subprocess.run([o.medc, "compile", *args, "--emit", "plan", "-o", "-"],
                          check=True, capture_output=True, text=True).stdout
    arts[side] = (art, json.loads(plan))

def read_safetensors(path):
    """Every tensor of a safetensors file (f32 or f64), by name."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    types = {"F32": np.float32, "F64": np.float64}
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             types[v["dtype"]]).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def deviation(a, b):
    """max|a − b| / max|b|, inf where shapes differ or either is not finite."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("inf")
    scale = np.max(np.abs(b)) if b.size else 0.0
    diff = np.max(np.abs(a - b)) if a.size else 0.0
    return float(diff / scale) if scale > 0 else (0.0 if diff == 0 else float("inf"))


rng = np.random.default_rng(0)
failed = 0
for fn in arts["with"][1]["functions"]:
    name = fn["name"]
    ops = {}
    inputs = []
    names = fn.get("input_names", [])
    for k, vid in enumerate(fn["inputs"]):
        v = fn["values"][vid]
        dtype = {"f32": np.float32, "f64": np.float64, "i64": np.int64}[v["dtype"]]
        if not v["shape"]:  # a step's scalars: learning rate, step (>= 1), decay, ...
            x = np.array(3 if k < len(names) and names[k] == "step" else 0.5, dtype)
        elif dtype == np.int64:
            x = np.zeros(v["shape"], np.int64)
        else:
            x = rng.standard_normal(v["shape"]).astype(dtype)
        path = os.path.join(o.dir, "%s_in%d.npy" % (name, k))
        np.save(path, x)
        inputs += ["--input", path]
    outs = {}
    for side, (art, doc) in arts.items():
        f = next(g for g in doc["functions"] if g["name"] == name)
        ops[side] = len(f["ops"])
        out = os.path.join(o.dir, side, name)
        params = os.path.join(out, "params.safetensors")
        subprocess.run([o.medrun, "run", art, "--func", name, *inputs, "--out", out,
                        "--save-params", params, "--threads", "1", "--precision",
                        o.precision if f.get("precision", "fp32") != "fp32" else "f32"],
                       check=True, capture_output=True)
        outs[side] = {e: np.load(os.path.join(out, e)) for e in os.listdir(out) if e.endswith(".npy")}
        outs[side].update(read_safetensors(params) if o.rtol is not None
                          else {"params": open(params, "rb").read()})
    a, b = outs["with"], outs["without"]
    if o.rtol is None:
        same = a.keys() == b.keys() and all(
            (np.array_equal(a[k], b[k]) if k != "params" else a[k] == b[k]) for k in a)
        detail = ""
    else:
        worst = max((deviation(a[k], b[k]) for k in a if k in b), default=0.0)
        same = a.keys() == b.keys() and worst <= o.rtol
        detail = " (largest deviation %s)" % ("%.1e" % worst if worst > 0 else "0")
    failed += not same
    print("%s: %d ops with %s, %d without; %d outputs and the parameters: %s%s" % (
        name, ops["with"], o.pass_, ops["without"], len(a) - 1 if o.rtol is None else
        len([k for k in a if k.endswith(".npy")]), "same" if same else "DIFFERENT", detail))
sys.exit(1 if failed else 0)
