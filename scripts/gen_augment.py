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

`nnunet`: nnU-Net v2's default 3D training augmentation (nnUNetTrainer with
batchgeneratorsv2; /work/shared/reference/augment.md section 1, not its dummy-2D,
masking, cascade or region variants) on a batch of C-channel initial patches of S^3 --
S = get_patch_size(patch): the patch-size vector rotated by 30° about each axis, the
elementwise maximum of |.|, / 0.85, truncated (128 -> 205) -- with i32 class labels
(-1 outside the volume; the loader's `classes`), to patch^3 and the deep-supervision
targets, in this order:

  1. SpatialTransform (always): rotation with p 0.2 (three angles U(-30°, 30°)), scaling
     with p 0.2 (one scale U(0.7, 1.4) for all axes), A = Rz(a2)·Ry(a1)·Rx(a0)·diag(s) about
     the centre (a0 about the first spatial axis, D), batchgeneratorsv2's grid @ A.T with
     align_corners=False; image trilinear with zeros outside, labels one-hot linear and
     argmax (lowest label wins ties) with -1 outside; a sample neither rotated nor scaled
     is the integer centre crop at offset (S - patch) // 2 (no interpolation);
  2. GaussianNoise: p 0.1, N(0, sigma) with one sigma U(0, 0.1) per sample (nnU-Net's
     "noise_variance" is used as the std), every channel;
  3. GaussianBlur: p 0.2, each channel with p 0.5, sigma U(0.5, 1) per axis;
  4. MultiplicativeBrightness: p 0.15, x * BGContrast((0.75, 1.25)) per channel;
  5. Contrast: p 0.15, BGContrast((0.75, 1.25)) per channel, range preserved:
     clamp((x - mean)·m + mean, min, max) with the channel's statistics before it;
  6. SimulateLowResolution: p 0.25, each channel with p 0.5, one scale U(0.5, 1) for all
     axes (nearest-exact down, trilinear up);
  7. Gamma: p 0.1, inverted, statistics retained, gamma BGContrast((0.7, 1.5)) per channel:
     x = -x; mean, unbiased std; x = ((x - min)/max(r, 1e-7))^gamma · r + min (r = max -
     min); x = (x - mean(x))·std/max(std(x), 1e-7) + mean; x = -x;
  8. Gamma: p 0.3, the same without inversion;
  9. Mirror: each axis with p 0.5, image and labels;
 10. RemoveLabel: -1 -> 0; the labels then become f32 class indices, the element type
     of the loss's targets (the sum of med.label_regions' channels [label >= k]; exact);
 11. DownsampleSegForDS: target.0 the labels, target.i nearest-exact to round(patch / 2^i)
     (levels 5: MedNeXt's five deep-supervision outputs at 1/2^i, as med.dice_ce takes
     them: f32 class indices, N x 1 x size^3).

BGContrast(r) is batchgeneratorsv2's split range: with probability 0.5 (if r[0] < 1)
U(r[0], 1), else U(max(r[0], 1), r[1]). Probabilities are per sample (the RandomTransform
gate), and per channel where a transform picks channels. The function is
@augment(image, seg, rng) -> (image, target.0, ..., target.<levels-1>), the outputs named
as the dice_ce loss names its inputs (`target` alone for one level).

A transform that is not applied gets its neutral parameters (gate 0), so every sample
runs the same ops; where an op has no exactly neutral parameter (contrast, gamma) the
result is value·gate + input·(1 - gate), exact for a gate of 0 or 1. Each random draw
has a stream of its own (STREAMS, NNUNET_STREAMS below), so the numbers of one transform
stay put when another changes.

  gen_augment.py banis [--batch 2] [--patch 128] [--context 10] [-o FILE]
  gen_augment.py nnunet [--batch 2] [--channels 1] [--classes 3] [--patch 128] [--levels 5]
                 [--probability P] [--given] [-o FILE]   # for tests: P for every transform and
                                               # channel choice; the draws as arguments
  gen_augment.py nnunet_spatial ...   # step 1 alone with given angles, scales and crop flags
  gen_augment.py bg_contrast [--count N] [--range LO HI]   # N BGContrast draws (tests)
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

CHECKED_IN = [
    ("augment_banis.mlir", "banis", {"batch": 2, "patch": 128, "context": 10}),
    # configs/nnunet_mednext_l.yaml: batch 2, 128^3, MedNeXt-L with one input channel, three
    # classes and five deep-supervision outputs.
    ("augment_nnunet.mlir", "nnunet", {"batch": 2, "channels": 1, "classes": 3, "patch": 128, "levels": 5}),
]
PIPELINES = ("banis", "nnunet", "nnunet_spatial", "bg_contrast")


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


# ---- nnU-Net -------------------------------------------------------------------------

# The stream of each random draw of the nnU-Net pipeline (its own program: the numbers
# need only be distinct within it).
NNUNET_STREAMS = {
    "rotation_gate": 1, "rotation_angles": 2,
    "scaling_gate": 3, "scaling": 4,
    "noise_gate": 5, "noise_std": 6, "noise": 7,
    "blur_gate": 8, "blur_channels": 9, "blur_sigma": 10,
    "brightness_gate": 11, "brightness_split": 12, "brightness": 13,
    "contrast_gate": 14, "contrast_split": 15, "contrast": 16,
    "lowres_gate": 17, "lowres_channels": 18, "lowres_scale": 19,
    "gamma_invert_gate": 20, "gamma_invert_split": 21, "gamma_invert": 22,
    "gamma_gate": 23, "gamma_split": 24, "gamma": 25,
    "mirror": 26,
}
assert len(set(NNUNET_STREAMS.values())) == len(NNUNET_STREAMS)

# nnU-Net v2's probabilities (nnUNetTrainer.get_training_transforms, batchgeneratorsv2):
# per sample (RandomTransform, SpatialTransform's p_rotation / p_scaling) and, where a
# transform picks channels, per channel. Mirror's 0.5 per axis and BGContrast's 0.5 split
# are part of their transforms and never overridden.
NNUNET_P = {
    "rotation": 0.2, "scaling": 0.2, "noise": 0.1,
    "blur": 0.2, "blur_channel": 0.5, "brightness": 0.15, "contrast": 0.15,
    "lowres": 0.25, "lowres_channel": 0.5, "gamma_invert": 0.1, "gamma": 0.3,
}
NNUNET_ROTATION = math.radians(30.0)  # angles U(-30°, 30°) about each axis
NNUNET_SCALING = (0.7, 1.4)           # one scale shared by the axes
NNUNET_MIN_SCALE = 0.85               # get_patch_size's scale_range[0] (nnUNetTrainer)


def nnunet_initial_size(patch):
    """nnU-Net's enlarged initial patch of a cube `patch`^3: get_patch_size(patch, rot, rot,
    rot, (0.85, 1.25)) -- the patch-size vector rotated about x, y and z by the largest
    angle (30°, capped at 90°) in turn, the elementwise maximum of the absolute values
    (and of the patch), divided by 0.85, truncated to int. 128 -> 205."""
    a = min(NNUNET_ROTATION, math.pi / 2)
    c, s = math.cos(a), math.sin(a)
    v = [float(patch)] * 3
    rots = [[[1, 0, 0], [0, c, -s], [0, s, c]],
            [[c, 0, s], [0, 1, 0], [-s, 0, c]],
            [[c, -s, 0], [s, c, 0], [0, 0, 1]]]
    best = list(v)
    for r in rots:
        rv = [abs(sum(r[i][k] * v[k] for k in range(3))) for i in range(3)]
        best = [max(b, x) for b, x in zip(best, rv)]
    sizes = [int(b / NNUNET_MIN_SCALE) for b in best]
    assert len(set(sizes)) == 1
    return sizes[0]


def nnunet_ds_sizes(patch, levels):
    """DownsampleSegForDSTransform's sizes: round(patch / 2^i) (Python's round, as nnU-Net
    computes them) for the deep-supervision scales 1, 1/2, ..., 1/2^(levels-1)."""
    return [round(patch * 0.5 ** i) for i in range(levels)]


def tensor_type(shape, et="f32"):
    return "tensor<%s>" % "x".join([str(d) for d in shape] + [et])


class V:
    """An SSA value and its static shape."""
    def __init__(self, name, shape, et="f32"):
        self.name, self.shape, self.et = name, tuple(shape), et

    @property
    def t(self):
        return tensor_type(self.shape, self.et)


def broadcast(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError("shapes %s and %s do not broadcast" % (a, b))
        out.append(max(x, y))
    return tuple(out)


class Builder(Writer):
    """Writes med ops on shaped values (the result types follow from the operands)."""
    def __init__(self, batch, streams, key="%key", given=False):
        super().__init__()
        self.batch, self.streams, self.key = batch, streams, key
        self.consts = {}
        self.complements = {}
        # given: each draw is an argument of the function instead (named by its stream;
        # bernoulli draws as 0/1, uniform ones in [0, 1), normal ones N(0, 1)), for tests
        # that feed the parameters to a reference.
        self.given = [] if given else None

    def val(self, text, shape, et="f32"):
        return V(self.op(text), shape, et)

    def const(self, v, shape=()):
        text = repr(float(v))
        if "e" in text and "." not in text:  # MLIR spells 1e-07 as 1.0e-07
            text = text.replace("e", ".0e")
        k = (text, tuple(shape))
        if k not in self.consts:  # one constant op per value and shape
            self.consts[k] = self.val("med.constant dense<%s> : %s" % (text, tensor_type(shape)), shape)
        return self.consts[k]

    def rand(self, stream, like, sample_shape=None, dist="uniform", p=None):
        attrs = ["stream = %d : i64" % self.streams[stream]]
        if dist != "uniform":
            attrs.append("distribution = #med<distribution %s>" % dist)
        if p is not None:
            attrs.append("probability = %r" % float(p))
        if sample_shape is not None:
            attrs.append("sample_shape = array<i64%s>" % (": " + ", ".join(map(str, sample_shape)) if sample_shape else ""))
            shape = (like.shape[0],) + tuple(sample_shape)
        else:
            shape = like.shape
        if self.given is not None:
            v = V("%" + stream, shape)
            self.given.append(v)
            return v
        return self.val("med.random %s, %s {%s} : (tensor<i64>, %s) -> %s"
                        % (self.key, like.name, ", ".join(attrs), like.t, tensor_type(shape)), shape)

    def bin(self, kind, a, b):
        if not isinstance(a, V):
            a = self.const(a)
        if not isinstance(b, V):
            b = self.const(b)
        shape = broadcast(a.shape, b.shape)
        return self.val("med.%s %s, %s : (%s, %s) -> %s" % (kind, a.name, b.name, a.t, b.t, tensor_type(shape, a.et)),
                        shape, a.et)

    def mul(self, a, b): return self.bin("mul", a, b)
    def add(self, a, b): return self.bin("add", a, b)
    def sub(self, a, b): return self.bin("sub", a, b)
    def div(self, a, b): return self.bin("div", a, b)
    def max(self, a, b): return self.bin("max", a, b)
    def min(self, a, b): return self.bin("min", a, b)
    def pow(self, a, b): return self.bin("pow", a, b)

    def unary(self, kind, a):
        return self.val("med.%s %s : %s" % (kind, a.name, a.t), a.shape, a.et)

    def uniform(self, u, lo, hi):
        """lo + (hi - lo) * u"""
        v = self.mul(u, float("%.12g" % (hi - lo)))
        return v if lo == 0 else self.add(v, lo)

    def mix(self, value, gate, neutral):
        """value where the gate is 1, `neutral` (a number or a value) where it is 0:
        value·g + neutral·(1 − g), exact for g in {0, 1} (both sides finite)."""
        v = self.mul(value, gate)
        if not isinstance(neutral, V) and neutral == 0:
            return v
        if gate.name not in self.complements:  # 1 - gate, once per gate
            self.complements[gate.name] = self.sub(1.0, gate)
        off = self.complements[gate.name]
        return self.add(v, off if not isinstance(neutral, V) and neutral == 1 else self.mul(neutral, off))

    def reduce(self, kind, x, axes):
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        return self.val("med.reduce %s %s {axes = array<i64: %s>, keepdims} : (%s) -> %s"
                        % (kind, x.name, ", ".join(map(str, axes)), x.t, tensor_type(shape)), shape)

    def reshape(self, x, shape):
        return self.val("med.reshape %s {shape = array<i64: %s>} : (%s) -> %s"
                        % (x.name, ", ".join(map(str, shape)), x.t, tensor_type(shape, x.et)), shape, x.et)

    def slice(self, x, offsets, sizes):
        return self.val("med.slice %s {offsets = array<i64: %s>, sizes = array<i64: %s>} : (%s) -> %s"
                        % (x.name, ", ".join(map(str, offsets)), ", ".join(map(str, sizes)), x.t,
                           tensor_type(sizes, x.et)), sizes, x.et)

    def concat(self, xs, axis):
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        return self.val("med.concat %s {axis = %d : i64} : (%s) -> %s"
                        % (", ".join(x.name for x in xs), axis, ", ".join(x.t for x in xs),
                           tensor_type(shape, xs[0].et)), shape, xs[0].et)

    def bg_contrast(self, like, sample_shape, split_stream, stream, lo, hi):
        """batchgeneratorsv2's BGContrast((lo, hi)) split range: with probability 0.5 (and
        lo < 1) U(lo, 1), else U(max(lo, 1), hi): split·U(lo, 1) + (1 − split)·U(1, hi),
        both from one uniform number, the split a bernoulli draw of its own stream."""
        u = self.rand(stream, like, sample_shape)
        upper = self.uniform(u, max(lo, 1.0), hi)
        if lo >= 1.0:
            return upper
        split = self.rand(split_stream, like, sample_shape, "bernoulli", 0.5)
        return self.mix(self.uniform(u, lo, 1.0), split, upper)


def nnunet_spatial_ops(w, image, seg, angles, scale, crop, patch, classes):
    """SpatialTransform's resampling of image (trilinear, zeros outside) and seg (one-hot
    linear and argmax, -1 outside) with batchgeneratorsv2's A = Rz(a2)·Ry(a1)·Rx(a0)·s
    (a0 about the first spatial axis, D) from given angles [B,3], scales [B,1] and crop
    flags [B,1,1] (1 for a sample neither rotated nor scaled: nnU-Net's integer centre
    crop, the sampling positions moved by -1/2 where the margin is odd).

    med.affine_matrix gives R_D(b0)·R_H(b1)·R_W(b2)·diag(k) = Rx(b0)·Ry(b1)·Rz(b2)·diag(k),
    so with b = -a and k = (s, s, s) its transpose is s·Rz(a2)·Ry(a1)·Rx(a0) = A (the
    rotations are orthogonal, the scale is shared by the axes)."""
    B, size = image.shape[0], image.shape[2]
    neg = w.unary("neg", angles)
    k = w.mul(scale, w.const(1.0, (3,)))
    m = w.val("med.affine_matrix %s, %s : (%s, %s) -> %s" % (neg.name, k.name, neg.t, k.t, tensor_type((B, 3, 4))),
              (B, 3, 4))
    rows = [w.reshape(w.slice(m, (0, 0, j), (B, 3, 1)), (B, 1, 3)) for j in range(3)]
    t = w.slice(m, (0, 0, 3), (B, 3, 1))  # zeros
    if (size - patch) % 2:
        t = w.add(t, w.mul(crop, -0.5))
    a = w.concat([w.concat(rows, 1), t], 2)
    shape = "array<i64: %d, %d, %d>" % (patch, patch, patch)
    out = (B, image.shape[1], patch, patch, patch)
    x = w.val("med.spatial_transform linear %s, %s {shape = %s} : (%s, %s) -> %s"
              % (image.name, a.name, shape, image.t, a.t, tensor_type(out)), out)
    labels = ", ".join(str(l) for l in range(-1, classes))
    out = (B, 1, patch, patch, patch)
    y = w.val("med.spatial_transform linear_argmax %s, %s {shape = %s, labels = array<i64: %s>, value = -1.0} : (%s, %s) -> %s"
              % (seg.name, a.name, shape, labels, seg.t, a.t, tensor_type(out, seg.et)), out, seg.et)
    return x, y


def nnunet_gamma(w, x, invert, gate, gamma):
    """batchgeneratorsv2's GammaTransform on each channel, retaining the statistics:
    (invert: x = -x); mean μ and unbiased std σ; with r = max - min,
    x = ((x - min)/max(r, 1e-7))^γ · r + min; x = (x - mean(x))·σ/max(std(x), 1e-7) + μ;
    (invert: x = -x). Where the gate is 0 the input passes unchanged."""
    axes = (2, 3, 4)
    n = x.shape[2] * x.shape[3] * x.shape[4]

    def mean_std(v):
        mu = w.reduce("mean", v, axes)
        d = w.sub(v, mu)
        var = w.div(w.reduce("sum", w.mul(d, d), axes), float(n - 1))
        return mu, w.unary("sqrt", var), d

    y = w.unary("neg", x) if invert else x
    mu, sd, _ = mean_std(y)
    lo = w.reduce("min", y, axes)
    r = w.sub(w.reduce("max", y, axes), lo)
    z = w.div(w.sub(y, lo), w.max(r, 1e-7))
    z = w.add(w.mul(w.pow(z, gamma), r), lo)
    _, sd2, d2 = mean_std(z)
    z = w.add(w.mul(d2, w.div(sd, w.max(sd2, 1e-7))), mu)
    if invert:
        z = w.unary("neg", z)
    return w.mix(z, gate, x)


def nnunet(batch, channels, classes, patch, levels, p_override=None, given=False):
    size = nnunet_initial_size(patch)
    P = dict(NNUNET_P)
    if p_override is not None:
        P = {k: p_override for k in P}
    w = Builder(batch, NNUNET_STREAMS, given=given)
    image = V("%image", (batch, channels, size, size, size))
    seg = V("%seg", (batch, 1, size, size, size), "i32")
    C = channels

    w.comment("1. SpatialTransform: rotation p %g (three angles U(-30°, 30°)), scaling p %g (one"
              % (P["rotation"], P["scaling"]))
    w.comment("   scale U(%g, %g) for all axes); A = Rz·Ry·Rx·diag(s) about the centre; image trilinear,"
              % NNUNET_SCALING)
    w.comment("   zeros outside; seg one-hot linear + argmax, -1 outside. Neither: the integer centre crop.")
    g_rot = w.rand("rotation_gate", image, [1], "bernoulli", P["rotation"])
    ang = w.mul(w.uniform(w.rand("rotation_angles", image, [3]), -NNUNET_ROTATION, NNUNET_ROTATION), g_rot)
    g_scale = w.rand("scaling_gate", image, [1], "bernoulli", P["scaling"])
    s = w.mix(w.uniform(w.rand("scaling", image, [1]), *NNUNET_SCALING), g_scale, 1.0)
    crop = w.reshape(w.mul(w.sub(1.0, g_rot), w.sub(1.0, g_scale)), (batch, 1, 1))  # neither
    x, y = nnunet_spatial_ops(w, image, seg, ang, s, crop, patch, classes)
    vshape = (batch, 1, 1, 1, 1)
    cshape = [C, 1, 1, 1]

    w.comment("2. GaussianNoise: p %g, one std U(0, 0.1) per sample (nnU-Net's 'variance' is the std)." % P["noise"])
    g = w.rand("noise_gate", x, [1, 1, 1, 1], "bernoulli", P["noise"])
    sd = w.mul(w.uniform(w.rand("noise_std", x, [1, 1, 1, 1]), 0.0, 0.1), g)
    x = w.add(x, w.mul(w.rand("noise", x, None, "normal"), sd))

    w.comment("3. GaussianBlur: p %g; each channel with p %g, sigma U(0.5, 1) per axis (0 elsewhere)."
              % (P["blur"], P["blur_channel"]))
    g = w.rand("blur_gate", x, [1, 1], "bernoulli", P["blur"])
    gc = w.mul(w.rand("blur_channels", x, [C, 1], "bernoulli", P["blur_channel"]), g)
    sig = w.mul(w.uniform(w.rand("blur_sigma", x, [C, 3]), 0.5, 1.0), gc)
    x = w.val("med.gaussian_blur %s, %s : (%s, %s) -> %s" % (x.name, sig.name, x.t, sig.t, x.t), x.shape)

    w.comment("4. MultiplicativeBrightness: p %g, x * BGContrast((0.75, 1.25)) per channel." % P["brightness"])
    g = w.rand("brightness_gate", x, [1, 1, 1, 1], "bernoulli", P["brightness"])
    m = w.bg_contrast(x, cshape, "brightness_split", "brightness", 0.75, 1.25)
    x = w.mul(x, w.mix(m, g, 1.0))

    w.comment("5. Contrast: p %g, BGContrast((0.75, 1.25)) per channel, range preserved:" % P["contrast"])
    w.comment("   clamp((x - mean)·m + mean, min, max) with the channel's statistics before it.")
    g = w.rand("contrast_gate", x, [1, 1, 1, 1], "bernoulli", P["contrast"])
    m = w.mix(w.bg_contrast(x, cshape, "contrast_split", "contrast", 0.75, 1.25), g, 1.0)
    mu = w.reduce("mean", x, (2, 3, 4))
    lo, hi = w.reduce("min", x, (2, 3, 4)), w.reduce("max", x, (2, 3, 4))
    z = w.add(w.mul(w.sub(x, mu), m), mu)
    x = w.mix(w.min(w.max(z, lo), hi), g, x)

    w.comment("6. SimulateLowResolution: p %g; each channel with p %g, one scale U(0.5, 1) for all axes"
              % (P["lowres"], P["lowres_channel"]))
    w.comment("   (nearest-exact down, trilinear up; 1 elsewhere).")
    g = w.rand("lowres_gate", x, [1, 1], "bernoulli", P["lowres"])
    gc = w.mul(w.rand("lowres_channels", x, [C, 1], "bernoulli", P["lowres_channel"]), g)
    sc = w.mix(w.uniform(w.rand("lowres_scale", x, [C, 1]), 0.5, 1.0), gc, 1.0)
    sc = w.mul(sc, w.const(1.0, (3,)))
    x = w.val("med.simulate_low_resolution %s, %s : (%s, %s) -> %s" % (x.name, sc.name, x.t, sc.t, x.t), x.shape)

    w.comment("7. Gamma, inverted: p %g, gamma BGContrast((0.7, 1.5)) per channel, statistics retained."
              % P["gamma_invert"])
    g = w.rand("gamma_invert_gate", x, [1, 1, 1, 1], "bernoulli", P["gamma_invert"])
    gam = w.mix(w.bg_contrast(x, cshape, "gamma_invert_split", "gamma_invert", 0.7, 1.5), g, 1.0)
    x = nnunet_gamma(w, x, True, g, gam)

    w.comment("8. Gamma: p %g, the same without inversion." % P["gamma"])
    g = w.rand("gamma_gate", x, [1, 1, 1, 1], "bernoulli", P["gamma"])
    gam = w.mix(w.bg_contrast(x, cshape, "gamma_split", "gamma", 0.7, 1.5), g, 1.0)
    x = nnunet_gamma(w, x, False, g, gam)

    w.comment("9. Mirror: each axis flipped with p 0.5, image and seg together.")
    f = w.rand("mirror", x, [3], "bernoulli", 0.5)
    x = w.val("med.mirror %s, %s : (%s, %s) -> %s" % (x.name, f.name, x.t, f.t, x.t), x.shape)
    y = w.val("med.mirror %s, %s : (%s, %s) -> %s" % (y.name, f.name, y.t, f.t, y.t), y.shape, y.et)

    w.comment("10. RemoveLabel: -1 (outside the volume) -> 0.")
    y = w.val("med.remove_label %s {label = -1 : i64, replace_with = 0 : i64} : (%s) -> %s" % (y.name, y.t, y.t),
              y.shape, y.et)

    w.comment("    As f32 class indices, the loss's targets: the sum of the channels [label >= k],")
    w.comment("    k = 1 .. %d (med.label_regions; exact)." % (classes - 1))
    regions = ", ".join("array<i64: %s>" % ", ".join(str(l) for l in range(k, classes)) for k in range(1, classes))
    r = w.val("med.label_regions %s {regions = [%s]} : (%s) -> %s"
              % (y.name, regions, y.t, tensor_type((batch, classes - 1, patch, patch, patch))),
              (batch, classes - 1, patch, patch, patch))
    y = w.reduce("sum", r, (1,))

    sizes = nnunet_ds_sizes(patch, levels)
    w.comment("11. Deep-supervision targets: scale 1 as it is, then nearest-exact to %s." % ", ".join(map(str, sizes[1:])))
    targets = [y]
    for n in sizes[1:]:
        shape = (batch, 1, n, n, n)
        targets.append(w.val("med.downsample_nearest %s {size = array<i64: %d, %d, %d>} : (%s) -> %s"
                             % (y.name, n, n, n, y.t, tensor_type(shape)), shape))
    names = ["target"] if levels == 1 else ["target.%d" % i for i in range(levels)]
    outs = [x] + targets
    args = ["%%image: %s" % image.t, "%%seg: %s" % seg.t]
    arg_names = ["image", "seg"]
    if given:
        args += ["%s: %s" % (v.name, v.t) for v in w.given]
        arg_names += [v.name[1:] for v in w.given]
    else:
        args.append("%key: tensor<i64>")
        arg_names.append("rng")
    head = [
        "// Generated by scripts/gen_augment.py (nnunet, batch %d, channels %d, classes %d, patch %d, levels %d%s%s): do not edit."
        % (batch, channels, classes, patch, levels, "" if p_override is None else ", probability %g" % p_override,
           ", given parameters" if given else ""),
        "// nnU-Net v2's default 3D training augmentation of a batch of %d^3 initial patches (image, class" % size,
        "// labels -1 .. %d as i32, -1 outside the volume) to %d^3, and the deep-supervision targets of" % (classes - 1, patch),
        "// med.dice_ce (target.<i> at 1/2^i, f32 class indices); docs/augment.md, the script's docstring.",
        "func.func @augment(%s) -> (%s) attributes {med.input_names = [%s], med.output_names = [%s]} {"
        % (", ".join(args), ", ".join(o.t for o in outs), ", ".join('"%s"' % n for n in arg_names),
           ", ".join('"%s"' % n for n in ["image"] + names)),
    ]
    tail = ["  return %s : %s" % (", ".join(o.name for o in outs), ", ".join(o.t for o in outs)), "}", ""]
    return "\n".join(head + w.lines + tail)


def nnunet_spatial(batch, channels, classes, patch):
    """The spatial transform alone, with given parameters: @spatial(image, seg, angles
    [B,3] (radians), scale [B,1], crop [B,1,1]) -> (image, seg), for the convention test."""
    size = nnunet_initial_size(patch)
    w = Builder(batch, NNUNET_STREAMS)
    image = V("%image", (batch, channels, size, size, size))
    seg = V("%seg", (batch, 1, size, size, size), "i32")
    angles, scale, crop = V("%angles", (batch, 3)), V("%scale", (batch, 1)), V("%crop", (batch, 1, 1))
    x, y = nnunet_spatial_ops(w, image, seg, angles, scale, crop, patch, classes)
    head = [
        "// Generated by scripts/gen_augment.py (nnunet_spatial, batch %d, channels %d, classes %d, patch %d)."
        % (batch, channels, classes, patch),
        "// nnU-Net's SpatialTransform with given angles, scales and crop flags (%d^3 -> %d^3)." % (size, patch),
        "func.func @spatial(%%image: %s, %%seg: %s, %%angles: %s, %%scale: %s, %%crop: %s) -> (%s, %s)"
        " attributes {med.input_names = [\"image\", \"seg\", \"angles\", \"scale\", \"crop\"], med.output_names = [\"image\", \"seg\"]} {"
        % (image.t, seg.t, angles.t, scale.t, crop.t, x.t, y.t),
    ]
    tail = ["  return %s, %s : %s, %s" % (x.name, y.name, x.t, y.t), "}", ""]
    return "\n".join(head + w.lines + tail)


def bg_contrast_draws(count, lo, hi):
    """@bg_contrast(key) -> `count` draws of BGContrast((lo, hi)) as the pipelines make them
    (the statistical test of the split range)."""
    w = Builder(count, NNUNET_STREAMS)
    like = w.const(0.0, (count,))
    v = w.bg_contrast(like, [], "gamma_split", "gamma", lo, hi)
    head = ["// Generated by scripts/gen_augment.py (bg_contrast, count %d, range %r .. %r)." % (count, lo, hi),
            "func.func @bg_contrast(%%key: tensor<i64>) -> %s attributes {med.input_names = [\"rng\"], med.output_names = [\"draws\"]} {" % v.t]
    tail = ["  return %s : %s" % (v.name, v.t), "}", ""]
    return "\n".join(head + w.lines + tail)


def generate(kind, params):
    if kind == "banis":
        return banis(params["batch"], params["patch"], params["context"])
    if kind == "nnunet":
        return nnunet(params["batch"], params["channels"], params["classes"], params["patch"],
                      params["levels"], params.get("probability"), params.get("given", False))
    if kind == "nnunet_spatial":
        return nnunet_spatial(params["batch"], params["channels"], params["classes"], params["patch"])
    if kind == "bg_contrast":
        return bg_contrast_draws(params["count"], *params["range"])
    raise SystemExit("gen_augment.py: unknown pipeline '%s' (expected %s)" % (kind, ", ".join(PIPELINES)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pipeline", nargs="?", choices=PIPELINES)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--context", type=int, default=10, help="banis: the affinities' long range")
    ap.add_argument("--channels", type=int, default=1, help="nnunet: image channels")
    ap.add_argument("--classes", type=int, default=3, help="nnunet: classes (labels 0 .. classes-1, -1 outside)")
    ap.add_argument("--levels", type=int, default=5, help="nnunet: deep-supervision outputs (1/2^i)")
    ap.add_argument("--probability", type=float,
                    help="nnunet, for tests: this probability for every transform and channel choice")
    ap.add_argument("--given", action="store_true",
                    help="nnunet, for tests: every random draw an argument (named by its stream)")
    ap.add_argument("--count", type=int, default=65536, help="bg_contrast: draws")
    ap.add_argument("--range", type=float, nargs=2, default=(0.7, 1.5), help="bg_contrast: lo hi")
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
        ap.error("give a pipeline (%s) or --check-models DIR" % ", ".join(PIPELINES))
    if a.pipeline == "banis" and (a.batch < 1 or a.patch < 1 or a.context < 1 or a.context >= a.patch):
        ap.error("expected --batch >= 1 and 1 <= --context < --patch")
    if a.pipeline.startswith("nnunet"):
        if a.batch < 1 or a.patch < 2 or a.channels < 1 or a.classes < 2 or a.levels < 1:
            ap.error("expected --batch, --channels, --levels >= 1, --classes >= 2 and --patch >= 2")
        if min(nnunet_ds_sizes(a.patch, a.levels)) < 1:
            ap.error("--patch %d has no %d deep-supervision levels" % (a.patch, a.levels))
        if a.probability is not None and not 0 <= a.probability <= 1:
            ap.error("--probability: expected a value in [0, 1]")
    if a.pipeline == "bg_contrast" and (a.count < 1 or not 0 < a.range[0] < a.range[1]):
        ap.error("expected --count >= 1 and 0 < lo < hi")
    params = {"batch": a.batch, "patch": a.patch, "context": a.context, "channels": a.channels,
              "classes": a.classes, "levels": a.levels, "count": a.count, "range": tuple(a.range)}
    if a.probability is not None:
        params["probability"] = a.probability
    if a.given:
        params["given"] = True
    text = generate(a.pipeline, params)
    if a.output:
        open(a.output, "w").write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
