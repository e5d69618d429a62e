"""Compares the CUDA sections of two artifacts and says whether each took its cubin from
medc's cache (the document's cuda.cubin_cached).

usage: cubin_cache.py A.medc B.medc
"""
import json
import struct
import sys


def read(path):
    b = open(path, "rb").read()
    n, = struct.unpack("<Q", b[16:24])
    doc = json.loads(b[24:24 + n])
    off = 24 + n
    count, = struct.unpack("<Q", b[off:off + 8])
    off += 8
    sections = {}
    for _ in range(count):
        ln, = struct.unpack("<Q", b[off:off + 8])
        name = b[off + 8:off + 8 + ln].decode()
        off += 8 + ln
        sz, = struct.unpack("<Q", b[off:off + 8])
        sections[name] = b[off + 8:off + 8 + sz]
        off += 8 + sz
    return doc["cuda"], sections


(ca, sa), (cb, sb) = read(sys.argv[1]), read(sys.argv[2])
same = all(sa[k] == sb[k] for k in ("cuda.cubin", "cuda.ptx"))
print("first cached %s, second cached %s, %s cubin and PTX" % (
    str(ca.get("cubin_cached")).lower(), str(cb.get("cubin_cached")).lower(),
    "same" if same else "different"))
