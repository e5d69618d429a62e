"""Edits one launch field of a compiled training step at a time and checks that medrun either
rejects the artifact at load (one line naming the file, the function, the op, the step and the
field) or runs it on the emulated CUDA device to the CPU backend's results (`medrun
cuda-check`, which the unedited artifact passes). Never a signal, never a silent difference.

usage: launch_mutations.py --medrun R --artifact A.medc --func F --fakecuda LIB --kernels K.so
                           --work DIR [--control [--every N]]

The edits (docs/reliability.md): each launch's grid and block, per axis, times 4 and set to 1;
its dynamic shared memory; its kernel swapped for another of the same family (kind) and for
one of another family; its arguments permuted (two swapped, all rotated); its status code;
each scratch buffer's size (0, half, 4 times); the storage type of values (f16, bf16, f64).

--control runs with MEDRUN_TEST_UNCHECKED_LAUNCHES=1 (the launch checks off) on every N-th
edit and must see at least one silently wrong result or crash: it shows that the edits bite.
Prints the counts: edits, rejected, clean runs, silent-wrong, crashes.
"""
import argparse
import copy
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "medrun", "Inputs"))
import mutate_plan as m  # noqa: E402  (the container's read and write)

FIELDS = ("grid", "block", "shared", "kernel", "variants", "args", "scalars", "scratch", "storage")


def kind(name):
    """A kernel's kind: its name less the hash (docs/artifact.md)."""
    return re.sub(r"_[0-9a-f]{8}$", "", name)


def mutations(doc, fname):
    fn = next(f for f in doc["functions"] if f["name"] == fname)
    plan = fn["cuda_plan"]
    out = []

    def add(desc, field, f, step=None):
        out.append((desc, field, f, step))

    def F(d):
        return next(f for f in d["functions"] if f["name"] == fname)

    # Every kernel any function launches, by kind (the swaps' candidates).
    names = sorted({s["kernel"] for f in doc["functions"] for s in f.get("cuda_plan", {}).get("steps", [])
                    if s["kind"] == "launch"})
    for s, step in enumerate(plan["steps"]):
        if step["kind"] != "launch":
            continue
        for key in ("grid", "block"):
            for axis in range(3):
                for new in (step[key][axis] * 4, 1):
                    if new == step[key][axis]:
                        continue
                    def f(d, s=s, key=key, axis=axis, new=new):
                        F(d)["cuda_plan"]["steps"][s][key][axis] = new
                    add("step %d %s[%d] %d -> %d" % (s, key, axis, step[key][axis], new), key, f, s)
        def f(d, s=s):
            F(d)["cuda_plan"]["steps"][s]["shared"] += 4096
        add("step %d shared + 4096" % s, "shared", f, s)
        same = [n for n in names if kind(n) == kind(step["kernel"]) and n != step["kernel"]]
        other = [n for n in names if kind(n) != kind(step["kernel"])]
        for label, pool in (("within its family", same), ("across families", other)):
            if pool:
                new = pool[s % len(pool)]
                def f(d, s=s, new=new):
                    F(d)["cuda_plan"]["steps"][s]["kernel"] = new
                add("step %d kernel %s -> %s (%s)" % (s, step["kernel"], new, label), "kernel", f, s)
        args = step["args"]
        if len(set(args)) > 1:
            i = next(i for i in range(1, len(args)) if args[i] != args[0])
            def f(d, s=s, i=i):
                a = F(d)["cuda_plan"]["steps"][s]["args"]
                a[0], a[i] = a[i], a[0]
            add("step %d args 0 and %d swapped" % (s, i), "args", f, s)
            if len(args) > 2:
                def f(d, s=s):
                    a = F(d)["cuda_plan"]["steps"][s]["args"]
                    a.append(a.pop(0))
                add("step %d args rotated" % s, "args", f, s)
        if step.get("scalars"):
            def f(d, s=s):
                F(d)["cuda_plan"]["steps"][s]["scalars"][0] += 1
            add("step %d status code + 1" % s, "scalars", f, s)
        for v in step.get("variants", []):
            def f(d, s=s, k=step["kernel"]):
                F(d)["cuda_plan"]["steps"][s]["variants"] = [k]
            add("step %d variant %s -> its own kernel" % (s, v), "variants", f, s)
    for k, b in enumerate(plan["scratch"]):
        if k == 0:
            continue  # the status word: the reader wants its 4 bytes
        for new in (0, b // 2, b * 4):
            def f(d, k=k, new=new):
                F(d)["cuda_plan"]["scratch"][k] = new
            add("scratch %d %d -> %d bytes" % (k, b, new), "scratch", f)
    # Storage: the float values of rank > 0, one 16-bit or wider type each in turn.
    floats = [i for i, v in enumerate(fn["values"]) if v["dtype"] == "f32" and v["shape"]]
    for n, i in enumerate(floats):
        st = ("f16", "bf16", "f64")[n % 3]
        if st == fn["values"][i].get("storage", "f32"):
            st = "f64"  # an edit, not the storage it has
        def f(d, i=i, st=st):
            F(d)["values"][i]["storage"] = st
        add("value %d storage %s" % (i, st), "storage", f)
    return out


def main():
    ap = argparse.ArgumentParser()
    for a in ("medrun", "artifact", "func", "fakecuda", "kernels", "work"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--control", action="store_true")
    ap.add_argument("--every", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    header, version, doc, rest = m.read(args.artifact)
    env = dict(os.environ, MEDRUN_LIBCUDA=args.fakecuda, MEDRUN_CUDA_POISON="1", MEDRUN_THREADS="1",
               MEDRUN_FAKE_CUDA_KERNELS=args.kernels)
    if args.control:
        env["MEDRUN_TEST_UNCHECKED_LAUNCHES"] = "1"
    else:
        env.pop("MEDRUN_TEST_UNCHECKED_LAUNCHES", None)

    def check(path):
        return subprocess.run([args.medrun, "cuda-check", path, "--func", args.func, "--repeat", "1"],
                              env=env, capture_output=True, text=True, timeout=120)

    base = check(args.artifact)
    if base.returncode != 0:
        print("FAIL: the unedited artifact fails cuda-check:\n" + base.stdout + base.stderr)
        return 1

    ms = mutations(doc, args.func)[::args.every]

    def one(i):
        desc, field, f, step = ms[i]
        d = copy.deepcopy(doc)
        f(d)
        path = os.path.join(args.work, "m%d.medc" % i)
        m.write(path, header, d, rest)
        info = subprocess.run([args.medrun, "info", path], env=env, capture_output=True, text=True,
                              timeout=300)
        problems = []
        if info.returncode == 1:
            outcome = "rejected"
            msg = info.stderr.strip()
            if len(msg.splitlines()) != 1 or not msg.startswith("medrun: " + path + ":"):
                problems.append("not one line naming the file: " + msg)
            if "function '%s'" % args.func not in msg:
                problems.append("the message does not name the function: " + msg)
            if step is not None and "step %d:" % step not in msg and "steps[%d]" % step not in msg:
                problems.append("the message does not name step %d: %s" % (step, msg))
            if field not in msg:
                problems.append("the message does not name the field %s: %s" % (field, msg))
        elif info.returncode != 0:
            outcome, msg = "crash", "info exits %d: %s" % (info.returncode, info.stderr.strip()[-300:])
        else:
            try:
                r = check(path)
            except subprocess.TimeoutExpired:
                r = subprocess.CompletedProcess([], -9, "", "cuda-check hung (killed after 120 s)")
            out = (r.stdout + r.stderr).strip()
            msg = out.splitlines()[-1] if out else ""
            if r.returncode == 0 and "PASS" in out:
                outcome = "clean"
            elif r.returncode == 1 and "FAIL" in out:
                outcome = "silent-wrong"
            elif r.returncode == 1 and out.splitlines()[-1].startswith("medrun: "):
                outcome = "refused at run"
            else:
                outcome = "crash"
                msg = "exit %d: %s" % (r.returncode, out[-300:])
        os.remove(path)
        return desc, field, outcome, msg, problems

    counts, fields, bad = {}, {}, 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for desc, field, outcome, msg, problems in pool.map(one, range(len(ms))):
            counts[outcome] = counts.get(outcome, 0) + 1
            fields.setdefault(field, {}).setdefault(outcome, 0)
            fields[field][outcome] += 1
            if args.control:
                if outcome in ("silent-wrong", "crash"):
                    print("%s: %s (%s)" % (desc, outcome, msg[:200]))
                continue
            if outcome != "rejected" and outcome != "clean":
                problems.append("%s: %s" % (outcome, msg))
            if problems:
                bad += 1
                print("FAIL: %s: %s" % (desc, "; ".join(problems)))
    for field in FIELDS:
        if field in fields:
            print("%s: %s" % (field, ", ".join("%d %s" % (n, o) for o, n in sorted(fields[field].items()))))
    print("%d edits of %s: %d rejected, %d clean runs, %d silent-wrong, %d crashes, %d refused at run" % (
        len(ms), args.func, counts.get("rejected", 0), counts.get("clean", 0), counts.get("silent-wrong", 0),
        counts.get("crash", 0), counts.get("refused at run", 0)))
    if args.control:
        bit = counts.get("silent-wrong", 0) + counts.get("crash", 0)
        print("control: %s" % ("the edits bite" if bit else "FAIL: no edit changed a result"))
        return 0 if bit else 1
    print("%d failures" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
