"""Resumes a finished run from each of its checkpoints and compares the metrics log with the
uninterrupted one: `resume_every.py RUN -- medrun train ...` (the command that trained RUN,
without --out). Each resumed copy must log every step once, in order, with the same loss,
learning rate and gradient norm as the straight run (timings differ)."""
import glob
import json
import os
import shutil
import subprocess
import sys

split = sys.argv.index("--")
run, cmd = sys.argv[1], sys.argv[split + 1:]
KEYS = ("step", "loss", "lr", "grad_norm")


def metrics(d):
    return [tuple(json.loads(l)[k] for k in KEYS) for l in open(os.path.join(d, "metrics.jsonl"))]


straight = metrics(run)
failures = 0
for ckpt in sorted(glob.glob(os.path.join(run, "checkpoints", "step_*"))):
    step = int(os.path.basename(ckpt)[5:])
    if step >= len(straight):
        continue  # the end of the run: nothing to resume
    copy = "%s.from%d" % (run, step)
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run, copy)
    # The copy still holds the log of every step and the later checkpoints, as a run that
    # crashed after its checkpoint of `step` does.
    subprocess.run(cmd + ["--out", copy, "--resume", os.path.join(copy, "checkpoints", os.path.basename(ckpt))],
                   check=True, stderr=subprocess.DEVNULL)
    got = metrics(copy)
    if got == straight:
        print("resumed from step %d: metrics.jsonl matches the uninterrupted run" % step)
    else:
        failures += 1
        print("resumed from step %d: steps %s, uninterrupted %s" % (step, [g[0] for g in got], [s[0] for s in straight]))
sys.exit(1 if failures else 0)
