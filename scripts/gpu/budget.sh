#!/usr/bin/env bash
# Part `budget` of scripts/gpu-check.sh: the memory budget's curve (docs/perf.md; issue 32,
# item 3). The BANIS+ step (MedNeXt-L k3, 1->6, batch 2, 128³, bf16-mixed, no augmentation)
# compiled without a budget (med-recompute's free recomputation only), without med-recompute
# (`--disable-pass med-recompute`: every saved value kept) and with `--memory-budget` 20, 16,
# 12 and 8 GiB (saved values recomputed until medc's plan fits), each benched by `medrun
# bench` (3 warm-up, 20 timed steps), in the order default, off, 20, 16, 12, 8, off, default:
# the repeated runs bracket any drift of the GPU during the part (MED_BUDGET_ORDER: another
# order or subset, e.g. "0 off 16 8 off 0"). The table gives per budget
# the median step (min-max), the device's peak as medrun measures it (plan, cuDNN and
# cuBLASLt workspaces, the CUDA context not included) and the step against the mean of the
# two default runs. A budget medc cannot meet is a compile error at prepare time, written
# into the table as such (no row is left out silently).
#
#   BUILD=build bash scripts/gpu/budget.sh prepare     here: .device/budget/ (gzip, ~15 MB)
#   MED_GPU_CHECKS=budget bash scripts/gpu-check.sh    there (sources this file)
set -uo pipefail

budget_prepare() {
  local medc=${BUILD:-build}/bin/medc D=.device/budget
  rm -rf "$D" && mkdir -p "$D"
  for b in 0 off 20 16 12 8; do
    local opt=() name=banis_plus_bf16
    [ "$b" = off ] && opt=(--disable-pass med-recompute) name=banis_plus_bf16_off
    [ "$b" != 0 ] && [ "$b" != off ] && opt=(--memory-budget "$b") name=banis_plus_bf16_${b}g
    echo "== budget.sh prepare: $name"
    if "$medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none \
        --set precision=bf16-mixed "${opt[@]}" --target cuda -o "$D/$name.medc" >"$D/$name.log" 2>&1; then
      gzip -f "$D/$name.medc"
    else
      echo "medc refused --memory-budget $b: $(grep -m1 -i error "$D/$name.log")" | tee "$D/$name.refused"
    fi
  done
  # The recipe as JSON, the run's settings for `medrun bench` (the artifact by --artifact).
  "$medc" recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed >"$D/bench.json"
  du -sh "$D"
}

budget_run() {
  local D=.device/budget M=./build-gpu/bin/medrun
  for z in "$D"/*.medc.gz; do [ -f "$z" ] && gunzip -f "$z"; done
  : >"$OUT/budget.txt"
  local i=0
  for b in ${MED_BUDGET_ORDER:-0 off 20 16 12 8 off 0}; do
    local name=banis_plus_bf16
    [ "$b" = off ] && name=banis_plus_bf16_off
    [ "$b" != 0 ] && [ "$b" != off ] && name=banis_plus_bf16_${b}g
    i=$((i + 1))
    if [ -f "$D/$name.refused" ]; then
      echo "$b refused $(cat "$D/$name.refused")" >>"$OUT/budget.rows"
      continue
    fi
    if [ ! -f "$D/$name.medc" ]; then
      echo "FAIL budget: $D/$name.medc missing (BUILD=build bash scripts/gpu/budget.sh prepare)" >>"$OUT/budget.txt"
      status=1
      continue
    fi
    echo "== budget: medrun bench $name ($i)"
    timeout 300 "$M" bench "$D/bench.json" --artifact "$D/$name.medc" --device cuda --steps 20 \
      --json "$OUT/budget-$i.json" >"$OUT/budget-$i.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
      tail -5 "$OUT/budget-$i.log"
      note_failure $rc 300 "medrun bench $name" "$OUT/budget.txt"
      echo "$b failed exit $rc" >>"$OUT/budget.rows"
    else
      echo "$b $OUT/budget-$i.json" >>"$OUT/budget.rows"
    fi
  done
  python3 - "$OUT/budget.rows" <<'PY' >>"$OUT/budget.txt"
import json, sys
rows = [l.split(None, 1) for l in open(sys.argv[1]).read().splitlines() if l.strip()]
runs = []
for b, what in rows:
    if what.startswith("/") or what.endswith(".json"):
        j = json.load(open(what))
        runs.append((b, j["ms_per_step"], j["peak_memory_bytes"] / 2**30, None))
    else:
        runs.append((b, None, None, what))
def mean(key):
    v = [t["median"] for b, t, _, _ in runs if b == key and t]
    return sum(v) / len(v) if v else None
ref, off = mean("0"), mean("off")
print("%-22s %-30s %-10s %-11s %s" % ("budget", "ms/step median (min-max)", "peak", "vs default",
                                      "vs no med-recompute"))
for b, t, peak, why in runs:
    label = {"0": "default", "off": "no med-recompute"}.get(b, "%s GiB" % b)
    if t is None:
        print("%-22s %s" % (label, why))
        continue
    ratio = lambda r: "%.3f" % (t["median"] / r) if r else "-"
    print("%-22s %-30s %-10s %-11s %s" % (label, "%.1f (%.1f-%.1f)" % (t["median"], t["min"], t["max"]),
                                          "%.2f GiB" % peak, ratio(ref), ratio(off)))
PY
  rm -f "$OUT/budget.rows"
}

case "${1:-run}" in
prepare) budget_prepare ;;
*) budget_run ;;
esac
