"""Checks the CUDA part of an artifact (medc compile --target cuda), independently of medrun.

usage: check_cuda_artifact.py X.medc [--arch sm_90]

Reads the container of docs/artifact.md (format version 11) with struct/zlib/json only and
checks: the CRC; each module's source, cubin and PTX sections are present and non-empty;
each cubin is a CUDA ELF (e_machine 190) for the requested arch (its e_flags hold the SM
number) and each PTX targets it; each module defines kernels of its own, none defined by
another module, each named in its cubin's symbol table and its PTX's entries; every op of
every function is covered by its plan (a launch of at least one kernel, or a
param/alias/assign step for param, reshape and assign, or no work at all for a value of
zero elements; a fusion refers to a body of the table); every launched kernel is defined in
a module. Prints one summary line per function.
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
modules = cuda.get("modules")
if not modules:
    fail("the 'cuda' part lists no modules")
sm = int(arch.split("_")[1])
defined, ptx_bytes = set(), 0
variant_kernels = set()  # defined in the sm_90a module (the variants')
for m, module in enumerate(modules):
    own = module.get("arch")  # "sm_90a": cubin only, kernels run as variants
    if own not in (None, "sm_90a") or (own and "ptx" in module):
        fail("module %d: arch %r with%s PTX" % (m, own, "" if "ptx" in module else "out"))
    for key in ("source", "cubin") + (() if own else ("ptx",)):
        if not sections.get(module[key]):
            fail("module %d: section %s missing or empty" % (m, module[key]))
    source = sections[module["source"]].decode()
    cubin = sections[module["cubin"]]
    ptx = sections[module["ptx"]].decode(errors="replace") if not own else None
    ptx_bytes += len(ptx or "")

    # ELF64 header: e_machine at 18 (EM_CUDA = 190); e_flags at 48 hold the SM version.
    if cubin[:4] != b"\x7fELF" or struct.unpack("<H", cubin[18:20])[0] != 190:
        fail("module %d: the cubin is not a CUDA ELF" % m)
    flags, = struct.unpack("<I", cubin[48:52])
    # e_flags encodes the SM as (flags >> 8) & 0xff in CUDA 12+ cubins, or flags & 0xff before.
    if sm not in ((flags >> 8) & 0xFF, flags & 0xFF):
        fail("module %d: cubin e_flags 0x%x do not name %s" % (m, flags, arch))
    if ptx is not None and (".target %s" % arch) not in ptx:
        fail("module %d: the PTX does not target %s" % (m, arch))

    here = set(re.findall(r'extern "C" __global__ void __launch_bounds__\(\d+\) (\w+)\(', source))
    if not here and len(modules) > 1:
        fail("module %d defines no kernel of its own" % m)
    if here & defined:
        fail("module %d defines kernels another module has: %s" % (m, ", ".join(sorted(here & defined)[:5])))
    defined |= here
    if own:
        variant_kernels |= here
    # Symbol names in the module's cubin and entries of its PTX: every kernel of its source.
    missing = [k for k in here if (b"\0" + k.encode() + b"\0") not in cubin or (ptx is not None and (".entry %s(" % k) not in ptx)]
    if missing:
        fail("module %d: kernels missing from its cubin or PTX: %s" % (m, ", ".join(sorted(missing)[:5])))
if len(defined) != cuda["kernels"]:
    fail("the modules define %d kernels, the document says %d" % (len(defined), cuda["kernels"]))

launches = 0
for f in doc["functions"]:
    plan = f["cuda_plan"]
    values = f["values"]
    covered = {}
    for s in plan["steps"]:
        covered.setdefault(s["op"], []).append(s)
        if s["kind"] == "launch":
            launches += 1
            if s["kernel"] not in defined or s["kernel"] in variant_kernels:
                fail("%s: launch of undefined kernel %s" % (f["name"], s["kernel"]))
            for v in s.get("variants", []):
                if v not in variant_kernels:
                    fail("%s: variant %s is not in the sm_90a module" % (f["name"], v))
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
print("cuda: %d kernels for %s (NVRTC %s), each in its module's cubin; %d launches; %d fusion bodies; %d modules; PTX %d bytes" % (
    len(defined), arch, cuda["nvrtc"], launches, len(doc.get("fusions", [])), len(modules), ptx_bytes))
