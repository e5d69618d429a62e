"""Runs a command with its address space limited: `reliability_threads.py MIB -- CMD...`
(RLIMIT_AS = MIB MiB, thread stacks of 8 MiB), so that starting many threads fails as it
does under `ulimit -v`. Prints its stderr lines that start with "medrun" or "terminate"
and its exit status."""
import resource
import subprocess
import sys

split = sys.argv.index("--")
limit = int(sys.argv[1]) << 20
cmd = sys.argv[split + 1:]


def limits():
    resource.setrlimit(resource.RLIMIT_STACK, (8 << 20, resource.getrlimit(resource.RLIMIT_STACK)[1]))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=limits)
for line in r.stderr.splitlines():
    if line.startswith(("medrun", "terminate")):
        print(line)
print("exit %d" % r.returncode)
