#!/usr/bin/env python3
"""NISB's skeleton.pkl -> the skeletons JSON of `medrun eval --skeletons` (docs/skeletons.md).

NISB (and BANIS's metrics.py) store a volume's skeletons as a pickled networkx graph: node
attributes `id` (the ground-truth neuron), `index_position` (voxel indices, x, y, z) and
`nm_position` (nm, x, y, z). This writes {"axes": "xyz", "nodes": [{"node", "skeleton",
"voxel", "position"}], "edges": [[u, v]]}.

networkx need not be installed: its graph classes are read as plain objects (their pickled
state is the node and adjacency dicts). The file is still unpickled (numpy arrays and
scalars are rebuilt by numpy), so convert only files you trust.

  nisb_skeletons.py skeleton.pkl -o skeletons.json
"""
import argparse
import json
import pickle
import sys


class _Plain:
    """Stands for any networkx class (the graph, its cached views): keeps the pickled state
    as attributes, so only the graph's node and adjacency dicts are read."""

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        if isinstance(state, tuple):  # (dict, slots) as pickle gives it for __slots__
            state = {k: v for part in state if isinstance(part, dict) for k, v in part.items()}
        if isinstance(state, dict):
            self.__dict__.update(state)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "networkx" or module.startswith("networkx."):
            return _Plain
        return super().find_class(module, name)


def number(v, what):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise SystemExit("%s = %r: expected a number" % (what, v))
    return int(x) if x == int(x) else x


def triple(v, what):
    try:
        items = list(v)
    except TypeError:
        raise SystemExit("%s = %r: expected 3 numbers" % (what, v))
    if len(items) != 3:
        raise SystemExit("%s = %r: expected 3 numbers" % (what, v))
    return [number(x, what) for x in items]


def convert(path):
    with open(path, "rb") as f:
        g = _Unpickler(f).load()
    nodes = getattr(g, "_node", None)
    adj = getattr(g, "_adj", None)
    if not isinstance(nodes, dict) or not isinstance(adj, dict):
        raise SystemExit("%s: not a pickled networkx graph (no node and adjacency dicts)" % path)
    out_nodes = []
    for n, attrs in nodes.items():
        what = "%s: node %r" % (path, n)
        if "id" not in attrs:
            raise SystemExit("%s: no attribute id (the neuron it traces)" % what)
        node = {"node": number(n, what), "skeleton": number(attrs["id"], what + ": id")}
        if "index_position" in attrs:
            node["voxel"] = triple(attrs["index_position"], what + ": index_position")
        if "nm_position" in attrs:
            node["position"] = triple(attrs["nm_position"], what + ": nm_position")
        if "voxel" not in node and "position" not in node:
            raise SystemExit("%s: neither index_position nor nm_position" % what)
        out_nodes.append(node)
    # Each undirected edge is in both nodes' adjacency dicts: keep its first direction.
    edges, seen = [], set()
    for u, nbrs in adj.items():
        for v in nbrs:
            if (v, u) not in seen:
                seen.add((u, v))
                edges.append([number(u, "edge"), number(v, "edge")])
    return {"axes": "xyz", "nodes": out_nodes, "edges": edges}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pkl")
    p.add_argument("-o", required=True, help="the JSON to write")
    a = p.parse_args()
    doc = convert(a.pkl)
    with open(a.o, "w") as f:
        json.dump(doc, f)
    print("%s: %d nodes, %d edges, %d skeletons -> %s" % (
        a.pkl, len(doc["nodes"]), len(doc["edges"]),
        len({n["skeleton"] for n in doc["nodes"]}), a.o), file=sys.stderr)


if __name__ == "__main__":
    main()
