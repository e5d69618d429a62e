"""Two `medrun train` in one output directory: starts the command after -- (a long run),
waits until it has logged two steps, runs it a second time in the same directory and
prints that run's exit status and message; then stops the first (SIGTERM) and runs the
second once more (`--resume --steps 1`), which now gets past the lock."""
import os
import signal
import subprocess
import sys
import time

split = sys.argv.index("--")
out, cmd = sys.argv[1], sys.argv[split + 1:]
first = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
log = os.path.join(out, "metrics.jsonl")
deadline = time.time() + 300
while time.time() < deadline and first.poll() is None:
    if os.path.exists(log) and sum(1 for _ in open(log)) >= 2:
        break
    time.sleep(0.05)
second = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
print("second run: exit %d" % second.returncode)
print(second.stderr.strip().splitlines()[-1])
first.send_signal(signal.SIGTERM)
print("first run: exit %d" % first.wait(timeout=300))
third = subprocess.run(cmd + ["--resume", "--steps", "1", "--set", "schedule.total_steps=2"], stderr=subprocess.PIPE, text=True)
print("after it: exit %d" % third.returncode)
print(third.stderr.strip().splitlines()[-1])
