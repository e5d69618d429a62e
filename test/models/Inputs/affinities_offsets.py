#!/usr/bin/python3
"""The affinity label path (a recipe's loss.affinities.offsets) against a NumPy definition
(test/models/affinities-offsets.test).

  affinities_offsets.py make DIR D,H,W [--batch B] [--seed S]
      random inputs of @augment: image.npy (f32) and seg.npy (i32 ids -1..3, with planes
      of -1 on some faces, as the loader pads outside the volume), B x 1 x D x H x W
  affinities_offsets.py check DIR OUT PATCH OFFSETS
      OUT/{image,target,mask}.npy (what @augment returned for DIR's inputs) against the
      definition: the affinity at patch voxel v (at v + low in the input, low = the
      offsets' reach back) is 1 iff v + o lies in the input, both ids are labelled (>= 0),
      equal and not 0; the mask is 1 iff v + o lies inside and both are labelled; the image
      is the input's crop. OFFSETS: d,h,w;d,h,w;...
"""
import sys

import numpy as np


def make(out, shape, batch=2, seed=0):
    r = np.random.default_rng(seed)
    d, h, w = shape
    # Few ids in blocks, so that equal pairs at every offset are common; some -1 and 0.
    seg = r.integers(-1, 4, size=(batch, 1, d, h, w)).astype(np.int32)
    blocks = r.integers(1, 4, size=(batch, 1, (d + 1) // 2, (h + 2) // 3, (w + 2) // 3))
    blocky = np.repeat(np.repeat(np.repeat(blocks, 2, 2), 3, 3), 3, 4)[:, :, :d, :h, :w]
    keep = r.random(seg.shape) < 0.8
    seg = np.where(keep, blocky, seg).astype(np.int32)
    # The loader's padding: unlabelled planes on the low D face and the high W face.
    seg[0, :, 0] = -1
    seg[-1, :, :, :, -1] = -1
    np.save(out + "/seg.npy", seg)
    np.save(out + "/image.npy", r.random((batch, 1, d, h, w), dtype=np.float32))


def reference(seg, patch, offsets):
    low = [max([0] + [-o[a] for o in offsets]) for a in range(3)]
    B = seg.shape[0]
    S = seg.shape[2:]
    aff = np.zeros((B, len(offsets)) + tuple(patch), np.float32)
    mask = np.zeros_like(aff)
    grid = np.meshgrid(*[np.arange(p) + l for p, l in zip(patch, low)], indexing="ij")
    a = seg[:, 0, grid[0], grid[1], grid[2]]
    for k, o in enumerate(offsets):
        u = [g + o[i] for i, g in enumerate(grid)]
        inside = np.ones(tuple(patch), bool)
        for i in range(3):
            inside &= (u[i] >= 0) & (u[i] < S[i])
        c = [np.clip(u[i], 0, S[i] - 1) for i in range(3)]
        b = seg[:, 0, c[0], c[1], c[2]]
        valid = inside[None] & (a >= 0) & (b >= 0)
        mask[:, k] = valid
        aff[:, k] = valid & (a == b) & (a != 0)
    return aff, mask, low


def check(inputs, out, patch, offsets):
    seg = np.load(inputs + "/seg.npy")
    image = np.load(inputs + "/image.npy")
    aff, mask, low = reference(seg, patch, offsets)
    crop = image[:, :, low[0]:low[0] + patch[0], low[1]:low[1] + patch[1], low[2]:low[2] + patch[2]]
    bad = 0
    for name, want in (("target", aff), ("mask", mask), ("image", crop)):
        have = np.load(out + "/" + name + ".npy")
        if have.shape != want.shape:
            print("FAIL %s: shape %s, expected %s" % (name, have.shape, want.shape))
            bad += 1
            continue
        if name == "image":
            ok = np.array_equal(have, want)
            if not ok:
                print("FAIL image: not the input's crop from %s" % low)
                bad += 1
            continue
        for k in range(want.shape[1]):
            wrong = int((have[:, k] != want[:, k]).sum())
            if wrong:
                print("FAIL %s channel %d (offset %s): %d of %d voxels differ"
                      % (name, k, list(offsets[k]), wrong, want[:, k].size))
                bad += 1
    # The inputs exercise every case: pairs inside and masked, same and different ids.
    cases = (int(mask.sum()), int((1 - mask).sum()), int(aff.sum()), int((mask - aff).sum()))
    if min(cases) == 0:
        print("FAIL inputs: masked %d, unmasked %d, affinity 1 %d, 0 %d: a case is missing" % cases)
        bad += 1
    if not bad:
        print("PASS %d affinities of %s voxels from %s, %d masked" % (len(offsets), "x".join(map(str, patch)),
                                                                  low, int((1 - mask).sum())))
    return bad


def main():
    if sys.argv[1] == "make":
        shape = [int(v) for v in sys.argv[3].split(",")]
        args = dict(zip(sys.argv[4::2], sys.argv[5::2]))
        make(sys.argv[2], shape, int(args.get("--batch", 2)), int(args.get("--seed", 0)))
        return 0
    patch = [int(v) for v in sys.argv[4].split(",")]
    offsets = [tuple(int(v) for v in o.split(",")) for o in sys.argv[5].split(";")]
    return 1 if check(sys.argv[2], sys.argv[3], patch, offsets) else 0


if __name__ == "__main__":
    sys.exit(main())
