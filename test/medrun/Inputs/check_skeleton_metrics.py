"""`medrun eval --skeletons` against a NumPy implementation of NISB/BANIS's definitions.

The definitions (banis/metrics.py over funlib.evaluate.run_length; docs/skeletons.md):
each node takes the predicted id at its voxel; a merging segment is a predicted id (0
included) that holds nodes of 2 or more skeletons; an edge (u, v) of skeleton s is omitted
if either node has id 0, split if the ids differ, merged if s meets a merging segment and
the edge's id is one, else correct for its id. ERL = sum_s (L_s / L) sum_k c_sk^2 / L_s with
c_sk the length of s's correct edges in id k (Euclidean, physical units); max ERL is the ERL
of the skeleton ids themselves; NERL = ERL / max ERL; nerl_N leaves the (skeleton, id)
pairs of N nodes or fewer out of the merge detection. VOI (bits) and the adapted Rand error
on the nodes: the skeleton ids as ground truth. The voxel VOI / ARAND are check_eval.py's
(eval.test); here they are recomputed the same way from the contingency table.

Random cases: Voronoi ground truth with background, predictions that split, merge and drop
objects, random trees of nodes per object, anisotropic spacing; the skeletons written with
voxel indices, physical positions, both, and x-first. Wrong variants (run length not
weighted by edge length, merges not penalised, a merge zeroing the whole skeleton, the
run normalised by node count, x and z swapped) must each be told apart.

  check_skeleton_metrics.py --medrun MEDRUN --dir DIR
  check_skeleton_metrics.py --bad-inputs --dir DIR     the files of the error checks
  check_skeleton_metrics.py --mutate --medrun M --dir DIR   mutated files: read or refused
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

from skeleton_defs import close, erl, random_skeletons, skeleton_scores, voi_arand, voronoi, write_skeletons

p = argparse.ArgumentParser()
p.add_argument("--medrun")
p.add_argument("--dir", required=True)
p.add_argument("--bad-inputs", action="store_true")
p.add_argument("--mutate", action="store_true")
a = p.parse_args()
os.makedirs(a.dir, exist_ok=True)
os.chdir(a.dir)
failures = []


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else "  " + detail), flush=True)
    if not ok:
        failures.append(name)


if a.mutate:
    # Mutated skeleton files (values of other types and sizes, keys dropped, bytes cut): every
    # one must be read or refused with medrun's error, exit 0 or 1, never a crash.
    import random
    r = random.Random(7)
    base = json.load(open("good.json"))
    weird = [None, True, "x", -1, 0, 2**63, 2**64 + 5, -2**63, 1e300, -1e300, 0.5, [], {}, [1, 2],
             [0, 0, 0, 0], [1e308, 0, 0], [-0.0, 0, 0], "NaN"]
    outcomes = {0: 0, 1: 0}

    def mutate(doc):
        node = r.choice(doc["nodes"])
        kind = r.randrange(5)
        if kind == 0:
            node[r.choice(["node", "skeleton", "voxel", "position"])] = r.choice(weird)
        elif kind == 1:
            node.pop(r.choice(list(node)), None)
        elif kind == 2:
            doc["edges"].append([r.choice(weird), r.choice(weird)])
        elif kind == 3:
            doc[r.choice(["spacing", "axes", "nodes", "edges", "units"])] = r.choice(weird)
        else:
            key = r.choice(["voxel", "position"])
            node[key] = [r.choice([c for c in weird if not isinstance(c, (list, dict))]) for _ in range(3)]
    for i in range(60):
        doc = json.loads(json.dumps(base))
        for _ in range(r.randrange(1, 4)):
            try:
                mutate(doc)
            except (AttributeError, IndexError, TypeError, KeyError):
                pass  # an earlier mutation replaced what this one edits
        text = json.dumps(doc)
        if i % 10 == 9:
            text = text[: r.randrange(len(text))]
        with open("mutant.json", "w") as f:
            f.write(text)
        res = subprocess.run([a.medrun, "eval", "gt.npy", "--labels", "gt.npy", "--skeletons", "mutant.json"],
                             capture_output=True, text=True)
        if res.returncode not in (0, 1) or (res.returncode == 1 and not res.stderr.startswith("medrun: ")):
            sys.exit("mutant %d: exit %d: %s\n%s" % (i, res.returncode, res.stderr, text))
        outcomes[res.returncode] += 1
    print("mutated skeletons: %d read, %d refused, no crash" % (outcomes[0], outcomes[1]))
    sys.exit(0)

if a.bad_inputs:
    # One 6x7x8 volume with two objects and skeletons broken one way per file.
    gt = np.zeros((6, 7, 8), np.int64)
    gt[:, :, :4] = 3
    gt[:, :, 4:] = 9
    np.save("gt.npy", gt)
    good = {"nodes": [{"node": 10, "skeleton": 3, "voxel": [0, 0, 0]},
                      {"node": 11, "skeleton": 3, "voxel": [5, 6, 3]},
                      {"node": 20, "skeleton": 9, "voxel": [1, 1, 6]},
                      {"node": 21, "skeleton": 9, "position": [40.0, 8.0, 28.0]}],
            "edges": [[10, 11], [20, 21]], "spacing": [40, 4, 4]}

    def variant(name, edit):
        doc = json.loads(json.dumps(good))
        edit(doc)
        with open(name, "w") as f:
            json.dump(doc, f)

    variant("good.json", lambda d: None)
    variant("outside.json", lambda d: d["nodes"][1].update(voxel=[6, 6, 3]))
    variant("outside_position.json", lambda d: d["nodes"][3].update(position=[40.0, 8.0, 34.0]))
    variant("zero_id.json", lambda d: d["nodes"][2].update(skeleton=0))
    variant("unknown_id.json", lambda d: [n.update(skeleton=5) for n in d["nodes"][2:]])
    variant("edge_unknown.json", lambda d: d["edges"].append([11, 99]))
    variant("edge_joins.json", lambda d: d["edges"].append([11, 20]))
    variant("twice.json", lambda d: d["nodes"][3].update(node=20))
    variant("no_skeleton.json", lambda d: d["nodes"][0].pop("skeleton"))
    variant("no_position.json", lambda d: d["nodes"][0].pop("voxel"))
    variant("spacing.json", lambda d: d.update(spacing=[30, 4, 4]))
    variant("half_voxel.json", lambda d: d["nodes"][0].update(voxel=[0, 0.5, 0]))
    variant("no_length.json", lambda d: d.update(edges=[]))
    variant("unknown_key.json", lambda d: d.update(units="nm"))
    with open("malformed.json", "w") as f:
        f.write('{"nodes": [')
    # Known answers: two straight skeletons of 9 unit edges along x (rows y = 0 and 1 of a
    # 1x2x10 volume, ids 1 and 2): L = 18, max ERL = (81 + 81) / 18 = 9. "split": row 0 cut
    # at x = 5 -> ERL = (4^2 + 4^2 + 9^2) / 18 = 113 / 18; "merge": both rows one id for
    # x < 5 (the merged runs count 0), cut at x = 5 -> ERL = (4^2 + 4^2) / 18 = 32 / 18.
    hand = np.zeros((1, 2, 10), np.int64)
    hand[0, 0], hand[0, 1] = 1, 2
    np.save("hand_gt.npy", hand)
    split = np.where(hand == 1, 10, 12)
    split[0, 0, 5:] = 11
    np.save("hand_split.npy", split)
    merge = split.copy()
    merge[0, :, :5] = 10
    np.save("hand_merge.npy", merge)
    with open("hand.json", "w") as f:
        json.dump({"nodes": [{"node": 10 * y + x, "skeleton": y + 1, "voxel": [0, y, x]}
                             for y in range(2) for x in range(10)],
                   "edges": [[10 * y + x, 10 * y + x + 1] for y in range(2) for x in range(9)]}, f)
    sys.exit(0)

rng = np.random.default_rng(3)
WRONG = {"run length not weighted by edge length": dict(weighted=False),
         "merges not penalised": dict(penalise=False),
         "a merge zeroing the whole skeleton": dict(whole_skeleton=True),
         "skeletons weighted by node count": dict(by_nodes=True)}
caught = {name: False for name in list(WRONG) + ["x and z swapped"]}
forms = ["voxel", "position", "both", "xyz"]
seen_edges = {"merged": 0, "split": 0, "omitted": 0, "correct": 0}
for case, shape in enumerate([(9, 11, 13), (7, 15, 10), (12, 9, 9), (8, 8, 14)]):
    spacing = [float(rng.choice([20.0, 30.0, 40.0])), 4.0, float(rng.choice([4.0, 6.0]))]
    ids = rng.choice(np.arange(1, 1 << 20), 7, replace=False)
    gt = voronoi(shape, 7, rng, ids)
    gt[rng.random(shape) < 0.05] = 0
    # The prediction: another Voronoi tessellation (splits and merges where they disagree),
    # two ground-truth objects joined, and a slab of background (omitted edges).
    pred = voronoi(shape, 6, rng, rng.choice(np.arange(1, 1000), 6, replace=False))
    pred = np.where(gt == ids[0], pred.max() + 7, pred)
    pred = np.where(gt == ids[1], pred.max(), pred)
    pred[:, :, : int(rng.integers(1, 3))] = 0
    np.save("gt%d.npy" % case, gt)
    np.save("pred%d.npy" % case, pred.astype(np.int64))
    nodes, edges = random_skeletons(gt, rng, 12)
    node_ids = [int(x) for x in rng.choice(np.arange(10**6), len(nodes), replace=False)]
    lut = [int(pred[v]) for _, v in nodes]
    sk_ids = np.array([s for s, _ in nodes])
    want = skeleton_scores(nodes, edges, pred, spacing)
    vs, vm, va = voi_arand(pred, gt)
    for form in forms:
        name = "skel%d_%s.json" % (case, form)
        # Physical positions only: the volume carries no spacing (.npy), the file's is used.
        write_skeletons(name, nodes, edges, spacing, form, node_ids)
        args = ["pred%d.npy" % case, "--labels", "gt%d.npy" % case, "--skeletons", name,
                "--json", "out%d_%s.json" % (case, form)]
        r = subprocess.run([a.medrun, "eval", *args], capture_output=True, text=True)
        if r.returncode != 0:
            check("case %d (%s): medrun eval runs" % (case, form), False, r.stderr)
            continue
        rep = json.load(open("out%d_%s.json" % (case, form)))["scores"]
        sk = rep["skeleton"]
        got = {k: sk[k] for k in want}
        # Voxel indices and no spacing in the file or the volume (.npy): lengths in voxels.
        expect = skeleton_scores(nodes, edges, pred, [1.0, 1.0, 1.0]) if form == "voxel" else want
        ok = all(close(got[k], expect[k]) for k in expect)
        check("case %d %s (%s): ERL, NERL, nerl_N, node VOI and ARAND" % (case, shape, form), ok,
              "medrun %s, numpy %s" % (got, expect))
        check("case %d (%s): voxel VOI and ARAND" % (case, form),
              close(rep["voi_split"], vs) and close(rep["voi_merge"], vm) and close(rep["arand"], va),
              "medrun %s, numpy %s" % ((rep["voi_split"], rep["voi_merge"], rep["arand"]), (vs, vm, va)))
        if form == "both":
            for wname, kw in WRONG.items():
                if not close(got["erl"], erl(nodes, edges, lut, spacing, **kw)):
                    caught[wname] = True
            swapped = [(s, v[::-1]) for s, v in nodes]
            if all(0 <= v[k] < shape[k] for _, v in swapped for k in range(3)):
                lut_s = [int(pred[v]) for _, v in swapped]
                if not close(got["erl"], erl(swapped, edges, lut_s, spacing[::-1])):
                    caught["x and z swapped"] = True
            else:
                caught["x and z swapped"] = True  # would not even fit the volume
            mergers = 0
            pairs = np.unique(np.stack([sk_ids, np.array(lut)], 1), axis=0)
            segs, nsk = np.unique(pairs[:, 1], return_counts=True)
            mergers = int(nsk[nsk > 1].sum())
            check("case %d: n_mergers" % case, sk["n_mergers"] == mergers,
                  "%d vs %d" % (sk["n_mergers"], mergers))
            for kind in seen_edges:
                seen_edges[kind] += sk["edges"][kind]
    # The skeletons alone (no labels): the same skeleton scores.
    r = subprocess.run([a.medrun, "eval", "pred%d.npy" % case, "--skeletons", "skel%d_both.json" % case,
                        "--json", "only%d.json" % case], capture_output=True, text=True)
    only = json.load(open("only%d.json" % case))["scores"] if r.returncode == 0 else None
    check("case %d: skeletons without labels" % case,
          only is not None and "voi_split" not in only and close(only["skeleton"]["nerl"], want["nerl"]),
          r.stderr)
check("the cases hold merged, split, omitted and correct edges", all(seen_edges.values()), str(seen_edges))
for name, seen in caught.items():
    check("negative control: the comparison rejects %s" % name, seen)
if failures:
    sys.exit("skeleton metrics: %d checks failed" % len(failures))
print("skeleton metrics: all checks passed")
