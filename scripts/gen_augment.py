#!/usr/bin/python3
"""Generate the augmentation pipelines in the `med` MLIR dialect (docs/augment.md).

`banis`: BANIS's `_apply_augmentations` (/work/shared/reference/mednext.md section 3) on a
batch of (patch + context)^3 crops -- image in [0, 1] and instance ids -- and its six
affinity targets (offsets 1 and `context` along each axis) of the first patch^3 voxels:

  1. orientation: axis permutation, rot90 in three planes and flips at p 0.5 together
     draw a uniform element of the 48 signed axis permutations (med.orientation_matrix),
     applied exactly (nearest; input and output sizes match);
  2. slice drop: p 0.5 per sample, then each D-slice with p 0.05 set to 0;
  3. slice shift: p 0.5 per sample, then each D-slice with p 0.05 rolled by -10 .. 10
     voxels along H and W (np.roll);
  4. intensity: p 0.5, x * U(0.9, 1.1) + U(-0.1, 0.1);
  5. Gaussian noise: p 0.5, std U(0, 1) * 0.5;
  6. MONAI RandAffine: p 0.5, rotations U(-pi, pi), scales 1 + U(-0.2, 0.2), shears
     U(-0.5, 0.5) (six), image bilinear, labels nearest, reflection padding;
  7. affinities of the augmented ids (med.affinities), kept for the first patch^3 voxels
     with the image.

A transform that is not applied gets its neutral parameters (gate 0), so every sample
runs the same ops. Each random draw has a stream of its own (STREAMS below), so the
numbers of one transform stay put when another changes.

  gen_augment.py banis [--batch 2] [--patch 128] [--context 10] [-o FILE]
  gen_augment.py --check-models DIR   # the checked-in pipelines are what this writes
"""

import argparse
import math
import os
import sys

# The stream of each random draw of the BANIS pipeline.
STREAMS = {
    "orientation": 1,
    "drop_gate": 2, "drop_slices": 3,
    "shift_gate": 4, "shift_slices": 5, "shift_amount": 6,
    "intensity_gate": 7, "intensity_scale": 8, "intensity_shift": 9,
    "noise_gate": 10, "noise_std": 11, "noise": 12,
    "affine_gate": 13, "affine_angles": 14, "affine_scales": 15, "affine_shear": 16,
}

CHECKED_IN = [("augment_banis.mlir", "banis", {"batch": 2, "patch": 128, "context": 10})]


class Writer:
    def __init__(self):
        self.lines = []
        self.n = 0

    def op(self, text):
        self.n += 1
        name = "%%v%d" % self.n
        self.lines.append("  %s = %s" % (name, text))
        return name

    def comment(self, text):
        self.lines.append("  // " + text)


def vol(b, c, s):
    return "tensor<%dx%dx%dx%dx%dxf32>" % (b, c, s, s, s)


def banis(batch, patch, context):
    s = patch + context
    img, seg = vol(batch, 1, s), "tensor<%dx1x%dx%dx%dxi32>" % (batch, s, s, s)
    out_img, out_t = vol(batch, 1, patch), vol(batch, 6, patch)
    mat_t = "tensor<%dx3x4xf32>" % batch
    w = Writer()
    f32 = "tensor<f32>"

    def const(v):
        return w.op("med.constant dense<%s> : %s" % (repr(float(v)), f32))

    def rand(stream, shape, dist="uniform", p=None, like="%image", like_t=img):
        attrs = ["stream = %d : i64" % STREAMS[stream]]
        if dist != "uniform":
            attrs.append("distribution = #med<distribution %s>" % dist)
        if p is not None:
            attrs.append("probability = %r" % p)
        if shape is not None:
            attrs.append("sample_shape = array<i64%s>" % (": " + ", ".join(map(str, shape)) if shape else ""))
        rt = "tensor<%s>" % "x".join(map(str, [batch] + shape + ["f32"])) if shape is not None else like_t
        return w.op("med.random %%key, %s {%s} : (tensor<i64>, %s) -> %s"
                    % (like, ", ".join(attrs), like_t, rt)), rt

    def binary(kind, a, at, b, bt, rt):
        return w.op("med.%s %s, %s : (%s, %s) -> %s" % (kind, a, b, at, bt, rt))

    def affine(u, ut, lo, hi):
        """lo + (hi - lo) * u"""
        t = binary("mul", u, ut, const(hi - lo), f32, ut)
        return binary("add", t, ut, const(lo), f32, ut)

    def gated(value, vt, gate, gt, neutral):
        """neutral + gate * (value - neutral): the value where the gate is 1."""
        if neutral == 0:
            return binary("mul", value, vt, gate, gt, vt)
        d = binary("sub", value, vt, const(neutral), f32, vt)
        d = binary("mul", d, vt, gate, gt, vt)
        return binary("add", d, vt, const(neutral), f32, vt)

    w.comment("1. Orientation: a uniform element of the 48 signed axis permutations, exact.")
    u, ut = rand("orientation", [])
    o = w.op("med.orientation_matrix %s : (%s) -> %s" % (u, ut, mat_t))
    shape = "array<i64: %d, %d, %d>" % (s, s, s)
    x = w.op("med.spatial_transform nearest %%image, %s {shape = %s} : (%s, %s) -> %s"
             % (o, shape, img, mat_t, img))
    y = w.op("med.spatial_transform nearest %%seg, %s {shape = %s} : (%s, %s) -> %s"
             % (o, shape, seg, mat_t, seg))

    w.comment("2. Slice drop: p 0.5 per sample, then each D-slice with p 0.05 set to 0.")
    g, gt = rand("drop_gate", [1, 1, 1, 1], "bernoulli", 0.5)
    d, dt = rand("drop_slices", [1, s, 1, 1], "bernoulli", 0.05)
    gd = binary("mul", d, dt, g, gt, dt)
    keep = binary("sub", const(1), f32, gd, dt, dt)
    x = binary("mul", x, img, keep, dt, img)

    w.comment("3. Slice shift: p 0.5 per sample, then each D-slice with p 0.05 rolled by")
    w.comment("   -10 .. 10 voxels along H and W (a uniform number in [-10, 11), floored).")
    g, gt = rand("shift_gate", [1, 1], "bernoulli", 0.5)
    d, dt = rand("shift_slices", [s, 1], "bernoulli", 0.05)
    a, at = rand("shift_amount", [s, 2])
    a = affine(a, at, -10.0, 11.0)
    a = binary("mul", a, at, d, dt, at)
    a = binary("mul", a, at, g, gt, at)
    x = w.op("med.shift_slices %s, %s : (%s, %s) -> %s" % (x, a, img, at, img))

    w.comment("4. Intensity: p 0.5, x * U(0.9, 1.1) + U(-0.1, 0.1).")
    g, gt = rand("intensity_gate", [1, 1, 1, 1], "bernoulli", 0.5)
    m, mt = rand("intensity_scale", [1, 1, 1, 1])
    m = gated(affine(m, mt, 0.9, 1.1), mt, g, gt, 1.0)
    b, bt = rand("intensity_shift", [1, 1, 1, 1])
    b = gated(affine(b, bt, -0.1, 0.1), bt, g, gt, 0.0)
    x = binary("mul", x, img, m, mt, img)
    x = binary("add", x, img, b, bt, img)

    w.comment("5. Gaussian noise: p 0.5, standard deviation U(0, 1) * 0.5.")
    g, gt = rand("noise_gate", [1, 1, 1, 1], "bernoulli", 0.5)
    sd, sdt = rand("noise_std", [1, 1, 1, 1])
    sd = binary("mul", sd, sdt, const(0.5), f32, sdt)
    sd = binary("mul", sd, sdt, g, gt, sdt)
    z, zt = rand("noise", None, "normal")
    z = binary("mul", z, img, sd, sdt, img)
    x = binary("add", x, img, z, img, img)

    w.comment("6. MONAI RandAffine: p 0.5, rotations U(-pi, pi), scales 1 + U(-0.2, 0.2),")
    w.comment("   shears U(-0.5, 0.5); bilinear image, nearest labels, reflection padding.")
    g, gt = rand("affine_gate", [1], "bernoulli", 0.5)
    r, rt = rand("affine_angles", [3])
    r = gated(affine(r, rt, -math.pi, math.pi), rt, g, gt, 0.0)
    k, kt = rand("affine_scales", [3])
    k = gated(affine(k, kt, 0.8, 1.2), kt, g, gt, 1.0)
    h, ht = rand("affine_shear", [6])
    h = gated(affine(h, ht, -0.5, 0.5), ht, g, gt, 0.0)
    mat = w.op("med.affine_matrix %s, %s shear %s : (%s, %s, %s) -> %s"
               % (r, k, h, rt, kt, ht, mat_t))
    x = w.op("med.spatial_transform linear %s, %s border reflection {shape = %s} : (%s, %s) -> %s"
             % (x, mat, shape, img, mat_t, img))
    y = w.op("med.spatial_transform nearest %s, %s border reflection {shape = %s} : (%s, %s) -> %s"
             % (y, mat, shape, seg, mat_t, seg))

    w.comment("7. The six affinities of the augmented ids and the image, for the first %d^3 voxels." % patch)
    offs = [1, 0, 0, 0, 1, 0, 0, 0, 1, context, 0, 0, 0, context, 0, 0, 0, context]
    w.n += 1
    aff, mask = "%%v%da" % w.n, "%%v%dm" % w.n
    w.lines.append("  %s, %s = med.affinities %s {offsets = array<i64: %s>, crop_size = array<i64: %d, %d, %d>} : (%s) -> (%s, %s)"
                   % (aff, mask, y, ", ".join(map(str, offs)), patch, patch, patch, seg, out_t, out_t))
    x = w.op("med.slice %s {offsets = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: %d, 1, %d, %d, %d>} : (%s) -> %s"
             % (x, batch, patch, patch, patch, img, out_img))
    head = [
        "// Generated by scripts/gen_augment.py (banis, batch %d, patch %d, context %d): do not edit."
        % (batch, patch, context),
        "// BANIS's augmentation of a batch of %d^3 crops (image in [0, 1], i32 instance ids) and its" % s,
        "// six affinity targets of the first %d^3 voxels; docs/augment.md, the script's docstring." % patch,
        "func.func @augment(%%image: %s, %%seg: %s, %%key: tensor<i64>) -> (%s, %s, %s)"
        " attributes {med.input_names = [\"image\", \"seg\", \"rng\"], med.output_names = [\"image\", \"target\", \"mask\"]} {"
        % (img, seg, out_img, out_t, out_t),
    ]
    tail = ["  return %s, %s, %s : %s, %s, %s" % (x, aff, mask, out_img, out_t, out_t), "}", ""]
    return "\n".join(head + w.lines + tail)


def generate(kind, params):
    if kind == "banis":
        return banis(params["batch"], params["patch"], params["context"])
    raise SystemExit("gen_augment.py: unknown pipeline '%s' (expected banis)" % kind)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pipeline", nargs="?", help="banis")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--context", type=int, default=10)
    ap.add_argument("-o", "--output")
    ap.add_argument("--check-models", metavar="DIR")
    a = ap.parse_args()
    if a.check_models:
        bad = 0
        for name, kind, params in CHECKED_IN:
            path = os.path.join(a.check_models, name)
            want = generate(kind, params)
            try:
                have = open(path).read()
            except OSError as e:
                print("%s: %s" % (path, e))
                bad += 1
                continue
            if have != want:
                print("%s: differs from what gen_augment.py writes (regenerate it)" % path)
                bad += 1
        sys.exit(1 if bad else 0)
    if not a.pipeline:
        ap.error("give a pipeline (banis) or --check-models DIR")
    if a.batch < 1 or a.patch < 1 or a.context < 1 or a.context >= a.patch:
        ap.error("expected --batch >= 1 and 1 <= --context < --patch")
    text = generate(a.pipeline, {"batch": a.batch, "patch": a.patch, "context": a.context})
    if a.output:
        open(a.output, "w").write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
