#!/usr/bin/env python3
"""Faults of a `medrun train ... --gpus N --out OUT` job: starts it, waits until training is
under way (OUT/metrics.jsonl holds a few steps), then does one thing to one rank and checks
that the job ends within a bound with no process left behind:

  kill R   SIGKILL to rank R (a rank that dies)
  stop R   SIGSTOP to rank R (a rank that hangs), never continued here: the launcher must
           wake it (SIGCONT) when it stops the job
  term R   SIGTERM to rank R alone (a preemption that reaches one rank)
  usr1 R   SIGUSR1 to rank R alone (Slurm's warning before the time limit); R = L: to the
           launcher, which forwards it to every rank

Prints the launcher's exit status, its stderr and how long the job took to end after the
fault; exits 1 when a rank is left or the job took longer than --within SECONDS (default 20).
--start SECONDS (default 60) bounds the wait for training to get under way (a large model
on a GPU takes longer to start).

  train_fault.py ACTION R [--within S] [--start S] -- medrun train ... --gpus N --out OUT
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def steps_logged(out):
    try:
        with open(os.path.join(out, "metrics.jsonl")) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def main():
    args = sys.argv[1:]
    action, target = args.pop(0), args.pop(0)
    target = None if target == "L" else int(target)
    within, start_limit = 20.0, 60.0
    while args[0] in ("--within", "--start"):
        flag = args.pop(0)
        if flag == "--within":
            within = float(args.pop(0))
        else:
            start_limit = float(args.pop(0))
    if args[0] == "--":
        args.pop(0)
    out = args[args.index("--out") + 1]
    launcher = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines, pids = [], []

    def read():
        for raw in launcher.stderr:
            line = raw.decode(errors="replace")
            lines.append(line)
            m = re.search(r"started \d+ ranks? \(pids ([0-9 ]+);", line)
            if m:
                pids.extend(int(p) for p in m.group(1).split())

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.time() + start_limit
    while (not pids or steps_logged(out) < 5) and time.time() < deadline and launcher.poll() is None:
        time.sleep(0.02)
    if not pids or steps_logged(out) < 5:
        launcher.kill()
        reader.join()
        sys.exit("train_fault.py: training did not get under way:\n" + "".join(lines))

    start = time.time()
    victim = launcher.pid if target is None else pids[target]
    os.kill(victim, {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "term": signal.SIGTERM,
                     "usr1": signal.SIGUSR1}[action])
    try:
        launcher.wait(timeout=within + 30)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.wait()
        lines.append("train_fault.py: the launcher did not end\n")
    ended = time.time() - start
    reader.join()
    while any(alive(p) for p in pids) and time.time() < start + within + 40:
        time.sleep(0.05)
    left = [r for r, p in enumerate(pids) if alive(p)]
    print("launcher exit %d" % launcher.returncode)
    sys.stdout.write("".join(lines))
    if left:
        print("train_fault.py: ranks still running: %s" % left)
        sys.exit(1)
    if ended > within:
        print("train_fault.py: the job ended %.1f s after the fault, later than %g s" % (ended, within))
        sys.exit(1)
    print("train_fault.py: no rank left, the job ended within %g s of the fault (after %.2f s)"
          % (within, ended))


if __name__ == "__main__":
    main()
