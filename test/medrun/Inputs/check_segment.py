"""`medrun segment` against a direct NumPy/SciPy implementation of the definitions
(segment.test; the rules are runtime/include/medrun/Segmentation.h's).

Affinities: channel k at voxel v is the affinity of v and v + off_k (an edge leaving the
volume does not exist). Edges are processed in descending weight, ties by the edge index
v * K + k. Written here from the definitions, with no code shared with medrun:

- seeded watershed: seeds are the connected components (scipy.sparse.csgraph) of the
  short-range edges >= the seed threshold with >= max(2, min seed size) voxels; Kruskal
  over the short-range edges > low: trees join unless both hold different seeds; a voxel
  in no edge > low is 0; objects numbered 1..N by first voxel in C order;
- mean agglomeration: fragments' region graph (sum, count of short-range affinities per
  pair), then, by brute force (every step recomputes every pair's mean from the voxels'
  labels), merge the pair of highest mean (ties: lowest (min, max) id pair, the merged
  region keeps the smaller id) while the mean > threshold; segments numbered by smallest
  fragment;
- mutex watershed: short-range edges attractive (weight a), the others repulsive (weight
  1 - a); Kruskal with mutexes between clusters;
- block-wise: the same with every edge between two blocks taken after every edge inside a
  block (the bound Segmentation.h states); medrun's --block result must equal that.

Each comparison has a wrong variant that must be told apart (the negative control): max
instead of mean affinity, mean of the pair means instead of the count-weighted mean,
repulsive edges ignored, the watershed without seeds, blocks not stitched.

  check_segment.py --medrun MEDRUN --dir DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

p = argparse.ArgumentParser()
p.add_argument("--medrun", required=True)
p.add_argument("--dir", required=True)
a = p.parse_args()
os.makedirs(a.dir, exist_ok=True)
os.chdir(a.dir)
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def is_short(o):
    return sum(abs(x) for x in o) == 1


def edges(shape, offsets, affs, channels, block=None):
    """(weight, index, u, v, k) of every edge of the channels, as arrays; `inside` when
    both ends lie in one block (block=None: one block)."""
    K = len(offsets)
    D, H, W = shape
    zz, yy, xx = np.meshgrid(np.arange(D), np.arange(H), np.arange(W), indexing="ij")
    out = []
    for k in channels:
        o = offsets[k]
        tz, ty, tx = zz + o[0], yy + o[1], xx + o[2]
        ok = (tz >= 0) & (tz < D) & (ty >= 0) & (ty < H) & (tx >= 0) & (tx < W)
        u = (zz * H + yy) * W + xx
        v = (tz * H + ty) * W + tx
        if block is None:
            inside = np.ones_like(ok)
        else:
            inside = ((zz // block[0] == tz // block[0]) & (yy // block[1] == ty // block[1])
                      & (xx // block[2] == tx // block[2]))
        out.append((affs[k][ok], u[ok] * K + k, u[ok], v[ok], np.full(ok.sum(), k), inside[ok]))
    return [np.concatenate([e[i] for e in out]) for i in range(6)]


def order(w, idx, inside):
    # Inside-block edges first, then by descending weight, then ascending index.
    return np.lexsort((idx, -w.astype(np.float64), ~inside))


def find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def number_by_first_voxel(root_of, background):
    n = len(root_of)
    labels = np.zeros(n, np.uint64)
    ids = {}
    for v in range(n):
        r = root_of[v]
        if background(r):
            continue
        if r not in ids:
            ids[r] = len(ids) + 1
        labels[v] = ids[r]
    return labels


def watershed(shape, offsets, affs, seed_thr, low, min_seed, block=None, seeded=True):
    n = int(np.prod(shape))
    short = [k for k, o in enumerate(offsets) if is_short(o)]
    w, idx, u, v, _, inside = edges(shape, offsets, affs, short, block)
    s = w >= np.float32(seed_thr)
    g = coo_matrix((np.ones(s.sum()), (u[s], v[s])), shape=(n, n))
    _, comp = connected_components(g, directed=False)
    size = np.bincount(comp)
    seed = np.where(size[comp] >= max(2, min_seed), comp + 1, 0) if seeded else np.zeros(n, int)
    keep = w > np.float32(low)
    w, idx, u, v, inside = w[keep], idx[keep], u[keep], v[keep], inside[keep]
    parent = list(range(n))
    tree_seed = list(seed)
    tree_size = [1] * n
    for e in order(w, idx, inside):
        ra, rb = find(parent, u[e]), find(parent, v[e])
        if ra == rb or (tree_seed[ra] and tree_seed[rb] and tree_seed[ra] != tree_seed[rb]):
            continue
        if rb < ra:
            ra, rb = rb, ra
        parent[rb] = ra
        tree_seed[ra] = tree_seed[ra] or tree_seed[rb]
        tree_size[ra] += tree_size[rb]
    roots = [find(parent, x) for x in range(n)]
    return number_by_first_voxel(roots, lambda r: tree_size[r] == 1).reshape(shape)


def agglomerate(shape, offsets, affs, frags, thresholds, rule="mean"):
    """Brute force: every step rebuilds the region graph of the current labels."""
    short = [k for k, o in enumerate(offsets) if is_short(o)]
    w, _, u, v, _, _ = edges(shape, offsets, affs, short)
    f = frags.reshape(-1).astype(np.int64)
    fu, fv = f[u], f[v]
    m = (fu != fv) & (fu > 0) & (fv > 0)
    fu, fv, w = fu[m], fv[m], w[m].astype(np.float64)
    lo, hi = np.minimum(fu, fv), np.maximum(fu, fv)
    nfr = int(f.max())
    region = np.arange(nfr + 1)
    # The pair means of the fragments, for the mean-of-means wrong variant.
    pair_stats = {}
    for a_, b_, x in zip(lo, hi, w):
        s_ = pair_stats.setdefault((a_, b_), [0.0, 0])
        s_[0] += x
        s_[1] += 1
    results = {}
    for t in sorted(thresholds, reverse=True):
        while True:
            ru, rv = region[lo], region[hi]
            mm = ru != rv
            if not mm.any():
                break
            a_, b_ = np.minimum(ru[mm], rv[mm]), np.maximum(ru[mm], rv[mm])
            stats = {}
            if rule == "mean-of-means":
                for (p_, q_), (s_, c_) in pair_stats.items():
                    ra_, rb_ = min(region[p_], region[q_]), max(region[p_], region[q_])
                    if ra_ != rb_:
                        stats.setdefault((ra_, rb_), []).append(s_ / c_)
                score = {k_: float(np.mean(x_)) for k_, x_ in stats.items()}
            else:
                for p_, q_, x in zip(a_, b_, w[mm]):
                    stats.setdefault((p_, q_), []).append(x)
                score = {k_: (max(x_) if rule == "max" else sum(x_) / len(x_))
                         for k_, x_ in stats.items()}
            best = min(score, key=lambda k_: (-score[k_], k_))
            if not score[best] > t:
                break
            keep_, gone = best
            region[region == gone] = keep_
        remap = np.zeros(nfr + 1, np.uint64)
        nxt = 0
        for fr in range(1, nfr + 1):
            if region[fr] == fr:
                nxt += 1
                remap[fr] = nxt
        for fr in range(1, nfr + 1):
            remap[fr] = remap[region[fr]]
        results[t] = remap[f].reshape(shape)
    return [results[t] for t in thresholds]


def mutex_ws(shape, offsets, affs, block=None, use_repulsive=True):
    n = int(np.prod(shape))
    w, idx, u, v, k, inside = edges(shape, offsets, affs, range(len(offsets)), block)
    attractive = np.array([is_short(offsets[c]) for c in k], bool)
    w = np.where(attractive, w, np.float32(1) - w).astype(np.float32)
    if not use_repulsive:
        keep = attractive
        w, idx, u, v, attractive, inside = w[keep], idx[keep], u[keep], v[keep], attractive[keep], inside[keep]
    parent = list(range(n))
    mutex = {x: set() for x in range(n)}
    for e in order(w, idx, inside):
        ra, rb = find(parent, u[e]), find(parent, v[e])
        if ra == rb or rb in mutex[ra]:
            continue
        if not attractive[e]:
            mutex[ra].add(rb)
            mutex[rb].add(ra)
            continue
        if rb < ra:
            ra, rb = rb, ra
        parent[rb] = ra
        for m_ in mutex.pop(rb):
            mutex[m_].discard(rb)
            mutex[m_].add(ra)
            mutex[ra].add(m_)
        mutex[rb] = set()
    roots = [find(parent, x) for x in range(n)]
    return number_by_first_voxel(roots, lambda r: False).reshape(shape)


def unstitched(shape, block, labels_of_block):
    """Each block segmented alone, ids made unique, never merged (a wrong variant)."""
    out = np.zeros(shape, np.int64)
    nxt = 0
    for z in range(0, shape[0], block[0]):
        for y in range(0, shape[1], block[1]):
            for x in range(0, shape[2], block[2]):
                sl = (slice(z, z + block[0]), slice(y, y + block[1]), slice(x, x + block[2]))
                lab = labels_of_block(sl).astype(np.int64)
                out[sl] = np.where(lab > 0, lab + nxt, 0)
                nxt += int(lab.max())
    return out


def medrun(affs_file, out, *args):
    cmd = [a.medrun, "segment", affs_file, "-o", out, "--progress", "lines"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print(" ".join(cmd) + "\n" + r.stdout + r.stderr)
        failures.append("medrun segment failed")
        return None
    return True if "{t}" in out else np.load(out)


def offsets_arg(offsets):
    return ";".join(",".join(str(x) for x in o) for o in offsets)


rng = np.random.default_rng(7)
# Random inputs with structure: blobs of a random label volume, affinities high inside an
# object and low across, plus noise; one set quantized to multiples of 1/8 so that equal
# weights (the tie rule) occur, with odd sizes and anisotropic, negative offsets.
cases = []
shape = (7, 9, 11)
lab = rng.integers(0, 4, size=(3, 3, 4))
lab = np.kron(lab, np.ones((3, 3, 3), int))[: shape[0], : shape[1], : shape[2]]
# PyTorch Connectomics' sign (v - 1 along each axis) and an extra long range, with blocks
# one voxel thick along z, in a third case.
forward = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (-2, 0, 0), (0, 3, 0), (0, 0, -3)]
backward = [(-1, 0, 0), (0, -1, 0), (0, 0, -1), (0, -4, 0), (5, 0, 0)]
for name, offsets, quant, block in (("continuous", forward, False, (4, 5, 4)),
                                    ("quantized", forward, True, (4, 5, 4)),
                                    ("backward", backward, False, (1, 4, 6))):
    affs = []
    for o in offsets:
        shifted = np.roll(lab, shift=(-o[0], -o[1], -o[2]), axis=(0, 1, 2))
        same = (shifted == lab).astype(np.float32)
        x = 0.15 + 0.7 * same + rng.uniform(-0.3, 0.3, size=shape)
        x = np.clip(x, 0, 1).astype(np.float32)
        if quant:
            x = (np.round(x * 8) / 8).astype(np.float32)
        affs.append(x)
    cases.append((name, offsets, np.stack(affs), block))

seed_thr, low, min_seed = 0.9, 0.1, 2
for name, offsets, affs, block in cases:
    common = ["--offsets", offsets_arg(offsets), "--seed-threshold", str(seed_thr), "--low",
              str(low), "--min-seed-size", str(min_seed)]
    np.save(f"affs_{name}.npy", affs)
    f = f"affs_{name}.npy"
    ws = watershed(shape, offsets, affs, seed_thr, low, min_seed)
    got = medrun(f, f"ws_{name}.npy", "--method", "watershed", *common)
    if got is None:
        continue
    nfr = int(ws.max())
    check(np.array_equal(got, ws), f"{name}: watershed = the definition ({nfr} fragments)")
    check(not np.array_equal(got, watershed(shape, offsets, affs, seed_thr, low, min_seed, seeded=False)),
          f"{name}: negative control: the comparison rejects the watershed without seeds")

    ts = [0.7, 0.55, 0.4, 0.25]
    ref = agglomerate(shape, offsets, affs, ws, ts)
    if medrun(f, f"agg_{name}_{{t}}.npy", "--method", "mean-agglomeration", "--threshold",
              ",".join(str(t) for t in ts), *common) is None:
        continue
    for t, r in zip(ts, ref):
        g = np.load(f"agg_{name}_{t:g}.npy")
        check(np.array_equal(g, r), f"{name}: mean agglomeration at {t} = the definition "
              f"({int(r.max())} segments from {nfr} fragments)")
    for rule in ("max", "mean-of-means"):
        wrong = agglomerate(shape, offsets, affs, ws, ts, rule)
        same = all(np.array_equal(np.load(f"agg_{name}_{t:g}.npy"), x) for t, x in zip(ts, wrong))
        check(not same, f"{name}: negative control: the comparison rejects {rule} agglomeration")

    mws = mutex_ws(shape, offsets, affs)
    got = medrun(f, f"mws_{name}.npy", "--method", "mutex", "--offsets", offsets_arg(offsets))
    if got is not None:
        check(np.array_equal(got, mws), f"{name}: mutex watershed = the definition ({int(mws.max())} clusters)")
        check(not np.array_equal(got, mutex_ws(shape, offsets, affs, use_repulsive=False)),
              f"{name}: negative control: the comparison rejects repulsive edges ignored")

    # Block-wise: equal to the definition with the edges between blocks taken last.
    bargs = ["--block", ",".join(map(str, block))]
    wsb = watershed(shape, offsets, affs, seed_thr, low, min_seed, block)
    got = medrun(f, f"wsb_{name}.npy", "--method", "watershed", *common, *bargs)
    if got is not None:
        check(np.array_equal(got, wsb), f"{name}: block-wise watershed = the definition, "
              f"edges between blocks last (whole volume {'equal' if np.array_equal(wsb, ws) else 'differs'})")
        un = unstitched(shape, block, lambda sl: watershed(
            tuple(min(s.stop, d) - s.start for s, d in zip(sl, shape)),
            offsets, affs[(slice(None),) + sl], seed_thr, low, min_seed))
        check(not np.array_equal(got, un), f"{name}: negative control: the comparison rejects blocks not stitched")
    got = medrun(f, f"aggb_{name}.npy", "--method", "mean-agglomeration", "--threshold", "0.4", *common, *bargs)
    if got is not None:
        check(np.array_equal(got, agglomerate(shape, offsets, affs, wsb, [0.4])[0]),
              f"{name}: block-wise agglomeration = the definition on the block-wise fragments")
    mwsb = mutex_ws(shape, offsets, affs, block)
    got = medrun(f, f"mwsb_{name}.npy", "--method", "mutex", "--offsets", offsets_arg(offsets), *bargs)
    if got is not None:
        check(np.array_equal(got, mwsb), f"{name}: block-wise mutex watershed = the definition, "
              f"edges between blocks last (whole volume {'equal' if np.array_equal(mwsb, mws) else 'differs'})")
        un = unstitched(shape, block, lambda sl: mutex_ws(
            tuple(min(s.stop, d) - s.start for s, d in zip(sl, shape)), offsets,
            affs[(slice(None),) + sl]))
        check(not np.array_equal(got, un), f"{name}: negative control: the comparison rejects blocks not stitched")

if failures:
    print("segment: FAILED: " + "; ".join(failures))
    sys.exit(1)
print("segment: all checks passed")
