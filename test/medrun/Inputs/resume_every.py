"""Resumes a finished run from each of its checkpoints and compares the metrics log with the
uninterrupted one: `resume_every.py RUN -- medrun train ...` (the command that trained RUN,
without --out). Each resumed copy must log every step once, in order, with the same loss,
learning rate and gradient norm as the straight run (timings differ), the same validations
(Dice, its moving average, the best so far) and end with the same `best` checkpoint."""
import glob
import json
import os
import shutil
import subprocess
import sys

split = sys.argv.index("--")
run, cmd = sys.argv[1], sys.argv[split + 1:]
KEYS = ("step", "loss", "lr", "grad_norm")
VALIDATION = ("step", "val_dice", "val_dice_ema", "val_dice_per_class", "val_best")


def metrics(d):
    lines = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    got = [tuple(l[k] for k in (VALIDATION if "val_dice" in l else KEYS)) for l in lines]
    # `best` by validation Dice is resumed exactly; by training loss it is not (the loss
    # averaged since the last log line starts afresh at the resumed step).
    best = os.path.join(d, "checkpoints", "best")
    best = json.load(open(best)) if os.path.exists(best) else None
    return got, best if best and best["metric"] == "val_dice" else None


straight = metrics(run)
failures = 0
for ckpt in sorted(glob.glob(os.path.join(run, "checkpoints", "step_*"))):
    step = int(os.path.basename(ckpt)[5:])
    if step >= sum(1 for l in straight[0] if len(l) == len(KEYS)):
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
        print("resumed from step %d: steps %s, uninterrupted %s; best %s, uninterrupted %s" % (
            step, [g[0] for g in got[0]], [s[0] for s in straight[0]], got[1], straight[1]))
sys.exit(1 if failures else 0)
