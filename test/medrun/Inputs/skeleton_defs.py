"""NISB/BANIS's skeleton scores as NumPy definitions, and the random volumes and skeletons
that test them (check_skeleton_metrics.py, check_sweep.py, check_e2e.py; docs/skeletons.md
states the definitions). No code is shared with medrun.
"""
import json

import numpy as np


def voronoi(shape, seeds, rng, ids):
    pts = np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij"), -1).reshape(-1, 3)
    cen = np.stack([rng.integers(0, s, seeds) for s in shape], 1)
    d = ((pts[:, None, :] - cen[None]) ** 2).sum(-1)
    return np.asarray(ids)[d.argmin(1)].reshape(shape)


def random_skeletons(gt, rng, per_object):
    """Random trees over random voxels of each object > 0: nodes (skeleton id, voxel), edges."""
    nodes, edges = [], []
    for sid in np.unique(gt):
        if sid <= 0:
            continue
        vox = np.argwhere(gt == sid)
        k = min(len(vox), int(rng.integers(2, per_object + 1)))
        pick = vox[rng.choice(len(vox), k, replace=False)]
        base = len(nodes)
        for i, v in enumerate(pick):
            nodes.append((int(sid), tuple(int(c) for c in v)))
            if i:
                edges.append((base + int(rng.integers(0, i)), base + i))
    return nodes, edges


def write_skeletons(path, nodes, edges, spacing, form, node_ids):
    out = []
    for (sid, v), nid in zip(nodes, node_ids):
        node = {"node": nid, "skeleton": sid}
        phys = [v[k] * spacing[k] for k in range(3)]
        if form in ("voxel", "both", "xyz"):
            node["voxel"] = list(v)
        if form in ("position", "both", "xyz"):
            node["position"] = phys
        if form == "xyz":
            node["voxel"] = node["voxel"][::-1]
            node["position"] = node["position"][::-1]
        out.append(node)
    doc = {"nodes": out, "edges": [[node_ids[u], node_ids[v]] for u, v in edges]}
    if form == "xyz":
        doc["axes"] = "xyz"
    if form == "position":
        doc["spacing"] = list(spacing)
    with open(path, "w") as f:
        json.dump(doc, f)


def erl(nodes, edges, lut, spacing, ignored=0, weighted=True, penalise=True,
        whole_skeleton=False, by_nodes=False):
    sk = np.array([s for s, _ in nodes])
    pos = np.array([v for _, v in nodes], np.float64) * np.asarray(spacing)
    seg = np.asarray(lut)
    pairs, counts = np.unique(np.stack([sk, seg], 1), axis=0, return_counts=True)
    pairs = pairs[counts > ignored]
    segs, nsk = np.unique(pairs[:, 1], return_counts=True)
    merging = set(segs[nsk > 1].tolist()) if penalise else set()
    merged = set(pairs[np.isin(pairs[:, 1], list(merging)), 0].tolist())
    length = {}
    correct = {}
    for u, v in edges:
        s = sk[u]
        el = np.linalg.norm(pos[u] - pos[v]) if weighted else 1.0
        length[s] = length.get(s, 0.0) + el
        a_, b_ = seg[u], seg[v]
        if a_ == 0 or b_ == 0 or a_ != b_:
            continue
        if s in merged and (whole_skeleton or a_ in merging):
            continue
        correct[(s, a_)] = correct.get((s, a_), 0.0) + el
    total = sum(length.values())
    if by_nodes:  # wrong: each skeleton weighted by its node count, not its length
        nn = {s: (sk == s).sum() for s in length}
        tot_n = sum(nn.values())
        return sum(nn[s] / tot_n * sum(c * c for (t, _), c in correct.items() if t == s) / length[s]
                   for s in length if length[s] > 0)
    return sum(length[s] / total * sum(c * c for (t, _), c in correct.items() if t == s) / length[s]
               for s in length if length[s] > 0)


def voi_arand(pred, gt):
    """CREMI's VOI (bits, ground truth <= 0 left out) and adapted Rand error over pairs."""
    g = np.where(gt <= 0, 0, gt).ravel()
    pr = pred.ravel()
    N = len(g)
    fg = g > 0
    _, gi = np.unique(g[fg], return_inverse=True)
    pv, pi = np.unique(pr[fg], return_inverse=True)
    n = np.zeros((gi.max() + 1, len(pv)), np.float64)
    np.add.at(n, (gi, pi), 1)
    pxy = n / n.sum()
    px, py = pxy.sum(1, keepdims=True), pxy.sum(0, keepdims=True)
    nz = pxy > 0
    split = -(pxy[nz] * np.log2((pxy / px)[nz])).sum()
    merge = -(pxy[nz] * np.log2((pxy / py)[nz])).sum()
    zero = pv == 0
    c = n[:, zero].sum() / N
    sum_a = (n.sum(1) ** 2).sum()
    sum_b = (n[:, ~zero].sum(0) ** 2).sum() + c
    sum_ab = (n[:, ~zero] ** 2).sum() + c
    prec, rec = sum_ab / sum_b, sum_ab / sum_a
    return split, merge, 1 - 2 * prec * rec / (prec + rec)


def close(x, y, tol=1e-9):
    return abs(x - y) <= tol * max(1.0, abs(y))


def components(aff, t):
    """BANIS's instances: voxels joined by a short-range affinity > t (aff[a][v] joins v and
    v + e_a) are one object; a voxel joined to none is 0. Numbered by first voxel."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    shape = aff.shape[1:]
    size = int(np.prod(shape))
    idx = np.arange(size).reshape(shape)
    us, vs = [], []
    for ax in range(3):
        src = [slice(None)] * 3
        dst = [slice(None)] * 3
        src[ax], dst[ax] = slice(0, -1), slice(1, None)
        on = aff[ax][tuple(src)] > t
        us.append(idx[tuple(src)][on])
        vs.append(idx[tuple(dst)][on])
    u, v = np.concatenate(us), np.concatenate(vs)
    g = coo_matrix((np.ones(len(u)), (u, v)), shape=(size, size))
    _, lab = connected_components(g, directed=False)
    joined = np.zeros(size, bool)
    joined[u] = joined[v] = True
    out = np.zeros(size, np.int64)
    ids = {}
    for i in np.flatnonzero(joined):
        out[i] = ids.setdefault(lab[i], len(ids) + 1)
    return out.reshape(shape)


def skeleton_scores(nodes, edges, seg, spacing):
    """The report's skeleton block for segmentation `seg` (a dict of the numbers checked)."""
    lut = [int(seg[v]) for _, v in nodes]
    sk = np.array([s for s, _ in nodes])
    out = {"erl": erl(nodes, edges, lut, spacing),
           "max_erl": erl(nodes, edges, [s for s, _ in nodes], spacing)}
    out["nerl"] = out["erl"] / out["max_erl"]
    for n_ign, key in [(5, "nerl_5"), (20, "nerl_20"), (100, "nerl_100"), (1 << 62, "nerl_inf")]:
        out[key] = erl(nodes, edges, lut, spacing, ignored=n_ign) / out["max_erl"]
    out["voi_split"], out["voi_merge"], out["arand"] = voi_arand(np.array(lut), sk)
    return out
