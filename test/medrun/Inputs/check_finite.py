"""Counts the non-finite tensors of a run's last checkpoint and the steps its metrics.jsonl
marks `update_skipped` (reliability-guard.test).

usage: check_finite.py RUN_DIR"""
import glob
import json
import os
import sys

import numpy as np

from runfiles import read_safetensors

run = sys.argv[1]
steps = sorted(glob.glob(os.path.join(run, "checkpoints", "step_*")))
last = steps[-1]
tensors, bad = 0, []
for path in sorted(glob.glob(os.path.join(last, "*.safetensors"))):
    for name, t in read_safetensors(path).items():
        tensors += 1
        if t.dtype.kind == "f" and not np.isfinite(t).all():
            bad.append(name)
with open(os.path.join(run, "metrics.jsonl")) as f:
    records = [json.loads(line) for line in f]
skipped = [r["step"] for r in records if r.get("update_skipped")]
print("%s: %d tensors, %d non-finite; steps skipped for a non-finite update: %s" %
      (os.path.basename(last), tensors, len(bad), skipped or "none"))
