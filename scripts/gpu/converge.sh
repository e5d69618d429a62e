#!/usr/bin/env bash
# Part `converge` of scripts/gpu-check.sh: training is unchanged by speed. BANIS+ (MedNeXt-L k3,
# bf16-mixed) trains STEPS steps on the embedded synthetic data three times, from the recipe's
# seed (train.seed: parameter initialization and every step's random numbers; the volumes,
# data.seed, stay the same):
#   fused      the default passes (the fused templates)               seed A
#   unfused    the fused templates' passes disabled (CONVERGE_UNFUSED)  seed A
#   seed2      the unfused path again                                 seed B
# and compares the loss curves as means of WINDOW-step windows (window k: steps k·WINDOW+1 ..
# (k+1)·WINDOW). With d_k = |fused_k − unfused_k| and s_k = |seed2_k − unfused_k|, the rule:
#   PASS when every run ends 0 with STEPS finite losses, and
#     (1) rms(d) <= rms(s)    (the fused path moves the curve no more than another seed does)
#     (2) max(d) <= max(s)    (and no window more than the largest seed-to-seed window)
# A short table (one row per window, the three means, d, s) and the verdict go to
# $OUT/converge.txt.
#
# Usage: on the build machine, `scripts/gpu/converge.sh prepare` compiles the unfused artifact
# (.device/cuda/banis_plus_bf16_unfused.medc; the fused one is gpu-prepare.sh's
# banis_plus_bf16.medc) and carries nothing else; on the GPU machine MED_GPU_CHECKS=converge
# scripts/gpu-check.sh sources this file, or run it alone: `scripts/gpu/converge.sh`.
# Variables: MED_CONVERGE_STEPS (500), MED_CONVERGE_WINDOW (50), MED_CONVERGE_SEEDS ("0 1": A and
# B), MED_CONVERGE_DEVICE (cuda), MED_CONVERGE_RECIPE / _FUSED / _UNFUSED (the effective
# recipe and the two artifacts; default .device/cuda/banis_plus_bf16{.json,.medc,_unfused.medc}),
# MED_MEDRUN (./build-gpu/bin/medrun), MED_MEDC (build/bin/medc, prepare only),
# MED_CONVERGE_LIMIT (seconds per run, 1800), OUT (/tmp/out). test/cuda/converge-cpu.test runs
# it on the CPU at a tiny size, with a perturbed curve as its negative control
# (MED_CONVERGE_COMPARE_ONLY=1 compares the metrics already in $OUT/converge-*).

# The passes that form the fused templates' ops (med.fusion: elementwise, stencil, mlp,
# reduce, resample); without them every op runs its own kernel.
CONVERGE_UNFUSED=(--disable-pass=med-form-fusions --disable-pass=med-form-stencil-fusions
  --disable-pass=med-form-mlp-fusions --disable-pass=med-form-reduce-fusions
  --disable-pass=med-form-resample-fusions)

# MED_CONVERGE_PREPARE_RECIPE (configs/banis_plus.yaml) and MED_CONVERGE_TARGET (cuda; cpu: an
# artifact without kernels) for the test at a tiny size.
converge_prepare() {
  local medc=${MED_MEDC:-${BUILD:-build}/bin/medc}
  local recipe=${MED_CONVERGE_PREPARE_RECIPE:-configs/banis_plus.yaml}
  local unfused=${MED_CONVERGE_UNFUSED:-.device/cuda/banis_plus_bf16_unfused.medc}
  mkdir -p "$(dirname "$unfused")"
  "$medc" compile --recipe "$recipe" --set precision=bf16-mixed --set augment.pipeline=none \
    --target "${MED_CONVERGE_TARGET:-cuda}" "${CONVERGE_UNFUSED[@]}" -o "$unfused"
  # Packed like gpu-prepare.sh's artifacts (the device call's carry holds 64 MiB in all;
  # gpu-check.sh unpacks every .device/cuda/*.medc.gz).
  case "$unfused" in .device/cuda/*) gzip -f "$unfused" ;; esac
}

converge_main() {
  local steps=${MED_CONVERGE_STEPS:-500} window=${MED_CONVERGE_WINDOW:-50}
  local device=${MED_CONVERGE_DEVICE:-cuda} limit=${MED_CONVERGE_LIMIT:-1800}
  local recipe=${MED_CONVERGE_RECIPE:-.device/cuda/banis_plus_bf16.json}
  local fused=${MED_CONVERGE_FUSED:-.device/cuda/banis_plus_bf16.medc}
  local unfused=${MED_CONVERGE_UNFUSED:-.device/cuda/banis_plus_bf16_unfused.medc}
  local medrun=${MED_MEDRUN:-./build-gpu/bin/medrun}
  local out=${OUT:-/tmp/out}
  read -r seed_a seed_b <<<"${MED_CONVERGE_SEEDS:-0 1}"
  local rc_all=0
  mkdir -p "$out"
  : >"$out/converge.txt"
  if [ "${MED_CONVERGE_COMPARE_ONLY:-0}" != 1 ]; then
    local f
    for f in "$recipe" "$fused" "$unfused"; do
      [ -f "$f" ] || { echo "FAIL converge: $f is missing (scripts/gpu-prepare.sh, then scripts/gpu/converge.sh prepare)" | tee -a "$out/converge.txt"; return 1; }
    done
    local name artifact seed
    for spec in "fused $fused $seed_a" "unfused $unfused $seed_a" "seed2 $unfused $seed_b"; do
      read -r name artifact seed <<<"$spec"
      echo "== converge $name: medrun train $recipe --artifact $artifact --device $device --steps $steps --set train.seed=$seed"
      rm -rf "$out/converge-$name"
      timeout "$limit" "$medrun" train "$recipe" --artifact "$artifact" --device "$device" \
        --steps "$steps" --set train.seed="$seed" --set checkpoint.every="$steps" \
        --out "$out/converge-$name" --progress lines >"$out/converge-$name.log" 2>&1
      local rc=$?
      echo "$rc" >"$out/converge-$name.rc"
      tail -2 "$out/converge-$name.log"
    done
  fi
  python3 - "$out" "$steps" "$window" "$seed_a" "$seed_b" >>"$out/converge.txt" <<'PY'
import json, math, os, sys
out, steps, window, seed_a, seed_b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
curves, problems = {}, []
for name in ("fused", "unfused", "seed2"):
    d = os.path.join(out, "converge-" + name)
    try:
        rc = open(d + ".rc").read().strip()
    except OSError:
        rc = "?"
    try:
        loss = [json.loads(l)["loss"] for l in open(os.path.join(d, "metrics.jsonl")) if l.strip()]
    except (OSError, ValueError, KeyError) as e:
        problems.append("%s: no loss curve (%s)" % (name, e))
        continue
    if rc != "0":
        problems.append("%s: exit %s" % (name, rc))
    if len(loss) != steps:
        problems.append("%s: %d steps, not %d" % (name, len(loss), steps))
    if not all(math.isfinite(x) for x in loss):
        problems.append("%s: a loss is not finite" % name)
    curves[name] = loss
print("Loss curves, means of %d-step windows (fused: the default passes, seed %s; unfused: "
      "the fused templates' passes disabled, seed %s; seed2: unfused, seed %s):"
      % (window, seed_a, seed_a, seed_b))
if problems:
    for p in problems:
        print("  " + p)
    print("FAIL converge: " + "; ".join(problems))
    sys.exit(1)
n = steps // window
mean = {k: [sum(v[i * window:(i + 1) * window]) / window for i in range(n)] for k, v in curves.items()}
d = [abs(mean["fused"][i] - mean["unfused"][i]) for i in range(n)]
s = [abs(mean["seed2"][i] - mean["unfused"][i]) for i in range(n)]
print("  steps        fused     unfused   seed2     |f-u|     |s2-u|")
for i in range(n):
    print("  %4d-%-4d    %.5f   %.5f   %.5f   %.5f   %.5f"
          % (i * window + 1, (i + 1) * window, mean["fused"][i], mean["unfused"][i],
             mean["seed2"][i], d[i], s[i]))
rms = lambda v: math.sqrt(sum(x * x for x in v) / len(v))
ok1, ok2 = rms(d) <= rms(s), max(d) <= max(s)
print("  rule: rms(|f-u|) %.5f <= rms(|s2-u|) %.5f: %s; max(|f-u|) %.5f <= max(|s2-u|) %.5f: %s"
      % (rms(d), rms(s), "yes" if ok1 else "NO", max(d), max(s), "yes" if ok2 else "NO"))
print("%s converge: the fused path's loss curve %s the seed-to-seed spread"
      % ("PASS" if ok1 and ok2 else "FAIL", "lies within" if ok1 and ok2 else "leaves"))
sys.exit(0 if ok1 and ok2 else 1)
PY
  rc_all=$?
  return $rc_all
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  # Run by itself: `prepare` (build machine) or the part alone.
  set -uo pipefail
  cd "$(dirname "$0")/../.."
  if [ "${1:-}" = prepare ]; then
    set -e
    converge_prepare
    exit 0
  fi
  converge_main
  rc=$?
  cat "${OUT:-/tmp/out}/converge.txt"
  exit $rc
else
  # Sourced by scripts/gpu-check.sh (part converge): its table and status.
  converge_main || status=1
fi
