#!/usr/bin/env bash
# The data-parallel benchmark of the BANIS+ recipe on the GPUs of one host (docs/distributed.md,
# "Benchmark on several GPUs"): the runs on 1, 2, 4 or 8 H200s. Runs on the GPU machine from
# the repository root with .device/ and .deps/ carried (scripts/gpu-prepare.sh makes them);
# builds medrun as scripts/gpu-check.sh does (build-gpu/) unless it is there. For each rank
# count N of --gpus, the parts of --parts:
#   bench  `medrun bench --gpus N` of the data-parallel step (N = 1: a communicator of one,
#          --data-parallel), W warm-up and S timed steps: ms/step, all-reduce and exposed
#          communication time, peak device memory of every GPU; with N = 1 also the step of a
#          single process (no NCCL), the reference of the scaling efficiency
#          (its ms/step / the N-rank ms/step, the same batch per GPU);
#   train  `medrun train --gpus N` for W + S steps on the recipe's synthetic data (its
#          loader workers): rank 0's median ms/step and mean data wait over the last S steps;
#   torch  PyTorch DDP of the same model and per-GPU batch (bench/mednext_torch.py --ddp
#          under torchrun, bf16 autocast, fused AdamW; --torch-modes eager,compile), when
#          torch is importable;
# then prints a short table. Logs, JSON and rank 0's metrics.jsonl go to $OUT (default
# /tmp/out); the training runs themselves (checkpoints) to $MED_RUNS (default
# /tmp/gpu-data-parallel-runs), so that $OUT stays small.
#
#   scripts/gpu-data-parallel.sh [--gpus "1 2"] [--warmup 30] [--steps 100]
#       [--precision bf16|fp32] [--parts "bench train torch"] [--torch-modes eager,compile]
#       [--set key=value]... [--dry-run | --report]
#
# Defaults: --gpus "1 G" (G: the GPUs nvidia-smi lists; just "1" on one GPU), 30 warm-up
# and 100 timed steps, bf16-mixed, all parts. --set passes recipe overrides to bench and
# train (keys that leave the compiled step as it is, e.g. data.workers=8). --dry-run checks
# the arguments and the carried files and prints the commands without running them (no GPU
# needed); --report prints the table of what $OUT holds from an earlier run.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
RUNS=${MED_RUNS:-/tmp/gpu-data-parallel-runs}

die() { echo "gpu-data-parallel.sh: $*" >&2; exit 2; }
count() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] || die "$1: expected a whole number >= $3, got '$2'"; }

gpus="" warmup=30 steps=100 precision=bf16 parts="bench train torch" modes=eager,compile dry=0 report=0
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus|--warmup|--steps|--precision|--parts|--torch-modes|--set)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --gpus) gpus=$2 ;; --warmup) warmup=$2 ;; --steps) steps=$2 ;;
        --precision) precision=$2 ;; --parts) parts=$2 ;; --torch-modes) modes=$2 ;;
        --set) sets+=(--set "$2") ;;
      esac
      shift 2 ;;
    --dry-run) dry=1; shift ;;
    --report) report=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
done
count --warmup "$warmup" 0
count --steps "$steps" 1
case "$precision" in
  bf16) base=banis_plus_bf16 ;;
  fp32) base=banis_plus ;;
  *) die "--precision: expected bf16 or fp32, got '$precision'" ;;
esac
for p in $parts; do
  case "$p" in bench|train|torch) ;; *) die "--parts: expected some of 'bench train torch', got '$p'" ;; esac
done
[[ "$modes" =~ ^(eager|compile)(,(eager|compile))*$ ]] || die "--torch-modes: expected eager, compile or eager,compile, got '$modes'"
if [ -z "$gpus" ]; then
  listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "${listed:-0}" -ge 2 ] && gpus="1 $listed" || gpus=1
fi
for n in $gpus; do count "--gpus (each rank count)" "$n" 1; done

[ $dry -eq 1 ] && [ $report -eq 1 ] && die "--dry-run and --report: give one of them"
C=${MED_DEVICE:-.device}/cuda # MED_DEVICE: another folder of carried artifacts (tests)
json=$C/$base.json plain=$C/$base.medc dp=$C/${base}_dp.medc
for f in "$json" "$dp" "$plain"; do
  [ $report -eq 1 ] && break
  [ -f "$f" ] || [ -f "$f.gz" ] || die "$f is missing: run scripts/gpu-prepare.sh on the build machine and carry .device and .deps"
done
M=./build-gpu/bin/medrun
has() { [[ " $parts " == *" $1 "* ]]; }
# run LIMIT LOG CMD...: the command under `timeout`, its output in LOG; one line to say so.
run() {
  local limit=$1 log=$2; shift 2
  echo "== $*"
  [ $dry -eq 1 ] && return 0
  timeout "$limit" "$@" >"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { echo "   FAILED (exit $rc$([ $rc -eq 124 ] && echo ", timed out after $limit s")), see $log:"; tail -3 "$log" | sed 's/^/   /'; }
  return $rc
}

if [ $report -eq 1 ]; then
  parts="" # the table only
elif [ $dry -eq 0 ]; then
  mkdir -p "$OUT"
  N=/opt/torch/.venv/lib/python3.12/site-packages/nvidia # NCCL and cuDNN as gpu-check.sh finds them
  export LD_LIBRARY_PATH=$N/cu13/lib:$N/cudnn/lib:$N/nccl/lib:${LD_LIBRARY_PATH:-}
  for z in "$C"/*.medc.gz; do [ -f "$z" ] && gunzip -f "$z"; done # gpu-prepare.sh packed them
  if [ ! -x "$M" ]; then
    echo "== building medrun (scripts/gpu-check.sh, no checks; log $OUT/build-gpu.log)"
    MED_GPU_CHECKS=none bash scripts/gpu-check.sh >"$OUT/build-gpu.log" 2>&1 ||
      { tail -20 "$OUT/build-gpu.log"; die "the build failed"; }
  fi
fi
torch_ok=0
if has torch; then
  if ! grep -q -- '--ddp' bench/mednext_torch.py; then
    echo "== torch: bench/mednext_torch.py has no --ddp: PyTorch DDP not run"
  elif [ $dry -eq 1 ] || python3 -c 'import torch' 2>/dev/null; then
    torch_ok=1
  else
    echo "== torch: not importable here: PyTorch DDP not run"
  fi
fi

total=$((warmup + steps))
for n in $gpus; do
  if has bench; then
    if [ "$n" -eq 1 ]; then
      run 900 "$OUT/dp-bench-single.log" "$M" bench "$json" --artifact "$plain" --device cuda \
        --warmup "$warmup" --steps "$steps" --roofline none --json "$OUT/dp-bench-single.json" "${sets[@]}"
    fi
    rm -f "$OUT/dp-bench-$n.json"
    run 900 "$OUT/dp-bench-$n.log" "$M" bench "$json" --artifact "$dp" --device cuda --gpus "$n" \
      --data-parallel --warmup "$warmup" --steps "$steps" --roofline none --json "$OUT/dp-bench-$n.json" "${sets[@]}"
  fi
  if has train; then
    [ $dry -eq 1 ] || rm -rf "$RUNS/dp-train-$n" "$OUT/dp-train-$n.metrics.jsonl"
    run 1200 "$OUT/dp-train-$n.log" "$M" train "$json" --artifact "$dp" --device cuda --gpus "$n" \
      --data-parallel --steps "$total" --set checkpoint.every=1000000 --out "$RUNS/dp-train-$n" \
      --progress lines "${sets[@]}"
    [ $dry -eq 1 ] || cp "$RUNS/dp-train-$n/metrics.jsonl" "$OUT/dp-train-$n.metrics.jsonl" 2>/dev/null
  fi
  if [ $torch_ok -eq 1 ]; then
    run 1200 "$OUT/ddp-$n.log" python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
      bench/mednext_torch.py --ddp --size L --classes 6 --patch 128 --batch 2 \
      --warmup "$warmup" --steps "$steps" --modes "$modes"
  fi
done
[ $dry -eq 1 ] && exit 0

echo
python3 - "$OUT" "$steps" "$warmup" "$precision" $gpus <<'PY'
import json, os, re, statistics, sys
out, steps, warmup, precision, counts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def train(n):  # rank 0's metrics of the last `steps` steps
    try:
        rows = [json.loads(l) for l in open(os.path.join(out, "dp-train-%s.metrics.jsonl" % n))]
    except (OSError, ValueError):
        return None
    losses = [r["loss"] for r in rows if "loss" in r]
    rows = rows[-steps:]
    if not rows:
        return None
    return (1e3 * statistics.median(r["step_time"] for r in rows),
            1e3 * statistics.mean(r["data_wait"] for r in rows),
            "%.3f -> %.3f" % (statistics.mean(losses[:10]), losses[-1]) if losses else None)

f = lambda v, fmt: "-" if v is None else fmt % v
single = load(os.path.join(out, "dp-bench-single.json"))
ref = single["ms_per_step"]["median"] if single else None
print("BANIS+ data parallel (MedNeXt-L k3, 1->6, 128^3, batch 2 per GPU, %s; %d warm-up + %d timed steps):"
      % (precision, warmup, steps))
print("%-11s %9s %6s %11s %9s %12s %10s %10s  %s" % ("ranks", "ms/step", "eff.", "all-reduce", "exposed",
                                                 "peak/GPU", "train ms", "data wait", "train loss"))
if single:
    print("%-11s %9.1f %6s %11s %9s %12s %10s %10s  %s" % ("1 (no NCCL)", ref, "", "-", "-",
          "%.2f GiB" % (single["peak_memory_bytes"] / 2**30), "-", "-", "-"))
for n in counts:
    b, t = load(os.path.join(out, "dp-bench-%s.json" % n)), train(n)
    ms = b["ms_per_step"]["median"] if b else None
    dp = b.get("data_parallel") if b else None
    if b and ref is None:
        ref = ms
    peak = max(r["peak_memory_bytes"] for r in dp["per_rank"]) / 2**30 if dp else None
    print("%-11s %9s %6s %11s %9s %12s %10s %10s  %s" % (
        n, f(ms, "%.1f"), f(100 * ref / ms if ms and ref else None, "%.1f%%"),
        f(dp and dp["allreduce_ms_per_step"], "%.2f ms"), f(dp and dp["exposed_ms_per_step"], "%.2f ms"),
        f(peak, "%.2f GiB"), f(t and t[0], "%.1f"), f(t and t[1], "%.2f ms"), f(t and t[2], "%s")))
rows = []
for n in counts:
    try:
        for line in open(os.path.join(out, "ddp-%s.log" % n)):
            m = re.match(r"torch (ddp-\S+)\s+([0-9.]+) ms/step\s+peak\s+([0-9.]+) GiB", line)
            if m:
                rows.append("%-7s %-12s %9s %12s" % (n, m.group(1), m.group(2), m.group(3) + " GiB"))
    except OSError:
        pass
if rows:
    print("PyTorch DDP (bench/mednext_torch.py, bf16 autocast; the slowest rank, the fullest GPU):")
    print("%-7s %-12s %9s %12s" % ("ranks", "mode", "ms/step", "peak/GPU"))
    print("\n".join(rows))
print("eff. = the single-process (else the first) ms/step / this ms/step, the same batch per GPU;"
      " exposed = the all-reduce time the step waits for (docs/distributed.md)")
PY
