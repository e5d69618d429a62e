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
    """One sample: img (C, S, S, S) float32, seg (1, S, S, S) float32 labels. Returns the
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


def compare(ours_img, ours_seg, ref_img, ref_seg, near):
    img_err = float((ours_img - ref_img).abs().max())
    differ = ours_seg != ref_seg
    hard = int((differ & ~near[None]).sum())
    return img_err, hard, int(differ.sum()), int(near.sum())


def spatial(o):
    batch, channels, classes, patch = len(SAMPLES), 2, 3, 12
    art = compile_kind(o, "nnunet_spatial", "spatial",
                       ["--batch", str(batch), "--channels", str(channels), "--classes", str(classes),
                        "--patch", str(patch)])
    sys.path.insert(0, os.path.dirname(o.gen))
    import gen_augment
    size = gen_augment.nnunet_initial_size(patch)
    print("patch %d: initial size %d (128: %d)" % (patch, size, gen_augment.nnunet_initial_size(128)))
    rng = np.random.default_rng(7)
    img = rng.standard_normal((batch, channels, size, size, size)).astype(np.float32)
    seg = rng.integers(-1, classes, (batch, 1, size, size, size)).astype(np.float32)
    angles = np.array([s[0] for s in SAMPLES], np.float32)
    scale = np.array([[s[1]] for s in SAMPLES], np.float32)
    crop = np.array([[[s[2]]] for s in SAMPLES], np.float32)
    out = run_medrun(o, art, "spatial", {"image": img, "seg": seg, "angles": angles, "scale": scale, "crop": crop},
                     os.path.join(o.dir, "spatial_out"))
    ours_img = torch.from_numpy(np.load(os.path.join(out, "image.npy")))
    ours_seg = torch.from_numpy(np.load(os.path.join(out, "seg.npy")))
    P = (patch,) * 3
    failed = 0
    for variant in ["bgv2"] + VARIANTS:
        worst_img, hard, soft, near_total = 0.0, 0, 0, 0
        for n, (a, s, c) in enumerate(SAMPLES):
            # the reference takes the parameters as the pipeline hands them over (f32)
            a64 = [float(v) for v in angles[n]]
            r_img, r_seg, near = bgv2_spatial(torch.from_numpy(img[n]), torch.from_numpy(seg[n]), a64,
                                              float(scale[n, 0]), c, P, variant)
            e, h, d, k = compare(ours_img[n], ours_seg[n], r_img, r_seg, near)
            worst_img, hard, soft, near_total = max(worst_img, e), hard + h, soft + d, near_total + k
        ok = worst_img <= 1e-4 and hard == 0
        if variant == "bgv2":
            print("bgv2: image max_abs %.1e, labels differing %d of %d (all at the %d near ties or border"
                  " voxels excluded: %d)" % (worst_img, soft, batch * patch ** 3, near_total, hard))
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["spatial", "bg-contrast"])
    for a in ("gen", "medc", "medrun", "dir"):
        p.add_argument("--" + a, required=True)
    o = p.parse_args()
    os.makedirs(o.dir, exist_ok=True)
    torch.set_num_threads(1)
    failed = spatial(o) if o.what == "spatial" else bg_contrast(o)
    print("%s: %s" % (o.what, "FAIL" if failed else "PASS"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
