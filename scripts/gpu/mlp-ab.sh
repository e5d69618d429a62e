#!/usr/bin/env bash
# Part `mlp` of scripts/gpu-check.sh: the fused block MLP (med-form-mlp-fusions, recipe key
# recompute_mlp; sides mlpN with the backward's voxels split across warps, MEDC_MLP_GRAD=stages)
# with its copy pipeline (two tiles in flight, medc's default
# --cuda-mlp-pipeline 2) against the same templates taking one tile at a time
# (--cuda-mlp-pipeline 1, the kernels before the pipeline) and against the default passes
# (unfused: cuBLASLt products and GELU kernels, the expansion in memory), the BANIS+
# bf16-mixed step, in one call on one GPU.
#
# Usage: on the build machine, after scripts/gpu-prepare.sh (whose banis_plus_bf16.medc is
# the unfused side), `scripts/gpu/mlp-ab.sh prepare` compiles the fused sides into
# .device/cuda/banis_plus_bf16_mlp1.medc, _mlp2.medc and _mlp3.medc (three tiles in flight
# where they fit: the level-0 forward; with their effective recipe banis_plus_bf16_mlp.json:
# recompute_mlp true). On the GPU machine MED_GPU_CHECKS=mlp
# scripts/gpu-check.sh sources this file: medrun bench (20 timed steps, the median) of each
# side in the order MED_MLP_ORDER (default "unfused mlp1 mlp2 mlp2 mlp1 unfused": a drift of
# the clocks falls on all; add mlp3 to it for the deeper pipeline), each side with its own
# MEDRUN_CACHE. MEDRUN_MMA is left as set
# (auto: the forward's wgmma variant where it is measured faster). The table
# ($OUT/mlp.txt): per side the mean of its medians and the peak memory, and the rows
# fusion:mlp and fusion:mlp_grad (and the unfused side's 1x1x1, gelu and gelu_grad rows) with
# their roofline columns: bytes as bench counts them (the fusion's operands and results
# once: x, y and their gradients, the weights) over the time, against the copy bandwidth
# (H200: 4300 GB/s, bench's own; H100: 3000 GB/s, measured on one, docs/perf.md).
# MED_MLP_STEPS picks the artifacts' stem (default banis_plus_bf16). Side `chunks`: mlp2 with
# the backward's expanded channels split across warps where it fits (MEDC_MLP_GRAD=chunks,
# kernels/mlp.cuh: mlpGradChunks), with its own recipe banis_plus_bf16_chunks.json (the
# compile hash counts MEDC_MLP_GRAD), which part profile can take too
# (MED_PROFILE_ARTIFACT=banis_plus_bf16_chunks). Side `hybrid`: the default passes with the
# blocks that side `chunks` runs in one kernel fused (`medc compile --mlp-fusions
# one-kernel`, MEDC_MLP_GRAD=chunks), the others on the library products.

mlp_prepare() {
  local medc=${MED_MEDC:-${BUILD:-build}/bin/medc} a=banis_plus_bf16
  local R=(--recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed --set recompute_mlp=true)
  mkdir -p .device/cuda
  # The sides MED_MLP_ORDER names (default all three), packed for the carry's 64 MiB.
  local side
  for side in $(echo ${MED_MLP_ORDER:-mlp1 mlp2 mlp3} | tr ' ' '\n' | grep '^mlp\|^chunks$\|^hybrid$' | sort -u); do
    if [ "$side" = hybrid ]; then
      local H=("${R[@]:0:${#R[@]}-2}" --mlp-fusions one-kernel) # (not recompute_mlp)
      MEDC_MLP_GRAD=chunks "$medc" recipe "${H[@]:1}" >.device/cuda/${a}_$side.json
      MEDC_MLP_GRAD=chunks "$medc" compile "${H[@]}" --target cuda -o .device/cuda/${a}_$side.medc
    elif [ "$side" = chunks ]; then
      # (its recipe's compile hash counts MEDC_MLP_GRAD too; also part profile's artifact)
      MEDC_MLP_GRAD=chunks "$medc" recipe "${R[@]:1}" >.device/cuda/${a}_$side.json
      MEDC_MLP_GRAD=chunks "$medc" compile "${R[@]}" --target cuda -o .device/cuda/${a}_$side.medc
    else
      MEDC_MLP_GRAD=stages "$medc" recipe "${R[@]:1}" >.device/cuda/${a}_mlp.json
      MEDC_MLP_GRAD=stages "$medc" compile "${R[@]}" --cuda-mlp-pipeline ${side#mlp} --target cuda -o .device/cuda/${a}_$side.medc
    fi
    gzip -f .device/cuda/${a}_$side.medc
  done
}

mlp_main() {
  local out=${OUT:-/tmp/out} medrun=${MED_MEDRUN:-./build-gpu/bin/medrun} C=.device/cuda
  local T=${TMPDIR:-/tmp}/med-mlp rc=0 a side n art json roof=()
  rm -rf "$T" && mkdir -p "$T"
  : >"$out/mlp.txt"
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
  *H100*) roof=(--roofline 3000,798) ;;
  esac
  for a in ${MED_MLP_STEPS:-banis_plus_bf16}; do
    for side in ${MED_MLP_ORDER:-unfused mlp1 mlp2 mlp2 mlp1 unfused}; do
      art=$C/${a}_$side.medc json=$C/${a}_mlp.json
      [ "$side" = unfused ] && art=$C/$a.medc json=$C/$a.json
      [ "$side" = chunks ] || [ "$side" = hybrid ] && json=$C/${a}_$side.json
      if [ ! -f "$art" ] || [ ! -f "$json" ]; then
        echo "FAIL mlp: $art or $json missing (scripts/gpu-prepare.sh, then scripts/gpu/mlp-ab.sh prepare)" >>"$out/mlp.txt"
        rc=1
        continue
      fi
      n=$(ls "$T"/bench-$a-$side-*.json 2>/dev/null | wc -l)
      echo "== mlp: medrun bench $a, $side"
      MEDRUN_CACHE="$T/cache-$side" timeout 300 "$medrun" bench "$json" --artifact "$art" \
        --device cuda --steps 20 "${roof[@]}" --json "$T/bench-$a-$side-$n.json" \
        >"$T/bench-$a-$side-$n.log" 2>&1 ||
        { echo "FAIL mlp: medrun bench $a ($side), log $T/bench-$a-$side-$n.log" >>"$out/mlp.txt"; rc=1; }
      grep -E "ms/step|median" "$T/bench-$a-$side-$n.log" | head -2
      grep -E "fusion:mlp|1x1x1|gelu" "$T/bench-$a-$side-$n.log"
    done
  done
  python3 - "$T" >>"$out/mlp.txt" <<'PY' || rc=1
import glob, json, re, statistics, sys
T = sys.argv[1]
runs = {}
for f in sorted(glob.glob(T + "/bench-*.json")):
    m = re.match(r".*/bench-(.+)-(unfused|mlp[0-9]|chunks|hybrid)-\d+\.json$", f)
    runs.setdefault((m.group(1), m.group(2)), []).append(json.load(open(f)))
print("Block MLP: unfused (default passes) / fused, N tiles in flight (mlpN; mlp1: one at a time, the kernels before the pipeline); medrun bench, mean of the medians:")
for a in sorted({k[0] for k in runs}):
    for side in sorted({k[1] for k in runs if k[0] == a}, key=lambda x: (x != "unfused", x)):
        bs = runs.get((a, side), [])
        if not bs:
            print("  %-16s %-8s not run" % (a, side))
            continue
        ms = statistics.mean(b["ms_per_step"]["median"] for b in bs)
        peak = max(b["peak_memory_bytes"] for b in bs) / 2**30
        roof = bs[0].get("roofline") or {}
        gbps = roof.get("gb_per_s", 0)
        print("  %-16s %-8s %8.1f ms/step  peak %6.2f GiB  (medians %s)"
              % (a, side, ms, peak, " ".join("%.1f" % b["ms_per_step"]["median"] for b in bs)))
        rows = {}
        for b in bs:
            for k in b.get("profile", []):
                if re.search(r"fusion:mlp|1x1x1|gelu", k["kind"]):
                    rows.setdefault(k["kind"], []).append(k)
        for kind in sorted(rows):
            ks = rows[kind]
            t = statistics.mean(k["ms"] for k in ks)
            gb = ks[0]["bytes"] / (t * 1e-3) / 1e9 if t > 0 else 0
            tf = ks[0]["flops"] / (t * 1e-3) / 1e12 if t > 0 else 0
            share = " %5.1f%% of %.0f GB/s" % (100 * gb / gbps, gbps) if gbps else ""
            print("    %-22s %9.3f ms  %8.1f GB/s%s  %6.1f TFLOP/s" % (kind, t, gb, share, tf))
PY
  return $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  cd "$(dirname "$0")/../.."
  if [ "${1:-}" = prepare ]; then
    set -e
    mlp_prepare
    exit 0
  fi
  mlp_main
  rc=$?
  cat "${OUT:-/tmp/out}/mlp.txt"
  exit $rc
else
  mlp_main || status=1 # sourced by scripts/gpu-check.sh (part mlp)
fi
