"""The connectomics pipeline end to end on generated EM-like volumes (connectomics-e2e.test).

  check_e2e.py inputs DIR   train.h5, val.h5 and test.h5 (raw uint8 and seg uint64 with
                            resolution 20 x 8 x 8 nm): wavy tubes along each axis and a
                            blob, dark membranes at object borders; each volume's skeletons
                            (the tubes' centre lines, the blob's star) as DIR/NAME_skel.json;
                            the training recipe DIR/recipe.yaml
  check_e2e.py check DIR    the test report (eval of `medrun segment`'s labels with the
                            skeletons and the labels) against NumPy, the threshold the one
                            chosen on validation; the negative control: the same check on
                            the segmentation with z and x swapped must fail
"""
import json
import os
import re
import sys

import numpy as np

from skeleton_defs import close, skeleton_scores, voi_arand

SHAPE = (24, 32, 32)
SPACING = [20.0, 8.0, 8.0]


def volume(seed):
    """Tubes of radius 3 along x (two), y (two) and z (one), a blob; their skeletons."""
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(*[np.arange(s) for s in SHAPE], indexing="ij")
    seg = np.zeros(SHAPE, np.uint64)
    nodes, edges = [], []
    # (axis of the tube, its centre in the other two axes), far enough apart not to touch.
    tubes = [(2, (6, 8)), (2, (6, 24)), (1, (17, 7)), (1, (17, 25)), (0, (16, 16))]
    ids = rng.choice(np.arange(100, 1000), len(tubes) + 1, replace=False)
    coords = [z, y, x]
    for (axis, centre), tid in zip(tubes, ids):
        other = [a for a in range(3) if a != axis]
        phase = rng.uniform(0, 2 * np.pi)
        along = coords[axis]
        c0 = centre[0] + 1.5 * np.sin(along / 5.0 + phase)
        c1 = centre[1] + 1.5 * np.cos(along / 6.0 + phase)
        inside = (coords[other[0]] - c0) ** 2 + (coords[other[1]] - c1) ** 2 <= 9
        seg[inside] = tid
        first = len(nodes)
        for t in range(1, SHAPE[axis] - 1, 2):
            v = [0, 0, 0]
            v[axis] = t
            v[other[0]] = int(round(centre[0] + 1.5 * np.sin(t / 5.0 + phase)))
            v[other[1]] = int(round(centre[1] + 1.5 * np.cos(t / 6.0 + phase)))
            assert seg[tuple(v)] == tid
            nodes.append((int(tid), tuple(v)))
            if len(nodes) - 1 > first:
                edges.append((len(nodes) - 2, len(nodes) - 1))
    blob = ((z - 11) / 3.0) ** 2 + ((y - 16) / 4.0) ** 2 + ((x - 27) / 4.0) ** 2 <= 1
    seg[blob & (seg == 0)] = ids[-1]
    centre = len(nodes)
    nodes.append((int(ids[-1]), (11, 16, 27)))
    assert seg[11, 16, 27] == ids[-1]
    for v in [(9, 16, 27), (13, 16, 27), (11, 13, 27), (11, 19, 27), (11, 16, 24), (11, 16, 30)]:
        if seg[v] == ids[-1]:  # where no tube passes
            nodes.append((int(ids[-1]), v))
            edges.append((centre, len(nodes) - 1))
    # EM-like: objects bright with texture, their borders (membranes) dark, background grey.
    border = np.zeros(SHAPE, bool)
    for ax in range(3):
        a = [slice(None)] * 3
        b = [slice(None)] * 3
        a[ax], b[ax] = slice(0, -1), slice(1, None)
        diff = seg[tuple(a)] != seg[tuple(b)]
        border[tuple(a)] |= diff
        border[tuple(b)] |= diff
    raw = np.where(seg > 0, 170.0, 110.0)
    raw[border] = 40.0
    raw += rng.normal(0, 12, SHAPE)
    return np.clip(raw, 0, 255).astype(np.uint8), seg, nodes, edges


def write(d):
    import h5py
    for name, seed in [("train", 1), ("val", 2), ("test", 3)]:
        raw, seg, nodes, edges = volume(seed)
        with h5py.File(os.path.join(d, name + ".h5"), "w") as f:
            f.create_dataset("raw", data=raw).attrs["resolution"] = SPACING
            f.create_dataset("seg", data=seg).attrs["resolution"] = SPACING
        doc = {"nodes": [{"node": i, "skeleton": s, "voxel": list(v)} for i, (s, v) in enumerate(nodes)],
               "edges": [list(e) for e in edges]}
        with open(os.path.join(d, name + "_skel.json"), "w") as f:
            json.dump(doc, f)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(d, "recipe.yaml"), "w") as f:
        f.write("""# The tiny network learns BANIS affinities from the generated training volume.
model: %s
data:
  source: files
  images: [%s]
  image_key: raw
  label_key: seg
  normalization: divide255
  batch: 2
  patch: [6, 8, 8]
  workers: 1
loss: {type: bce_with_logits, mask: true}
optimizer: {type: adamw, lr: 5.0e-2}
train: {steps: 4}
checkpoint: {every: 4}
logging: {every: 1}
""" % (os.path.join(here, "tiny_1to3.mlir"), os.path.join(d, "train.h5")))


def check(d, seg_file, swap=False):
    _, gt, nodes, edges = volume(3)
    seg = np.load(os.path.join(d, seg_file)).astype(np.int64)
    if swap:
        seg = np.ascontiguousarray(seg.transpose(2, 1, 0))[: SHAPE[0], : SHAPE[1], : SHAPE[2]]
        seg = np.pad(seg, [(0, SHAPE[k] - seg.shape[k]) for k in range(3)])
    report = json.load(open(os.path.join(d, "test.json")))
    chosen = json.load(open(os.path.join(d, "params.json")))
    val = json.load(open(os.path.join(d, "val.json")))
    failures = []

    def ok(name, good, detail=""):
        print(("ok    " if good else "FAIL  ") + name + ("" if good else "  " + detail), flush=True)
        if not good:
            failures.append(name)

    rows = val["sweep"]
    nerls = [r["skeleton"]["nerl"] for r in rows]
    best = rows[int(np.argmax(nerls))]["threshold"]
    ok("validation chose the highest NERL's threshold (%g, method %s)" % (best, chosen["method"]),
       chosen["threshold"] == best and chosen["method"] == "mean-agglomeration")
    # medrun segment's own account of what it applied (its stdout and stderr).
    said = open(os.path.join(d, "segment.txt")).read()
    used = re.findall(r"mean-agglomeration: \d+ objects at threshold (\S+) ->", said)
    ok("the test segmentation used the validation's threshold",
       len(used) == 1 and abs(float(used[0]) - chosen["threshold"]) <= 1e-6 * max(1, abs(chosen["threshold"]))
       and "the parameters of " in said, "segment said %r" % said)
    sk = skeleton_scores(nodes, edges, seg, SPACING)
    got = report["scores"]["skeleton"]
    ok("test: NERL, ERL, nerl_N, node VOI and ARAND against NumPy",
       all(close(got[k], sk[k]) for k in sk), "medrun %s, numpy %s" % ({k: got[k] for k in sk}, sk))
    vs, vm, va = voi_arand(seg, gt.astype(np.int64))
    ok("test: voxel VOI and ARAND against NumPy",
       close(report["scores"]["voi_split"], vs) and close(report["scores"]["voi_merge"], vm) and
       close(report["scores"]["arand"], va),
       "medrun %s, numpy %s" % ([report["scores"][k] for k in ("voi_split", "voi_merge", "arand")], [vs, vm, va]))
    print("test: nerl %.4f, voi_split %.4f, voi_merge %.4f, arand %.4f" % (got["nerl"], vs, vm, va))
    return failures


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "inputs":
        write(d)
        sys.exit(0)
    failures = check(d, "test_seg.npy", swap=(mode == "check-swapped"))
    if failures:
        sys.exit("e2e: %d checks failed" % len(failures))
    print("e2e: all checks passed")
