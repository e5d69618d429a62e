"""Compares the losses and gradient norms of two `medrun train` runs (metrics.jsonl) step by
step within a relative tolerance: a data-parallel job against one rank with the global batch,
whose sums round differently. Steps of RUN_B must all be in RUN_A (RUN_B may be resumed).

  same_losses.py RUN_A RUN_B [--rtol R]   prints "same losses: ..." and exits 0,
                                          or "differ: ..." and exits 1
"""
import json
import os
import sys


def steps(run):
    out = {}
    for line in open(os.path.join(run, "metrics.jsonl")):
        r = json.loads(line)
        if "loss" in r and "val_dice" not in r:
            out[r["step"]] = (r["loss"], r["grad_norm"])
    return out


args = sys.argv[1:]
rtol = 1e-5
if "--rtol" in args:
    i = args.index("--rtol")
    rtol = float(args[i + 1])
    del args[i:i + 2]
a, b = steps(args[0]), steps(args[1])
if not b or not set(b) <= set(a):
    print("differ: steps %s vs %s" % (sorted(a), sorted(b)))
    sys.exit(1)
worst, where = 0.0, ""
for s in sorted(b):
    for name, x, y in zip(("loss", "gradient norm"), a[s], b[s]):
        d = abs(x - y) / max(abs(x), 1e-30)
        if d > worst:
            worst, where = d, "step %d %s" % (s, name)
        if d > rtol:
            print("differ: step %d %s %.9g vs %.9g (relative difference %.2g > %g)" % (s, name, x, y, d, rtol))
            sys.exit(1)
print("same losses: %d steps (%d..%d) within %g (largest relative difference %.2g%s)"
      % (len(b), min(b), max(b), rtol, worst, ", " + where if where else ""))
