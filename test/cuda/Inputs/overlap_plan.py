"""Edits the memory plan of a compiled artifact (docs/artifact.md, version 11) so that the
result of a function's first launched op shares bytes with that op's first operand, which is
live at the same step, and writes the artifact again (the CRC recomputed): the runtime must
reject it. usage: overlap_plan.py IN.medc OUT.medc FUNCTION"""
import json
import struct
import sys
import zlib

src, dst, name = sys.argv[1:4]
b = open(src, "rb").read()
n, = struct.unpack("<Q", b[16:24])
doc = json.loads(b[24:24 + n])
fn = next(f for f in doc["functions"] if f["name"] == name)
plan = fn["cuda_plan"]
op = fn["ops"][next(s["op"] for s in plan["steps"] if s["kind"] == "launch")]
operand = next(ids[0] for ids in op["operands"].values() if ids)
result = op["results"][0]
offsets = plan["memory"]["offsets"]
assert offsets[operand] >= 0 and offsets[result] >= 0, offsets
print("value %d onto value %d" % (result, operand))
offsets[result] = offsets[operand]
text = json.dumps(doc).encode()
body = b[:16] + struct.pack("<Q", len(text)) + text + b[24 + n:-4]
open(dst, "wb").write(body + struct.pack("<I", zlib.crc32(body)))
