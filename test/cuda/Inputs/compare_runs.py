"""Compares two `medrun train` runs (prefetch.test): per-step losses and gradient norms from
metrics.jsonl, and the files of the last checkpoint, byte for byte.

usage: compare_runs.py RUN_DIR_A RUN_DIR_B"""
import json
import os
import sys


def steps(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, f)]


def last_checkpoint(run):
    d = os.path.join(run, "checkpoints")
    return os.path.join(d, max(n for n in os.listdir(d) if n.startswith("step_")))


a, b = sys.argv[1:3]
sa, sb = steps(a), steps(b)
words = ["%d steps: losses and gradient norms %s;" %
         (len(sa), "identical" if sa == sb else "DIFFER: %s vs %s" % (sa, sb))]
for name in ("model.safetensors", "optimizer.safetensors"):
    read = lambda run: open(os.path.join(last_checkpoint(run), name), "rb").read()
    words.append("%s %s;" % (name, "identical" if read(a) == read(b) else "DIFFER"))
print(" ".join(words).rstrip(";"))
