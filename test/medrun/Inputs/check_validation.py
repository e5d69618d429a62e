"""Checks the validations of runs (train-validation.test).

`check_validation.py RUN N`: metrics.jsonl holds N validation records (val_dice,
val_dice_ema, per class, val_best), checkpoints/best points to the checkpoint of the highest
Dice (the earliest of equal ones) and state.json of each checkpoint records the best so far.
`check_validation.py --dice MODEL EMA0 EMA1`: compares the Dice of three runs."""
import json
import os
import sys


def validations(run):
    lines = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    return [l for l in lines if "val_dice" in l]


if sys.argv[1] == "--dice":
    model, ema0, ema1 = (tuple(v["val_dice"] for v in validations(r)) for r in sys.argv[2:5])
    print("ema0 = model: %s; ema1 constant: %s; model constant: %s" %
          (ema0 == model, len(set(ema1)) == 1, len(set(model)) == 1))
    sys.exit(0)

run, n = sys.argv[1], int(sys.argv[2])
vals = validations(run)
assert len(vals) == n, vals
for v in vals:
    for key in ("val_dice", "val_dice_ema", "val_dice_per_class", "val_best", "val_volumes", "val_time"):
        assert key in v, (key, v)
best = max(vals, key=lambda v: (v["val_dice"], -v["step"]))
pointer = json.load(open(os.path.join(run, "checkpoints", "best")))
assert pointer["metric"] == "val_dice" and pointer["step"] == best["step"] + 1, (pointer, best)
assert abs(pointer["value"] - best["val_dice"]) < 1e-12
for v in vals:
    assert v["val_best"] == max(w["val_dice"] for w in vals if w["step"] <= v["step"])
state = json.load(open(os.path.join(run, "checkpoints", pointer["dir"], "state.json")))
rec = state["extra"]["validation"]
assert rec["best"] == best["val_dice"] and rec["best_step"] == pointer["step"], rec
assert state["metrics"]["val_dice"] == best["val_dice"]
print("%d validations at steps %s; best step %d = the highest Dice; state.json records it" %
      (n, [v["step"] for v in vals], pointer["step"]))
