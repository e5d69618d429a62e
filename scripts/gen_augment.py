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

With --offsets (a recipe's loss.affinities.offsets; the affinity at v pairs v with
v + offset, PyTorch Connectomics' sign: [-1, 0, 0] is the voxel before along D) the targets
are one channel per offset, and the crops reach past the patch by each axis's longest
offset: after it for positive offsets, before it for negative ones (the patch is then the
box from that reach back). `affinities` is the label path alone, with no augmentation: the
image cropped to that box and the affinities of the ids (medc links it for a recipe that
gives offsets and no augmentation).

`nnunet`: nnU-Net v2's default 3D training augmentation (nnUNetTrainer with
batchgeneratorsv2; /work/shared/reference/augment.md section 1, not its masking, cascade
or region variants) on a batch of C-channel initial patches of S = get_patch_size(patch)
-- the patch-size vector rotated by 30° about each axis (batchgenerators'
rotate_coords_3d), the elementwise maximum of |.|, / 0.85, truncated (128^3 -> 205^3;
a patch is D,H,W or one size for a cube) -- with i32 class labels (-1 outside the
volume; the loader's `classes`), to the patch and the deep-supervision targets, in this
order:

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

Dummy-2D (nnU-Net's rule for an anisotropic patch: max(patch) / patch[0] > 3, or
--dummy-2d on/off): step 1 is batchgeneratorsv2's 2D SpatialTransform of every D-slice
(one in-plane angle U(-180°, 180°) about D, the scale in-plane only, D not resampled; the
initial patch's D is the patch's, its H and W get_patch_size's for 180° capped at 90°),
and step 6 leaves D alone (ignore_axes = (0,)); the rest is as above.

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

Tunable parameters. Each probability and range a user may change has a stable name
(BANIS_PARAMS, NNUNET_PARAMS below; docs/augment.md has the table) and is marked in the
file: `med.param = "NAME"` on the bernoulli `med.random` of a probability, and on each
`med.constant` that holds a part of a number or range, with `med.param_part` saying which:
`value` (the number), `width` and `lo` (a range [lo, hi] drawn as u·(hi − lo) + lo from a
uniform u), or `low.width`, `low.lo`, `high.width`, `high.lo` (BGContrast's split range: the
two uniform ranges it mixes). A tunable constant is an op of its own, never shared. `--set
NAME=VALUE` writes the file with other values; medc sets the same ops from a recipe's
`augment.overrides` (tools/medc/AugmentOverrides.cpp), and both give the same module.

  gen_augment.py banis [--batch 2] [--patch 128] [--context 10 | --offsets=D,H,W;...] [--set NAME=V]... [-o FILE]
  gen_augment.py affinities [--batch 2] [--patch 128] --offsets=D,H,W;... [-o FILE]
  gen_augment.py nnunet [--batch 2] [--channels 1] [--classes 3] [--patch 128|D,H,W] [--levels 5]
                 [--dummy-2d auto|on|off] [--probability P] [--given] [--set NAME=V]... [-o FILE]
  gen_augment.py nnunet --patch D,H,W --print-rule   # dummy-2D or 3D, the initial and DS sizes
                 # for tests: P for every transform and channel choice; the draws as arguments
  gen_augment.py --list-params banis|nnunet   # the names, kinds and default values
  gen_augment.py nnunet_spatial ... [--dummy-2d on]   # step 1 alone with given angles, scales, crop flags
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

# The tunable parameters of the BANIS pipeline: name -> (kind, default). Kinds: "p" (a
# probability in [0, 1]), "value" (a number >= 0), "range" ([lo, hi], lo <= hi: U(lo, hi)),
# "split" (BGContrast's split range [lo, hi], lo <= hi). The names are part of the recipe
# format (augment.overrides): keep them.
BANIS_PARAMS = {
    "drop.p": ("p", 0.5), "drop.slice_p": ("p", 0.05),
    "shift.p": ("p", 0.5), "shift.slice_p": ("p", 0.05),
    "intensity.p": ("p", 0.5), "intensity.scale": ("range", (0.9, 1.1)),
    "intensity.shift": ("range", (-0.1, 0.1)),
    "noise.p": ("p", 0.5), "noise.std": ("value", 0.5),
    "affine.p": ("p", 0.5), "affine.rotation": ("range", (-math.pi, math.pi)),
    "affine.scale": ("range", (0.8, 1.2)), "affine.shear": ("range", (-0.5, 0.5)),
}

CHECKED_IN = [
    ("augment_banis.mlir", "banis", {"batch": 2, "patch": 128, "context": 10}),
    # configs/nnunet_mednext_l.yaml at its own size (batch 2, 128^3, MedNeXt-L with one input
    # channel, three classes and five deep-supervision outputs); the recipe generates the
    # same through medc (augment.pipeline: nnunet) for whatever patch and batch it compiles.
    ("augment_nnunet.mlir", "nnunet", {"batch": 2, "channels": 1, "classes": 3, "patch": 128, "levels": 5}),
]
PIPELINES = ("banis", "affinities", "nnunet", "nnunet_spatial", "bg_contrast")


def mlir_float(v):
    """A float literal MLIR parses (it wants a '.': 1e-07 is 1.0e-07), exact for a double."""
    text = repr(float(v))
    if "e" in text and "." not in text:
        text = text.replace("e", ".0e")
    if text in ("inf", "-inf", "nan"):
        raise ValueError("not a finite number: %s" % text)
    return text


def check_param(name, kind, value):
    """The value of a tunable parameter checked as medc checks a recipe's override (the
    same rules); returns it as a float or a (lo, hi) pair, or raises ValueError."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value]
    vals = [float(v) for v in vals]
    if any(math.isnan(v) or math.isinf(v) for v in vals):
        raise ValueError("%s: expected finite numbers" % name)
    if kind in ("p", "value"):
        if len(vals) != 1:
            raise ValueError("%s: expected %s, got a list" % (name, "a probability in [0, 1]" if kind == "p" else "a number >= 0"))
        if kind == "p" and not 0 <= vals[0] <= 1:
            raise ValueError("%s: expected a probability in [0, 1], got %r" % (name, vals[0]))
        if kind == "value" and vals[0] < 0:
            raise ValueError("%s: expected a number >= 0, got %r" % (name, vals[0]))
        return vals[0]
    if len(vals) != 2:
        raise ValueError("%s: expected a range [lo, hi]" % name)
    if vals[0] > vals[1]:
        raise ValueError("%s: expected a range [lo, hi] with lo <= hi, got [%r, %r]" % (name, vals[0], vals[1]))
    return tuple(vals)


def resolve_params(table, sets):
    """The defaults of `table` with `sets` ({name: value}) applied and checked."""
    out = {name: default for name, (kind, default) in table.items()}
    for name, value in sets.items():
        if name not in table:
            raise ValueError("unknown parameter '%s' (this pipeline has: %s)" % (name, ", ".join(table)))
        out[name] = check_param(name, table[name][0], value)
    return out


def param_attrs(name, part=None):
    return 'med.param = "%s"' % name + ("" if part is None else ', med.param_part = "%s"' % part)


def split_parts(lo, hi):
    """BGContrast((lo, hi))'s two uniform ranges: with lo < 1, U(lo, 1) and U(1, hi); else
    U(lo, hi) both (no split). medc computes the same (AugmentOverrides.cpp)."""
    if lo < 1.0:
        return (lo, 1.0), (1.0, hi)
    return (lo, hi), (lo, hi)


def set_suffix(sets):
    """The header's note of --set values."""
    if not sets:
        return ""
    return ", set " + " ".join("%s=%s" % (k, ",".join(map(repr, v)) if isinstance(v, tuple) else repr(v))
                               for k, v in sets.items())


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
    return "tensor<%dx%dx%dx%dx%dxf32>" % ((b, c) + as_patch(s))


def banis_offsets(context):
    """BANIS's six affinities (data.py::comp_affinities): 1 and `context` voxels along D, H, W."""
    return [(1, 0, 0), (0, 1, 0), (0, 0, 1), (context, 0, 0), (0, context, 0), (0, 0, context)]


def offsets_arg(text):
    """--offsets: 'd,h,w;d,h,w;...' (a recipe's loss.affinities.offsets, as medc passes it)."""
    try:
        offsets = [tuple(int(v) for v in part.split(",")) for part in text.split(";") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected offsets d,h,w;d,h,w;..., got '%s'" % text)
    if not offsets or any(len(o) != 3 for o in offsets):
        raise argparse.ArgumentTypeError("expected offsets of three entries d,h,w each, got '%s'" % text)
    return offsets


def check_offsets(offsets, patch):
    """An error message for offsets that give no affinity in the patch (medc checks the same
    for loss.affinities.offsets), or None."""
    for k, o in enumerate(offsets):
        if len(o) != 3:
            return "offset %d %s: expected three entries (D, H, W)" % (k, list(o))
        if not any(o):
            return "offset %d is [0, 0, 0]: each affinity needs a non-zero offset" % k
        for a in range(3):
            if abs(o[a]) >= patch[a]:
                return ("offset %d %s reaches %d voxels along %s, not less than the patch's %d"
                        % (k, list(o), o[a], "DHW"[a], patch[a]))
    return None


def affinity_halo(offsets):
    """The voxels before and after the patch that its affinities read, per axis: the
    affinity at v pairs v with v + offset, so negative offsets reach back, positive ones on."""
    low = tuple(max([0] + [-o[a] for o in offsets]) for a in range(3))
    high = tuple(max([0] + [o[a] for o in offsets]) for a in range(3))
    return low, high


def affinity_ops(w, y, seg, batch, patch, offsets, low):
    """med.affinities of the ids `y` (input size `seg`) for the patch at `low`: (aff, mask)."""
    out_t = vol(batch, len(offsets), patch)
    w.n += 1
    aff, mask = "%%v%da" % w.n, "%%v%dm" % w.n
    crop_low = "crop_low = array<i64: %d, %d, %d>, " % low if any(low) else ""
    w.lines.append("  %s, %s = med.affinities %s {offsets = array<i64: %s>, %scrop_size = array<i64: %d, %d, %d>} : (%s) -> (%s, %s)"
                   % ((aff, mask, y, ", ".join(str(v) for o in offsets for v in o), crop_low) + patch
                      + (seg, out_t, out_t)))
    return aff, mask, out_t


def affinities_only(batch, patch, offsets):
    """The label path alone (no augmentation): the image cropped to the patch and the
    affinities of the ids for `offsets` -- a recipe's loss.affinities.offsets without an
    augmentation pipeline."""
    patch = as_patch(patch)
    low, high = affinity_halo(offsets)
    s = tuple(p + l + h for p, l, h in zip(patch, low, high))
    img, seg = vol(batch, 1, s), "tensor<%dx1x%dx%dx%dxi32>" % ((batch,) + s)
    out_img = vol(batch, 1, patch)
    w = Writer()
    w.comment("The %d affinities of the ids and the image, for the %s voxels from %s."
              % (len(offsets), cube_text(patch), list(low)))
    aff, mask, out_t = affinity_ops(w, "%seg", seg, batch, patch, offsets, low)
    x = w.op("med.slice %%image {offsets = array<i64: 0, 0, %d, %d, %d>, sizes = array<i64: %d, 1, %d, %d, %d>} : (%s) -> %s"
             % (low + (batch,) + patch + (img, out_img)))
    head = [
        "// Generated by scripts/gen_augment.py (affinities, batch %d, patch %s, offsets %s): do not edit."
        % (batch, patch_text(patch), offsets_text(offsets)),
        "// No augmentation: the affinity targets of %s crops' ids and the image (docs/augment.md)." % cube_text(s),
        "func.func @augment(%%image: %s, %%seg: %s, %%key: tensor<i64>) -> (%s, %s, %s)"
        " attributes {med.input_names = [\"image\", \"seg\", \"rng\"], med.output_names = [\"image\", \"target\", \"mask\"]} {"
        % (img, seg, out_img, out_t, out_t),
    ]
    tail = ["  return %s, %s, %s : %s, %s, %s" % (x, aff, mask, out_img, out_t, out_t), "}", ""]
    return "\n".join(head + w.lines + tail)


def offsets_text(offsets):
    return ";".join(",".join(map(str, o)) for o in offsets)


def banis(batch, patch, context, sets=None, offsets=None):
    """BANIS's pipeline; `offsets` (default: banis_offsets(context)) are the affinities'."""
    P = resolve_params(BANIS_PARAMS, sets or {})
    patch = as_patch(patch)
    if offsets is not None and len(offsets) == 6 and [tuple(o) for o in offsets] == banis_offsets(offsets[3][0]):
        context, offsets = offsets[3][0], None  # BANIS's six, written as --context writes them
    default = offsets is None
    offsets = banis_offsets(context) if offsets is None else [tuple(o) for o in offsets]
    low, high = affinity_halo(offsets)
    s = tuple(p + l + h for p, l, h in zip(patch, low, high))
    img, seg = vol(batch, 1, s), "tensor<%dx1x%dx%dx%dxi32>" % ((batch,) + s)
    out_img = vol(batch, 1, patch)
    mat_t = "tensor<%dx3x4xf32>" % batch
    w = Writer()
    f32 = "tensor<f32>"

    def const(v, name=None, part=None):
        """A constant; one of a tunable parameter (`name`) is marked with it and its part."""
        attrs = "" if name is None else " {%s}" % param_attrs(name, part)
        return w.op("med.constant dense<%s> : %s%s" % (mlir_float(v), f32, attrs))

    def rand(stream, shape, dist="uniform", p=None, like="%image", like_t=img):
        """A draw; a bernoulli draw's `p` is the name of its probability parameter."""
        attrs = ["stream = %d : i64" % STREAMS[stream]]
        if dist != "uniform":
            attrs.append("distribution = #med<distribution %s>" % dist)
        if p is not None:
            attrs.append("probability = %s" % mlir_float(P[p]))
            attrs.append(param_attrs(p))
        if shape is not None:
            attrs.append("sample_shape = array<i64%s>" % (": " + ", ".join(map(str, shape)) if shape else ""))
        rt = "tensor<%s>" % "x".join(map(str, [batch] + shape + ["f32"])) if shape is not None else like_t
        return w.op("med.random %%key, %s {%s} : (tensor<i64>, %s) -> %s"
                    % (like, ", ".join(attrs), like_t, rt)), rt

    def binary(kind, a, at, b, bt, rt):
        return w.op("med.%s %s, %s : (%s, %s) -> %s" % (kind, a, b, at, bt, rt))

    def affine(u, ut, lo, hi, name=None):
        """lo + (hi - lo) * u (the range `name`'s values where given)"""
        if name is not None:
            lo, hi = P[name]
        t = binary("mul", u, ut, const(hi - lo, name, "width"), f32, ut)
        return binary("add", t, ut, const(lo, name, "lo"), f32, ut)

    def fmt(v):
        return "%g" % v

    def rng(name):
        return "U(%s, %s)" % tuple(fmt(v) for v in P[name])

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
    shape = "array<i64: %d, %d, %d>" % s
    x = w.op("med.spatial_transform nearest %%image, %s {shape = %s} : (%s, %s) -> %s"
             % (o, shape, img, mat_t, img))
    y = w.op("med.spatial_transform nearest %%seg, %s {shape = %s} : (%s, %s) -> %s"
             % (o, shape, seg, mat_t, seg))

    w.comment("2. Slice drop: p %s per sample, then each D-slice with p %s set to 0."
              % (fmt(P["drop.p"]), fmt(P["drop.slice_p"])))
    g, gt = rand("drop_gate", [1, 1, 1, 1], "bernoulli", "drop.p")
    d, dt = rand("drop_slices", [1, s[0], 1, 1], "bernoulli", "drop.slice_p")
    gd = binary("mul", d, dt, g, gt, dt)
    keep = binary("sub", const(1), f32, gd, dt, dt)
    x = binary("mul", x, img, keep, dt, img)

    w.comment("3. Slice shift: p %s per sample, then each D-slice with p %s rolled by"
              % (fmt(P["shift.p"]), fmt(P["shift.slice_p"])))
    w.comment("   -10 .. 10 voxels along H and W (a uniform number in [-10, 11), floored).")
    g, gt = rand("shift_gate", [1, 1], "bernoulli", "shift.p")
    d, dt = rand("shift_slices", [s[0], 1], "bernoulli", "shift.slice_p")
    a, at = rand("shift_amount", [s[0], 2])
    a = affine(a, at, -10.0, 11.0)
    a = binary("mul", a, at, d, dt, at)
    a = binary("mul", a, at, g, gt, at)
    x = w.op("med.shift_slices %s, %s : (%s, %s) -> %s" % (x, a, img, at, img))

    w.comment("4. Intensity: p %s, x * %s + %s."
              % (fmt(P["intensity.p"]), rng("intensity.scale"), rng("intensity.shift")))
    g, gt = rand("intensity_gate", [1, 1, 1, 1], "bernoulli", "intensity.p")
    m, mt = rand("intensity_scale", [1, 1, 1, 1])
    m = gated(affine(m, mt, 0, 0, "intensity.scale"), mt, g, gt, 1.0)
    b, bt = rand("intensity_shift", [1, 1, 1, 1])
    b = gated(affine(b, bt, 0, 0, "intensity.shift"), bt, g, gt, 0.0)
    x = binary("mul", x, img, m, mt, img)
    x = binary("add", x, img, b, bt, img)

    w.comment("5. Gaussian noise: p %s, standard deviation U(0, 1) * %s."
              % (fmt(P["noise.p"]), fmt(P["noise.std"])))
    g, gt = rand("noise_gate", [1, 1, 1, 1], "bernoulli", "noise.p")
    sd, sdt = rand("noise_std", [1, 1, 1, 1])
    sd = binary("mul", sd, sdt, const(P["noise.std"], "noise.std", "value"), f32, sdt)
    sd = binary("mul", sd, sdt, g, gt, sdt)
    z, zt = rand("noise", None, "normal")
    z = binary("mul", z, img, sd, sdt, img)
    x = binary("add", x, img, z, img, img)

    if P["affine.rotation"] == (-math.pi, math.pi) and P["affine.scale"] == (0.8, 1.2):
        w.comment("6. MONAI RandAffine: p %s, rotations U(-pi, pi), scales 1 + U(-0.2, 0.2),"
                  % fmt(P["affine.p"]))
    else:
        w.comment("6. MONAI RandAffine: p %s, rotations %s, scales %s,"
                  % (fmt(P["affine.p"]), rng("affine.rotation"), rng("affine.scale")))
    w.comment("   shears %s; bilinear image, nearest labels, reflection padding." % rng("affine.shear"))
    g, gt = rand("affine_gate", [1], "bernoulli", "affine.p")
    r, rt = rand("affine_angles", [3])
    r = gated(affine(r, rt, 0, 0, "affine.rotation"), rt, g, gt, 0.0)
    k, kt = rand("affine_scales", [3])
    k = gated(affine(k, kt, 0, 0, "affine.scale"), kt, g, gt, 1.0)
    h, ht = rand("affine_shear", [6])
    h = gated(affine(h, ht, 0, 0, "affine.shear"), ht, g, gt, 0.0)
    mat = w.op("med.affine_matrix %s, %s shear %s : (%s, %s, %s) -> %s"
               % (r, k, h, rt, kt, ht, mat_t))
    x = w.op("med.spatial_transform linear %s, %s border reflection {shape = %s} : (%s, %s) -> %s"
             % (x, mat, shape, img, mat_t, img))
    y = w.op("med.spatial_transform nearest %s, %s border reflection {shape = %s} : (%s, %s) -> %s"
             % (y, mat, shape, seg, mat_t, seg))

    if default:
        w.comment("7. The six affinities of the augmented ids and the image, for the first %s voxels." % cube_text(patch))
    else:
        w.comment("7. The %d affinities of the augmented ids and the image, for the %s voxels from %s."
                  % (len(offsets), cube_text(patch), list(low)))
    aff, mask, out_t = affinity_ops(w, y, seg, batch, patch, offsets, low)
    x = w.op("med.slice %s {offsets = array<i64: 0, 0, %d, %d, %d>, sizes = array<i64: %d, 1, %d, %d, %d>} : (%s) -> %s"
             % ((x,) + low + (batch,) + patch + (img, out_img)))
    what = ("context %d" % context if default else "offsets %s" % offsets_text(offsets))
    head = [
        "// Generated by scripts/gen_augment.py (banis, batch %d, patch %s, %s%s): do not edit."
        % (batch, patch_text(patch), what, set_suffix(sets)),
        "// BANIS's augmentation of a batch of %s crops (image in [0, 1], i32 instance ids) and its" % cube_text(s),
        ("// six affinity targets of the first %s voxels; docs/augment.md, the script's docstring." % cube_text(patch)
         if default else
         "// %d affinity targets of %s voxels; docs/augment.md, the script's docstring." % (len(offsets), cube_text(patch))),
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

# The tunable parameters of the nnU-Net pipeline (kinds as BANIS_PARAMS'): NNUNET_P's
# probabilities as "<transform>.p" ("blur.channel_p", "lowres.channel_p" the per-channel
# choices), the ranges, and the mirror's per-axis probability. The input size follows
# from the default rotation (nnunet_initial_size): a wider rotation.angle reads zeros
# (labels -1) at the corners of the input.
NNUNET_PARAMS = {
    "rotation.p": ("p", NNUNET_P["rotation"]),
    "rotation.angle": ("range", (-NNUNET_ROTATION, NNUNET_ROTATION)),
    "scaling.p": ("p", NNUNET_P["scaling"]), "scaling.range": ("range", NNUNET_SCALING),
    "noise.p": ("p", NNUNET_P["noise"]), "noise.std": ("range", (0.0, 0.1)),
    "blur.p": ("p", NNUNET_P["blur"]), "blur.channel_p": ("p", NNUNET_P["blur_channel"]),
    "blur.sigma": ("range", (0.5, 1.0)),
    "brightness.p": ("p", NNUNET_P["brightness"]), "brightness.range": ("split", (0.75, 1.25)),
    "contrast.p": ("p", NNUNET_P["contrast"]), "contrast.range": ("split", (0.75, 1.25)),
    "lowres.p": ("p", NNUNET_P["lowres"]), "lowres.channel_p": ("p", NNUNET_P["lowres_channel"]),
    "lowres.scale": ("range", (0.5, 1.0)),
    "gamma_invert.p": ("p", NNUNET_P["gamma_invert"]), "gamma_invert.range": ("split", (0.7, 1.5)),
    "gamma.p": ("p", NNUNET_P["gamma"]), "gamma.range": ("split", (0.7, 1.5)),
    "mirror.p": ("p", 0.5),
}
PARAMS = {"banis": BANIS_PARAMS, "nnunet": NNUNET_PARAMS}


# nnU-Net's anisotropy rule (nnUNetTrainer.configure_rotation_dummyDA_mirroring_and_inital_
# patch_size, ANISO_THRESHOLD): a 3D patch whose largest size exceeds 3 times its first
# (the out-of-plane axis after nnU-Net's transpose) is augmented "dummy-2D".
NNUNET_ANISO_THRESHOLD = 3
NNUNET_ROTATION_2D = math.pi  # dummy-2D: one in-plane angle U(-180°, 180°)


def nnunet_dummy_2d(patch):
    """nnU-Net's do_dummy_2d_data_aug for a patch (D, H, W): max(patch) / patch[0] > 3. The
    first axis, not the smallest: (64, 16, 64) is augmented in 3D."""
    return max(patch) / patch[0] > NNUNET_ANISO_THRESHOLD


def as_patch(patch):
    """A patch as three sizes (D, H, W); an int is a cube."""
    return (patch,) * 3 if isinstance(patch, int) else tuple(patch)


def cube_text(patch):
    """'128^3' for a cube, else '16x64x64'."""
    t = patch_text(patch)
    return t + "^3" if "x" not in t else t


def patch_text(patch):
    """'128' for a cube (the checked-in files' spelling), else '16x64x64'."""
    patch = as_patch(patch)
    return str(patch[0]) if len(set(patch)) == 1 else "x".join(map(str, patch))


def nnunet_initial_shape(patch, dummy_2d=False):
    """nnU-Net's enlarged initial patch: get_patch_size(patch, rot, rot, rot, (0.85, 1.25)) --
    the patch-size vector v rotated about x, y and z in turn by the largest angle (30°;
    dummy-2D 180°, capped at 90°) as batchgenerators' rotate_coords_3d does (v·R, i.e. Rᵀv),
    the elementwise maximum of the absolute values and of v, divided by 0.85, truncated to
    int; dummy-2D keeps the first size (initial_patch_size[0] = patch_size[0]). 128³ -> 205³,
    16x64x64 -> 16x75x75 (dummy-2D), 32x48x64 -> 60x86x84."""
    patch = as_patch(patch)
    a = min(NNUNET_ROTATION_2D if dummy_2d else NNUNET_ROTATION, math.pi / 2)
    c, s = math.cos(a), math.sin(a)
    v = [float(p) for p in patch]
    rots = [[[1, 0, 0], [0, c, -s], [0, s, c]],
            [[c, 0, s], [0, 1, 0], [-s, 0, c]],
            [[c, -s, 0], [s, c, 0], [0, 0, 1]]]
    best = list(v)
    for r in rots:
        rv = [abs(v[0] * r[0][j] + v[1] * r[1][j] + v[2] * r[2][j]) for j in range(3)]
        best = [max(b, x) for b, x in zip(best, rv)]
    sizes = [int(b / NNUNET_MIN_SCALE) for b in best]
    if dummy_2d:
        sizes[0] = patch[0]
    return tuple(sizes)


def nnunet_initial_size(patch):
    """The initial size of a cube `patch`^3 (nnunet_initial_shape; 128 -> 205)."""
    sizes = nnunet_initial_shape(patch)
    assert len(set(sizes)) == 1
    return sizes[0]


def nnunet_ds_shapes(patch, levels):
    """DownsampleSegForDSTransform's shapes: round(size / 2^i) per axis (Python's round, as
    nnU-Net computes them) for the deep-supervision scales 1, 1/2, ..., 1/2^(levels-1)."""
    return [tuple(round(p * 0.5 ** i) for p in as_patch(patch)) for i in range(levels)]


def nnunet_ds_sizes(patch, levels):
    """nnunet_ds_shapes of a cube: one size per level."""
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
        # Per-sample draws take their batch size from this value (the pipeline's input), not
        # from the volume they modify: they then depend on nothing the pipeline computes,
        # and a transform can fuse with the ops after it (med-form-resample-fusions).
        self.batch_like = None

    def val(self, text, shape, et="f32"):
        return V(self.op(text), shape, et)

    def const(self, v, shape=()):
        text = mlir_float(v)
        k = (text, tuple(shape))
        if k not in self.consts:  # one constant op per value and shape
            self.consts[k] = self.val("med.constant dense<%s> : %s" % (text, tensor_type(shape)), shape)
        return self.consts[k]

    def vconst(self, values, shape=None):
        """A constant tensor of `values` (shape: (len(values),) unless given)."""
        shape = (len(values),) if shape is None else tuple(shape)
        k = (tuple(map(mlir_float, values)), shape)
        if k not in self.consts:
            flat = ", ".join(mlir_float(v) for v in values)
            text = "[%s]" % flat if len(shape) == 1 else "[%s]" % ", ".join("[%s]" % mlir_float(v) for v in values)
            assert len(shape) == 1 or shape[1:] == (1,) * (len(shape) - 1)
            self.consts[k] = self.val("med.constant dense<%s> : %s" % (text, tensor_type(shape)), shape)
        return self.consts[k]

    def pconst(self, v, name, part):
        """A constant part of the tunable parameter `name`: an op of its own, marked."""
        return self.val("med.constant dense<%s> : tensor<f32> {%s}" % (mlir_float(v), param_attrs(name, part)), ())

    def rand(self, stream, like, sample_shape=None, dist="uniform", p=None, param=None):
        """A draw; `param` names the tunable probability `p` of a bernoulli draw."""
        attrs = ["stream = %d : i64" % self.streams[stream]]
        if dist != "uniform":
            attrs.append("distribution = #med<distribution %s>" % dist)
        if p is not None:
            attrs.append("probability = %s" % mlir_float(p))
        if param is not None:
            attrs.append(param_attrs(param))
        if sample_shape is not None:
            attrs.append("sample_shape = array<i64%s>" % (": " + ", ".join(map(str, sample_shape)) if sample_shape else ""))
            like = self.batch_like or like
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

    def uniform_param(self, u, name, lo, hi, part=""):
        """lo + (hi - lo) * u with both constants the tunable range `name`'s (`part`: the
        prefix of a split range's parts, "low." or "high.")."""
        v = self.mul(u, self.pconst(hi - lo, name, part + "width"))
        return self.add(v, self.pconst(lo, name, part + "lo"))

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

    def bg_contrast(self, like, sample_shape, split_stream, stream, lo, hi, name):
        """batchgeneratorsv2's BGContrast((lo, hi)) split range: with probability 0.5 (and
        lo < 1) U(lo, 1), else U(max(lo, 1), hi): split·U(lo, 1) + (1 − split)·U(1, hi),
        both from one uniform number, the split a bernoulli draw of its own stream. With
        lo >= 1 both ranges are U(lo, hi) (the split then changes nothing, exactly), so a
        recipe's override of the tunable split range `name` sets constants only."""
        low, high = split_parts(lo, hi)
        u = self.rand(stream, like, sample_shape)
        upper = self.uniform_param(u, name, high[0], high[1], "high.")
        split = self.rand(split_stream, like, sample_shape, "bernoulli", 0.5)
        return self.mix(self.uniform_param(u, name, low[0], low[1], "low."), split, upper)


def nnunet_spatial_ops(w, image, seg, angles, scale, crop, patch, classes, dummy_2d=False):
    """SpatialTransform's resampling of image (trilinear, zeros outside) and seg (one-hot
    linear and argmax, -1 outside) with batchgeneratorsv2's A = Rz(a2)·Ry(a1)·Rx(a0)·s
    (a0 about the first spatial axis, D) from given angles [B,3], scales [B,1] and crop
    flags [B,1,1] (1 for a sample neither rotated nor scaled: nnU-Net's integer centre
    crop, the sampling positions moved by -1/2 on each axis whose margin is odd).

    med.affine_matrix gives R_D(b0)·R_H(b1)·R_W(b2)·diag(k) = Rx(b0)·Ry(b1)·Rz(b2)·diag(k),
    so with b = -a and k = (s, s, s) its transpose is s·Rz(a2)·Ry(a1)·Rx(a0) = A (the
    rotations are orthogonal, the scale is shared by the axes).

    dummy_2d: nnU-Net's 2D SpatialTransform of every D-slice (Convert3DTo2DTransform makes
    the slices channels): one angle a per sample ([B,1]), taken as (a, 0, 0), and k = (1, s,
    s), so A = Rx(a)·diag(1, s, s) leaves D alone -- its first row is (1, 0, 0) exactly and
    each output slice reads the input slice of its index (input and output have the
    patch's D)."""
    B = image.shape[0]
    size = image.shape[2:]
    patch = as_patch(patch)
    if dummy_2d:  # (a, 0, 0): about D only
        angles = w.mul(angles, w.vconst((1.0, 0.0, 0.0)))
    neg = w.unary("neg", angles)
    if dummy_2d:  # s·(0, 1, 1) + (1, 0, 0): exact
        k = w.add(w.mul(scale, w.vconst((0.0, 1.0, 1.0))), w.vconst((1.0, 0.0, 0.0)))
    else:
        k = w.mul(scale, w.const(1.0, (3,)))
    m = w.val("med.affine_matrix %s, %s : (%s, %s) -> %s" % (neg.name, k.name, neg.t, k.t, tensor_type((B, 3, 4))),
              (B, 3, 4))
    rows = [w.reshape(w.slice(m, (0, 0, j), (B, 3, 1)), (B, 1, 3)) for j in range(3)]
    t = w.slice(m, (0, 0, 3), (B, 3, 1))  # zeros
    odd = [(n - p) % 2 for n, p in zip(size, patch)]
    if all(odd):
        t = w.add(t, w.mul(crop, -0.5))
    elif any(odd):  # -1/2 on the axes whose margin is odd only
        t = w.add(t, w.mul(crop, w.vconst(tuple(-0.5 if o else 0.0 for o in odd), (3, 1))))
    a = w.concat([w.concat(rows, 1), t], 2)
    shape = "array<i64: %d, %d, %d>" % patch
    out = (B, image.shape[1]) + patch
    x = w.val("med.spatial_transform linear %s, %s {shape = %s} : (%s, %s) -> %s"
              % (image.name, a.name, shape, image.t, a.t, tensor_type(out)), out)
    labels = ", ".join(str(l) for l in range(-1, classes))
    out = (B, 1) + patch
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


def nnunet(batch, channels, classes, patch, levels, p_override=None, given=False, sets=None, dummy_2d=None):
    """dummy_2d: None for nnU-Net's rule (nnunet_dummy_2d), or forced on or off."""
    patch = as_patch(patch)
    if dummy_2d is None:
        dummy_2d = nnunet_dummy_2d(patch)
    size = nnunet_initial_shape(patch, dummy_2d)
    defaults = {}
    if dummy_2d:  # rotation_for_DA of dummy-2D: one in-plane angle U(-180°, 180°)
        defaults["rotation.angle"] = (-NNUNET_ROTATION_2D, NNUNET_ROTATION_2D)
    if p_override is not None:  # every transform's and channel choice's, not the mirror's
        defaults.update({k: p_override for k, (kind, _) in NNUNET_PARAMS.items() if kind == "p" and k != "mirror.p"})
    P = resolve_params(NNUNET_PARAMS, dict(defaults, **(sets or {})))
    w = Builder(batch, NNUNET_STREAMS, given=given)

    def gate(stream, like, sample_shape, name):
        return w.rand(stream, like, sample_shape, "bernoulli", P[name], param=name)

    def uniform(u, name):
        return w.uniform_param(u, name, *P[name])

    def bg_contrast(like, shape, split_stream, stream, name):
        return w.bg_contrast(like, shape, split_stream, stream, P[name][0], P[name][1], name)

    def rng(name):
        return "U(%g, %g)" % P[name]
    image = V("%image", (batch, channels) + size)
    seg = V("%seg", (batch, 1) + size, "i32")
    C = channels
    w.batch_like = image

    if dummy_2d:
        w.comment("nnU-Net's dummy-2D augmentation: the patch %s is anisotropic (max / first size > %d), so"
                  % (patch_text(patch), NNUNET_ANISO_THRESHOLD))
        w.comment("the spatial transform is 2D on every D-slice (one in-plane angle, the scale in-plane, the")
        w.comment("input's D = the patch's) and SimulateLowResolution leaves D alone (ignore_axes = (0,)).")
    angles = "U(%g°, %g°)" % tuple(math.degrees(a) for a in P["rotation.angle"])
    w.comment("1. SpatialTransform: rotation p %g (three angles %s), scaling p %g (one"
              % (P["rotation.p"], angles, P["scaling.p"]))
    w.comment("   scale %s for all axes); A = Rz·Ry·Rx·diag(s) about the centre; image trilinear,"
              % rng("scaling.range"))
    w.comment("   zeros outside; seg one-hot linear + argmax, -1 outside. Neither: the integer centre crop.")
    g_rot = gate("rotation_gate", image, [1], "rotation.p")
    ang = w.mul(uniform(w.rand("rotation_angles", image, [1 if dummy_2d else 3]), "rotation.angle"), g_rot)
    g_scale = gate("scaling_gate", image, [1], "scaling.p")
    s = w.mix(uniform(w.rand("scaling", image, [1]), "scaling.range"), g_scale, 1.0)
    crop = w.reshape(w.mul(w.sub(1.0, g_rot), w.sub(1.0, g_scale)), (batch, 1, 1))  # neither
    x, y = nnunet_spatial_ops(w, image, seg, ang, s, crop, patch, classes, dummy_2d)
    vshape = (batch, 1, 1, 1, 1)
    cshape = [C, 1, 1, 1]

    w.comment("2. GaussianNoise: p %g, one std %s per sample (nnU-Net's 'variance' is the std)."
              % (P["noise.p"], rng("noise.std")))
    g = gate("noise_gate", x, [1, 1, 1, 1], "noise.p")
    sd = w.mul(uniform(w.rand("noise_std", x, [1, 1, 1, 1]), "noise.std"), g)
    x = w.add(x, w.mul(w.rand("noise", x, None, "normal"), sd))

    w.comment("3. GaussianBlur: p %g; each channel with p %g, sigma %s per axis (0 elsewhere)."
              % (P["blur.p"], P["blur.channel_p"], rng("blur.sigma")))
    g = gate("blur_gate", x, [1, 1], "blur.p")
    gc = w.mul(gate("blur_channels", x, [C, 1], "blur.channel_p"), g)
    sig = w.mul(uniform(w.rand("blur_sigma", x, [C, 3]), "blur.sigma"), gc)
    x = w.val("med.gaussian_blur %s, %s : (%s, %s) -> %s" % (x.name, sig.name, x.t, sig.t, x.t), x.shape)

    w.comment("4. MultiplicativeBrightness: p %g, x * BGContrast((%g, %g)) per channel."
              % ((P["brightness.p"],) + P["brightness.range"]))
    g = gate("brightness_gate", x, [1, 1, 1, 1], "brightness.p")
    m = bg_contrast(x, cshape, "brightness_split", "brightness", "brightness.range")
    x = w.mul(x, w.mix(m, g, 1.0))

    w.comment("5. Contrast: p %g, BGContrast((%g, %g)) per channel, range preserved:"
              % ((P["contrast.p"],) + P["contrast.range"]))
    w.comment("   clamp((x - mean)·m + mean, min, max) with the channel's statistics before it.")
    g = gate("contrast_gate", x, [1, 1, 1, 1], "contrast.p")
    m = w.mix(bg_contrast(x, cshape, "contrast_split", "contrast", "contrast.range"), g, 1.0)
    mu = w.reduce("mean", x, (2, 3, 4))
    lo, hi = w.reduce("min", x, (2, 3, 4)), w.reduce("max", x, (2, 3, 4))
    z = w.add(w.mul(w.sub(x, mu), m), mu)
    x = w.mix(w.min(w.max(z, lo), hi), g, x)

    w.comment("6. SimulateLowResolution: p %g; each channel with p %g, one scale %s for all axes"
              % (P["lowres.p"], P["lowres.channel_p"], rng("lowres.scale")))
    w.comment("   (nearest-exact down, trilinear up; 1 elsewhere).")
    g = gate("lowres_gate", x, [1, 1], "lowres.p")
    gc = w.mul(gate("lowres_channels", x, [C, 1], "lowres.channel_p"), g)
    sc = w.mix(uniform(w.rand("lowres_scale", x, [C, 1]), "lowres.scale"), gc, 1.0)
    if dummy_2d:  # scale 1 along D (ignore_axes): sc·(0, 1, 1) + (1, 0, 0), exact
        sc = w.add(w.mul(sc, w.vconst((0.0, 1.0, 1.0))), w.vconst((1.0, 0.0, 0.0)))
    else:
        sc = w.mul(sc, w.const(1.0, (3,)))
    x = w.val("med.simulate_low_resolution %s, %s : (%s, %s) -> %s" % (x.name, sc.name, x.t, sc.t, x.t), x.shape)

    w.comment("7. Gamma, inverted: p %g, gamma BGContrast((%g, %g)) per channel, statistics retained."
              % ((P["gamma_invert.p"],) + P["gamma_invert.range"]))
    g = gate("gamma_invert_gate", x, [1, 1, 1, 1], "gamma_invert.p")
    gam = w.mix(bg_contrast(x, cshape, "gamma_invert_split", "gamma_invert", "gamma_invert.range"), g, 1.0)
    x = nnunet_gamma(w, x, True, g, gam)

    w.comment("8. Gamma: p %g, gamma BGContrast((%g, %g)), the same without inversion."
              % ((P["gamma.p"],) + P["gamma.range"]))
    g = gate("gamma_gate", x, [1, 1, 1, 1], "gamma.p")
    gam = w.mix(bg_contrast(x, cshape, "gamma_split", "gamma", "gamma.range"), g, 1.0)
    x = nnunet_gamma(w, x, False, g, gam)

    w.comment("9. Mirror: each axis flipped with p %g, image and seg together." % P["mirror.p"])
    f = gate("mirror", x, [3], "mirror.p")
    x = w.val("med.mirror %s, %s : (%s, %s) -> %s" % (x.name, f.name, x.t, f.t, x.t), x.shape)
    y = w.val("med.mirror %s, %s : (%s, %s) -> %s" % (y.name, f.name, y.t, f.t, y.t), y.shape, y.et)

    w.comment("10. RemoveLabel: -1 (outside the volume) -> 0.")
    y = w.val("med.remove_label %s {label = -1 : i64, replace_with = 0 : i64} : (%s) -> %s" % (y.name, y.t, y.t),
              y.shape, y.et)

    w.comment("    As f32 class indices, the loss's targets: the sum of the channels [label >= k],")
    w.comment("    k = 1 .. %d (med.label_regions; exact)." % (classes - 1))
    regions = ", ".join("array<i64: %s>" % ", ".join(str(l) for l in range(k, classes)) for k in range(1, classes))
    r = w.val("med.label_regions %s {regions = [%s]} : (%s) -> %s"
              % (y.name, regions, y.t, tensor_type((batch, classes - 1) + patch)),
              (batch, classes - 1) + patch)
    y = w.reduce("sum", r, (1,))

    sizes = nnunet_ds_shapes(patch, levels)
    w.comment("11. Deep-supervision targets: scale 1 as it is, then nearest-exact to %s."
              % ", ".join(patch_text(n) for n in sizes[1:]))
    targets = [y]
    for n in sizes[1:]:
        shape = (batch, 1) + n
        targets.append(w.val("med.downsample_nearest %s {size = array<i64: %d, %d, %d>} : (%s) -> %s"
                             % ((y.name,) + n + (y.t, tensor_type(shape))), shape))
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
        "// Generated by scripts/gen_augment.py (nnunet, batch %d, channels %d, classes %d, patch %s, levels %d%s%s%s%s): do not edit."
        % (batch, channels, classes, patch_text(patch), levels, ", dummy-2D" if dummy_2d else "",
           "" if p_override is None else ", probability %g" % p_override,
           ", given parameters" if given else "", set_suffix(sets)),
        "// nnU-Net v2's default %s training augmentation of a batch of %s initial patches (image, class"
        % ("dummy-2D" if dummy_2d else "3D", cube_text(size)),
        "// labels -1 .. %d as i32, -1 outside the volume) to %s, and the deep-supervision targets of" % (classes - 1, cube_text(patch)),
        "// med.dice_ce (target.<i> at 1/2^i, f32 class indices); docs/augment.md, the script's docstring.",
        "func.func @augment(%s) -> (%s) attributes {med.input_names = [%s], med.output_names = [%s]} {"
        % (", ".join(args), ", ".join(o.t for o in outs), ", ".join('"%s"' % n for n in arg_names),
           ", ".join('"%s"' % n for n in ["image"] + names)),
    ]
    tail = ["  return %s : %s" % (", ".join(o.name for o in outs), ", ".join(o.t for o in outs)), "}", ""]
    return "\n".join(head + w.lines + tail)


def nnunet_spatial(batch, channels, classes, patch, dummy_2d=False):
    """The spatial transform alone, with given parameters: @spatial(image, seg, angles
    [B,3] (radians; dummy-2D [B,1], the in-plane angle), scale [B,1], crop [B,1,1]) ->
    (image, seg), for the convention test."""
    size = nnunet_initial_shape(patch, dummy_2d)
    w = Builder(batch, NNUNET_STREAMS)
    image = V("%image", (batch, channels) + size)
    seg = V("%seg", (batch, 1) + size, "i32")
    angles = V("%angles", (batch, 1 if dummy_2d else 3))
    scale, crop = V("%scale", (batch, 1)), V("%crop", (batch, 1, 1))
    x, y = nnunet_spatial_ops(w, image, seg, angles, scale, crop, patch, classes, dummy_2d)
    head = [
        "// Generated by scripts/gen_augment.py (nnunet_spatial, batch %d, channels %d, classes %d, patch %s%s)."
        % (batch, channels, classes, patch_text(patch), ", dummy-2D" if dummy_2d else ""),
        "// nnU-Net's SpatialTransform with given angles, scales and crop flags (%s -> %s)." % (cube_text(size), cube_text(patch)),
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
    v = w.bg_contrast(like, [], "gamma_split", "gamma", lo, hi, "gamma.range")
    head = ["// Generated by scripts/gen_augment.py (bg_contrast, count %d, range %r .. %r)." % (count, lo, hi),
            "func.func @bg_contrast(%%key: tensor<i64>) -> %s attributes {med.input_names = [\"rng\"], med.output_names = [\"draws\"]} {" % v.t]
    tail = ["  return %s : %s" % (v.name, v.t), "}", ""]
    return "\n".join(head + w.lines + tail)


def generate(kind, params):
    if kind == "banis":
        return banis(params["batch"], params["patch"], params["context"], params.get("sets"),
                     params.get("offsets"))
    if kind == "affinities":
        return affinities_only(params["batch"], params["patch"], params["offsets"])
    if kind == "nnunet":
        return nnunet(params["batch"], params["channels"], params["classes"], params["patch"],
                      params["levels"], params.get("probability"), params.get("given", False),
                      params.get("sets"), params.get("dummy_2d"))
    if kind == "nnunet_spatial":
        return nnunet_spatial(params["batch"], params["channels"], params["classes"], params["patch"],
                              bool(params.get("dummy_2d")))
    if kind == "bg_contrast":
        return bg_contrast_draws(params["count"], *params["range"])
    raise SystemExit("gen_augment.py: unknown pipeline '%s' (expected %s)" % (kind, ", ".join(PIPELINES)))


def patch_arg(text):
    """--patch: one size (a cube) or three, D,H,W."""
    try:
        sizes = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("expected a size or D,H,W, got '%s'" % text)
    if len(sizes) == 1:
        sizes *= 3
    if len(sizes) != 3:
        raise argparse.ArgumentTypeError("expected a size or three sizes D,H,W, got '%s'" % text)
    return sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pipeline", nargs="?", choices=PIPELINES)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--patch", type=patch_arg, default=(128, 128, 128),
                    help="the patch: one size (a cube) or D,H,W")
    ap.add_argument("--context", type=int, default=10, help="banis: the affinities' long range")
    ap.add_argument("--offsets", type=offsets_arg,
                    help="banis, affinities: the affinities' offsets d,h,w;d,h,w;... (the affinity at v "
                         "pairs v with v + offset; default for banis: 1 and --context along each axis)")
    ap.add_argument("--channels", type=int, default=1, help="nnunet: image channels")
    ap.add_argument("--classes", type=int, default=3, help="nnunet: classes (labels 0 .. classes-1, -1 outside)")
    ap.add_argument("--dummy-2d", choices=("auto", "on", "off"), default="auto",
                    help="nnunet: nnU-Net's dummy-2D augmentation (auto: when max(patch) / D > 3, "
                         "nnU-Net's rule)")
    ap.add_argument("--print-rule", action="store_true",
                    help="nnunet: print the initial size, the deep-supervision sizes and whether the "
                         "patch is augmented dummy-2D, and write no pipeline")
    ap.add_argument("--levels", type=int, default=5, help="nnunet: deep-supervision outputs (1/2^i)")
    ap.add_argument("--probability", type=float,
                    help="nnunet, for tests: this probability for every transform and channel choice")
    ap.add_argument("--given", action="store_true",
                    help="nnunet, for tests: every random draw an argument (named by its stream)")
    ap.add_argument("--count", type=int, default=65536, help="bg_contrast: draws")
    ap.add_argument("--range", type=float, nargs=2, default=(0.7, 1.5), help="bg_contrast: lo hi")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="banis, nnunet: a tunable parameter's value (a number, or lo,hi for a range); "
                         "the names as a recipe's augment.overrides takes them (--list-params)")
    ap.add_argument("--list-params", action="store_true",
                    help="print the pipeline's tunable parameters: name, kind, default")
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
    if a.list_params:
        if a.pipeline not in PARAMS:
            ap.error("--list-params: expected banis or nnunet")
        for name, (kind, default) in PARAMS[a.pipeline].items():
            print("%s %s %s" % (name, kind, ",".join(map(mlir_float, default)) if isinstance(default, tuple)
                                else mlir_float(default)))
        return
    sets = {}
    if a.set and a.pipeline not in PARAMS:
        ap.error("--set: the %s pipeline has no tunable parameters (banis and nnunet have)" % a.pipeline)
    for spec in a.set:
        name, eq, value = spec.partition("=")
        if not eq or not name:
            ap.error("--set %s: expected NAME=VALUE, e.g. affine.p=0.3 or affine.rotation=-0.5,0.5" % spec)
        try:
            nums = tuple(float(v) for v in value.strip("[]").split(","))
        except ValueError:
            ap.error("--set %s: expected a number or lo,hi" % spec)
        sets[name] = nums[0] if len(nums) == 1 else nums
    try:
        resolve_params(PARAMS.get(a.pipeline, {}), sets)
    except ValueError as e:
        ap.error("--set %s" % e)
    if a.pipeline == "banis" and a.offsets is None and (a.batch < 1 or min(a.patch) < 1 or a.context < 1 or a.context >= min(a.patch)):
        ap.error("expected --batch >= 1 and 1 <= --context < each --patch size")
    if a.pipeline == "affinities" and a.offsets is None:
        ap.error("the affinities pipeline needs --offsets")
    if a.offsets is not None:
        if a.pipeline not in ("banis", "affinities"):
            ap.error("--offsets is an option of the banis and affinities pipelines")
        if a.batch < 1 or min(a.patch) < 1:
            ap.error("expected --batch >= 1 and --patch sizes >= 1")
        bad = check_offsets(a.offsets, a.patch)
        if bad:
            ap.error("--offsets: " + bad)
    if a.pipeline.startswith("nnunet"):
        if a.batch < 1 or min(a.patch) < 2 or a.channels < 1 or a.classes < 2 or a.levels < 1:
            ap.error("expected --batch, --channels, --levels >= 1, --classes >= 2 and --patch sizes >= 2")
        if a.pipeline == "nnunet" and min(min(n) for n in nnunet_ds_shapes(a.patch, a.levels)) < 1:
            ap.error("--patch %s has no %d deep-supervision levels (the smallest would be %s)"
                     % (",".join(map(str, a.patch)), a.levels,
                        "x".join(map(str, nnunet_ds_shapes(a.patch, a.levels)[-1]))))
    if a.pipeline not in ("nnunet", "nnunet_spatial") and (a.dummy_2d != "auto" or a.print_rule):
        ap.error("--dummy-2d and --print-rule are options of the nnunet pipeline")
    dummy_2d = {"auto": None, "on": True, "off": False}[a.dummy_2d]
    if a.print_rule:
        d2 = nnunet_dummy_2d(a.patch) if dummy_2d is None else dummy_2d
        print("patch %s: %s; initial %s; deep supervision %s"
              % ("x".join(map(str, a.patch)), "dummy-2D" if d2 else "3D",
                 "x".join(map(str, nnunet_initial_shape(a.patch, d2))),
                 " ".join("x".join(map(str, n)) for n in nnunet_ds_shapes(a.patch, a.levels))))
        return
        if a.probability is not None and not 0 <= a.probability <= 1:
            ap.error("--probability: expected a value in [0, 1]")
    if a.pipeline == "bg_contrast" and (a.count < 1 or not 0 < a.range[0] < a.range[1]):
        ap.error("expected --count >= 1 and 0 < lo < hi")
    params = {"batch": a.batch, "patch": a.patch, "context": a.context, "offsets": a.offsets, "channels": a.channels,
              "classes": a.classes, "levels": a.levels, "count": a.count, "range": tuple(a.range)}
    if a.probability is not None:
        params["probability"] = a.probability
    if a.given:
        params["given"] = True
    if dummy_2d is not None:
        params["dummy_2d"] = dummy_2d
    if sets:
        params["sets"] = sets
    text = generate(a.pipeline, params)
    if a.output:
        open(a.output, "w").write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
