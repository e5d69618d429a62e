"""Checks of the run's data contract (data-contract.test).

`check_contract.py stats RUN DATASET [--with-validation]`: RUN/data.json and the state.json
of RUN's checkpoints hold CT normalisation with the statistics NumPy computes from the
foreground voxels of the training cases (RUN/split.json; the tiny cases have fewer than
nnU-Net's 10000 sampled voxels per case, so every foreground voxel is taken). With
--with-validation the validation case is counted too: a wrong set of cases, which the same
comparison must reject (negative control).

`check_contract.py dice RUN EVAL.json`: the foreground mean Dice `medrun eval` gives for the
prediction of `medrun infer` equals the validation Dice of the checkpoint it predicted with
(RUN/checkpoints/best; one validation case)."""
import json
import os
import sys

import numpy as np


def fail(msg):
    sys.exit("check_contract: " + msg)


cmd, run = sys.argv[1], sys.argv[2]
if cmd == "stats":
    dataset = sys.argv[3]
    contract = json.load(open(os.path.join(run, "data.json")))
    split = json.load(open(os.path.join(run, "split.json")))
    cases = [c["name"] for c in split["train"]]
    if "--with-validation" in sys.argv:
        cases += [c["name"] for c in split["validation"]]
    import nibabel as nib
    fg = []
    for name in cases:
        img = np.asarray(nib.load(os.path.join(dataset, "imagesTr", name + "_0000.nii.gz")).dataobj)
        seg = np.asarray(nib.load(os.path.join(dataset, "labelsTr", name + ".nii.gz")).dataobj)
        assert (seg > 0).sum() <= 10000, "more foreground than sampled: the check needs all"
        fg.append(img[seg > 0].astype(np.float64))
    fg = np.concatenate(fg).astype(np.float32).astype(np.float64)
    want = {"mean": fg.mean(), "std": fg.std(), "percentile_00_5": np.percentile(fg, 0.5),
            "percentile_99_5": np.percentile(fg, 99.5)}
    ch = contract["channels"]
    if len(ch) != 1 or ch[0]["normalization"] != "ct" or ch[0]["name"] != "CT":
        fail("data.json channels: %s" % ch)
    for key, value in want.items():
        if abs(ch[0][key] - value) > 1e-6 * max(1.0, abs(value)):
            fail("data.json %s = %r, NumPy gives %r" % (key, ch[0][key], value))
    if contract["labels"] != {"background": 0, "even": 1, "odd": 2}:
        fail("labels %s" % contract["labels"])
    if contract["spacing"] != [2.0, 0.8, 0.8] and not np.allclose(contract["spacing"], [2.0, 0.8, 0.8]):
        fail("spacing %s" % contract["spacing"])
    root = os.path.join(run, "checkpoints")
    steps = [d for d in os.listdir(root) if d.startswith("step_")]
    for d in steps:
        state = json.load(open(os.path.join(root, d, "state.json")))
        if state["extra"]["data"] != contract:
            fail("%s/state.json extra.data differs from data.json" % d)
    print("data contract: ct statistics of %d cases' foreground (%d voxels) as NumPy's; "
          "in data.json and %d checkpoints" % (len(cases), fg.size, len(steps)))
elif cmd == "dice":
    result = json.load(open(sys.argv[3]))
    pointer = json.load(open(os.path.join(run, "checkpoints", "best")))
    lines = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    val = [l for l in lines if "val_dice" in l and l["step"] + 1 == pointer["step"]]
    if len(val) != 1 or val[0]["val_volumes"] != 1:
        fail("no single-case validation at step %d: %s" % (pointer["step"], val))
    got, want = result["foreground_mean_dice"], val[0]["val_dice"]
    if got is None or abs(got - want) > 1e-9:
        fail("infer + eval give Dice %r, validation after step %d gave %r" %
             (got, pointer["step"], want))
    per_class = {("class%d" % c["class"]): c["dice"] for c in result["per_class"] if c["class"] > 0}
    for name, d in val[0]["val_dice_per_class"].items():
        key = name if name in per_class else None
        if key is None:
            # class names from dataset.json: the order of the per-class record is the class order
            key = "class%d" % (list(val[0]["val_dice_per_class"]).index(name) + 1)
        if (d is None) != (per_class[key] is None) or (d is not None and abs(d - per_class[key]) > 1e-9):
            fail("class %s: infer + eval %r, validation %r" % (name, per_class[key], d))
    print("infer + eval Dice %.6f = validation's after step %d" % (got, pointer["step"]))
else:
    fail("unknown command " + cmd)
