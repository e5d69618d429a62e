"""Edits the ops of one kind in one function of a compiled artifact, for negative controls:
a plan that computes something else must fail the check that compares it; or exposes their
results as outputs, to compare intermediate values.

usage: edit_plan.py IN.medc OUT.medc --func F --op KIND [--where ATTR=JSON] [--set ATTR=JSON]
                    [--swap A,B] [--expose] [--rename NAME]

Every op of kind KIND in function F (whose attribute ATTR equals JSON, with --where) gets
ATTR set (--set) and/or its operand groups A and B exchanged (--swap). With --expose, each
matched op's results become further outputs of F, named `KIND.v<value id>` (the forward
check of medcheck, with --against-f64 too, then compares every one of them: which op of a
plan first loses precision). --rename gives F the name NAME (a function already named so is
renamed NAME.orig): medcheck and medrun draw random inputs from a seed and the function's
name, so a <loss>_grad renamed to <loss> gets the batch that `medcheck --train-steps` draws.
--op all matches every op but param and constant. With --in-fusions the ops matched are those
of the fusion bodies F's fusion ops run instead (a body is shared by every fusion that runs
it). The container of docs/artifact.md is
rewritten with the CRC recomputed. Prints how many ops were edited and exits 1 if none
matched.
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
p.add_argument("--expose", action="store_true")
p.add_argument("--rename")
p.add_argument("--in-fusions", action="store_true")
o = p.parse_args()


def pairs(items):
    return [(k, json.loads(v)) for k, v in (i.split("=", 1) for i in items)]


d = open(o.input, "rb").read()
n, = struct.unpack("<Q", d[16:24])
doc = json.loads(d[24:24 + n])
fn = next(f for f in doc["functions"] if f["name"] == o.func)
edited = 0
ops = fn["ops"]
if o.in_fusions:
    bodies = sorted({op["attrs"]["body"] for op in fn["ops"] if op["op"] == "fusion"})
    ops = [op for b in bodies for op in doc["fusions"][b]["ops"]]
for op in ops:
    if o.op == "all" and op["op"] in ("param", "constant"):
        continue
    if o.op not in ("all", op["op"]) or any(op["attrs"].get(k) != v for k, v in pairs(o.where)):
        continue
    for k, v in pairs(o.set):
        op["attrs"][k] = v
    if o.swap:
        a, b = o.swap.split(",")
        op["operands"][a], op["operands"][b] = op["operands"][b], op["operands"][a]
    if o.expose:
        names = fn.setdefault("output_names", ["out%d" % i for i in range(len(fn["outputs"]))])
        for r in op["results"]:
            fn["outputs"].append(r)
            names.append("%s.v%d" % (op["op"], r))
    edited += 1
if o.rename:
    for f in doc["functions"]:
        if f["name"] == o.rename:
            f["name"] = o.rename + ".orig"
    fn["name"] = o.rename
body = json.dumps(doc).encode()
head = d[:16] + struct.pack("<Q", len(body)) + body + d[24 + n:-4]
open(o.output, "wb").write(head + struct.pack("<I", zlib.crc32(head) & 0xffffffff))
print("edited %d '%s' ops of %s" % (edited, o.op, o.func))
sys.exit(0 if edited else 1)
