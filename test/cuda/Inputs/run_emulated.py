"""Runs every function of med programs on the CUDA backend under the CPU emulation of
test/cuda and compares it with the CPU backend (medrun cuda-check).

usage: run_emulated.py --medc M --medrun R --fakecuda LIB --emu-h H --cxx CXX --dir D
                       [--repeat N] [--func F]... FILE.mlir[:medc options]... RECIPE.yaml[:--set ...]...

Per file: `medc compile --target cuda` (the artifact), `medc compile --emit cuda` (the same
source), the source compiled for the host with emu.h, then `medrun cuda-check` of each
function (or of those --func names) with MEDRUN_LIBCUDA pointing at the fake driver. Prints one line per function.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

p = argparse.ArgumentParser()
for a in ("medc", "medrun", "fakecuda", "emu_h", "cxx", "dir"):
    p.add_argument("--" + a.replace("_", "-"), dest=a, required=True)
p.add_argument("--repeat", default="1")
p.add_argument("--extra", action="append", default=[], help="extra cuda-check arguments")
p.add_argument("--func", action="append", default=[], help="check only these functions")
p.add_argument("files", nargs="+")
o = p.parse_args()
os.makedirs(o.dir, exist_ok=True)
env = dict(os.environ, MEDRUN_LIBCUDA=o.fakecuda, MEDRUN_CUDA_POISON="1", MEDRUN_THREADS="2")
failed = 0
for spec in o.files:
    path, _, opts = spec.partition(":")
    name = re.sub(r"\.(mlir|yaml)$", "", os.path.basename(path))
    art, src, lib = (os.path.join(o.dir, name + s) for s in (".medc", ".cu", ".so"))
    opts = shlex.split(opts)
    if path.endswith(".yaml"):  # a training recipe
        opts, path = ["--recipe", path] + opts, []
    else:
        path = [path]
    subprocess.run([o.medc, "compile", *path, *opts, "--target", "cuda", "-o", art], check=True)
    subprocess.run([o.medc, "compile", *path, *opts, "--emit", "cuda", "-o", src], check=True)
    subprocess.run([o.cxx, "-O0", "-shared", "-fPIC", "-w", "-include", o.emu_h, "-x", "c++", src,
                    "-o", lib], check=True)
    info = subprocess.run([o.medrun, "info", art], check=True, capture_output=True, text=True).stdout
    for fn in re.findall(r"^function (\S+) ", info, re.M):
        if o.func and fn not in o.func:
            continue
        r = subprocess.run([o.medrun, "cuda-check", art, "--func", fn, "--repeat", o.repeat,
                            *o.extra], env=dict(env, MEDRUN_FAKE_CUDA_KERNELS=lib),
                           capture_output=True, text=True)
        lines = (r.stdout + r.stderr).strip().splitlines()
        summary = [l for l in lines if l.startswith(("PASS", "FAIL", "medrun:"))]
        if r.returncode != 0:
            failed += 1
            print("\n".join(lines[-20:]))
        print("%s: %s" % (name, summary[-1] if summary else "no summary (exit %d)" % r.returncode))
sys.exit(1 if failed else 0)
