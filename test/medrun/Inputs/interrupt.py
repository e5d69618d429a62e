"""Runs `medrun train` (the command after --), sends a signal (--signal INT, TERM or USR1) once two
steps are logged, and reports the exit status, the summary line and whether the checkpoint
matches the log. With --twice, a second signal follows at once: medrun quits without saving,
and the checkpoints written before stay loadable."""
import json
import os
import signal
import subprocess
import sys
import time

split = sys.argv.index("--")
opts, cmd = sys.argv[1:split], sys.argv[split + 1:]
cache, out = opts[0], opts[1]
sig = getattr(signal, "SIG" + (opts[opts.index("--signal") + 1] if "--signal" in opts else "INT"))
twice = "--twice" in opts
env = dict(os.environ, MEDRUN_CACHE=cache)
p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
log = os.path.join(out, "metrics.jsonl")
deadline = time.time() + 300
while time.time() < deadline and p.poll() is None:
    if os.path.exists(log) and sum(1 for _ in open(log)) >= 2:
        break
    time.sleep(0.05)
p.send_signal(sig)
if twice:
    time.sleep(0.01)
    p.send_signal(sig)
try:
    _, err = p.communicate(timeout=300)
except subprocess.TimeoutExpired:
    p.kill()
    print("medrun did not stop after %s" % sig.name)
    sys.exit(1)
print("exit %d" % p.returncode)
for line in err.splitlines():
    if "interrupted after" in line or "medrun:" in line:
        print(line)
steps = sum(1 for _ in open(log))
if twice:
    sys.exit(0)
latest = json.load(open(os.path.join(out, "checkpoints", "latest")))
if latest["step"] == steps:
    print("checkpoint at step %d matches the log" % steps)
else:
    print("checkpoint at step %d, log has %d steps" % (latest["step"], steps))
