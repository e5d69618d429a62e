#!/usr/bin/env bash
# Part `stencil` of scripts/gpu-check.sh: medc's stencil variants (MEDC_STENCIL) in one call on
# one GPU, one artifact each: `parity` (the tiled shift-sums and staged weight gradient, the
# strided transposed depthwise convolutions as parity classes), `rows` (medc's default:
# parity with the k3 shift-sums and weight gradient streamed along H), and, where
# MED_STENCIL_SIDES names them, `tiles` (the kernels before the parity classes) and
# `registers` (parity plus shift-sums with 8 outputs per thread along W).
#
# Usage: on the build machine, after scripts/gpu-prepare.sh, `scripts/gpu/stencil-ab.sh
# prepare` compiles the BANIS+ bf16-mixed step (k3) and MedNeXt-L k5 with MEDC_STENCIL=<side>
# for every side but rows into .device/cuda/<name>_<side>.medc (the rows side, the default, is
# gpu-prepare.sh's <name>.medc).
# On the GPU machine MED_GPU_CHECKS=stencil scripts/gpu-check.sh sources this file: first
# `medrun cuda-check` of the depthwise test network's training step compiled with
# MEDC_STENCIL=rows (fp32 and bf16-mixed, against the CPU backend), then medrun bench (20 timed
# steps) of each side, in the sides' order and then reversed (a drift of the
# clocks falls on both), each side with its own MEDRUN_CACHE (a cuDNN-or-generated choice
# measured against one side's kernels is not reused for the other's). The table
# ($OUT/stencil.txt): per step and side the mean of its two medians, and the kernel time of
# the depthwise rows of bench's profile (kinds naming stencil, shift_sum or depthwise), each
# side against the first. MED_STENCIL_STEPS picks the steps (default "banis_plus_bf16
# banis_l_k5_bf16"), MED_STENCIL_SIDES the sides (default "parity rows").

stencil_sides() { echo "${MED_STENCIL_SIDES:-parity rows}"; }

stencil_prepare() {
  local medc=${MED_MEDC:-${BUILD:-build}/bin/medc} side p
  mkdir -p .device/cuda
  # The streamed kernels on the GPU against the CPU backend: the depthwise test network's
  # training step at 8 × 16 × 128 (every streamed kernel at full resolution), fp32 and bf16-mixed.
  for p in fp32 bf16-mixed; do
    MEDC_STENCIL=rows "$medc" compile test/Transforms/Inputs/depthwise.mlir --batch 2 --patch 8,16,128 \
      --loss type=bce_with_logits --grad --train "precision=$p" --target cuda \
      -o .device/cuda/depthwise_rows_$p.medc
  done
  for side in $(stencil_sides); do
    [ "$side" = rows ] && continue
    MEDC_STENCIL=$side "$medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none \
      --set precision=bf16-mixed --target cuda -o .device/cuda/banis_plus_bf16_$side.medc
    MEDC_STENCIL=$side "$medc" compile --recipe configs/banis_l_k5.yaml --set augment.pipeline=none \
      --set precision=bf16-mixed --target cuda -o .device/cuda/banis_l_k5_bf16_$side.medc
  done
  # Packed like gpu-prepare.sh's artifacts (the device call's carry holds 64 MiB in all;
  # gpu-check.sh unpacks every .device/cuda/*.medc.gz).
  gzip -f .device/cuda/*.medc
}

stencil_main() {
  local out=${OUT:-/tmp/out} medrun=${MED_MEDRUN:-./build-gpu/bin/medrun} C=.device/cuda
  local T=${TMPDIR:-/tmp}/med-stencil rc=0
  rm -rf "$T" && mkdir -p "$T"
  : >"$out/stencil.txt"
  local a side n art p tol
  for p in fp32 bf16-mixed; do
    art=$C/depthwise_rows_$p.medc tol=1e-4
    [ "$p" = fp32 ] || tol=2e-2
    if [ ! -f "$art" ]; then
      echo "FAIL stencil: $art missing (scripts/gpu/stencil-ab.sh prepare)" >>"$out/stencil.txt"
      rc=1
      continue
    fi
    echo "== stencil: medrun cuda-check $art (MEDC_STENCIL=rows, $p)"
    if timeout 300 "$medrun" cuda-check "$art" --func train_step --tolerance $tol >"$T/check-$p.log" 2>&1; then
      echo "PASS stencil: MEDC_STENCIL=rows $p depthwise train_step against the CPU backend ($(grep -o 'worst [^;]*' "$T/check-$p.log" | tail -1))" >>"$out/stencil.txt"
    else
      echo "FAIL stencil: MEDC_STENCIL=rows $p depthwise train_step against the CPU backend, log $T/check-$p.log" >>"$out/stencil.txt"
      tail -5 "$T/check-$p.log" >>"$out/stencil.txt"
      rc=1
    fi
  done
  for a in ${MED_STENCIL_STEPS:-banis_plus_bf16 banis_l_k5_bf16}; do
    local sides=($(stencil_sides)) order=()
    for side in "${sides[@]}"; do order+=("$side"); done
    for ((n = ${#sides[@]} - 1; n >= 0; n--)); do order+=("${sides[n]}"); done
    for side in "${order[@]}"; do
      art=$C/$a.medc
      [ "$side" = rows ] || art=$C/${a}_$side.medc
      if [ ! -f "$art" ] || [ ! -f "$C/$a.json" ]; then
        echo "FAIL stencil: $art or $C/$a.json missing (scripts/gpu-prepare.sh, then scripts/gpu/stencil-ab.sh prepare)" >>"$out/stencil.txt"
        rc=1
        continue
      fi
      n=$(ls "$T"/bench-$a-$side-*.json 2>/dev/null | wc -l)
      echo "== stencil: medrun bench $a, $side"
      MEDRUN_CACHE="$T/cache-$side" timeout 300 "$medrun" bench "$C/$a.json" --artifact "$art" \
        --device cuda --steps 20 --json "$T/bench-$a-$side-$n.json" >"$T/bench-$a-$side-$n.log" 2>&1 ||
        { echo "FAIL stencil: medrun bench $a ($side), log $T/bench-$a-$side-$n.log" >>"$out/stencil.txt"; rc=1; }
      grep -E "ms/step|median" "$T/bench-$a-$side-$n.log" | head -2
    done
  done
  python3 - "$T" $(stencil_sides) >>"$out/stencil.txt" <<'PY' || rc=1
import glob, json, re, statistics, sys
T, sides = sys.argv[1], sys.argv[2:]
runs = {}
for f in sorted(glob.glob(T + "/bench-*.json")):
    m = re.match(r".*/bench-(.+)-(%s)-\d+\.json$" % "|".join(sides), f)
    if m:
        runs.setdefault((m.group(1), m.group(2)), []).append(json.load(open(f)))
print("Stencil kernels, MEDC_STENCIL=%s, medrun bench, mean of two medians per side (change against %s):"
      % (" against ".join(sides), sides[0]))
for a in sorted({k[0] for k in runs}):
    row = {}
    for side in sides:
        bs = runs.get((a, side), [])
        if not bs:
            continue
        ms = statistics.mean(b["ms_per_step"]["median"] for b in bs)
        dw = {}
        for b in bs:
            for k in b.get("profile", []):
                if re.search(r"stencil|shift_sum|depthwise", k["kind"]):
                    dw.setdefault(k["kind"], []).append(k["ms"])
        row[side] = (ms, {k: statistics.mean(v) for k, v in dw.items()})
    if len(row) < len(sides):
        print("  %-18s not run on every side" % a)
        continue
    base = row[sides[0]][0]
    print("  %-18s step %s" % (a, ", ".join("%s %.1f ms (%+.1f%%)" % (s, row[s][0], 100 * (row[s][0] - base) / base)
                                             for s in sides)))
    print("    %-40s %s" % ("depthwise kernels in all", "  ".join("%8.3f" % sum(row[s][1].values()) for s in sides)))
    for k in sorted(set().union(*(row[s][1] for s in sides))):
        print("    %-40s %s ms" % (k, "  ".join("%8.3f" % row[s][1].get(k, 0.0) for s in sides)))
PY
  return $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  cd "$(dirname "$0")/../.."
  if [ "${1:-}" = prepare ]; then
    set -e
    stencil_prepare
    exit 0
  fi
  stencil_main
  rc=$?
  cat "${OUT:-/tmp/out}/stencil.txt"
  exit $rc
else
  stencil_main || status=1 # sourced by scripts/gpu-check.sh (part stencil)
fi
