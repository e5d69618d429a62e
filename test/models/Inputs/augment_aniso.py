"""Helpers of augment-anisotropic.test (nnU-Net's augmentation at any patch, its dummy-2D rule).

  initial GEN               nnU-Net's initial patch (gen_augment.nnunet_initial_shape) against
                            batchgenerators' get_patch_size written out here with numpy
                            (rotate_coords_3d: coords · Rx·Ry·Rz, the angle capped at 90°, the
                            maximum with the patch, / 0.85, truncated; dummy-2D keeps D), for
                            3D and dummy-2D patches; and the wrong variant R·v (the rotation
                            applied to the column vector), which must differ for some patch
  inputs DIR MLIR CLASSES   writes DIR/image.npy, DIR/seg.npy, DIR/rng.npy for the pipeline in
                            MLIR (its @augment's input shapes): every D-slice d of the image
                            holds d + 1 (all channels), of the labels d % CLASSES
  slices OUT MLIR           whether each D-slice of OUT/image.npy holds its input slice's value
                            (nnU-Net's dummy-2D never mixes slices): d + 1 + (S - P) // 2 along
                            D on at least half of its non-zero voxels (to 1e-5), and no value
                            above it; prints 'slices kept: K of N'
  targets OUT CLASSES NAME=DxHxW...  each target's shape, and values among 0 .. CLASSES-1
"""
import os
import re
import sys

import numpy as np


def get_patch_size(patch, rot, variant="bg"):
    """batchgenerators' get_patch_size(patch, rot, rot, rot, (0.85, 1.25)) for a 3D patch."""
    rot = min(90 / 360 * 2.0 * np.pi, rot)

    def rx(a):
        return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])

    def ry(a):
        return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])

    def rz(a):
        return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

    def rotate(c, ax, ay, az):
        m = np.identity(3) @ rx(ax) @ ry(ay) @ rz(az)
        if variant == "Rv":
            return m @ c
        return np.dot(c.reshape(3, -1).transpose(), m).transpose().reshape(c.shape)

    coords = np.array(patch)
    final = np.copy(coords)
    final = np.max(np.vstack((np.abs(rotate(coords, rot, 0, 0)), final)), 0)
    final = np.max(np.vstack((np.abs(rotate(coords, 0, rot, 0)), final)), 0)
    final = np.max(np.vstack((np.abs(rotate(coords, 0, 0, rot)), final)), 0)
    final = final / 0.85
    return tuple(int(v) for v in final.astype(int))


PATCHES = [(128, 128, 128), (80, 160, 160), (16, 32, 32), (32, 48, 64), (7, 10, 9), (64, 16, 64),
           (4, 16, 24), (16, 64, 64), (3, 12, 11), (20, 96, 160)]


def initial(gen):
    sys.path.insert(0, os.path.dirname(gen))
    import gen_augment as g
    bad, wrong = 0, 0
    for p in PATCHES:
        d2 = g.nnunet_dummy_2d(p)
        rot = np.pi if d2 else 30 / 360 * 2 * np.pi  # nnU-Net's rotation_for_DA
        want = get_patch_size(p, rot)
        if d2:
            want = (p[0],) + want[1:]
        have = g.nnunet_initial_shape(p, d2)
        bad += have != want
        wrong += get_patch_size(p, rot, "Rv") != get_patch_size(p, rot)
        print("%s (%s): %s %s batchgenerators' %s" % ("x".join(map(str, p)), "dummy-2D" if d2 else "3D",
                                                      "x".join(map(str, have)), "=" if have == want else "!=",
                                                      "x".join(map(str, want))))
    print("initial patches: %s" % ("PASS" if not bad else "FAIL (%d differ)" % bad))
    print("wrong variant R·v: differs for %d of %d patches: %s" % (wrong, len(PATCHES),
                                                                   "caught" if wrong else "NOT CAUGHT"))
    return 1 if bad or not wrong else 0


def shapes(mlir):
    head = open(mlir).read()
    m = re.search(r"%image: tensor<([0-9x]+)xf32>", head)
    n = re.search(r"-> \(tensor<([0-9x]+)xf32>", head)
    return tuple(int(v) for v in m.group(1).split("x")), tuple(int(v) for v in n.group(1).split("x"))


def inputs(d, mlir, classes):
    (B, C, D, H, W), _ = shapes(mlir)
    os.makedirs(d, exist_ok=True)
    slab = np.arange(D, dtype=np.float32)[None, None, :, None, None]
    np.save(os.path.join(d, "image.npy"), np.broadcast_to(slab + 1, (B, C, D, H, W)).astype(np.float32))
    labels = (np.arange(D) % classes).astype(np.int32)[None, None, :, None, None]
    np.save(os.path.join(d, "seg.npy"), np.broadcast_to(labels, (B, 1, D, H, W)).astype(np.int32))
    np.save(os.path.join(d, "rng.npy"), np.array(20261206, dtype=np.int64))
    return 0


def slices(out, mlir):
    (_, _, S, _, _), (_, _, P, _, _) = shapes(mlir)
    x = np.load(os.path.join(out, "image.npy"))
    kept, total = 0, 0
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for k in range(x.shape[2]):
                v = x[n, c, k].astype(np.float64)
                want = k + 1 + (S - P) // 2
                nonzero = v[np.abs(v) > 1e-6]
                same = np.abs(nonzero - want) <= 1e-5 * want
                total += 1
                kept += nonzero.size > 0 and same.mean() >= 0.5 and v.max() <= want * (1 + 1e-5)
    print("slices kept: %d of %d" % (kept, total))
    return 0


def targets(out, classes, specs):
    bad = 0
    for spec in specs:
        name, shape = spec.split("=")
        t = np.load(os.path.join(out, name + ".npy"))
        want = tuple(int(v) for v in shape.split("x"))
        ok = t.shape[2:] == want and np.isin(t, np.arange(classes)).all()
        bad += not ok
        print("%s: %s, values %s" % (name, "x".join(map(str, t.shape[2:])), sorted(set(np.unique(t).astype(int)))))
    print("targets: %s" % ("PASS" if not bad else "FAIL"))
    return 1 if bad else 0


def main():
    what = sys.argv[1]
    if what == "initial":
        return initial(sys.argv[2])
    if what == "inputs":
        return inputs(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if what == "slices":
        return slices(sys.argv[2], sys.argv[3])
    if what == "targets":
        return targets(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    sys.exit("augment_aniso.py: expected initial, inputs, slices or targets")


if __name__ == "__main__":
    sys.exit(main())
