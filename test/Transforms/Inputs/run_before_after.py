"""Runs every function of a med program compiled with and without one pass of medc's
pipeline on the CPU backend, on the same random inputs and initial parameters, and compares
the outputs and the parameters a step assigns: the pass must not change what a program
computes. Values compare with == (so +0 and -0 are equal, NaN never is).

usage: run_before_after.py --medc M --medrun R --pass NAME --dir D FILE.mlir [medc options]

Prints, per function, how many ops each artifact has and whether the results are the same.
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
p.add_argument("file")
o, medc_opts = p.parse_known_args()
os.makedirs(o.dir, exist_ok=True)

arts = {}
for side, extra in (("with", []), ("without", ["--disable-pass=" + o.pass_])):
    art = os.path.join(o.dir, side + ".medc")
    subprocess.run([o.medc, "compile", o.file, *medc_opts, *extra, "-o", art], check=True)
    plan = subprocess.run([o.medc, "compile", o.file, *medc_opts, *extra, "--emit", "plan", "-o", "-"],
                          check=True, capture_output=True, text=True).stdout
    arts[side] = (art, json.loads(plan))

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
                        "--save-params", params, "--threads", "1"], check=True, capture_output=True)
        outs[side] = {e: np.load(os.path.join(out, e)) for e in os.listdir(out) if e.endswith(".npy")}
        outs[side]["params"] = open(params, "rb").read()
    a, b = outs["with"], outs["without"]
    same = a.keys() == b.keys() and all(
        (np.array_equal(a[k], b[k]) if k != "params" else a[k] == b[k]) for k in a)
    failed += not same
    print("%s: %d ops with %s, %d without; %d outputs and the parameters: %s" % (
        name, ops["with"], o.pass_, ops["without"], len(a) - 1, "same" if same else "DIFFERENT"))
sys.exit(1 if failed else 0)
