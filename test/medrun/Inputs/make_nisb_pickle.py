"""A skeleton.pkl as NISB writes it, from a skeletons JSON (metrics-skeletons.test).

NISB's file is a pickled networkx Graph: its state holds `graph`, `_node` (node -> attribute
dict: `id` a numpy integer, `index_position` and `nm_position` numpy arrays in x, y, z) and
`_adj` (node -> neighbour -> edge attributes). networkx is not installed here, so a class of
the same module path and name stands for it: the pickle names networkx.classes.graph.Graph
and carries the same state, which is what scripts/nisb_skeletons.py reads.

  make_nisb_pickle.py SKELETONS.json OUT.pkl
  make_nisb_pickle.py --same A.json B.json     the two eval reports' skeleton scores agree
"""
import json
import pickle
import sys
import types

import numpy as np

if sys.argv[1] == "--same":
    a = json.load(open(sys.argv[2]))["scores"]["skeleton"]
    b = json.load(open(sys.argv[3]))["scores"]["skeleton"]
    keys = ["erl", "max_erl", "nerl", "voi_split", "voi_merge", "length"]
    bad = [k for k in keys if abs(a[k] - b[k]) > 1e-6 * max(1.0, abs(a[k]))]
    if bad:
        sys.exit("the converted skeleton.pkl scores differently: %s" % {k: (a[k], b[k]) for k in bad})
    print("skeleton.pkl converted: the same scores", {k: a[k] for k in keys})
    sys.exit(0)

for name in ("networkx", "networkx.classes", "networkx.classes.graph"):
    sys.modules[name] = types.ModuleType(name)


class Graph:
    pass


Graph.__module__ = "networkx.classes.graph"
sys.modules["networkx.classes.graph"].Graph = Graph

doc = json.load(open(sys.argv[1]))
spacing = doc.get("spacing", [1, 1, 1])
g = Graph()
g.graph = {}
g._node = {}
g._adj = {}
for n in doc["nodes"]:
    v = n.get("voxel")
    if v is None:
        v = [int(round(p / s)) for p, s in zip(n["position"], spacing)]
    nm = n.get("position") or [c * s for c, s in zip(v, spacing)]
    g._node[n["node"]] = {"id": np.uint64(n["skeleton"]),
                          "index_position": np.array(v[::-1], np.int64),
                          "nm_position": np.array(nm[::-1], np.float32)}
    g._adj[n["node"]] = {}
for u, v in doc["edges"]:
    g._adj[u][v] = {}
    g._adj[v][u] = {}
with open(sys.argv[2], "wb") as f:
    pickle.dump(g, f, protocol=4)
