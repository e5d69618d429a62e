#!/usr/bin/env python3
"""die.py R [--steps OUT N] CMD...: runs CMD; in rank R (RANK) kills it with SIGKILL and
exits as killed: once it has joined the communicator (its stderr says so) and has run a
little, or with --steps once OUT/metrics.jsonl (which rank 0 of `medrun train` writes) holds
N steps."""
import os
import signal
import subprocess
import sys
import threading
import time

args = sys.argv[1:]
rank = args.pop(0)
steps = None
if args[0] == "--steps":
    steps = (args[1], int(args[2]))
    args = args[3:]
proc = subprocess.Popen(args, stderr=subprocess.PIPE)
mine = rank == os.environ.get("RANK")


def die():
    proc.kill()
    proc.wait()
    os.kill(os.getpid(), signal.SIGKILL)


def logged(out):
    try:
        with open(os.path.join(out, "metrics.jsonl")) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


if mine and steps:
    def watch():
        while proc.poll() is None:
            if logged(steps[0]) >= steps[1]:
                die()
            time.sleep(0.02)
    threading.Thread(target=watch, daemon=True).start()
for line in proc.stderr:
    sys.stderr.write(line.decode(errors="replace"))
    if mine and not steps and b"joined the communicator" in line:
        time.sleep(0.2)
        die()
sys.exit(proc.wait())
