"""Runs the commands of the README's "A short tour" as written, one by one, in a temporary
directory where build/, configs/, models/, scripts/ and test/ link to this tree. Lines that need a
GPU (`cuda-check`, `--device cuda`) are skipped, and `--target cuda` without NVRTC. Fails on
the first command that fails, and when the tour has fewer than --min-commands commands (a
README whose tour moved or lost its code block).

  readme_tour.py --readme README.md --source SRC --build BUILD [--nvrtc 0|1] [--min-commands N]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("--readme", required=True)
p.add_argument("--source", required=True)
p.add_argument("--build", required=True)
p.add_argument("--nvrtc", type=int, default=1)
p.add_argument("--min-commands", type=int, default=1)
a = p.parse_args()

text = open(a.readme).read()
m = re.search(r"^## A short tour\n.*?^```sh\n(.*?)^```", text, re.M | re.S)
if not m:
    sys.exit("readme tour: %s has no ```sh block under '## A short tour'" % a.readme)
commands, current = [], ""
for line in m.group(1).splitlines():
    current += line + "\n"
    if not line.endswith("\\"):  # a continued line goes to bash with its backslash
        if current.strip():
            commands.append(current.rstrip("\n"))
        current = ""

def skip_reason(cmd):
    if "cuda-check" in cmd or "--device cuda" in cmd:
        return "needs a GPU"
    if "--target cuda" in cmd and not a.nvrtc:
        return "medc was built without NVRTC"
    return None

env = dict(os.environ)
# python3 in the tour is the interpreter CI configured (with numpy), not another one on PATH.
env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
ran = 0
with tempfile.TemporaryDirectory(prefix="readme-tour-") as tmp:
    env["MEDRUN_CACHE"] = os.path.join(tmp, "cache")  # not the user's compile cache
    os.symlink(os.path.abspath(a.build), os.path.join(tmp, "build"))
    for d in ("configs", "models", "scripts", "test"):
        os.symlink(os.path.join(os.path.abspath(a.source), d), os.path.join(tmp, d))
    for cmd in commands:
        shown = " ".join(cmd.replace("\\\n", " ").split())
        why = skip_reason(cmd)
        if why:
            print("skip  (%s)  %s" % (why, shown), flush=True)
            continue
        start = time.time()
        r = subprocess.run(["bash", "-c", "set -o pipefail\n" + cmd], cwd=tmp, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            print("\n".join(r.stdout.splitlines()[-30:]))
            print("readme tour: FAIL (exit %d) %s" % (r.returncode, shown))
            sys.exit(1)
        ran += 1
        print("ok    %6.1f s  %s" % (time.time() - start, shown), flush=True)
if ran < a.min_commands:
    sys.exit("readme tour: ran %d commands, expected at least %d" % (ran, a.min_commands))
print("readme tour: %d commands ran, %d skipped" % (ran, len(commands) - ran))
