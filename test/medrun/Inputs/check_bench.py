"""Checks the JSON of `medrun bench`: every number present and positive, the summary
consistent with the step times, TFLOP/s and GB/s the counts over the median, the profile's
shares summing to 100%, the FLOP and byte counts those `medrun info` prints for train_step,
and (with --stats) the forward function `infer` counting exactly medc stats' forward FLOPs;
with a roofline, each kind's GB/s, TFLOP/s and shares of the bounds its counts over its time.
With --out, the printed median matches the JSON."""
import argparse
import json
import math
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("json")
p.add_argument("--steps", type=int, required=True)
p.add_argument("--info", required=True, help="output of `medrun info` on the same artifact")
p.add_argument("--stats", help="output of `medc stats --json` on the model")
p.add_argument("--out", help="what `medrun bench` printed")
a = p.parse_args()

b = json.load(open(a.json))
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def close(x, y, rel=1e-9):
    return abs(x - y) <= rel * max(abs(x), abs(y))


ms = b["step_ms"]
check(len(ms) == a.steps == b["steps"], "step count %d, expected %d" % (len(ms), a.steps))
check(all(t > 0 for t in ms), "a step time is not positive: %s" % ms)
s = sorted(ms)
median = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
summary = b["ms_per_step"]
check(close(summary["median"], median), "median %s, recomputed %s" % (summary["median"], median))
check(close(summary["min"], s[0]) and close(summary["max"], s[-1]), "min/max differ")
check(summary["min"] <= summary["median"] <= summary["max"], "min <= median <= max fails")
check(b["flops_per_step"] > 0 and b["bytes_per_step"] > 0, "counts not positive")
check(close(b["tflops"], b["flops_per_step"] / (median / 1e3) / 1e12), "tflops != flops / median")
check(close(b["gb_per_s"], b["bytes_per_step"] / (median / 1e3) / 1e9), "gb_per_s != bytes / median")
check(b["peak_memory_bytes"] > 0, "peak memory not positive")
check(b["device"] == "cpu" and b["threads"] >= 1, "device %s, threads %s" % (b["device"], b["threads"]))
check(b["batch"] == 2 and b["patch"] == [16, 16, 16] and b["precision"] == "fp32", "recipe summary")
check(math.isfinite(b["loss_first"]) and math.isfinite(b["loss_last"]) and b["loss_first"] > 0,
      "loss %s -> %s" % (b["loss_first"], b["loss_last"]))

prof = b["profile"]
total = sum(r["ms"] for r in prof)
check(close(total, b["profile_total_ms"], 1e-6), "profile rows sum to %s, total %s" % (total, b["profile_total_ms"]))
check(abs(sum(r["percent"] for r in prof) - 100) < 1e-6, "profile shares do not sum to 100")
check([r["ms"] for r in prof] == sorted((r["ms"] for r in prof), reverse=True), "profile not sorted")
kinds = {r["kind"]: r for r in prof}
for k in ("conv3d", "conv3d_transpose", "conv3d_grad_weight", "group_norm", "fusion"):
    check(k in kinds, "no %s in the profile" % k)
if "conv3d" in kinds and "conv3d_grad_weight" in kinds:
    # Every convolution's weight gradient is taken: the same multiply-adds, and the
    # convolutions that kept a bias add one FLOP per output element (at most half their
    # two per multiply-add).
    fwd, wgrad = kinds["conv3d"]["flops"], kinds["conv3d_grad_weight"]["flops"]
    check(0 < wgrad <= fwd <= 1.5 * wgrad,
          "conv3d and its weight gradients count %s and %s FLOPs" % (fwd, wgrad))
check(sum(r["flops"] for r in prof) <= b["flops_per_step"] * (1 + 1e-12), "kinds exceed the total")

cost = {}
for line in open(a.info):
    m = re.match(r"cost (\S+): (\d+) FLOP, (\d+) bytes", line)
    if m:
        cost[m.group(1)] = (float(m.group(2)), float(m.group(3)))
check(cost.get("train_step") == (b["flops_per_step"], b["bytes_per_step"]),
      "medrun info says %s, bench %s" % (cost.get("train_step"), (b["flops_per_step"], b["bytes_per_step"])))
check(b["parameters"] > 0, "no parameters")
extra = ""
if a.stats:
    stats = json.load(open(a.stats))
    check(cost.get("infer", (None,))[0] == stats["forward_flops"],
          "infer counts %s FLOPs, medc stats %s" % (cost.get("infer"), stats["forward_flops"]))
    check(stats["parameters"] == b["parameters"], "parameters %s vs medc stats %s" % (b["parameters"], stats["parameters"]))
    extra = ", forward FLOPs as medc stats"
roof = b.get("roofline")
if roof:
    # Each kind against the roofline: its bytes and FLOPs over its time, as shares of the
    # bounds.
    for r in prof:
        sec = r["ms"] / 1e3
        check(close(r["gb_per_s"], r["bytes"] / sec / 1e9), "%s: GB/s != bytes / time" % r["kind"])
        check(close(r["tflops"], r["flops"] / sec / 1e12), "%s: TFLOP/s != FLOPs / time" % r["kind"])
        check(close(r["bandwidth_percent"], 100 * r["gb_per_s"] / roof["gb_per_s"]), "%s: share of bandwidth" % r["kind"])
        check(close(r["compute_percent"], 100 * r["tflops"] / roof["tflops"]), "%s: share of peak" % r["kind"])
    extra += ", roofline rows consistent"
else:
    check(all("gb_per_s" not in r for r in prof), "roofline columns without a roofline")
if a.out:
    m = re.search(r"median ([0-9.]+) ms/step", open(a.out).read())
    check(m is not None and abs(float(m.group(1)) - median) <= 0.006, "printed median differs")

if problems:
    for x in problems:
        print("FAIL", x)
    sys.exit(1)
print("bench json ok: %d steps, FLOPs as medrun info%s" % (a.steps, extra))
