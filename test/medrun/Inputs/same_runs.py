"""Compares two `medrun train` output directories bit for bit: the loss and gradient norm of
every step (metrics.jsonl) and every tensor of the last checkpoint (model, EMA, optimizer).

  same_runs.py RUN_A RUN_B     prints "same: ..." and exits 0, or "differ: ..." and exits 1
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from runfiles import read_safetensors  # noqa: E402


def steps(run):
    out = []
    for line in open(os.path.join(run, "metrics.jsonl")):
        r = json.loads(line)
        if "loss" in r and "val_dice" not in r:
            out.append((r["step"], r["loss"], r.get("grad_norm")))
    return out


def last_checkpoint(run):
    dirs = glob.glob(os.path.join(run, "checkpoints", "step_*"))
    dirs = [d for d in dirs if not d.endswith(".tmp")]
    return max(dirs, key=lambda d: int(d.rsplit("_", 1)[1]))


a, b = sys.argv[1], sys.argv[2]
sa, sb = steps(a), steps(b)
if not sa or sa != sb:
    print("differ: steps", sa, "vs", sb)
    sys.exit(1)
ca, cb = last_checkpoint(a), last_checkpoint(b)
if os.path.basename(ca) != os.path.basename(cb):
    print("differ: last checkpoints", ca, cb)
    sys.exit(1)
count = 0
for f in sorted(glob.glob(os.path.join(ca, "*.safetensors"))):
    ta, tb = read_safetensors(f), read_safetensors(os.path.join(cb, os.path.basename(f)))
    if sorted(ta) != sorted(tb):
        print("differ: keys of", os.path.basename(f))
        sys.exit(1)
    for k in ta:
        if ta[k].tobytes() != tb[k].tobytes():
            print("differ: tensor", k, "of", os.path.basename(f))
            sys.exit(1)
        count += 1
print("same: %d steps, %d tensors of %s" % (len(sa), count, os.path.basename(ca)))
