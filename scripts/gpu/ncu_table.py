#!/usr/bin/env python3
"""Summarises Nsight Compute's raw CSV (ncu --csv --page raw) of scripts/gpu-check.sh part
`profile`: one row per kernel name (launches of one name averaged), the time, registers,
static shared memory, achieved occupancy, the tensor pipe's and memory's use, local-memory
traffic (spills) and the three largest warp stall reasons."""
import csv
import re
import sys
from collections import OrderedDict

rows = list(csv.reader(open(sys.argv[1], newline="")))
start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
head, units = rows[start], rows[start + 1]
data = [dict(zip(head, r)) for r in rows[start + 2:] if len(r) == len(head)]


def num(r, key):
    v = r.get(key, "").replace(",", "")
    try:
        return float(v)
    except ValueError:
        return float("nan")


stall = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
by = OrderedDict()
for r in data:
    name = re.sub(r"_[0-9a-f]{6,}$", "", r["Kernel Name"].split("(")[0])
    key = (name, r.get("launch__grid_size", ""), r.get("launch__registers_per_thread", ""))
    by.setdefault(key, []).append(r)

print("%-26s %6s %8s %5s %6s %5s %6s %6s %8s  %s" % (
    "kernel", "calls", "us/call", "regs", "smemKB", "occ%", "tens%", "dram%", "localMB",
    "top stalls (cycles per issue)"))
total = 0.0
for (name, grid, regs), rs in by.items():
    t = sum(num(r, "gpu__time_duration.sum") for r in rs) / len(rs)
    unit = units[head.index("gpu__time_duration.sum")]
    us = t / 1e3 if unit in ("nsecond", "ns") else t * 1e3 if unit in ("msecond", "ms") else t
    total += us * len(rs)
    stalls = sorted(((num(rs[0], k), stall.match(k).group(1)) for k in head if stall.match(k)),
                    reverse=True)[:3]
    local = (num(rs[0], "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum") +
             num(rs[0], "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")) / 1e6
    print("%-26s %6d %8.1f %5s %6.1f %5.1f %6.1f %6.1f %8.2f  %s" % (
        name[:26], len(rs), us, regs,
        num(rs[0], "launch__shared_mem_per_block_static") / 1024,
        num(rs[0], "sm__warps_active.avg.pct_of_peak_sustained_active"),
        num(rs[0], "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
        num(rs[0], "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        local, ", ".join("%s %.1f" % (n, v) for v, n in stalls)))
print("profiled kernels: %.2f ms in all" % (total / 1e3))
