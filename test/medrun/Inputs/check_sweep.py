"""The threshold chosen on validation, applied to test (eval-sweep.test).

  check_sweep.py --inputs --dir DIR   a validation and a test volume: affinities, instance
                                      labels, skeletons; the validation's best threshold
                                      (0.731, sigmoid(1)) is not the test's (0.881)
  check_sweep.py --check --dir DIR    val.json: every row's NERL and VOI against NumPy and
                                      the chosen threshold the highest NERL; test.json: one
                                      segmentation at the recorded threshold, its numbers
                                      against NumPy, and not what tuning on test would give
"""
import argparse
import json
import os
import sys

import numpy as np

from skeleton_defs import close, components, random_skeletons, skeleton_scores, voi_arand, voronoi, write_skeletons

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--inputs", action="store_true")
p.add_argument("--check", action="store_true")
a = p.parse_args()
os.chdir(a.dir)
SHAPE = (10, 12, 14)
SPACING = [40.0, 4.0, 4.0]


def volume(seed, inside, boundary):
    """Voronoi objects; affinities drawn from `inside` within an object, `boundary` across."""
    rng = np.random.default_rng(seed)
    gt = voronoi(SHAPE, 5, rng, np.arange(1, 6) * 11)
    aff = np.zeros((3,) + SHAPE, np.float32)
    for ax in range(3):
        src = [slice(None)] * 3
        dst = [slice(None)] * 3
        src[ax], dst[ax] = slice(0, -1), slice(1, None)
        same = np.zeros(SHAPE, bool)
        same[tuple(src)] = gt[tuple(src)] == gt[tuple(dst)]
        aff[ax] = np.where(same, rng.uniform(*inside, SHAPE), rng.uniform(*boundary, SHAPE))
    nodes, edges = random_skeletons(gt, rng, 10)
    return gt, aff, nodes, edges


VOLUMES = {"val": dict(seed=1, inside=(0.80, 1.0), boundary=(0.55, 0.72)),
           "test": dict(seed=2, inside=(0.90, 1.0), boundary=(0.60, 0.85))}

if a.inputs:
    for name, kw in VOLUMES.items():
        gt, aff, nodes, edges = volume(**kw)
        np.save("%s_gt.npy" % name, gt)
        np.save("%s_aff.npy" % name, aff)
        np.save("%s_logits.npy" % name, np.log(aff / (1 - aff)))
        # PyTorch Connectomics' convention: channel a at u joins u and u - e_a (offsets -1),
        # so it holds the forward affinity of u - e_a; the first slice joins nothing.
        back = np.zeros_like(aff)
        for ax in range(3):
            src = [slice(None)] * 3
            dst = [slice(None)] * 3
            src[ax], dst[ax] = slice(0, -1), slice(1, None)
            back[ax][tuple(dst)] = aff[ax][tuple(src)]
        np.save("%s_aff_back.npy" % name, back)
        write_skeletons("%s_skel.json" % name, nodes, edges, SPACING, "position", list(range(len(nodes))))
    os.makedirs("run", exist_ok=True)
    with open("run/config.json", "w") as f:
        json.dump({}, f)
    os.makedirs("run_back", exist_ok=True)
    with open("run_back/config.json", "w") as f:
        json.dump({"loss": {"type": "bce_with_logits",
                            "affinities": {"offsets": [[-1, 0, 0], [0, -1, 0], [0, 0, -1]]}}}, f)
    sys.exit(0)

failures = []


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else "  " + detail), flush=True)
    if not ok:
        failures.append(name)


def numpy_row(name, t):
    gt, aff, nodes, edges = volume(**VOLUMES[name])
    seg = components(aff, t)
    sk = skeleton_scores(nodes, edges, seg, SPACING)
    vs, vm, va = voi_arand(seg, gt)
    return seg, sk, {"voi_split": vs, "voi_merge": vm, "arand": va}


val = json.load(open("val.json"))
nerls = []
for row in val["sweep"]:
    _, sk, vox = numpy_row("val", row["threshold"])
    got = {k: row["skeleton"][k] for k in sk}
    check("validation at %.6g: NERL, ERL, node VOI against NumPy" % row["threshold"],
          all(close(got[k], sk[k]) for k in sk), "medrun %s, numpy %s" % (got, sk))
    check("validation at %.6g: voxel VOI and ARAND" % row["threshold"],
          all(close(row[k], vox[k]) for k in vox))
    nerls.append(sk["nerl"])
best = int(np.argmax(nerls))  # the first of equals
chosen = json.load(open("params.json"))
check("validation: the chosen threshold has the highest NERL (%.6g)" % val["sweep"][best]["threshold"],
      chosen["threshold"] == val["sweep"][best]["threshold"] == val["best"]["threshold"],
      "chosen %r" % chosen["threshold"])
check("validation: recorded in the run directory too",
      json.load(open("run/segmentation_params.json")) == chosen)

test = json.load(open("test.json"))
check("test: no sweep", "sweep" not in test and test["params"]["threshold"] == chosen["threshold"])
_, sk, vox = numpy_row("test", chosen["threshold"])
got = {k: test["scores"]["skeleton"][k] for k in sk}
check("test: the scores at the recorded threshold against NumPy",
      all(close(got[k], sk[k]) for k in sk) and all(close(test["scores"][k], vox[k]) for k in vox),
      "medrun %s, numpy %s" % (got, sk))
# Negative control: tuning on the test volume would choose another threshold and report a
# higher NERL; the test report must not be that.
tuned = max(((numpy_row("test", row["threshold"])[1]["nerl"], -i, row["threshold"])
             for i, row in enumerate(val["sweep"])))
check("negative control: tuned on test, the threshold would be %.6g with NERL %.4f, not the "
      "report's %.6g with %.4f" % (tuned[2], tuned[0], chosen["threshold"], got["nerl"]),
      tuned[2] != chosen["threshold"] and not close(tuned[0], got["nerl"]))
if failures:
    sys.exit("sweep: %d checks failed" % len(failures))
print("sweep: all checks passed")
