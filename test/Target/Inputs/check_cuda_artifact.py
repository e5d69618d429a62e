"""Checks the CUDA part of an artifact (medc compile --target cuda), independently of medrun.

usage: check_cuda_artifact.py X.medc [--arch sm_90]

Reads the container of docs/artifact.md (format version 5) with struct/zlib/json only and
checks: the CRC; the cuda.source, cuda.cubin and cuda.ptx sections are present and non-empty;
the cubin is a CUDA ELF (e_machine 190) for the requested arch (its e_flags hold the SM
number); every op of every function is covered by its plan (a launch of at least one
kernel, or a param/alias/assign step for param, reshape and assign, or no work at all for
a value of zero elements; a fusion refers to a body of the table); every launched kernel is defined in the source and named in the
cubin's symbol table; the PTX targets the same arch. Prints one summary line per function.
"""
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import artifact_container  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


path = sys.argv[1]
arch = sys.argv[sys.argv.index("--arch") + 1] if "--arch" in sys.argv else "sm_90"
try:
    doc, sections = artifact_container.read(path)
except ValueError as e:
    fail(str(e))
cuda = doc.get("cuda")
if not cuda:
    fail("no 'cuda' part in the document")
for key in ("source", "cubin", "ptx"):
    if not sections.get(cuda[key]):
        fail("section %s missing or empty" % cuda[key])
source = sections[cuda["source"]].decode()
cubin = sections[cuda["cubin"]]
ptx = sections[cuda["ptx"]].decode(errors="replace")

# ELF64 header: e_machine at 18 (EM_CUDA = 190); e_flags at 48 hold the SM version.
if cubin[:4] != b"\x7fELF" or struct.unpack("<H", cubin[18:20])[0] != 190:
    fail("the cubin is not a CUDA ELF")
sm = int(arch.split("_")[1])
flags, = struct.unpack("<I", cubin[48:52])
# e_flags encodes the SM as (flags >> 8) & 0xff in CUDA 12+ cubins, or flags & 0xff before.
if sm not in ((flags >> 8) & 0xFF, flags & 0xFF):
    fail("cubin e_flags 0x%x do not name %s" % (flags, arch))
if (".target %s" % arch) not in ptx:
    fail("the PTX does not target %s" % arch)

defined = set(re.findall(r'extern "C" __global__ void __launch_bounds__\(\d+\) (\w+)\(', source))
if len(defined) != cuda["kernels"]:
    fail("the source defines %d kernels, the document says %d" % (len(defined), cuda["kernels"]))
# Symbol names in the cubin: every kernel must be there (string table).
missing = [k for k in defined if (b"\0" + k.encode() + b"\0") not in cubin]
if missing:
    fail("kernels missing from the cubin: %s" % ", ".join(sorted(missing)[:5]))

launches = 0
for f in doc["functions"]:
    plan = f["cuda_plan"]
    values = f["values"]
    covered = {}
    for s in plan["steps"]:
        covered.setdefault(s["op"], []).append(s)
        if s["kind"] == "launch":
            launches += 1
            if s["kernel"] not in defined:
                fail("%s: launch of undefined kernel %s" % (f["name"], s["kernel"]))
            for a in s["args"]:
                if not 0 <= a < len(values) + len(plan["scratch"]):
                    fail("%s: argument %d out of range" % (f["name"], a))
    kernels_ops = 0
    for i, op in enumerate(f["ops"]):
        steps = covered.get(i, [])
        kinds = {s["kind"] for s in steps}
        empty = bool(op["results"]) and all(0 in values[r]["shape"] for r in op["results"])
        if op["op"] == "param":
            ok = kinds == {"param"}
        elif op["op"] == "assign":
            ok = kinds == {"assign"}
        elif op["op"] == "reshape":
            ok = kinds == {"alias"}
        elif op["op"] == "pack":  # zeroes its result, places its inputs (or copies them)
            ok = "launch" in kinds and kinds <= {"launch", "place"}
            kernels_ops += 1
        else:
            ok = kinds == {"launch"} or (not steps and empty)
            kernels_ops += 1
        if not ok:
            fail("%s: op %d (%s) is covered by %s" % (f["name"], i, op["op"], sorted(kinds) or "nothing"))
        if op["op"] == "fusion" and not 0 <= op["attrs"]["body"] < len(doc.get("fusions", [])):
            fail("%s: op %d is a fusion without a body" % (f["name"], i))
    print("%s: %d ops, %d fusions, %d with kernels, %d launches, %d scratch buffers: ok" % (
        f["name"], len(f["ops"]), sum(1 for op in f["ops"] if op["op"] == "fusion"), kernels_ops,
        sum(1 for s in plan["steps"] if s["kind"] == "launch"), len(plan["scratch"])))
if launches != cuda["launches"]:
    fail("%d launches in the plans, the document says %d" % (launches, cuda["launches"]))
print("cuda: %d kernels for %s (NVRTC %s), all in the cubin; %d launches; %d fusion bodies; PTX %d bytes" % (
    len(defined), arch, cuda["nvrtc"], launches, len(doc.get("fusions", [])), len(ptx)))
