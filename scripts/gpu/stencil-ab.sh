#!/usr/bin/env bash
# Part `stencil` of scripts/gpu-check.sh: medc's stencil variants (MEDC_STENCIL) in one call on
# one GPU, one artifact each: `tiles` (the kernels before), `parity` (medc's default: the tiled
# shift-sums, the strided transposed depthwise convolutions as parity classes) and `registers`
# (parity plus shift-sums with 8 outputs per thread along W staged from 16-byte vectors).
#
# Usage: on the build machine, after scripts/gpu-prepare.sh, `scripts/gpu/stencil-ab.sh
# prepare` compiles the BANIS+ bf16-mixed step (k3) and MedNeXt-L k5 with MEDC_STENCIL=tiles
# and =registers into .device/cuda/<name>_tiles.medc and _registers.medc (the parity side is
# gpu-prepare.sh's <name>.medc).
# On the GPU machine MED_GPU_CHECKS=stencil scripts/gpu-check.sh sources this file: medrun
# bench (20 timed steps) of each side in the order tiles parity registers registers parity tiles (a
# drift of the clocks falls on both), each side with its own MEDRUN_CACHE (a cuDNN-or-
# generated choice measured against one side's kernels is not reused for the other's). The
# table ($OUT/stencil.txt): per step and side the mean of its two medians, and the kernel
# time of the depthwise rows of bench's profile (kinds naming stencil, shift_sum or depthwise).
# MED_STENCIL_STEPS picks the steps (default "banis_plus_bf16 banis_l_k5_bf16").

stencil_prepare() {
  local medc=${MED_MEDC:-${BUILD:-build}/bin/medc}
  mkdir -p .device/cuda
  MEDC_STENCIL=tiles "$medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed \
    --target cuda -o .device/cuda/banis_plus_bf16_tiles.medc
  MEDC_STENCIL=tiles "$medc" compile --recipe configs/banis_l_k5.yaml --set augment.pipeline=none --set precision=bf16-mixed \
    --target cuda -o .device/cuda/banis_l_k5_bf16_tiles.medc
  MEDC_STENCIL=registers "$medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed \
    --target cuda -o .device/cuda/banis_plus_bf16_registers.medc
  MEDC_STENCIL=registers "$medc" compile --recipe configs/banis_l_k5.yaml --set augment.pipeline=none --set precision=bf16-mixed \
    --target cuda -o .device/cuda/banis_l_k5_bf16_registers.medc
}

stencil_main() {
  local out=${OUT:-/tmp/out} medrun=${MED_MEDRUN:-./build-gpu/bin/medrun} C=.device/cuda
  local T=${TMPDIR:-/tmp}/med-stencil rc=0
  rm -rf "$T" && mkdir -p "$T"
  : >"$out/stencil.txt"
  local a side n art
  for a in ${MED_STENCIL_STEPS:-banis_plus_bf16 banis_l_k5_bf16}; do
    for side in tiles parity registers registers parity tiles; do
      art=$C/$a.medc
      [ "$side" = parity ] || art=$C/${a}_$side.medc
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
  python3 - "$T" >>"$out/stencil.txt" <<'PY' || rc=1
import glob, json, re, statistics, sys
T = sys.argv[1]
runs = {}
for f in sorted(glob.glob(T + "/bench-*.json")):
    m = re.match(r".*/bench-(.+)-(tiles|parity|registers)-\d+\.json$", f)
    runs.setdefault((m.group(1), m.group(2)), []).append(json.load(open(f)))
print("Stencil kernels, MEDC_STENCIL=tiles (before) against parity (the default) and registers, medrun bench, mean of two medians per side:")
for a in sorted({k[0] for k in runs}):
    row = {}
    for side in ("tiles", "parity", "registers"):
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
    if len(row) < 3:
        print("  %-18s not run on every side" % a)
        continue
    (t, td), (p, pd), (r, rd) = row["tiles"], row["parity"], row["registers"]
    print("  %-18s step tiles %.1f, parity %.1f (%+.1f%%), registers %.1f ms (%+.1f%%); depthwise kernels %.2f, %.2f, %.2f ms"
          % (a, t, p, 100 * (p - t) / t, r, 100 * (r - t) / t, sum(td.values()), sum(pd.values()), sum(rd.values())))
    for k in sorted(set(td) | set(pd) | set(rd)):
        print("    %-30s %8.3f  %8.3f  %8.3f ms" % (k, td.get(k, 0.0), pd.get(k, 0.0), rd.get(k, 0.0)))
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
