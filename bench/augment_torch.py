#!/usr/bin/env python3
"""The PyTorch side of the augmentation benchmarks: our two pipelines, batched on one device.

Each pipeline is the same transforms, probabilities and ranges as the file we compile
(models/augment_nnunet.mlir, models/augment_banis.mlir; scripts/gen_augment.py writes them
and docs/augment.md describes them), written in batched torch ops as a GPU implementation
would write them: every per-sample (per-channel, per-axis) parameter drawn on the device,
every transform computed for the whole batch with neutral parameters where it is not drawn
(as our pipeline does: no host synchronisation, the same work every batch).

  nnunet  nnU-Net v2's default 3D training augmentation (batchgeneratorsv2, nnUNetTrainer's
          order) from the enlarged initial patch S^3 = get_patch_size(P) (128 -> 205), image
          and i32 class labels -1 .. classes-1 (-1 outside the volume), to P^3:
          SpatialTransform (rotation p 0.2, three angles U(-30°, 30°); scaling p 0.2, one
          U(0.7, 1.4); A = Rz·Ry·Rx·diag(s), grid @ A.T, grid_sample align_corners=False;
          image trilinear with zeros outside; labels one-hot trilinear + argmax, lowest label
          on ties, -1 outside [-1 + 1/S, 1 - 1/S]; a sample neither rotated nor scaled read
          at whole voxels from offset (S - P) // 2), GaussianNoise (p 0.1, std U(0, 0.1)),
          GaussianBlur (p 0.2, each channel p 0.5, sigma U(0.5, 1) per axis, taps to the odd
          size nearest 6 sigma + 1/2, reflect padding), MultiplicativeBrightness (p 0.15),
          Contrast (p 0.15, range preserved), both BGContrast((0.75, 1.25)) per channel,
          SimulateLowResolution (p 0.25, each channel p 0.5, one scale U(0.5, 1):
          nearest-exact down, trilinear up), Gamma inverted (p 0.1) and Gamma (p 0.3),
          BGContrast((0.7, 1.5)), statistics retained, Mirror (each axis p 0.5),
          RemoveLabel (-1 -> 0), the labels as f32 class indices and the deep-supervision
          targets nearest-exact at round(P / 2^i), i < levels.
  banis   BANIS's augmentation from (P + context)^3 crops (image, i32 instance ids) to P^3:
          a uniform element of the 48 signed axis permutations (BANIS's permutation, rot90
          in three planes and flips; exact), slice drop (p 0.5, each D-slice p 0.05), slice
          shift (p 0.5, each D-slice p 0.05 rolled by -10 .. 10 along H and W), intensity
          (p 0.5, x * U(0.9, 1.1) + U(-0.1, 0.1)), Gaussian noise (p 0.5, std U(0, 1) * 0.5),
          MONAI's RandAffine (p 0.5, rotations U(-pi, pi), scales 1 + U(-0.2, 0.2), six shears
          U(-0.5, 0.5), R_D·R_H·R_W·Sh·S; image bilinear, ids nearest, reflection padding),
          and the six affinities (offsets 1 and context along D, H, W) with their loss masks
          of the first P^3 voxels, with the image cut to them.

The probabilities, ranges and sizes come from scripts/gen_augment.py itself. The random
numbers are torch's, not our Philox streams: the two sides agree in distribution, not batch
by batch.

  python3 bench/augment_torch.py                      # both pipelines, CUDA, batch 2, 128^3
  python3 bench/augment_torch.py --device cpu --size 16 --steps 3 --warmup 1 --check

Timing: --warmup calls, then --steps calls each between CUDA events (wall clock on the CPU);
the median and the peak device memory. One line per pipeline, as bench/mednext_torch.py
prints its steps:

  torch aug-nnunet     1.234 ms/batch  peak   1.23 GiB  (205^3 -> 128^3, batch 2, min ..., max ... ms)

then the outputs' shapes (`outputs PIPELINE: NAME SHAPE ...`); --json FILE writes the numbers.
--check first runs each pipeline with every transform off (the output must be the crop of
the input, the targets computed directly from the input labels) and with every per-sample,
per-channel and per-axis draw on (the outputs must be finite, the targets class indices,
the affinities 0/1 and never 1 where their mask is 0), and prints PASS or FAIL per pipeline.
--save-inputs DIR writes the synthetic inputs instead, for our side on the same data
(`medrun run ARTIFACT --func augment --input image=DIR/nnunet_image.npy --input
seg=DIR/nnunet_seg.npy --input rng=KEY`; scripts/gpu-check.sh, part augment).
"""
import argparse
import functools
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import gen_augment as G  # noqa: E402  (the pipelines' probabilities, ranges and sizes)


class Draws:
    """Per-sample parameters drawn on the device. `force` (None, 0 or 1) sets every gate
    (each transform's per-sample, per-channel and per-axis choice) for --check."""

    def __init__(self, device, seed, force=None):
        self.g = torch.Generator(device=device)
        self.g.manual_seed(seed)
        self.device, self.force = device, force

    def uniform(self, shape, lo=0.0, hi=1.0):
        u = torch.rand(shape, generator=self.g, device=self.device)
        return u if (lo, hi) == (0.0, 1.0) else lo + (hi - lo) * u

    def normal_like(self, x):
        return torch.randn(x.shape, generator=self.g, device=self.device)

    def bernoulli(self, shape, p):
        return (self.uniform(shape) < p).float()

    def gate(self, shape, p):
        if self.force is not None:
            return torch.full(shape, float(self.force), device=self.device)
        return self.bernoulli(shape, p)

    def bg_contrast(self, shape, lo, hi):
        """batchgeneratorsv2's BGContrast((lo, hi)): with p 1/2 (lo < 1) U(lo, 1), else
        U(max(lo, 1), hi), from one uniform number and a split of its own."""
        u = self.uniform(shape)
        upper = max(lo, 1.0) + (hi - max(lo, 1.0)) * u
        if lo >= 1.0:
            return upper
        split = self.bernoulli(shape, 0.5)
        return split * (lo + (1.0 - lo) * u) + (1.0 - split) * upper


def mix(value, gate, neutral):
    return value * gate + neutral * (1.0 - gate)


def vol(t, n):
    return t.view(t.shape[0], t.shape[1], *([1] * n))


# ---- nnU-Net ------------------------------------------------------------------------------

def bgv2_rotation(a):
    """create_affine_matrix_3d's Rz(a2)·Ry(a1)·Rx(a0), (B, 3, 3)."""
    c, s = a.cos(), a.sin()
    o, z = torch.ones_like(a[:, 0]), torch.zeros_like(a[:, 0])

    def m(rows):
        return torch.stack([torch.stack(r, -1) for r in rows], -2)
    rx = m([[o, z, z], [z, c[:, 0], -s[:, 0]], [z, s[:, 0], c[:, 0]]])
    ry = m([[c[:, 1], z, s[:, 1]], [z, o, z], [-s[:, 1], z, c[:, 1]]])
    rz = m([[c[:, 2], -s[:, 2], z], [s[:, 2], c[:, 2], z], [z, z, o]])
    return rz @ ry @ rx


def centred_grid(n, device):
    t = torch.arange(n, device=device, dtype=torch.float32) - (n - 1) / 2
    return torch.stack(torch.meshgrid(t, t, t, indexing="ij"), -1)  # (n, n, n, 3), (D, H, W)


def blur_taps(sigma, radius=3):
    """GaussianBlurTransform's 1-D taps for each sigma (any shape), padded with zeros to
    2·radius + 1: exp(-(t/sigma)^2/2) over the odd size nearest 6 sigma + 1/2, normalised;
    sigma 0 is the identity. Reflect padding does not depend on its width, so zero taps
    beyond a kernel's own radius leave it as it is."""
    t = torch.arange(-radius, radius + 1, device=sigma.device, dtype=torch.float32)
    n = 6 * sigma + 0.5
    k = torch.round(n)
    even = torch.remainder(k, 2) == 0
    k = torch.where(even, torch.where(n - k >= 0, k + 1, k - 1), k)
    r = ((k - 1) / 2).clamp(max=radius)[..., None]
    s = sigma.clamp(min=1e-12)[..., None]
    w = torch.exp(-0.5 * (t / s) ** 2) * (t.abs() <= r).float()
    w = w / w.sum(-1, keepdim=True)
    delta = (t == 0).float().expand_as(w)
    return torch.where((sigma > 0)[..., None], w, delta)


def blur(x, sigma):
    """Separable Gaussian blur, each (sample, channel) with its own sigma per axis
    (sigma: B x C x 3), reflect padding; grouped conv3d over the B·C volumes."""
    B, C = x.shape[:2]
    taps = blur_taps(sigma.reshape(B * C, 3))  # (B·C, 3, 7)
    y = x.reshape(1, B * C, *x.shape[2:])
    for a in range(3):
        pad = [0, 0, 0, 0, 0, 0]
        pad[2 * (2 - a)] = pad[2 * (2 - a) + 1] = 3
        shape = [B * C, 1, 1, 1, 1]
        shape[2 + a] = 7
        y = F.conv3d(F.pad(y, pad, mode="reflect"), taps[:, a].reshape(shape), groups=B * C)
    return y.reshape(x.shape)


def lowres_axis(x, scale, axis):
    """Nearest-exact to round(n·scale) then linear back to n (align_corners=False) along one
    axis, each (sample, channel) with its own scale (B x C): the composition as one gather
    and lerp (separable, as both resamplings are). Scale 1 is the identity."""
    B, C = x.shape[:2]
    n = x.shape[2 + axis]
    m = torch.round(n * scale).clamp(min=1)[..., None]  # (B, C, 1)
    o = torch.arange(n, device=x.device, dtype=torch.float32)
    src = ((o + 0.5) * (m / n) - 0.5).clamp(min=0)
    i0 = torch.floor(src)
    w1 = src - i0
    i1 = torch.minimum(i0 + 1, m - 1)
    near = lambda j: torch.clamp(torch.floor((j + 0.5) * (n / m)), max=n - 1).long()  # noqa: E731
    shape = [B, C, 1, 1, 1]
    shape[2 + axis] = n
    full = list(x.shape)
    j0 = near(i0).view(shape).expand(full)
    j1 = near(i1).view(shape).expand(full)
    w1 = w1.view(shape)
    return x.gather(2 + axis, j0) * (1 - w1) + x.gather(2 + axis, j1) * w1


def gamma(x, g, invert, gate):
    """GammaTransform per channel with the statistics retained (unbiased std)."""
    y = -x if invert else x
    flat = y.flatten(2)
    mu, sd = vol(flat.mean(2), 3), vol(flat.std(2), 3)
    lo, hi = vol(flat.amin(2), 3), vol(flat.amax(2), 3)
    r = hi - lo
    z = torch.pow((y - lo) / r.clamp(min=1e-7), g) * r + lo
    zf = z.flatten(2)
    z = (z - vol(zf.mean(2), 3)) * (sd / vol(zf.std(2), 3).clamp(min=1e-7)) + mu
    if invert:
        z = -z
    return mix(z, gate, x)


def nnunet(image, seg, d, patch, classes, levels):
    B, C, S = image.shape[0], image.shape[1], image.shape[2]
    P = G.NNUNET_P
    dev = image.device
    # 1. SpatialTransform
    g_rot = d.gate((B, 1), P["rotation"])
    angles = d.uniform((B, 3), -G.NNUNET_ROTATION, G.NNUNET_ROTATION) * g_rot
    g_scale = d.gate((B, 1), P["scaling"])
    s = mix(d.uniform((B, 1), *G.NNUNET_SCALING), g_scale, 1.0)
    A = bgv2_rotation(angles) * s[:, :, None]
    shift = torch.zeros(B, 3, device=dev)
    if (S - patch) % 2:  # neither rotated nor scaled: whole voxels from (S - P) // 2
        shift = shift - 0.5 * ((1 - g_rot) * (1 - g_scale))
    p = torch.einsum("dhwj,bij->bdhwi", centred_grid(patch, dev), A) + shift[:, None, None, None]
    grid = (p / (S / 2)).flip(-1)  # normalised, (x, y, z)
    x = F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    labels = torch.arange(-1, classes, device=dev)
    onehot = (seg == labels.view(1, -1, 1, 1, 1)).float()
    scores = F.grid_sample(onehot, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    y = labels[scores.argmax(1, keepdim=True)]  # the first (lowest) label of the largest
    outside = (grid.abs() > 1 - 1 / S).any(-1)[:, None]
    y = torch.where(outside, torch.full_like(y, -1), y)
    # 2. GaussianNoise: std U(0, 0.1) per sample
    sd = d.uniform((B, 1, 1, 1, 1), 0.0, 0.1) * d.gate((B, 1, 1, 1, 1), P["noise"])
    x = x + d.normal_like(x) * sd
    # 3. GaussianBlur: per channel p 0.5, sigma U(0.5, 1) per axis
    gc = d.gate((B, C), P["blur_channel"]) * d.gate((B, 1), P["blur"])
    x = blur(x, d.uniform((B, C, 3), 0.5, 1.0) * gc[..., None])
    # 4. MultiplicativeBrightness
    g = d.gate((B, 1, 1, 1, 1), P["brightness"])
    x = x * mix(vol(d.bg_contrast((B, C), 0.75, 1.25), 3), g, 1.0)
    # 5. Contrast, range preserved, the channel's statistics before it
    g = d.gate((B, 1, 1, 1, 1), P["contrast"])
    m = vol(d.bg_contrast((B, C), 0.75, 1.25), 3)
    flat = x.flatten(2)
    mu, lo, hi = vol(flat.mean(2), 3), vol(flat.amin(2), 3), vol(flat.amax(2), 3)
    x = mix(torch.minimum(torch.maximum((x - mu) * m + mu, lo), hi), g, x)
    # 6. SimulateLowResolution: per channel p 0.5, one scale U(0.5, 1) for all axes
    gc = d.gate((B, C), P["lowres_channel"]) * d.gate((B, 1), P["lowres"])
    sc = mix(d.uniform((B, C), 0.5, 1.0), gc, 1.0)
    for a in range(3):
        x = lowres_axis(x, sc, a)
    # 7., 8. Gamma inverted, Gamma
    for invert, key in ((True, "gamma_invert"), (False, "gamma")):
        g = d.gate((B, 1, 1, 1, 1), P[key])
        x = gamma(x, mix(vol(d.bg_contrast((B, C), 0.7, 1.5), 3), g, 1.0), invert, g)
    # 9. Mirror, each axis p 0.5, image and labels
    f = d.gate((B, 3), 0.5) > 0
    for a in range(3):
        fa = f[:, a].view(B, 1, 1, 1, 1)
        x = torch.where(fa, x.flip(2 + a), x)
        y = torch.where(fa, y.flip(2 + a), y)
    # 10. RemoveLabel; f32 class indices
    y = torch.where(y == -1, torch.zeros_like(y), y).float()
    # 11. Deep-supervision targets
    out = {"image": x, "target.0": y}
    for i, n in enumerate(G.nnunet_ds_sizes(patch, levels)[1:], 1):
        out["target.%d" % i] = F.interpolate(y, size=(n, n, n), mode="nearest-exact")
    return out


# ---- BANIS --------------------------------------------------------------------------------

PERMUTATIONS = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


@functools.lru_cache(maxsize=None)
def device_tables(device, S):
    """Constant tables, copied to the device once (a copy inside the timed call would wait
    for the device)."""
    return torch.tensor(PERMUTATIONS, device=device), torch.tensor([S * S, S, 1], device=device)


def orientation_index(u, S):
    """Flat input indices (B, S^3) of a uniform element of the 48 signed axis permutations
    per sample (element floor(48 u) = 8 q + f: permutation q, axis i flipped where bit i of f
    is set), input and output of size S^3: exact, a gather."""
    B, dev = u.shape[0], u.device
    perms, strides = device_tables(dev, S)
    e = torch.clamp((48 * u).long(), 0, 47)
    perm = perms[e // 8]  # (B, 3): output axis i reads input axis perm[i]
    flips = torch.stack([(e % 8 >> i) & 1 for i in range(3)], 1)  # (B, 3)
    stride = strides[perm]  # (B, 3)
    o = torch.arange(S, device=dev)
    idx = 0
    for i in range(3):
        c = torch.where(flips[:, i:i + 1] > 0, S - 1 - o, o) * stride[:, i:i + 1]  # (B, S)
        shape = [B, 1, 1, 1]
        shape[1 + i] = S
        idx = idx + c.view(shape)
    return idx.reshape(B, 1, -1)


def monai_affine(angles, scales, shear):
    """R_D(a0)·R_H(a1)·R_W(a2)·Sh·diag(k), (B, 3, 3), axes (D, H, W) (med.affine_matrix)."""
    c, s = angles.cos(), angles.sin()
    o, z = torch.ones_like(c[:, 0]), torch.zeros_like(c[:, 0])

    def m(rows):
        return torch.stack([torch.stack(r, -1) for r in rows], -2)
    rd = m([[o, z, z], [z, c[:, 0], -s[:, 0]], [z, s[:, 0], c[:, 0]]])
    rh = m([[c[:, 1], z, s[:, 1]], [z, o, z], [-s[:, 1], z, c[:, 1]]])
    rw = m([[c[:, 2], -s[:, 2], z], [s[:, 2], c[:, 2], z], [z, z, o]])
    h = shear
    sh = m([[o, h[:, 0], h[:, 1]], [h[:, 2], o, h[:, 3]], [h[:, 4], h[:, 5], o]])
    return rd @ rh @ rw @ sh @ torch.diag_embed(scales)


def affinities(seg, patch, offsets):
    """BANIS's comp_affinities of the first patch^3 voxels, the other end anywhere in the
    volume: mask where both ends are labelled (>= 0), affinity where also equal and not 0."""
    a = seg[:, :, :patch, :patch, :patch]
    affs, masks = [], []
    for off in offsets:
        b = seg[:, :, off[0]:off[0] + patch, off[1]:off[1] + patch, off[2]:off[2] + patch]
        mask = (a >= 0) & (b >= 0)
        masks.append(mask)
        affs.append(mask & (a == b) & (a != 0))
    return torch.cat(affs, 1).float(), torch.cat(masks, 1).float()


def banis(image, seg, d, patch, context):
    B, S = image.shape[0], image.shape[2]
    dev = image.device
    # 1. Orientation: one of the 48, exact (a gather of image and ids)
    u = d.uniform((B,)) if d.force is None else torch.zeros(B, device=dev)
    idx = orientation_index(u, S)
    x = image.flatten(2).gather(2, idx).view(image.shape)
    y = seg.flatten(2).gather(2, idx).view(seg.shape)
    # 2. Slice drop: p 0.5, each D-slice p 0.05
    drop = d.bernoulli((B, 1, S, 1, 1), 0.05) * d.gate((B, 1, 1, 1, 1), 0.5)
    x = x * (1 - drop)
    # 3. Slice shift: p 0.5, each D-slice p 0.05 rolled by -10 .. 10 along H and W (np.roll)
    sel = d.bernoulli((B, S, 1), 0.05) * d.gate((B, 1, 1), 0.5)
    shift = (torch.floor(d.uniform((B, S, 2), -10.0, 11.0)) * sel).long()
    o = torch.arange(S, device=dev)
    ih = torch.remainder(o.view(1, 1, S) - shift[:, :, 0:1], S)  # (B, D, H)
    iw = torch.remainder(o.view(1, 1, S) - shift[:, :, 1:2], S)  # (B, D, W)
    x = x.gather(3, ih.view(B, 1, S, S, 1).expand(x.shape))
    x = x.gather(4, iw.view(B, 1, S, 1, S).expand(x.shape))
    # 4. Intensity: p 0.5, x * U(0.9, 1.1) + U(-0.1, 0.1)
    g = d.gate((B, 1, 1, 1, 1), 0.5)
    x = x * mix(d.uniform((B, 1, 1, 1, 1), 0.9, 1.1), g, 1.0) + d.uniform((B, 1, 1, 1, 1), -0.1, 0.1) * g
    # 5. Gaussian noise: p 0.5, std U(0, 1) * 0.5
    sd = d.uniform((B, 1, 1, 1, 1)) * 0.5 * d.gate((B, 1, 1, 1, 1), 0.5)
    x = x + d.normal_like(x) * sd
    # 6. MONAI RandAffine: p 0.5; bilinear image, nearest ids, reflection padding
    g = d.gate((B, 1), 0.5)
    angles = d.uniform((B, 3), -math.pi, math.pi) * g
    scales = mix(d.uniform((B, 3), 0.8, 1.2), g, 1.0)
    shear = d.uniform((B, 6), -0.5, 0.5) * g
    M = monai_affine(angles, scales, shear).flip(1).flip(2)  # to (x, y, z) = (W, H, D)
    theta = torch.cat([M, torch.zeros(B, 3, 1, device=dev)], 2)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    y = F.grid_sample(y.float(), grid, mode="nearest", padding_mode="reflection",
                      align_corners=False).round().int()
    # 7. The six affinities of the first patch^3 voxels, and the image cut to them
    offs = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (context, 0, 0), (0, context, 0), (0, 0, context)]
    aff, mask = affinities(y, patch, offs)
    return {"image": x[:, :, :patch, :patch, :patch].contiguous(), "target": aff, "mask": mask}


# ---- inputs, timing, checks ---------------------------------------------------------------

def blobs(shape, low, high, cell, g, device):
    """Integer labels in [low, high) constant over cells of `cell` voxels (nearest upsampling
    of a coarse random grid): regions with boundaries, as labels have."""
    B, S = shape[0], shape[2]
    n = -(-S // cell)
    coarse = torch.randint(low, high, (B, 1, n, n, n), generator=g, device=device).float()
    return F.interpolate(coarse, scale_factor=cell, mode="nearest")[:, :, :S, :S, :S].int().contiguous()


def make_inputs(kind, a, device):
    g = torch.Generator(device=device)
    g.manual_seed(a.seed)
    if kind == "nnunet":
        S = G.nnunet_initial_size(a.size)
        image = torch.rand((a.batch, 1, S, S, S), generator=g, device=device)
        seg = blobs((a.batch, 1, S, S, S), 0, a.classes, 9, g, device)
        seg[:, :, : S // 10] = -1  # outside the volume
    else:
        S = a.size + a.context
        image = torch.rand((a.batch, 1, S, S, S), generator=g, device=device)
        seg = blobs((a.batch, 1, S, S, S), 0, 40, 7, g, device)  # 0: background
    return image, seg


def run_pipeline(kind, a, image, seg, draws):
    if kind == "nnunet":
        return nnunet(image, seg, draws, a.size, a.classes, a.levels)
    return banis(image, seg, draws, a.size, a.context)


def timed(fn, a, device):
    cuda = device.type == "cuda"
    for _ in range(a.warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.steps):
        if cuda:
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            out = fn()
            t1.record()
            torch.cuda.synchronize()
            times.append(t0.elapsed_time(t1))
        else:
            t = time.perf_counter()
            out = fn()
            times.append(1e3 * (time.perf_counter() - t))
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    return times, peak, out


def check(kind, a, image, seg, device):
    """Every transform off: the crop of the input; every gate on: well-formed outputs."""
    problems = []
    off = run_pipeline(kind, a, image, seg, Draws(device, a.seed, force=0))
    on = run_pipeline(kind, a, image, seg, Draws(device, a.seed, force=1))
    P = a.size
    # On the GPU grid_sample's unnormalised positions ((x + 1) W - 1) / 2 land up to ~1e-5 of
    # a voxel off the voxel centres (float rounding), which mixes in that much of the
    # neighbours: 3e-5 on these inputs. Half a voxel off gives ~1e-1.
    tol = 1e-4 if image.is_cuda else 1e-5
    if kind == "nnunet":
        o = (image.shape[2] - P) // 2
        box = (slice(None), slice(None), slice(o, o + P), slice(o, o + P), slice(o, o + P))
        want = seg[box].clamp(min=0).float()
        err = float((off["image"] - image[box]).abs().max())
        if err > tol:
            problems.append("off: image differs from the crop at offset %d by %.1e" % (o, err))
        for i, n in enumerate(G.nnunet_ds_sizes(P, a.levels)):
            t = F.interpolate(want, size=(n, n, n), mode="nearest-exact") if i else want
            if not torch.equal(off["target.%d" % i], t):
                problems.append("off: target.%d is not the crop's labels" % i)
        for i in range(a.levels):
            t = on["target.%d" % i]
            if not torch.equal(t, t.round()) or t.min() < 0 or t.max() > a.classes - 1:
                problems.append("on: target.%d holds other values than 0 .. %d" % (i, a.classes - 1))
    else:
        box = (slice(None), slice(None), slice(0, P), slice(0, P), slice(0, P))
        err = float((off["image"] - image[box]).abs().max())
        if err > tol:
            problems.append("off: image differs from the first %d^3 voxels by %.1e" % (P, err))
        c = a.context
        aff, mask = affinities(seg, P, [(1, 0, 0), (0, 1, 0), (0, 0, 1), (c, 0, 0), (0, c, 0), (0, 0, c)])
        if not (torch.equal(off["target"], aff) and torch.equal(off["mask"], mask)):
            problems.append("off: the affinities are not those of the input ids")
        t, m = on["target"], on["mask"]
        if not (((t == 0) | (t == 1)).all() and ((m == 0) | (m == 1)).all() and (t <= m).all()):
            problems.append("on: affinities not 0/1 or 1 where the mask is 0")
        if not 0 < float(t.mean()) < 1:
            problems.append("on: affinities all %g" % float(t.mean()))
    if not all(bool(torch.isfinite(v).all()) for v in on.values()):
        problems.append("on: an output is not finite")
    if torch.equal(on["image"], off["image"]):
        problems.append("on: the image equals the unaugmented one")
    return problems


def shape_str(t):
    return "x".join(str(n) for n in t.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelines", default="nnunet,banis", help="comma-separated: nnunet, banis")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--size", type=int, default=128, help="output patch P (P^3)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--classes", type=int, default=3, help="nnunet: labels 0 .. classes-1, -1 outside")
    ap.add_argument("--levels", type=int, default=5, help="nnunet: deep-supervision targets")
    ap.add_argument("--context", type=int, default=10, help="banis: crop P + context, long-range offset")
    ap.add_argument("--steps", type=int, default=50, help="timed calls")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, help="torch CPU threads")
    ap.add_argument("--check", action="store_true", help="check each pipeline first (see above)")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    ap.add_argument("--save-inputs", metavar="DIR",
                    help="write each pipeline's synthetic inputs as DIR/<pipeline>_image.npy (f32) and\n"
                         "DIR/<pipeline>_seg.npy (i32), the inputs of its @augment, and stop")
    a = ap.parse_args()
    kinds = a.pipelines.split(",")
    if any(k not in ("nnunet", "banis") for k in kinds):
        ap.error("--pipelines: expected nnunet and/or banis")
    if a.steps < 1 or a.warmup < 0 or a.batch < 1 or a.size < 2 or a.classes < 2 or a.levels < 1:
        ap.error("expected --steps, --batch, --levels >= 1, --warmup >= 0, --size >= 2, --classes >= 2")
    if "banis" in kinds and not 1 <= a.context < a.size:
        ap.error("--context: expected 1 <= context < size")
    if "nnunet" in kinds and min(G.nnunet_ds_sizes(a.size, a.levels)) < 1:
        ap.error("--size %d has no %d deep-supervision levels" % (a.size, a.levels))
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("augment_torch.py: no CUDA device (use --device cpu)")
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.save_inputs:  # the same inputs for our side (medrun run --func augment)
        import numpy as np
        os.makedirs(a.save_inputs, exist_ok=True)
        for kind in kinds:
            image, seg = make_inputs(kind, a, device)
            for n, t in (("image", image), ("seg", seg)):
                path = os.path.join(a.save_inputs, "%s_%s.npy" % (kind, n))
                np.save(path, t.cpu().numpy())
                print("%s  %s %s" % (path, shape_str(t), t.dtype), flush=True)
        return
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, %d threads" % torch.get_num_threads()
    print("augmentation pipelines, batch %d, 1 channel, %d^3 out, torch %s, %s"
          % (a.batch, a.size, torch.__version__, name), flush=True)
    failed, results = False, {}
    with torch.no_grad():
        for kind in kinds:
            image, seg = make_inputs(kind, a, device)
            if a.check:
                problems = check(kind, a, image, seg, device)
                failed |= bool(problems)
                print("check %s: %s%s" % (kind, "FAIL: " if problems else "PASS",
                                          "; ".join(problems)), flush=True)
            draws = Draws(device, a.seed + 1)
            times, peak, out = timed(lambda: run_pipeline(kind, a, image, seg, draws), a, device)
            ms = statistics.median(times)
            S = image.shape[2]
            print("torch aug-%-8s %8.3f ms/batch  peak %s  (%d^3 -> %d^3, batch %d, min %.3f, max %.3f ms, "
                  "%d timed after %d warm-up)" % (kind, ms, "%6.2f GiB" % peak if peak is not None else "   n/a GiB",
                                                  S, a.size, a.batch, min(times), max(times), a.steps, a.warmup),
                  flush=True)
            print("outputs %s: %s" % (kind, "  ".join("%s %s" % (k, shape_str(v)) for k, v in out.items())), flush=True)
            results[kind] = {"ms_median": ms, "ms_min": min(times), "ms_max": max(times), "peak_gib": peak,
                             "input": S, "output": a.size, "batch": a.batch,
                             "outputs": {k: list(v.shape) for k, v in out.items()}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": name, "pipelines": results}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
