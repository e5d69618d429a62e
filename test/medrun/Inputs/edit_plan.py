"""Edits the ops of one kind in one function of a compiled artifact, for negative controls:
a plan that computes something else must fail the check that compares it.

usage: edit_plan.py IN.medc OUT.medc --func F --op KIND [--where ATTR=JSON] [--set ATTR=JSON]
                    [--swap A,B]

Every op of kind KIND in function F (whose attribute ATTR equals JSON, with --where) gets
ATTR set (--set) and/or its operand groups A and B exchanged (--swap). The container of
docs/artifact.md is rewritten with the CRC recomputed. Prints how many ops were edited and
exits 1 if none matched.
"""
import argparse
import json
import struct
import sys
import zlib

p = argparse.ArgumentParser()
p.add_argument("input")
p.add_argument("output")
p.add_argument("--func", required=True)
p.add_argument("--op", required=True)
p.add_argument("--where", action="append", default=[])
p.add_argument("--set", action="append", default=[])
p.add_argument("--swap")
o = p.parse_args()


def pairs(items):
    return [(k, json.loads(v)) for k, v in (i.split("=", 1) for i in items)]


d = open(o.input, "rb").read()
n, = struct.unpack("<Q", d[16:24])
doc = json.loads(d[24:24 + n])
fn = next(f for f in doc["functions"] if f["name"] == o.func)
edited = 0
for op in fn["ops"]:
    if op["op"] != o.op or any(op["attrs"].get(k) != v for k, v in pairs(o.where)):
        continue
    for k, v in pairs(o.set):
        op["attrs"][k] = v
    if o.swap:
        a, b = o.swap.split(",")
        op["operands"][a], op["operands"][b] = op["operands"][b], op["operands"][a]
    edited += 1
body = json.dumps(doc).encode()
head = d[:16] + struct.pack("<Q", len(body)) + body + d[24 + n:-4]
open(o.output, "wb").write(head + struct.pack("<I", zlib.crc32(head) & 0xffffffff))
print("edited %d '%s' ops of %s" % (edited, o.op, o.func))
sys.exit(0 if edited else 1)
