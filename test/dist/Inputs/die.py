#!/usr/bin/env python3
"""die.py R CMD...: runs CMD; in rank R (RANK) kills it with SIGKILL once it has joined
the communicator (its stderr says so) and has run a little, and exits as killed."""
import os
import signal
import subprocess
import sys
import time

rank = sys.argv[1]
proc = subprocess.Popen(sys.argv[2:], stderr=subprocess.PIPE)
for line in proc.stderr:
    sys.stderr.write(line.decode(errors="replace"))
    if rank == os.environ.get("RANK") and b"joined the communicator" in line:
        time.sleep(0.2)
        proc.kill()
        proc.wait()
        os.kill(os.getpid(), signal.SIGKILL)
sys.exit(proc.wait())
