#!/usr/bin/python3
"""nnU-Net's augmentation conventions written out again from batchgeneratorsv2's description
(/work/shared/reference/augment.md section 1) and compared with what scripts/gen_augment.py
makes of them, run by medrun.

  nnunet_reference.py spatial --gen G --medc M --medrun R --dir D
      SpatialTransform. The function `nnunet_spatial` (the pipeline's spatial part with
      given angles, scales and crop flags) runs on random images and labels; the reference
      is bgv2's grid, literally: a centred linspace grid of the patch, `grid @ A.T` with
      A = Rz·Ry·Rx·diag(s), divided by S/2 per axis, flipped to (x, y, z), grid_sample with
      align_corners=False (image trilinear, zeros outside; each label's one-hot mask × 1000
      trilinear, cast to float16, running argmax with strict >, -1 where the grid leaves
      [-1 + 1/S, 1 - 1/S]); without rotation and scaling the integer centre crop at offset
      (S - P) // 2. Images agree to 1e-4 (f32 rounding of the grid), labels exactly except
      at near ties (the two best one-hot values within 1e-3, where float16 or the grid's
      rounding may decide) and within 1e-4 voxels of the border. Wrong conventions (the
      rotations in the other order, the pre-0.3.4 `grid @ A`, align_corners=True, the grid
      not flipped to xyz, the crop half a voxel the other way) must each fail the same rule.

  nnunet_reference.py spatial-2d --gen G --medc M --medrun R --dir D
      The dummy-2D SpatialTransform (an anisotropic patch, 3x12x11 from 3x14x14: nnU-Net's
      Convert3DTo2DTransform, bgv2's 2D SpatialTransform, Convert2DTo3DTransform): the
      function `nnunet_spatial --dummy-2d on` (one in-plane angle per sample) against bgv2's
      2D path written out: the D slices of every channel as 2D channels, A = R(a)·diag(s, s),
      the 2D grid as above, bilinear, each slice's labels one-hot and argmax, -1 outside in
      the plane; the integer centre crop in the plane (an odd margin on W). The same rule as
      `spatial`; wrong variants (the angle about H instead of D, D scaled too, the crop
      half a voxel the other way) must fail it.

  nnunet_reference.py pipeline --gen G --medc M --medrun R --dir D
      The whole pipeline with given draws (gen_augment.py nnunet --given: every random
      draw an argument; batch 4, two channels, 25^3 -> 16^3, two parameter sets; sample 0
      with every transform on, sample 1 with none, the others and the channel choices at
      random) against batchgeneratorsv2's transforms in nnUNetTrainer's order, written out
      again in torch from the reference's description: the spatial transform above,
      noise, blur (taps, reflect padding), brightness, contrast with the range preserved,
      low resolution (nearest-exact down, trilinear up), both gammas (inversion, retained
      unbiased statistics), mirror, -1 -> 0, the deep-supervision targets by nearest-exact;
      the draws mapped to nnU-Net's ranges here again. The image to 1e-5 of max(1, |x|),
      the targets exactly away from near ties. Wrong variants (BGContrast as a plain
      U(lo, hi), contrast without the clamp, the first gamma not inverted, noise std as
      sqrt(variance), noise after the blur, gamma without retained statistics, targets by
      striding as the loader's segmentation/F) fail. (A biased std in both places of the
      gamma would pass: the ratio std/std(x) does not see the n - 1.)

      With --patch D,H,W (and --levels L) at another patch; a dummy-2D one (nnU-Net's rule)
      against the dummy-2D path (the 2D spatial transform of `spatial-2d`, one angle
      U(-180°, 180°), SimulateLowResolution with D ignored), low resolution along D as an
      eighth wrong variant.

  nnunet_reference.py bg-contrast --gen G --medc M --medrun R --dir D
      BGContrast((lo, hi)), the split range: 65536 draws per key (three keys) of the
      pipelines' construction against the mixture's CDF, 1/2 U(lo, 1) + 1/2 U(1, hi): the
      Kolmogorov-Smirnov distance below 1.63/sqrt(n) (alpha = 0.01), the share below 1 within
      4 standard errors of 1/2. A plain U(lo, hi) draw (numpy, fixed seeds) must fail where
      the two differ ((0.7, 1.5); for (0.75, 1.25) they are the same distribution).
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F


def call(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def compile_kind(o, kind, name, extra):
    src, art = os.path.join(o.dir, name + ".mlir"), os.path.join(o.dir, name + ".medc")
    call([sys.executable, o.gen, kind, *extra, "-o", src])
    call([o.medc, "compile", src, "-o", art])
    return art


def run_medrun(o, art, func, inputs, out):
    args = [o.medrun, "run", art, "--func", func, "--out", out]
    for name, value in inputs.items():
        path = os.path.join(o.dir, "%s_%s.npy" % (os.path.basename(out), name))
        np.save(path, value)
        args += ["--input", "%s=%s" % (name, path)]
    call(args)
    return out


# ---- batchgeneratorsv2, written out ---------------------------------------------------

def create_affine_matrix_3d(angles, scales, order="zyx"):
    """bgv2's create_affine_matrix_3d: Rz @ Ry @ Rx @ diag(scales), in float64."""
    a = angles
    rx = np.array([[1, 0, 0], [0, np.cos(a[0]), -np.sin(a[0])], [0, np.sin(a[0]), np.cos(a[0])]])
    ry = np.array([[np.cos(a[1]), 0, np.sin(a[1])], [0, 1, 0], [-np.sin(a[1]), 0, np.cos(a[1])]])
    rz = np.array([[np.cos(a[2]), -np.sin(a[2]), 0], [np.sin(a[2]), np.cos(a[2]), 0], [0, 0, 1]])
    r = rz @ ry @ rx if order == "zyx" else rx @ ry @ rz
    return r @ np.diag(scales)


def bgv2_grid(affine, patch, shape, variant):
    space = [torch.linspace((1 - s) / 2, (s - 1) / 2, s) for s in patch]
    grid = torch.stack(torch.meshgrid(space, indexing="ij"), -1)
    m = affine if variant == "grid@A" else affine.T
    grid = torch.matmul(grid, torch.from_numpy(m).float())
    # centre_location_in_pixels = shape / 2 (no random crop): new_center = c - s/2 = 0
    grid = grid + torch.Tensor([c - s / 2 for c, s in zip([s / 2 for s in shape], shape)])
    for d in range(len(shape)):
        grid[..., d] = grid[..., d] / (shape[d] / 2)
    return grid if variant == "no-flip" else torch.flip(grid, (grid.ndim - 1,))


def bgv2_spatial(img, seg, angles, scale, crop, patch, variant):
    """One sample: img (C, S, S, S) float32, seg (1, S, S, S) labels as float32. Returns the
    image, the labels and a mask of voxels whose label is decided by a near tie."""
    shape = img.shape[1:]
    if crop:
        off = [(s - p) // 2 + (1 if variant == "crop-ceil" else 0) for s, p in zip(shape, patch)]
        sl = tuple(slice(o, o + p) for o, p in zip(off, patch))
        return img[(slice(None),) + sl], seg[(slice(None),) + sl], torch.zeros(patch, dtype=torch.bool)
    order = "xyz" if variant == "order-xyz" else "zyx"
    affine = create_affine_matrix_3d(angles, [scale] * 3, order)
    grid = bgv2_grid(affine, patch, shape, variant)
    ac = variant == "align-corners"
    out = F.grid_sample(img[None], grid[None], mode="bilinear", padding_mode="zeros", align_corners=ac)[0]
    labels = torch.unique(seg[0])
    scores = []
    result = torch.zeros(patch)
    best = None
    for i, u in enumerate(labels):
        v = F.grid_sample(((seg[0] == u).float() * 1000)[None, None], grid[None], mode="bilinear",
                          padding_mode="zeros", align_corners=ac)[0][0]
        scores.append(v)
        h = v.half()
        if best is None:
            best, result[:] = h, u
        else:
            better = h > best
            result[better] = u
            best = torch.where(better, h, best)
    lim = torch.tensor([1 - 1 / s for s in shape[::-1]])
    result[((grid < -lim) | (grid > lim)).any(-1)] = -1
    top2 = torch.stack(scores).topk(2, 0).values if len(scores) > 1 else None
    near = (top2[0] - top2[1] < 1.0) if top2 is not None else torch.zeros(patch, dtype=torch.bool)
    edge = ((grid.abs() - lim).abs() < 1e-4 * 2 / torch.tensor(shape[::-1], dtype=torch.float32)).any(-1)
    return out, result[None], near | edge


SAMPLES = [  # (angles about axes 0, 1, 2 = D, H, W in radians, scale, crop)
    ((0.3, -0.2, 0.45), 1.0, 0),      # rotation only
    ((0.0, 0.0, 0.0), 0.8, 0),        # scaling only
    ((-0.5, 0.4, -0.25), 1.3, 0),     # both
    ((0.0, 0.0, 0.0), 1.0, 1),        # neither: the integer centre crop
    ((0.52, 0.1, -0.52), 0.7, 0),
    ((0.0, 0.0, 0.5), 1.0, 0),        # one axis at a time: each angle's sign and plane
    ((0.5, 0.0, 0.0), 1.4, 0),
    ((0.0, 0.5, 0.0), 1.0, 0),
]
VARIANTS = ["order-xyz", "grid@A", "align-corners", "no-flip", "crop-ceil"]


def create_affine_matrix_2d(angle, scales):
    """bgv2's create_affine_matrix_2d: R(angle) @ diag(scales), in float64."""
    r = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return r @ np.diag(scales)


def bgv2_spatial_2d(img, seg, angle, scale, crop, patch, variant="bgv2"):
    """One sample of the dummy-2D path: img (C, D, H, W), seg (1, D, H, W) as float32;
    Convert3DTo2DTransform (C·D 2D channels, the seg's D slices its channels), the 2D
    SpatialTransform to patch[1:], Convert2DTo3DTransform. Returns the image, the labels and
    the near-tie mask as bgv2_spatial."""
    C, D = img.shape[0], img.shape[1]
    shape, P = img.shape[2:], patch[1:]
    img2, seg2 = img.reshape(C * D, *shape), seg.reshape(D, *shape)
    if crop:
        off = [(s - p) // 2 + (1 if variant == "crop-ceil" else 0) for s, p in zip(shape, P)]
        sl = (slice(None),) + tuple(slice(o, o + p) for o, p in zip(off, P))
        return (img2[sl].reshape(C, D, *P), seg2[sl].reshape(1, D, *P),
                torch.zeros((D,) + tuple(P), dtype=torch.bool))
    grid = bgv2_grid(create_affine_matrix_2d(angle, [scale] * 2), P, shape, "bgv2")
    out = F.grid_sample(img2[None], grid[None], mode="bilinear", padding_mode="zeros", align_corners=False)[0]
    lim = torch.tensor([1 - 1 / s for s in shape[::-1]])
    outside = ((grid < -lim) | (grid > lim)).any(-1)
    edge = ((grid.abs() - lim).abs() < 1e-4 * 2 / torch.tensor(shape[::-1], dtype=torch.float32)).any(-1)
    result, nears = torch.zeros((D,) + tuple(P)), torch.zeros((D,) + tuple(P), dtype=torch.bool)
    for d in range(D):  # bgv2 resamples each seg channel with its own labels
        best, scores = None, []
        for u in torch.unique(seg2[d]):
            v = F.grid_sample(((seg2[d] == u).float() * 1000)[None, None], grid[None], mode="bilinear",
                              padding_mode="zeros", align_corners=False)[0][0]
            scores.append(v)
            h = v.half()
            if best is None:
                best, result[d] = h, u
            else:
                better = h > best
                result[d][better] = u
                best = torch.where(better, h, best)
        result[d][outside] = -1
        if len(scores) > 1:
            top2 = torch.stack(scores).topk(2, 0).values
            nears[d] = top2[0] - top2[1] < 1.0
        nears[d] |= edge
    return out.reshape(C, D, *P), result[None], nears


SAMPLES_2D = [  # (in-plane angle about D in radians, scale, crop)
    (0.4, 1.0, 0),     # rotation only
    (0.0, 0.8, 0),     # scaling only
    (-2.5, 1.3, 0),    # both, beyond 90°
    (0.0, 1.0, 1),     # neither: the integer centre crop
    (3.0, 0.7, 0),
    (-0.9, 1.4, 0),
]
VARIANTS_2D = ["about-H", "scale-D", "crop-ceil"]


def spatial_2d(o):
    batch, channels, classes, patch = len(SAMPLES_2D), 2, 3, (3, 12, 11)
    art = compile_kind(o, "nnunet_spatial", "spatial2d",
                       ["--batch", str(batch), "--channels", str(channels), "--classes", str(classes),
                        "--patch", ",".join(map(str, patch)), "--dummy-2d", "on"])
    sys.path.insert(0, os.path.dirname(o.gen))
    import gen_augment
    size = gen_augment.nnunet_initial_shape(patch, True)
    print("patch %s: dummy-2D %s, initial size %s" % ("x".join(map(str, patch)), gen_augment.nnunet_dummy_2d(patch),
                                                      "x".join(map(str, size))))
    rng = np.random.default_rng(8)
    img = rng.standard_normal((batch, channels) + size).astype(np.float32)
    seg = rng.integers(-1, classes, (batch, 1) + size).astype(np.int32)
    angles = np.array([[s[0]] for s in SAMPLES_2D], np.float32)
    scale = np.array([[s[1]] for s in SAMPLES_2D], np.float32)
    crop = np.array([[[s[2]]] for s in SAMPLES_2D], np.float32)
    out = run_medrun(o, art, "spatial", {"image": img, "seg": seg, "angles": angles, "scale": scale, "crop": crop},
                     os.path.join(o.dir, "spatial2d_out"))
    ours_img = torch.from_numpy(np.load(os.path.join(out, "image.npy")))
    ours_seg = torch.from_numpy(np.load(os.path.join(out, "seg.npy"))).float()
    failed = 0
    for variant in ["bgv2"] + VARIANTS_2D:
        worst_img, hard, soft, near_total = 0.0, 0, 0, 0
        for n, (a, s, c) in enumerate(SAMPLES_2D):
            a, s = float(angles[n, 0]), float(scale[n, 0])
            x, y = torch.from_numpy(img[n]), torch.from_numpy(seg[n]).float()
            if variant in ("bgv2", "crop-ceil"):
                r_img, r_seg, near = bgv2_spatial_2d(x, y, a, s, c, patch, variant)
            else:  # the 3D path: the angle about H, or the scale on D as well
                angles3 = (0.0, a, 0.0) if variant == "about-H" else (a, 0.0, 0.0)
                r_img, r_seg, near = bgv2_spatial(x, y, angles3, s, c, patch, "bgv2")
            e, h, d, k = compare(ours_img[n], ours_seg[n], r_img, r_seg, near)
            worst_img, hard, soft, near_total = max(worst_img, e), hard + h, soft + d, near_total + k
        ok = worst_img <= 1e-4 and hard == 0
        if variant == "bgv2":
            print("bgv2 2D: image max_abs %.1e, labels differing %d of %d (all at the %d near ties or border"
                  " voxels excluded: %d)" % (worst_img, soft, batch * int(np.prod(patch)), near_total, hard))
            print("bgv2 dummy-2D convention: %s" % ("PASS" if ok else "FAIL"))
            failed += not ok
        else:
            print("wrong variant %s: image max_abs %.1e, labels differing %d: %s"
                  % (variant, worst_img, hard, "caught" if not ok else "NOT CAUGHT"))
            failed += ok
    return failed


def compare(ours_img, ours_seg, ref_img, ref_seg, near):
    img_err = float((ours_img - ref_img).abs().max())
    differ = ours_seg != ref_seg
    hard = int((differ & ~near[None]).sum())
    return img_err, hard, int(differ.sum()), int(near.sum())


def spatial(o):
    batch, channels, classes = len(SAMPLES), 2, 3
    P = tuple(int(v) for v in (o.patch or "12").split(","))
    P = P * 3 if len(P) == 1 else P
    art = compile_kind(o, "nnunet_spatial", "spatial",
                       ["--batch", str(batch), "--channels", str(channels), "--classes", str(classes),
                        "--patch", ",".join(map(str, P))])
    sys.path.insert(0, os.path.dirname(o.gen))
    import gen_augment
    size = gen_augment.nnunet_initial_shape(P)
    if len(set(P)) == 1:
        print("patch %d: initial size %d (128: %d)" % (P[0], size[0], gen_augment.nnunet_initial_size(128)))
    else:
        print("patch %s: initial size %s" % ("x".join(map(str, P)), "x".join(map(str, size))))
    rng = np.random.default_rng(7)
    img = rng.standard_normal((batch, channels) + size).astype(np.float32)
    seg = rng.integers(-1, classes, (batch, 1) + size).astype(np.int32)
    angles = np.array([s[0] for s in SAMPLES], np.float32)
    scale = np.array([[s[1]] for s in SAMPLES], np.float32)
    crop = np.array([[[s[2]]] for s in SAMPLES], np.float32)
    out = run_medrun(o, art, "spatial", {"image": img, "seg": seg, "angles": angles, "scale": scale, "crop": crop},
                     os.path.join(o.dir, "spatial_out"))
    ours_img = torch.from_numpy(np.load(os.path.join(out, "image.npy")))
    ours_seg = torch.from_numpy(np.load(os.path.join(out, "seg.npy"))).float()
    failed = 0
    for variant in ["bgv2"] + VARIANTS:
        worst_img, hard, soft, near_total = 0.0, 0, 0, 0
        for n, (a, s, c) in enumerate(SAMPLES):
            # the reference takes the parameters as the pipeline hands them over (f32)
            a64 = [float(v) for v in angles[n]]
            r_img, r_seg, near = bgv2_spatial(torch.from_numpy(img[n]), torch.from_numpy(seg[n]).float(), a64,
                                              float(scale[n, 0]), c, P, variant)
            e, h, d, k = compare(ours_img[n], ours_seg[n], r_img, r_seg, near)
            worst_img, hard, soft, near_total = max(worst_img, e), hard + h, soft + d, near_total + k
        ok = worst_img <= 1e-4 and hard == 0
        if variant == "bgv2":
            print("bgv2: image max_abs %.1e, labels differing %d of %d (all at the %d near ties or border"
                  " voxels excluded: %d)" % (worst_img, soft, batch * int(np.prod(P)), near_total, hard))
            print("bgv2 convention: %s" % ("PASS" if ok else "FAIL"))
            failed += not ok
        else:
            print("wrong variant %s: image max_abs %.1e, labels differing %d: %s"
                  % (variant, worst_img, hard, "caught" if not ok else "NOT CAUGHT"))
            failed += ok
    return failed


def ks_mixture(x, lo, hi):
    x = np.sort(np.asarray(x, np.float64))
    n = len(x)
    cdf = np.where(x < 1, 0.5 * (x - lo) / (1 - lo), 0.5 + 0.5 * (x - 1) / (hi - 1))
    cdf = np.clip(cdf, 0, 1)
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - cdf), np.max(cdf - (i - 1) / n)))


def bg_contrast(o):
    n, failed = 65536, 0
    limit = 1.63 / math.sqrt(n)
    for lo, hi in [(0.75, 1.25), (0.7, 1.5)]:
        name = "bgc_%g_%g" % (lo, hi)
        art = compile_kind(o, "bg_contrast", name, ["--count", str(n), "--range", repr(lo), repr(hi)])
        for key in (1, 2, 3):
            out = run_medrun(o, art, "bg_contrast", {"rng": np.array(key, np.int64)},
                             os.path.join(o.dir, "%s_key%d" % (name, key)))
            x = np.load(os.path.join(out, "draws.npy")).astype(np.float64)
            d = ks_mixture(x, lo, hi)
            below = float(np.mean(x < 1))
            ok = d < limit and abs(below - 0.5) < 4 * 0.5 / math.sqrt(n) and x.min() >= lo and x.max() < hi
            failed += not ok
            print("BGContrast((%g, %g)) key %d: KS %.4f (limit %.4f), below 1: %.4f: %s"
                  % (lo, hi, key, d, limit, below, "PASS" if ok else "FAIL"))
        for seed in (1, 2, 3):
            plain = np.random.default_rng(seed).uniform(lo, hi, n)
            d = ks_mixture(plain, lo, hi)
            if (lo + hi) / 2 == 1:
                print("plain U(%g, %g) seed %d: KS %.4f (the same distribution as the mixture)" % (lo, hi, seed, d))
                continue
            caught = d >= limit
            failed += not caught
            print("plain U(%g, %g) seed %d: KS %.4f: %s" % (lo, hi, seed, d, "caught" if caught else "NOT CAUGHT"))
    return failed


# ---- the whole pipeline with given parameters -----------------------------------------

def blur_axis(x, sigma, axis):
    """GaussianBlurTransform on one channel (D, H, W) along `axis`: taps exp(-(t/sigma)^2/2)
    at t = -r .. r, normalised, 2r + 1 the odd number nearest to 6 sigma + 1/2 (an even
    rounding moves towards it), reflect padding."""
    n = 6 * sigma + 0.5
    k = round(n)
    if k % 2 == 0:
        k = k + 1 if n - k >= 0 else k - 1
    t = torch.linspace(-(k - 1) / 2, (k - 1) / 2, k)
    w = torch.exp(-0.5 * (t / sigma) ** 2)
    w = w / w.sum()
    shape = [1, 1, 1, 1, 1]
    shape[2 + axis] = k
    pad = [0, 0, 0, 0, 0, 0]
    pad[2 * (2 - axis)] = pad[2 * (2 - axis) + 1] = k // 2
    y = F.pad(x[None, None], pad, mode="reflect")
    return F.conv3d(y, w.reshape(shape))[0, 0]


def bg_contrast_value(u, split, lo, hi, variant):
    if variant == "bgc-plain":
        return lo + (hi - lo) * u
    return lo + (1 - lo) * u if split else 1 + (hi - 1) * u


def gamma_channel(x, g, invert, retain=True):
    if invert:
        x = -x
    mu, sd = x.mean(), x.std()
    mn = x.min()
    r = x.max() - mn
    x = torch.pow((x - mn) / torch.clamp(r, min=1e-7), g) * r + mn
    if retain:
        x = (x - x.mean()) * (sd / torch.clamp(x.std(), min=1e-7)) + mu
    return -x if invert else x


def pipeline_reference(img, seg, q, n, patch, levels, variant, dummy_2d=False):
    """bgv2's transforms in nnUNetTrainer's order for sample n, the draws q (numpy arrays
    named by stream) mapped to nnU-Net's ranges here again. dummy_2d: nnU-Net's dummy-2D
    path (the 2D SpatialTransform of every D-slice with one angle U(-180°, 180°),
    SimulateLowResolution with ignore_axes = (0,))."""
    C = img.shape[0]
    rot, scl = q["rotation_gate"][n, 0] > 0, q["scaling_gate"][n, 0] > 0
    s = 0.7 + 0.7 * float(q["scaling"][n, 0]) if scl else 1.0
    if dummy_2d:
        angle = -math.pi + 2 * math.pi * float(q["rotation_angles"][n, 0]) if rot else 0.0
        x, y, near = bgv2_spatial_2d(img, seg, angle, s, not (rot or scl), patch)
    else:
        angles = [(-math.pi / 6 + math.pi / 3 * float(u)) if rot else 0.0 for u in q["rotation_angles"][n]]
        x, y, near = bgv2_spatial(img, seg, angles, s, not (rot or scl), patch, "bgv2")
    x = x.clone()

    steps = ["noise", "blur", "brightness", "contrast", "lowres", "gamma_invert", "gamma"]
    if variant == "swap-noise-blur":
        steps[0], steps[1] = steps[1], steps[0]
    for step in steps:
        if q[step + "_gate"].reshape(-1)[n] == 0:
            continue
        if step == "noise":
            sd = 0.1 * float(q["noise_std"].reshape(-1)[n])
            if variant == "noise-variance":
                sd = math.sqrt(sd)
            x = x + torch.from_numpy(q["noise"][n]) * sd
        elif step == "blur":
            for c in range(C):
                if q["blur_channels"][n, c, 0] > 0:
                    for a in range(3):
                        x[c] = blur_axis(x[c], 0.5 + 0.5 * float(q["blur_sigma"][n, c, a]), a)
        elif step in ("brightness", "contrast"):
            for c in range(C):
                m = bg_contrast_value(float(q[step].reshape(q[step].shape[0], C)[n, c]),
                                      q[step + "_split"].reshape(q[step].shape[0], C)[n, c] > 0, 0.75, 1.25, variant)
                if step == "brightness":
                    x[c] = x[c] * m
                else:
                    mu, lo, hi = x[c].mean(), x[c].min(), x[c].max()
                    z = (x[c] - mu) * m + mu
                    x[c] = z if variant == "contrast-no-clamp" else z.clamp(lo, hi)
        elif step == "lowres":
            for c in range(C):
                if q["lowres_channels"][n, c, 0] > 0:
                    sc = 0.5 + 0.5 * float(q["lowres_scale"][n, c, 0])
                    size = [round(d * sc) for d in x.shape[1:]]
                    if dummy_2d and variant != "lowres-d":  # ignore_axes = (0,): D at scale 1
                        size[0] = x.shape[1]
                    lowres = F.interpolate(x[c][None, None], size=size, mode="nearest-exact")
                    x[c] = F.interpolate(lowres, size=list(x.shape[1:]), mode="trilinear")[0, 0]
        else:
            for c in range(C):
                g = bg_contrast_value(float(q[step].reshape(q[step].shape[0], C)[n, c]),
                                      q[step + "_split"].reshape(q[step].shape[0], C)[n, c] > 0, 0.7, 1.5, variant)
                invert = step == "gamma_invert" and variant != "gamma-no-invert"
                x[c] = gamma_channel(x[c], g, invert, retain=variant != "gamma-no-retain")
    flip = [a + 1 for a in range(3) if q["mirror"][n, a] > 0]
    if flip:
        x, y, near = torch.flip(x, flip), torch.flip(y, flip), torch.flip(near[None], flip)[0]
    y = torch.where(y == -1, torch.zeros_like(y), y)
    targets, nears = [y], [near]
    for i in range(1, levels):
        size = [round(p * 0.5 ** i) for p in patch]
        if variant == "ds-strided":
            f = 2 ** i
            targets.append(y[:, ::f, ::f, ::f])
            nears.append(near[::f, ::f, ::f])
        else:
            targets.append(F.interpolate(y[None].float(), size=size, mode="nearest-exact")[0])
            nears.append(F.interpolate(near[None, None].float(), size=size, mode="nearest-exact")[0, 0] > 0)
    return x, targets, nears


PIPELINE_VARIANTS = ["bgc-plain", "contrast-no-clamp", "gamma-no-invert", "noise-variance",
                     "swap-noise-blur", "gamma-no-retain", "ds-strided"]


def pipeline(o):
    batch, channels, classes = 4, 2, 3
    sys.path.insert(0, os.path.dirname(o.gen))
    import gen_augment
    patch = tuple(int(v) for v in (o.patch or "16").split(","))
    patch = patch * 3 if len(patch) == 1 else patch
    levels = o.levels
    dummy_2d = gen_augment.nnunet_dummy_2d(patch)
    art = compile_kind(o, "nnunet", "given", ["--batch", str(batch), "--channels", str(channels), "--classes",
                                              str(classes), "--patch", ",".join(map(str, patch)),
                                              "--levels", str(levels), "--given"])
    size = gen_augment.nnunet_initial_shape(patch, dummy_2d)
    print("pipeline: patch %s from %s (%s)" % ("x".join(map(str, patch)), "x".join(map(str, size)),
                                               "dummy-2D" if dummy_2d else "3D"))
    failed = 0
    variants = PIPELINE_VARIANTS + (["lowres-d"] if dummy_2d else [])
    results = {v: [0.0, 0] for v in ["bgv2"] + variants}
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        img = (rng.standard_normal((batch, channels) + size) + 2).astype(np.float32)
        seg = rng.integers(-1, classes, (batch, 1) + size).astype(np.int32)
        q = {"image": img, "seg": seg}
        shapes = {"rotation_gate": (1,), "rotation_angles": (1,) if dummy_2d else (3,), "scaling_gate": (1,),
                  "scaling": (1,), "noise_gate": (1, 1, 1, 1), "noise_std": (1, 1, 1, 1), "noise": (channels,) + patch,
                  "blur_gate": (1, 1), "blur_channels": (channels, 1), "blur_sigma": (channels, 3),
                  "lowres_gate": (1, 1), "lowres_channels": (channels, 1), "lowres_scale": (channels, 1),
                  "mirror": (3,)}
        for t in ("brightness", "contrast", "gamma_invert", "gamma"):
            shapes[t + "_gate"] = (1, 1, 1, 1)
            shapes[t] = shapes[t + "_split"] = (channels, 1, 1, 1)
        for name, shp in shapes.items():
            full = (batch,) + shp
            if name == "noise":
                q[name] = rng.standard_normal(full).astype(np.float32)
            elif name.endswith(("_gate", "_split", "_channels")) or name == "mirror":
                q[name] = (rng.random(full) < 0.5).astype(np.float32)
            else:
                q[name] = rng.random(full).astype(np.float32)
        # sample 0: every transform; sample 1: none (the crop); 2 and 3 as drawn
        for name in shapes:
            if name.endswith("_gate"):
                q[name][0] = 1
                q[name][1] = 0
        out = run_medrun(o, art, "augment", q, os.path.join(o.dir, "given_out%d" % seed))
        ours = [torch.from_numpy(np.load(os.path.join(out, f + ".npy")))
                for f in ["image"] + ["target.%d" % i for i in range(levels)]]
        for variant in results:
            for n in range(batch):
                x, targets, nears = pipeline_reference(torch.from_numpy(img[n]), torch.from_numpy(seg[n]).float(), q, n,
                                                       patch, levels, variant, dummy_2d)
                e = float((ours[0][n] - x).abs().max() / max(1.0, float(x.abs().max())))
                bad = sum(int(((ours[1 + i][n] != t) & ~k[None]).sum()) for i, (t, k) in enumerate(zip(targets, nears)))
                results[variant][0] = max(results[variant][0], e)
                results[variant][1] += bad
    for variant, (e, bad) in results.items():
        ok = e <= 1e-5 and bad == 0
        if variant == "bgv2":
            print("pipeline against bgv2's transforms: image max error %.1e (relative to max(1, |x|)), labels "
                  "differing away from near ties %d: %s" % (e, bad, "PASS" if ok else "FAIL"))
            failed += not ok
        else:
            print("wrong variant %s: image max error %.1e, labels differing %d: %s"
                  % (variant, e, bad, "caught" if not ok else "NOT CAUGHT"))
            failed += ok
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["spatial", "spatial-2d", "bg-contrast", "pipeline"])
    for a in ("gen", "medc", "medrun", "dir"):
        p.add_argument("--" + a, required=True)
    p.add_argument("--patch", help="spatial, pipeline: the patch, one size or D,H,W (default 12, 16)")
    p.add_argument("--levels", type=int, default=5, help="pipeline: deep-supervision levels")
    o = p.parse_args()
    os.makedirs(o.dir, exist_ok=True)
    torch.set_num_threads(1)
    failed = {"spatial": spatial, "spatial-2d": spatial_2d, "bg-contrast": bg_contrast,
              "pipeline": pipeline}[o.what](o)
    print("%s: %s" % (o.what, "FAIL" if failed else "PASS"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
