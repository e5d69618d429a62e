"""Compares the CUDA modules of two artifacts: how many of each took their cubin from
medc's cache (the document's cuda.modules[*].cached), how many of the second's modules have
the source of one of the first's, and whether the two carry the same cubins and PTX.

usage: cubin_cache.py A.medc B.medc [--cache DIR]   (DIR: also count the cache's entries)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import artifact_container  # noqa: E402


def read(path):
    doc, sections = artifact_container.read(path)
    return doc["cuda"]["modules"], sections


(ma, sa), (mb, sb) = read(sys.argv[1]), read(sys.argv[2])
first = {sa[m["source"]] for m in ma}
unchanged = [m for m in mb if sb[m["source"]] in first]
same = len(ma) == len(mb) and all(
    sa[x[k]] == sb[y[k]] for x, y in zip(ma, mb) for k in ("source", "cubin", "ptx"))
cached = sum(m["cached"] for m in mb)
print("first: %d modules, %d cached" % (len(ma), sum(m["cached"] for m in ma)))
print("second: %d modules, %d cached, %d compiled" % (len(mb), cached, len(mb) - cached))
print("second: %d with a source of the first, %d of them cached" % (
    len(unchanged), sum(m["cached"] for m in unchanged)))
print("%s cubins and PTX" % ("same" if same else "different"))
if "--cache" in sys.argv:
    print("cache: %d entries" % len(os.listdir(sys.argv[sys.argv.index("--cache") + 1])))
