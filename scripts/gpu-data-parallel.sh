#!/usr/bin/env bash
# The data-parallel benchmark and checks of the BANIS+ recipe on the GPUs of one host
# (docs/distributed.md, "Benchmark on several GPUs"): the runs on 1, 2, 4 or 8 H200s. Runs on
# the GPU machine from the repository root with .device/ and .deps/ carried
# (scripts/gpu-prepare.sh makes them); builds medrun as scripts/gpu-check.sh does (build-gpu/)
# unless it is there. For each rank count N of --gpus, the parts of --parts:
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
#   equiv  `medrun train --gpus N --data-parallel` at batch b per GPU and `medrun train` of
#          one process (no NCCL) at batch N*b, E steps each (--equiv-steps) on the same
#          samples, with a loss that is a mean over the samples (the _equiv artifacts); PASS
#          when every step's loss and gradient norm agree within --rtol
#          (test/dist/Inputs/same_losses.py), the N ranks print one checksum of their final
#          state (MEDRUN_STATE_DIGEST=1), and the control, the one process on other samples
#          (data.seed + 1), does not agree with it;
#   kill   `medrun train --gpus N --data-parallel`, its highest rank killed (SIGKILL) once
#          5 steps are logged (test/dist/Inputs/train_fault.py): PASS when the launcher
#          names that rank, the job ends within MEDRUN_DIST_TIMEOUT (default here 60 s) and
#          no rank is left;
# then prints a short table. Logs, JSON and rank 0's metrics.jsonl go to $OUT (default
# /tmp/out); the training runs themselves (checkpoints) to $MED_RUNS (default
# /tmp/gpu-data-parallel-runs), so that $OUT stays small.
#
#   scripts/gpu-data-parallel.sh [--gpus "1 2"] [--warmup 30] [--steps 100]
#       [--precision bf16|fp32] [--parts "bench train torch equiv kill"]
#       [--torch-modes eager,compile] [--equiv-steps 20] [--rtol R]
#       [--set key=value]... [--dry-run | --report]
#
# Defaults: --gpus "1 G" (G: the GPUs nvidia-smi lists; just "1" on one GPU), 30 warm-up
# and 100 timed steps, bf16-mixed, all parts, 20 steps of equiv within --rtol 2^-6 (bf16;
# fp32: 1e-5; docs/distributed.md says why). --set passes recipe overrides to the runs
# (keys that leave the compiled step as it is, e.g. data.workers=8). --dry-run checks the
# arguments and the carried files and prints the commands without running them (no GPU
# needed); --report prints the table of what $OUT holds from an earlier run. The exit
# status is 1 when a check of equiv or kill fails (--report too), 2 on bad arguments.
# MED_DEVICE, MED_MEDRUN and MED_TRAIN_DEVICE name another folder of artifacts, another
# medrun and another --device (cpu: test/dist/gpu-data-parallel-cpu.test runs equiv and
# kill on the emulated driver and the stand-in NCCL).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
RUNS=${MED_RUNS:-/tmp/gpu-data-parallel-runs}

die() { echo "gpu-data-parallel.sh: $*" >&2; exit 2; }
count() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] || die "$1: expected a whole number >= $3, got '$2'"; }

gpus="" warmup=30 steps=100 precision=bf16 parts="bench train torch equiv kill" modes=eager,compile
esteps=20 rtol="" dry=0 report=0
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus|--warmup|--steps|--precision|--parts|--torch-modes|--equiv-steps|--rtol|--set)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --gpus) gpus=$2 ;; --warmup) warmup=$2 ;; --steps) steps=$2 ;;
        --precision) precision=$2 ;; --parts) parts=$2 ;; --torch-modes) modes=$2 ;;
        --equiv-steps) esteps=$2 ;; --rtol) rtol=$2 ;; --set) sets+=(--set "$2") ;;
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
count --equiv-steps "$esteps" 1
# The rule of part equiv (docs/distributed.md, "Benchmark on several GPUs"): bf16 keeps 8
# significant bits (a rounding moves a value by up to 2^-9 of it), and the two jobs round
# the same sums in other places; 2^-6 leaves room for a few such roundings and for their
# drift over the steps, while other samples or a gradient not summed alike move the loss
# and the gradient norm by far more. f32: the CPU tests' 1e-5.
case "$precision" in
  bf16) base=banis_plus_bf16 rtol=${rtol:-0.015625} ;;
  fp32) base=banis_plus rtol=${rtol:-1e-5} ;;
  *) die "--precision: expected bf16 or fp32, got '$precision'" ;;
esac
[[ "$rtol" =~ ^[0-9]*\.?[0-9]+([eE]-?[0-9]+)?$ ]] && python3 -c "import sys; sys.exit(not 0 < float('$rtol') < 1)" ||
  die "--rtol: expected a number between 0 and 1, got '$rtol'"
for p in $parts; do
  case "$p" in bench|train|torch|equiv|kill) ;; *) die "--parts: expected some of 'bench train torch equiv kill', got '$p'" ;; esac
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
# Part equiv: the recipe with a loss that is a mean over the samples (loss.mask false,
# auto_pos_weight false: a masked mean or a pos_weight counted per rank is not the global
# batch's), compiled with --data-parallel at the recipe's batch b, and for one process at
# each batch N*b (scripts/gpu-prepare.sh makes b and 2b).
eq=$C/${base}_equiv
has() { [[ " $parts " == *" $1 "* ]]; }
missing() { die "$1 is missing: run scripts/gpu-prepare.sh on the build machine and carry .device and .deps"; }
need=()
has bench && need+=("$json" "$plain" "$dp")
{ has train || has kill; } && need+=("$json" "$dp")
if has equiv && [ $report -eq 0 ]; then
  need+=("$eq.json")
fi
for f in "${need[@]}"; do
  [ $report -eq 1 ] && break
  [ -f "$f" ] || [ -f "$f.gz" ] || missing "$f"
done
if has equiv && [ $report -eq 0 ]; then
  read -r b seed < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["data"]; print(d["batch"], d["seed"])' "$eq.json" 2>/dev/null)
  [[ "${b:-}" =~ ^[0-9]+$ && "${seed:-}" =~ ^[0-9]+$ ]] || die "$eq.json: expected an effective recipe (medc recipe) with data.batch and data.seed"
  for f in "${eq}_dp.medc" $(for n in $gpus; do echo "${eq}_b$((n * b)).json ${eq}_b$((n * b)).medc"; done); do
    [ -f "$f" ] || [ -f "$f.gz" ] || missing "$f"
  done
fi
M=${MED_MEDRUN:-./build-gpu/bin/medrun}
D=${MED_TRAIN_DEVICE:-cuda}
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
  if [ ! -x "$M" ] && [ -z "${MED_MEDRUN:-}" ]; then
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
      run 900 "$OUT/dp-bench-single.log" "$M" bench "$json" --artifact "$plain" --device "$D" \
        --warmup "$warmup" --steps "$steps" --roofline none --json "$OUT/dp-bench-single.json" "${sets[@]}"
    fi
    rm -f "$OUT/dp-bench-$n.json"
    run 900 "$OUT/dp-bench-$n.log" "$M" bench "$json" --artifact "$dp" --device "$D" --gpus "$n" \
      --data-parallel --warmup "$warmup" --steps "$steps" --roofline none --json "$OUT/dp-bench-$n.json" "${sets[@]}"
  fi
  if has train; then
    [ $dry -eq 1 ] || rm -rf "$RUNS/dp-train-$n" "$OUT/dp-train-$n.metrics.jsonl"
    run 1200 "$OUT/dp-train-$n.log" "$M" train "$json" --artifact "$dp" --device "$D" --gpus "$n" \
      --data-parallel --steps "$total" --set checkpoint.every=1000000 --out "$RUNS/dp-train-$n" \
      --progress lines "${sets[@]}"
    [ $dry -eq 1 ] || cp "$RUNS/dp-train-$n/metrics.jsonl" "$OUT/dp-train-$n.metrics.jsonl" 2>/dev/null
  fi
  if [ $torch_ok -eq 1 ]; then
    run 1200 "$OUT/ddp-$n.log" python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
      bench/mednext_torch.py --ddp --size L --classes 6 --patch 128 --batch 2 \
      --warmup "$warmup" --steps "$steps" --modes "$modes"
  fi
  if has equiv; then
    # The N ranks and the one process on the same samples, then the one process on others
    # (the control). Every step logged; the checkpoint of the last step only.
    r=$RUNS/dp-equiv-$n ref=${eq}_b$((n * b))
    e=(--steps "$esteps" --set logging.every=1 --set checkpoint.every=1000000 "${sets[@]}")
    [ $dry -eq 1 ] || rm -rf "$r"-{ranks,one,other} "$OUT/dp-equiv-$n".*
    run 900 "$OUT/dp-equiv-$n.ranks.log" env MEDRUN_STATE_DIGEST=1 "$M" train "$eq.json" \
      --artifact "${eq}_dp.medc" --device "$D" --gpus "$n" --data-parallel --out "$r-ranks" "${e[@]}"
    rc_ranks=$?
    run 900 "$OUT/dp-equiv-$n.one.log" "$M" train "$ref.json" --artifact "$ref.medc" --device "$D" \
      --out "$r-one" "${e[@]}"
    rc_one=$?
    run 900 "$OUT/dp-equiv-$n.other.log" "$M" train "$ref.json" --artifact "$ref.medc" --device "$D" \
      --out "$r-other" "${e[@]}" --set data.seed=$((seed + 1))
    rc_other=$?
    if [ $dry -eq 0 ]; then
      echo "ranks $rc_ranks one $rc_one other $rc_other batch $((n * b)) rtol $rtol" >"$OUT/dp-equiv-$n.status"
      for x in ranks one other; do cp "$r-$x/metrics.jsonl" "$OUT/dp-equiv-$n.$x.metrics.jsonl" 2>/dev/null; done
      python3 test/dist/Inputs/same_losses.py "$r-one" "$r-ranks" --rtol "$rtol" >"$OUT/dp-equiv-$n.same" 2>&1
      python3 test/dist/Inputs/same_losses.py "$r-one" "$r-other" --rtol "$rtol" >"$OUT/dp-equiv-$n.control" 2>&1
    fi
  fi
  if has kill; then
    # A long run; its highest rank killed once 5 steps are logged (a large model takes
    # a while to start: up to 600 s).
    limit=${MEDRUN_DIST_TIMEOUT:-60}
    [ $dry -eq 1 ] || rm -rf "$RUNS/dp-kill-$n" "$OUT/dp-kill-$n".*
    run $((limit + 900)) "$OUT/dp-kill-$n.log" env MEDRUN_DIST_TIMEOUT="$limit" \
      python3 test/dist/Inputs/train_fault.py kill $((n - 1)) --within "$limit" --start 600 -- \
      "$M" train "$json" --artifact "$dp" --device "$D" --gpus "$n" --data-parallel --steps 100000 \
      --set logging.every=1 --set checkpoint.every=1000000 --out "$RUNS/dp-kill-$n" "${sets[@]}"
    rc=$?
    [ $dry -eq 1 ] || echo "fault $rc rank $((n - 1)) within $limit" >"$OUT/dp-kill-$n.status"
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
bench_rows = [(n, load(os.path.join(out, "dp-bench-%s.json" % n)), train(n)) for n in counts]
timed = single or any(b or t for _, b, t in bench_rows)  # parts bench and train
if timed:
    print("BANIS+ data parallel (MedNeXt-L k3, 1->6, 128^3, batch 2 per GPU, %s; %d warm-up + %d timed steps):"
          % (precision, warmup, steps))
    print("%-11s %9s %6s %11s %9s %12s %10s %10s  %s" % ("ranks", "ms/step", "eff.", "all-reduce", "exposed",
                                                     "peak/GPU", "train ms", "data wait", "train loss"))
    if single:
        print("%-11s %9.1f %6s %11s %9s %12s %10s %10s  %s" % ("1 (no NCCL)", ref, "", "-", "-",
              "%.2f GiB" % (single["peak_memory_bytes"] / 2**30), "-", "-", "-"))
    for n, b, t in bench_rows:
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
if timed or rows:
    print("eff. = the single-process (else the first) ms/step / this ms/step, the same batch per GPU;"
          " exposed = the all-reduce time the step waits for (docs/distributed.md)")


def read(name):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read()
    except OSError:
        return None


failed = False
rows = []
for n in counts:  # part equiv: its files in OUT (dp-equiv-N.*)
    status = read("dp-equiv-%s.status" % n)
    if status is None:
        continue
    st = dict(zip(status.split()[::2], status.split()[1::2]))
    same, control = read("dp-equiv-%s.same" % n) or "", read("dp-equiv-%s.control" % n) or ""
    m = re.match(r"same losses: (\d+) steps .*largest relative difference ([^,)]+)(?:, ([^)]*))?", same)
    d = re.match(r"differ: (step \d+ [a-z ]+?) \S+ vs \S+ \(relative difference ([^ ]+)", same)
    losses = ("%s (%s)" % (m.group(2), m.group(3) or "-") if m else
              "%s (%s) too large" % (d.group(2), d.group(1)) if d else same.strip()[:34] or "-")
    digests = re.findall(r"medrun: rank (\d+) of (\d+): state after step (\d+): crc32c ([0-9a-f]+)",
                         read("dp-equiv-%s.ranks.log" % n) or "")
    ranks_seen = sorted(int(d[0]) for d in digests)
    agree = (ranks_seen == list(range(int(n))) and len({d[3] for d in digests}) == 1
             and len({d[2] for d in digests}) == 1 and all(int(d[1]) == int(n) for d in digests))
    state = ("crc32c %s on %d of %s" % (digests[0][3], len(digests), n) if agree
             else "differ: %s" % ",".join(sorted({d[3] for d in digests})) if digests else "-")
    c = re.match(r"differ: (step \d+) \S.*relative difference ([^ ]+)", control)
    ok = (all(st.get(k) == "0" for k in ("ranks", "one", "other")) and m is not None and agree
          and c is not None)
    failed |= not ok
    rows.append("%-6s %-10s %-34s %-27s %-23s %s" % (
        n, "batch " + st.get("batch", "?"), losses, state,
        "differ %s (%s)" % (c.group(2), c.group(1)) if c else "agrees" if control.startswith("same") else "-",
        "PASS" if ok else "FAIL" + ("" if all(st.get(k) == "0" for k in ("ranks", "one", "other"))
                                    else " (a run failed: dp-equiv-%s.*.log)" % n)))
if rows:
    print("Equivalence (part equiv: N ranks of the per-GPU batch vs one process of N times it, the same"
          " samples; loss and gradient norm of every step within %s):" % st.get("rtol", "?"))
    print("%-6s %-10s %-34s %-27s %-23s %s" % ("ranks", "1 process", "largest relative difference",
                                            "final state of the ranks", "control: other samples", "check"))
    print("\n".join(rows))
rows = []
for n in counts:  # part kill: dp-kill-N.*
    status = read("dp-kill-%s.status" % n)
    if status is None:
        continue
    st = dict(zip(status.split()[::2], status.split()[1::2]))
    log = read("dp-kill-%s.log" % n) or ""
    victim = st.get("rank", "?")
    named = re.search(r"medrun: rank %s \(pid \d+\) was killed by signal 9" % re.escape(victim), log)
    launcher = re.search(r"launcher exit (-?\d+)", log)
    ended = re.search(r"no rank left, the job ended within \S+ s of the fault \(after ([0-9.]+) s\)", log)
    left = re.search(r"ranks still running: (.*)", log)
    ok = st.get("fault") == "0" and bool(named) and bool(ended) and launcher and launcher.group(1) != "0"
    failed |= not ok
    rows.append("%-6s %-7s %-9s %-8s %-18s %-12s %s" % (
        n, "rank " + victim, "yes" if named else "no", launcher.group(1) if launcher else "-",
        "%s s (<= %s s)" % (ended.group(1), st.get("within")) if ended else "-",
        left.group(1) if left else "none" if ended else "-", "PASS" if ok else "FAIL"))
if rows:
    print("A rank killed (part kill: SIGKILL to the highest rank once 5 steps are logged):")
    print("%-6s %-7s %-9s %-8s %-18s %-12s %s" % ("ranks", "killed", "named", "exit", "job ended after",
                                                "ranks left", "check"))
    print("\n".join(rows))
sys.exit(1 if failed else 0)
PY
