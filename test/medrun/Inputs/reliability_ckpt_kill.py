"""Kills `medrun train` at every point of its deletion of old checkpoints and resumes it:
`reliability_ckpt_kill.py SHIM WORK -- medrun train RECIPE [ARGS...]` (no --out, --steps,
--resume; the recipe saves every step).

A reference run trains 4 steps. A base run trains 2 steps and keeps every checkpoint. For
K = 1, 2, ...: a copy of the base run trains to step 3 with checkpoint.keep=1 under SHIM
(reliability_kill_at.cpp), which SIGKILLs it before the K-th rename/unlink/rmdir of the
deletion (counting from the first path that holds ".deleting.tmp"), until a run passes every
point. After each kill, every step_<N> directory must hold its state.json (a half-deleted
step may only be a *.tmp leftover), and `--resume-or-start` to step 4 must write a step 4
whose tensor files equal the reference's byte for byte (state.json too, but for saved_at and
the interval's loss) and leave no *.tmp behind.

The checker's control: a step directory without state.json, as deleting the files in place
left it, must be reported."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

split = sys.argv.index("--")
shim, work = sys.argv[1], sys.argv[2]
cmd = sys.argv[split + 1:]
STEP = re.compile(r"^step_\d+$")


def train(out, steps, keep, env=None):
    return subprocess.run(cmd + ["--out", out, "--steps", str(steps), "--resume-or-start",
                                 "--set", "checkpoint.keep=%d" % keep],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env)


def whole_steps(run):
    """The problems of RUN/checkpoints: step directories that lost their state.json."""
    root = os.path.join(run, "checkpoints")
    bad = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if STEP.match(name) and not os.path.isfile(os.path.join(path, "state.json")):
            bad.append("%s has no state.json (%s)" % (name, ", ".join(sorted(os.listdir(path))) or "empty"))
    return bad


def leftovers(run):
    return sorted(n for n in os.listdir(os.path.join(run, "checkpoints")) if n.endswith(".tmp") or ".tmp-" in n)


def state(path):
    doc = json.load(open(path))
    for k in ("saved_at", "metrics", "state_crc32c"):
        doc.pop(k, None)
    return doc


def same_step(a, b):
    """Differences between two step directories: tensor files byte for byte, state.json."""
    diffs = []
    names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
    for n in names:
        pa, pb = os.path.join(a, n), os.path.join(b, n)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            diffs.append("%s only in one" % n)
        elif n == "state.json":
            if state(pa) != state(pb):
                diffs.append("state.json differs")
        elif open(pa, "rb").read() != open(pb, "rb").read():
            diffs.append("%s differs" % n)
    return diffs


def run_checked(out, steps, keep, env=None):
    r = train(out, steps, keep, env)
    if r.returncode != 0:
        sys.exit("%s: exit %d: %s" % (out, r.returncode, r.stderr.strip()[-2000:]))


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
ref, base = os.path.join(work, "ref"), os.path.join(work, "base")
run_checked(ref, 4, 100)
run_checked(base, 2, 100)
ref4 = os.path.join(ref, "checkpoints", "step_00000004")

failures = 0
k = 0
while True:
    k += 1
    run = os.path.join(work, "k%d" % k)
    shutil.copytree(base, run)
    env = dict(os.environ, LD_PRELOAD=shim, KILL_FROM=".deleting.tmp", KILL_AT=str(k))
    r = train(run, 3, 1, env)
    if r.returncode == 0:
        break  # past the last point
    if r.returncode != -signal.SIGKILL or "kill_at: SIGKILL before point %d" % k not in r.stderr:
        sys.exit("point %d: exit %d, not killed by the shim: %s" % (k, r.returncode, r.stderr.strip()[-2000:]))
    where = r.stderr.split("kill_at: SIGKILL before point %d: " % k)[1].splitlines()[0]
    where = where.replace(os.path.join(run, "checkpoints") + "/", "")
    bad = whole_steps(run)
    left = leftovers(run)
    r = train(run, 4, 1)
    if r.returncode != 0:
        bad.append("resume: exit %d: %s" % (r.returncode, r.stderr.strip()[-500:]))
    else:
        bad += ["step 4: " + d for d in same_step(os.path.join(run, "checkpoints", "step_00000004"), ref4)]
        bad += ["left after the resume: " + n for n in leftovers(run)]
    if bad:
        failures += 1
        print("point %d (before %s): %s" % (k, where, "; ".join(bad)))
    else:
        print("point %d (before %s): every step whole (leftovers: %s); resumed: step 4 as uninterrupted"
              % (k, where, ", ".join(left) or "none"))
    shutil.rmtree(run)

print("deletion points: %d" % (k - 1))
bad = whole_steps(os.path.join(work, "k%d" % k))
print("past the last point: %s" % ("; ".join(bad) or "every step whole"))

# Control: what deleting in place leaves (the directory of a step without its state.json).
control = os.path.join(work, "control")
shutil.copytree(base, control)
os.remove(os.path.join(control, "checkpoints", "step_00000001", "state.json"))
print("control: %s" % ("; ".join(whole_steps(control)) or "not caught"))
sys.exit(1 if failures or k == 1 else 0)
