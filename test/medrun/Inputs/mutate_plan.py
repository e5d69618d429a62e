"""Edits one field of a compiled plan at a time and checks that medrun either rejects the
artifact with a clean error or runs it cleanly (identically, where the edit cannot change the
program's meaning). Never a signal, never std::bad_alloc.

usage: mutate_plan.py --medrun MEDRUN --artifact A.medc --func F --work DIR
                      [--count N] [--seed S]

Reads and writes the container of docs/artifact.md with struct/zlib/json only (the CRC is
recomputed, so only the plan is inconsistent). Each mutant has an expectation:
  reject       `medrun info` and `medrun run` both exit 1 with one line naming the file and
               the function (and the op, for an op's field);
  reject|same  rejected so, or runs with outputs identical to the unedited artifact's;
  input        (a function input's type) as reject|same, or `medrun run` rejects the input
               file with a message naming the argument;
  any          rejected so, or runs (exit 0): the edit may give another valid program.
Prints a summary line per expectation and exits 1 on the first mutant that breaks its own.
"""
import argparse
import copy
import json
import os
import random
import re
import struct
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HUGE = 1 << 62


def read(path):
    b = open(path, "rb").read()
    version, = struct.unpack("<I", b[8:12])
    n, = struct.unpack("<Q", b[16:24])
    doc = json.loads(b[24:24 + n])
    return b[:16], version, doc, b[24 + n:-4]


def write(path, header, doc, rest):
    body = json.dumps(doc).encode()
    b = header + struct.pack("<Q", len(body)) + body + rest
    open(path, "wb").write(b + struct.pack("<I", zlib.crc32(b)))


def inputs_for(fn, work):
    """One .npy per input, drawn by its name (training-step scalars get sensible values)."""
    rng = np.random.default_rng(0)
    args = []
    for i, vid in enumerate(fn["inputs"]):
        v = fn["values"][vid]
        name = fn.get("input_names", [])[i] if i < len(fn.get("input_names", [])) else "arg%d" % i
        shape = v["shape"]
        fixed = {"lr": 1e-3, "step": 1, "ema_decay": 0.9, "loss_scale": 1024.0,
                 "growth_tracker": 0, "rng": 3}
        if name in fixed:
            a = np.full(shape, fixed[name])
        elif name.startswith("target") or name == "mask" or i > 0:
            a = (rng.random(shape) > 0.5).astype(np.float64)  # 0/1: masks, labels, classes
        else:
            a = rng.standard_normal(shape)
        dtype = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32}.get(
            v["dtype"], np.float32)
        path = os.path.join(work, "in_%d.npy" % i)
        np.save(path, a.astype(dtype))
        args += ["--input", "%s=%s" % (name, path)]
    return args


# ---- mutations: (description, expectation, function applied to a deep copy of the doc) ----

def mutations(doc, fname):
    fi = next(i for i, f in enumerate(doc["functions"]) if f["name"] == fname)
    fn = doc["functions"][fi]
    values = fn["values"]
    nv = len(values)
    producer = {}
    for k, op in enumerate(fn["ops"]):
        for r in op["results"]:
            producer[r] = k
    out = []

    def add(desc, expect, f, op=None):
        out.append((desc, expect, f, op))

    def F(d):
        return next(f for f in d["functions"] if f["name"] == fname)

    # Values: sizes, ranks, element types.
    for vid in range(nv):
        shape = values[vid]["shape"]
        made = vid in producer
        expect = "reject" if made else "input"
        for axis in range(len(shape)):
            for new in (shape[axis] + 1, 0, shape[axis] * 1000003, HUGE):
                def f(d, vid=vid, axis=axis, new=new):
                    F(d)["values"][vid]["shape"][axis] = new
                add("value %d: size %d on axis %d" % (vid, new, axis), expect, f)
        add("value %d: rank + 1" % vid, expect,
            lambda d, vid=vid: F(d)["values"][vid]["shape"].append(2))
        if shape:
            add("value %d: rank - 1" % vid, expect,
                lambda d, vid=vid: F(d)["values"][vid]["shape"].pop())
        for dt in ("f64", "bf16", "i64", "bool"):
            if dt != values[vid]["dtype"]:
                def f(d, vid=vid, dt=dt):
                    F(d)["values"][vid]["dtype"] = dt
                add("value %d: dtype %s" % (vid, dt), expect, f)

    # Ops: operand ids, result ids, attributes.
    shape_attrs = {"stride", "padding", "dilation", "output_padding", "kernel", "low", "high",
                   "sizes", "shape", "axes", "axis", "keepdims", "save_statistics"}
    for k, op in enumerate(fn["ops"]):
        kind = op["op"]
        defined_before = [v for v in fn["inputs"]] + [r for o in fn["ops"][:k] for r in o["results"]]
        for name, ids in op["operands"].items():
            for j, vid in enumerate(ids):
                others = [v for v in defined_before if values[v] != values[vid]]
                if others:
                    new = random.Random(k * 31 + j).choice(others)
                    def f(d, k=k, name=name, j=j, new=new):
                        F(d)["ops"][k]["operands"][name][j] = new
                    add("op %d %s: operand %s = value %d (another type)" % (k, kind, name, new),
                        "any", f, k)
                def f(d, k=k, name=name, j=j):
                    F(d)["ops"][k]["operands"][name][j] = nv + 5
                add("op %d %s: operand %s out of range" % (k, kind, name), "reject", f, k)
                if op["results"]:
                    def f(d, k=k, name=name, j=j, r=op["results"][0]):
                        F(d)["ops"][k]["operands"][name][j] = r
                    add("op %d %s: operand %s = its own result" % (k, kind, name), "reject", f, k)
            # Variadic ops take a value twice as a valid (other) program.
            if len(ids) == 1 and kind not in ("concat", "any_non_finite", "sum_squares", "dice_ce",
                                              "dice_ce_grad"):
                def f(d, k=k, name=name):
                    g = F(d)["ops"][k]["operands"][name]
                    g.append(g[0])
                add("op %d %s: operand %s given twice" % (k, kind, name), "reject", f, k)
                if name not in ("bias", "mask", "pos_weight"):
                    def f(d, k=k, name=name):
                        F(d)["ops"][k]["operands"][name] = []
                    add("op %d %s: operand %s empty" % (k, kind, name), "reject", f, k)
            def f(d, k=k, name=name):
                ops = F(d)["ops"][k]["operands"]
                ops[name + "_x"] = ops.pop(name)
            add("op %d %s: operand %s renamed" % (k, kind, name), "reject", f, k)
        if op["results"]:
            def f(d, k=k):
                F(d)["ops"][k]["results"].pop()
            add("op %d %s: one result fewer" % (k, kind), "reject", f, k)
        for name, val in op["attrs"].items():
            expect = "reject|same" if name in shape_attrs else "any"
            if kind == "group_norm" and name == "groups":
                expect = "any"
            if kind in ("conv3d", "conv3d_transpose", "conv3d_grad_weight", "group_norm_grad") and name == "groups":
                expect = "reject|same"
            if kind == "slice" and name in ("offsets", "strides"):
                expect = "any"
            if kind == "slice_grad" and name in ("offsets", "strides"):
                expect = "any"
            if kind.startswith("conv3d") and name in ("padding", "stride", "dilation"):
                expect = "any"  # another stride (dilation, ...) may keep the output size
            news = []
            if isinstance(val, bool):
                news = [not val, 1]
            elif isinstance(val, int):
                news = [val + 1, val - 1, 0, -1, 7, HUGE]
            elif isinstance(val, float):
                news = [0.0, -1.0, 1e308, "x"]
            elif isinstance(val, str):
                news = ["bogus", 3]
            elif isinstance(val, list):
                for i in range(len(val)):
                    for nv_ in ([val[i] + 1, -1, HUGE] if all(isinstance(x, int) for x in val)
                                else [-1.0, 1e308]):
                        nl = list(val)
                        nl[i] = nv_
                        news.append(nl)
                news += [val[:-1], val + [1], "x"]
            for new in news:
                e = expect
                if isinstance(new, str) and not isinstance(val, str) or isinstance(val, str) and not isinstance(new, str):
                    e = "reject"  # the wrong kind of value
                if kind in ("param", "assign") and name == "name":
                    e = "reject"
                if name == "kind" or name == "reduction":
                    e = "reject" if new == "bogus" or not isinstance(new, str) else e
                def f(d, k=k, name=name, new=new):
                    F(d)["ops"][k]["attrs"][name] = new
                add("op %d %s: %s = %s" % (k, kind, name, json.dumps(new)), e, f, k)
            def f(d, k=k, name=name):
                del F(d)["ops"][k]["attrs"][name]
            if kind != "constant" or name != "value":
                add("op %d %s: no %s" % (k, kind, name), "reject", f, k)
        if kind == "constant":
            def f(d, k=k):
                F(d)["ops"][k]["attrs"]["value"] = [1.0, 2.0]
            add("op %d constant: 2 values" % k, "reject", f, k)

    # Function lists.
    def f(d):
        F(d)["inputs"][0] = nv + 1
    add("inputs[0] out of range", "reject", f)
    def f(d):
        F(d)["outputs"][0] = -1
    add("outputs[0] = -1", "reject", f)

    # Parameters.
    for i, p in enumerate(doc["parameters"][:20]):
        def f(d, i=i):
            d["parameters"][i]["shape"].append(2)
        add("parameter %s: rank + 1" % p["name"], "reject|same", f)
        def f(d, i=i):
            d["parameters"][i]["dtype"] = "f64"
        add("parameter %s: f64" % p["name"], "reject|same", f)
        def f(d, i=i):
            d["parameters"][i]["shape"] = [HUGE, 4] if d["parameters"][i]["shape"] else [HUGE]
        add("parameter %s: huge" % p["name"], "reject", f)

    # CUDA launch plan.
    plan = fn.get("cuda_plan")
    if plan:
        ns = len(plan["scratch"])
        for s, step in enumerate(plan["steps"]):
            if step["kind"] != "launch":
                if step["kind"] == "alias":
                    def f(d, s=s):
                        F(d)["cuda_plan"]["steps"][s]["from"] = 0
                    add("step %d alias from value 0" % s, "reject|same", f, step["op"])
                continue
            k = step["op"]
            touched = set(v for ids in fn["ops"][k]["operands"].values() for v in ids) | set(fn["ops"][k]["results"])
            untouched = [v for v in range(nv) if v not in touched]
            for j in range(len(step["args"])):
                def f(d, s=s, j=j):
                    F(d)["cuda_plan"]["steps"][s]["args"][j] = nv + ns
                add("step %d arg %d out of range" % (s, j), "reject", f, k)
                if untouched:
                    def f(d, s=s, j=j, u=untouched[(s + j) % len(untouched)]):
                        F(d)["cuda_plan"]["steps"][s]["args"][j] = u
                    add("step %d arg %d = an untouched value" % (s, j), "reject", f, k)
            def f(d, s=s):
                F(d)["cuda_plan"]["steps"][s]["args"].append(0)
            add("step %d one argument more" % s, "reject", f, k)
            if step["args"]:
                def f(d, s=s):
                    F(d)["cuda_plan"]["steps"][s]["args"].pop()
                add("step %d one argument fewer" % s, "reject", f, k)
            def f(d, s=s):
                F(d)["cuda_plan"]["steps"][s]["kernel"] += "_x"
            add("step %d unknown kernel" % s, "reject", f, k)
            def f(d, s=s):
                F(d)["cuda_plan"]["steps"][s]["shared"] = 1 << 20
            add("step %d 1 MiB shared" % s, "reject", f, k)
            for key, new in (("grid", [0, 1, 1]), ("block", [2048, 1, 1]), ("grid", [1, 1 << 20, 1])):
                def f(d, s=s, key=key, new=new):
                    F(d)["cuda_plan"]["steps"][s][key] = new
                add("step %d %s %s" % (s, key, new), "reject", f, k)
        for i in range(ns):
            def f(d, i=i):
                F(d)["cuda_plan"]["scratch"][i] = 1 << 50
            add("scratch %d 2^50 bytes" % i, "reject", f)

    # Fusion bodies the function uses (plan v4): their values and operand ids, and the
    # fusion ops' references to them. The loader matches a body to its op's inputs and
    # results, and the verifier checks its ops like a function's.
    for k, op in enumerate(fn["ops"]):
        if op["op"] != "fusion":
            continue
        b = op["attrs"]["body"]
        body = doc["fusions"][b]
        for vid, v in enumerate(body["values"]):
            def f(d, b=b, vid=vid):
                d["fusions"][b]["values"][vid]["shape"].append(3)
            add("fusion body %d: value %d rank + 1" % (b, vid), "reject", f, k)
            def f(d, b=b, vid=vid):
                d["fusions"][b]["values"][vid]["dtype"] = "i64"
            add("fusion body %d: value %d dtype i64" % (b, vid), "reject", f, k)
        for j, bop in enumerate(body["ops"]):
            for name in bop["operands"]:
                if not bop["operands"][name]:  # an absent optional operand (a shift-sum's bias)
                    continue
                def f(d, b=b, j=j, name=name):
                    d["fusions"][b]["ops"][j]["operands"][name][0] = len(d["fusions"][b]["values"]) + 2
                add("fusion body %d: op %d operand %s out of range" % (b, j, name), "reject", f, k)
        for role in body.get("roles", {}):
            def f(d, b=b, role=role):
                d["fusions"][b]["roles"][role] = len(d["fusions"][b]["ops"])
            add("fusion body %d: role %s out of range" % (b, role), "reject", f, k)
        def f(d, k=k):
            F(d)["ops"][k]["attrs"]["body"] = len(d["fusions"])
        add("op %d fusion: body out of range" % k, "reject", f, k)
        def f(d, k=k):
            F(d)["ops"][k]["attrs"]["template"] = "mlp"
        add("op %d fusion: another template" % k, "reject", f, k)
    return out


def explicit(doc, fname):
    """The two silent-wrong cases: conv groups 7 of 32 channels, a changed padding."""
    fn = next(f for f in doc["functions"] if f["name"] == fname)
    out = []
    def F(d):
        return next(f for f in d["functions"] if f["name"] == fname)
    for k, op in enumerate(fn["ops"]):
        if op["op"] == "conv3d" and op["attrs"].get("groups") == 32 and not any("groups 7" in o[0] for o in out):
            def f(d, k=k):
                F(d)["ops"][k]["attrs"]["groups"] = 7
            out.append(("op %d conv3d: groups 7 of 32 channels" % k, "reject", f, k))
        if op["op"] == "conv3d" and op["attrs"].get("padding") == [1, 1, 1] and not any("padding" in o[0] for o in out):
            def f(d, k=k):
                F(d)["ops"][k]["attrs"]["padding"] = [2, 1, 1]
            out.append(("op %d conv3d: padding [2, 1, 1]" % k, "reject", f, k))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--medrun", required=True)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--func", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--explicit", action="store_true",
                    help="also the silent-wrong cases (needs a conv3d with 32 groups and one with padding 1)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    header, version, doc, rest = read(args.artifact)
    fn = next(f for f in doc["functions"] if f["name"] == args.func)
    inputs = inputs_for(fn, args.work)

    def run(path, out):
        cmd = [args.medrun, "run", path, "--func", args.func, "--seed", "1", "--threads", "1",
               "--out", out] + inputs
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)

    def outputs(out):
        if not os.path.isdir(out):
            return None
        return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}

    base = run(args.artifact, os.path.join(args.work, "base"))
    if base.returncode != 0:
        print("FAIL: the unedited artifact does not run:\n" + base.stderr)
        return 1
    reference = outputs(os.path.join(args.work, "base"))

    rnd = random.Random(args.seed)
    ms = mutations(doc, args.func)
    rnd.shuffle(ms)
    # Launch-plan edits are few beside the op edits: they get up to half of the count.
    launch = [m for m in ms if m[0].startswith(("step ", "scratch "))]
    other = [m for m in ms if not m[0].startswith(("step ", "scratch "))]
    launch = launch[:args.count // 2]
    ms = launch + other[:args.count - len(launch)]
    if args.explicit:
        ex = explicit(doc, args.func)
        if len(ex) != 2:
            print("FAIL: the artifact has no conv3d with 32 groups and padding 1")
            return 1
        ms = ex + ms

    def check(i):
        desc, expect, f, opindex = ms[i]
        d = copy.deepcopy(doc)
        f(d)
        path = os.path.join(args.work, "m%d.medc" % i)
        write(path, header, d, rest)
        info = subprocess.run([args.medrun, "info", path], capture_output=True, text=True, timeout=600)
        out = os.path.join(args.work, "m%d.out" % i)
        r = run(path, out)
        problems = []
        for what, p in (("info", info), ("run", r)):
            if p.returncode not in (0, 1):
                problems.append("%s exits %d: %s" % (what, p.returncode, p.stderr.strip()[-300:]))
            if "bad_alloc" in p.stderr or "std::" in p.stderr or "terminate" in p.stderr:
                problems.append("%s: %s" % (what, p.stderr.strip()[-300:]))
        rejected = info.returncode == 1
        if not problems and rejected:
            msg = info.stderr.strip()
            if r.returncode != 1 or r.stderr.strip() != msg:
                problems.append("info rejects (%s) but run says (%d) %s" % (msg, r.returncode, r.stderr.strip()))
            if len(msg.splitlines()) != 1 or not msg.startswith("medrun: " + path + ":"):
                problems.append("not one line naming the file: " + msg)
            body = re.match(r"fusion body (\d+):", desc)
            if body:  # a body is shared by the functions that use it: it is what is named
                if "fusion body %s" % body.group(1) not in msg:
                    problems.append("the message does not name the fusion body: " + msg)
            elif opindex is not None and "function '%s'" % args.func not in msg:
                problems.append("the message does not name the function: " + msg)
            if not body and opindex is not None and "invalid plan" in msg and "op %d " % opindex not in msg:
                problems.append("the message does not name op %d: %s" % (opindex, msg))
        outcome = "rejected" if rejected else ("same" if r.returncode == 0 and outputs(out) == reference
                                               else "ran" if r.returncode == 0 else "failed at run")
        if not problems:
            if expect == "reject" and outcome != "rejected":
                problems.append("expected a rejection, got: " + outcome)
            if expect == "reject|same" and outcome not in ("rejected", "same"):
                problems.append("expected a rejection or the same outputs, got: " + outcome +
                                " " + r.stderr.strip())
            if expect == "input" and outcome not in ("rejected", "same") and not (
                    outcome == "failed at run" and "argument" in r.stderr):
                problems.append("expected a rejection, the same outputs or a rejected input file, "
                                "got: " + outcome + " " + r.stderr.strip())
            if expect == "any" and outcome == "failed at run" and r.returncode != 1:
                problems.append("run failed: " + r.stderr.strip())
        for p in (path,):
            os.remove(p)
        return desc, expect, outcome, problems, info.stderr.strip()

    counts = {}
    bad = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for desc, expect, outcome, problems, msg in pool.map(check, range(len(ms))):
            counts.setdefault(expect, {}).setdefault(outcome, 0)
            counts[expect][outcome] += 1
            if "groups 7" in desc or "padding [2, 1, 1]" in desc:
                print("%s: %s (%s)" % (desc, outcome, msg))
            if problems:
                bad += 1
                print("FAIL: %s [%s]: %s" % (desc, expect, "; ".join(problems)))
    for expect in sorted(counts):
        print("%s: %s" % (expect, ", ".join("%d %s" % (n, o) for o, n in sorted(counts[expect].items()))))
    print("%d mutants of %s, %d failures" % (len(ms), args.func, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
