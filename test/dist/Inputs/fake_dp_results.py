#!/usr/bin/env python3
"""fake_dp_results.py OUT: what scripts/gpu-data-parallel.sh leaves in OUT after a run with
--gpus "1 2" --steps 10, with round figures, for a test of its table (--report)."""
import json
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
GiB = 2**30


def bench(name, median, peaks=None, allreduce=0, exposed=0):
    b = {"ms_per_step": {"median": median}, "peak_memory_bytes": 2 * GiB, "data_parallel": None}
    if peaks:
        b["data_parallel"] = {"allreduce_ms_per_step": allreduce, "exposed_ms_per_step": exposed,
                              "per_rank": [{"peak_memory_bytes": p * GiB} for p in peaks]}
    with open(os.path.join(out, name), "w") as f:
        json.dump(b, f)


bench("dp-bench-single.json", 100.0)
bench("dp-bench-1.json", 102.0, [2], 3.0, 0.5)
bench("dp-bench-2.json", 104.0, [2, 3], 4.0, 1.25)
with open(os.path.join(out, "dp-train-2.metrics.jsonl"), "w") as f:
    for step in range(12):  # 2 warm-up steps, slower, then 10 timed
        f.write(json.dumps({"step": step, "step_time": 0.5 if step < 2 else 0.11,
                            "data_wait": 0.2 if step < 2 else 0.001,
                            "loss": 1.0 - 0.05 * step}) + "\n")
with open(os.path.join(out, "ddp-2.log"), "w") as f:
    f.write("torch ddp-eager     361.2 ms/step  peak  20.00 GiB  (warm-up 10 s, loss 0.7000)\n")
