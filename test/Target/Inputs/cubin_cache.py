"""Compares the CUDA sections of two artifacts and says whether each took its cubin from
medc's cache (the document's cuda.cubin_cached).

usage: cubin_cache.py A.medc B.medc
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import artifact_container  # noqa: E402


def read(path):
    doc, sections = artifact_container.read(path)
    return doc["cuda"], sections


(ca, sa), (cb, sb) = read(sys.argv[1]), read(sys.argv[2])
same = all(sa[k] == sb[k] for k in ("cuda.cubin", "cuda.ptx"))
print("first cached %s, second cached %s, %s cubin and PTX" % (
    str(ca.get("cubin_cached")).lower(), str(cb.get("cubin_cached")).lower(),
    "same" if same else "different"))
