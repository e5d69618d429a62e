#!/usr/bin/env python3
"""check_comm.py OVERLAPPED.json SERIALIZED.json DELAY_MS: the communication that
`medrun bench` reports on the data-parallel path (its JSON's data_parallel) for the same step
with the all-reduces overlapped with backward and serialized after it, each all-reduce made
DELAY_MS slower. Checks that the all-reduce time counts every sum's delay in both, that the
serialized run exposes nearly all of it, the overlapped run little of it, and that exposed
time never exceeds the all-reduce time; prints the figures and a verdict, exits 1 on a
failed check."""
import json
import sys


def comm(path):
    with open(path) as f:
        dp = json.load(f)["data_parallel"]
    if not dp:
        sys.exit("%s: no data_parallel figures" % path)
    return dp


over, serial, delay = comm(sys.argv[1]), comm(sys.argv[2]), float(sys.argv[3])
failed = []
for name, dp in (("overlapped", over), ("serialized", serial)):
    sums, total, exposed = dp["allreduces_per_step"], dp["allreduce_ms_per_step"], dp["exposed_ms_per_step"]
    print("%s: %d all-reduces/step, all-reduce %.1f ms/step, exposed %.1f ms/step" % (name, sums, total, exposed))
    if sums < 2:
        failed.append("%s: %d all-reduces per step, expected the buckets (2 or more)" % (name, sums))
    if total < 0.9 * delay * sums:
        failed.append("%s: all-reduce %.1f ms/step misses the %g ms delay of each of %d sums" % (name, total, delay, sums))
    if exposed > total + 1:
        failed.append("%s: exposed %.1f ms/step exceeds the all-reduce time %.1f" % (name, exposed, total))
if serial["exposed_ms_per_step"] < 0.75 * serial["allreduce_ms_per_step"]:
    failed.append("serialized: exposed %.1f ms/step is not most of the all-reduce time" % serial["exposed_ms_per_step"])
if over["exposed_ms_per_step"] > 0.25 * over["allreduce_ms_per_step"]:
    failed.append("overlapped: exposed %.1f ms/step is not a small part of the all-reduce time" % over["exposed_ms_per_step"])
for f in failed:
    print("check_comm.py: " + f)
if failed:
    sys.exit(1)
print("exposed: serialized > overlapped")
