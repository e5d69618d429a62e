#!/usr/bin/env python3
"""Faults of a `medrun ... --gpus N` job: starts the command (which must print each rank's
"rank R (pid P) joined" line to stderr, as dist-check does), waits until every rank has
joined, then does one thing to it and checks that the job ends within a few seconds with
no process left behind:

  kill-rank R   SIGKILL to rank R: the launcher names it and stops the others
  kill-launcher SIGKILL to the launcher: the ranks die with it (PR_SET_PDEATHSIG)
  sigint        SIGINT to the launcher: forwarded, every rank stops, status 130

Prints the launcher's exit status and its stderr; exits 1 when a check fails.
"""
import os
import re
import signal
import subprocess
import sys
import time


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def main():
    args = sys.argv[1:]
    action = args.pop(0)
    target = int(args.pop(0)) if action == "kill-rank" else None
    if args and args[0] == "--":
        args.pop(0)
    # SIGINT as at a terminal: a test runner may start this script with it ignored, and
    # an ignored signal is never delivered, nor forwarded.
    launcher = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines, pids = [], {}
    n = int(args[args.index("--gpus") + 1])
    deadline = time.time() + 30
    while len(pids) < n and time.time() < deadline:
        line = launcher.stderr.readline().decode(errors="replace")
        if not line:
            break
        lines.append(line)
        m = re.search(r"rank (\d+) \(pid (\d+)\) joined", line)
        if m:
            pids[int(m.group(1))] = int(m.group(2))
    if len(pids) < n:
        launcher.kill()
        sys.exit("fault.py: the ranks did not all join:\n" + "".join(lines))

    start = time.time()
    if action == "kill-rank":
        os.kill(pids[target], signal.SIGKILL)
    elif action == "kill-launcher":
        os.kill(launcher.pid, signal.SIGKILL)
    else:
        os.kill(launcher.pid, signal.SIGINT)
    try:
        _, rest = launcher.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        launcher.kill()
        _, rest = launcher.communicate()
        lines.append("fault.py: the launcher did not end within 15 s\n")
    lines.append(rest.decode(errors="replace"))
    # The ranks are gone soon after (with the launcher killed, nobody reaps them: they are
    # reparented and reaped by init, or stay zombies of this process's subreaper).
    while any(alive(p) for p in pids.values()) and time.time() < start + 10:
        time.sleep(0.05)
    left = [r for r, p in sorted(pids.items()) if alive(p)]
    print("launcher exit %d" % launcher.returncode)
    sys.stdout.write("".join(lines))
    if left:
        print("fault.py: ranks still running: %s" % left)
        sys.exit(1)
    print("fault.py: no rank left, ended %.1f s after the fault" % (time.time() - start))
    if time.time() - start > 10:
        sys.exit(1)


if __name__ == "__main__":
    main()
