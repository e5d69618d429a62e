#!/usr/bin/env bash
# Part `ab` of scripts/gpu-check.sh (sourced there: $OUT, $status, note_failure, build-gpu/):
# a change's times before against after, in one call on one GPU. The before side is what
# scripts/gpu/prepare-ab.sh COMMIT made (.device/ab: that commit's source and its artifacts);
# its medrun is built here from that source. Rows: the BANIS+ bf16-mixed step (k3) and
# MedNeXt-L k5 (medrun bench: 3 warm-up and 20 timed steps, the median), each side twice in
# alternating order (before, after, after, before: a drift of the GPU's clocks falls on both);
# the two augmentation pipelines alone (medrun cuda-check --profile, the sum of the launches'
# kernel times of one warm run, 5 runs per side alternating, the median). A row passes when
# after is within MED_AB_TOLERANCE percent (default 2) of before. MED_AB_STEPS picks the step
# rows (default "banis_plus_bf16 banis_l_k5_bf16"), MED_AB_ORDER the sides' order per row
# (default "before after after before"), MED_AB_AUGMENT=0 leaves the pipelines out: a shorter
# call where little device time is left; a row not run is reported as not run, not passed.
# MED_AB_RUNS sets the augmentation rows' runs per side (default 5; more where their spread,
# about 2% at 0.4 ms, is near the tolerance).
AB=.device/ab
T=${TMPDIR:-/tmp}/med-ab
if [ ! -f "$AB/src.tar.gz" ]; then
  echo "FAIL ab: $AB/src.tar.gz missing (run scripts/gpu/prepare-ab.sh COMMIT here first)" >>"$OUT/ab.txt"
  status=1
  return 0 2>/dev/null || exit 1
fi
rm -rf "$T" && mkdir -p "$T/src"
tar xzf "$AB/src.tar.gz" -C "$T/src"
cp -r .deps "$T/src/"
for z in "$AB"/*.medc.gz; do gunzip -f "$z"; done
echo "== ab: building the before side's medrun ($(cat "$AB/commit"))"
cmake -S "$T/src" -B "$T/build" -G Ninja -DMED_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$ABI" \
  >"$T/configure.log" 2>&1 && cmake --build "$T/build" -j "$(nproc)" --target medrun >"$T/build.log" 2>&1
note_failure $? 0 "ab: the before side's build" "$OUT/ab.txt"
tail -3 "$T/build.log"
declare -A BIN=([before]="$T/build/bin/medrun" [after]=./build-gpu/bin/medrun)
declare -A DIR=([before]="$AB" [after]=.device/cuda)
for a in ${MED_AB_STEPS:-banis_plus_bf16 banis_l_k5_bf16}; do
  for side in ${MED_AB_ORDER:-before after after before}; do
    n=$(ls "$T"/bench-$a-$side-*.json 2>/dev/null | wc -l)
    echo "== ab: medrun bench $a, $side"
    timeout 300 "${BIN[$side]}" bench "${DIR[$side]}/$a.json" --artifact "${DIR[$side]}/$a.medc" \
      --device cuda --steps 20 --json "$T/bench-$a-$side-$n.json" >"$T/bench-$a-$side-$n.log" 2>&1
    note_failure $? 300 "ab: medrun bench $a ($side)" "$OUT/ab.txt"
    grep -E "ms/step|median" "$T/bench-$a-$side-$n.log" | head -2
  done
done
[ "${MED_AB_AUGMENT:-1}" = 0 ] || python3 bench/augment_torch.py --device cpu --save-inputs "$T/in" >"$T/inputs.log" 2>&1
note_failure $? 0 "ab: augmentation inputs" "$OUT/ab.txt"
for p in $([ "${MED_AB_AUGMENT:-1}" = 0 ] || echo nnunet banis); do
  in=(--func augment --input "image=$T/in/${p}_image.npy" --input "seg=$T/in/${p}_seg.npy" --input rng=12)
  for i in $(seq 0 $((${MED_AB_RUNS:-5} - 1))); do
    for side in before after; do
      [ $((i % 2)) -eq 1 ] && side=$([ "$side" = before ] && echo after || echo before)
      log="$T/augment-$p-$side-$i.log"
      timeout 180 "${BIN[$side]}" cuda-check "${DIR[$side]}/augment_$p.medc" "${in[@]}" --tolerance 1e-5 \
        --profile >"$log" 2>&1
      note_failure $? 180 "ab: cuda-check augment_$p ($side)" "$OUT/ab.txt"
    done
  done
done
python3 - "$T" "${MED_AB_TOLERANCE:-2}" "$(cat "$AB/commit")" >>"$OUT/ab.txt" <<'PY'
import glob, json, re, statistics, sys
root, tol, commit = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def steps(a, side):
    return [json.load(open(f))["ms_per_step"]["median"] for f in sorted(glob.glob("%s/bench-%s-%s-*.json" % (root, a, side)))]
def kernels(p, side):
    out = []
    for f in sorted(glob.glob("%s/augment-%s-%s-*.log" % (root, p, side))):
        on = False
        for line in open(f):
            on = on or "kernel time by op kind" in line
            parts = line.split()
            if on and parts[:1] == ["total"]:
                out.append(float(parts[1]))
    return out
fail = False
print("before = %s, after = this tree; a row passes within %.1f%%" % (commit[:12], tol))
rows = [("step bf16 k3 (ms/step)", steps("banis_plus_bf16", "before"), steps("banis_plus_bf16", "after")),
        ("step bf16 k5 (ms/step)", steps("banis_l_k5_bf16", "before"), steps("banis_l_k5_bf16", "after")),
        ("augment nnunet (ms)", kernels("nnunet", "before"), kernels("nnunet", "after")),
        ("augment banis (ms)", kernels("banis", "before"), kernels("banis", "after"))]
for name, b, a in rows:
    if not b and not a:
        print("NOT RUN ab %s" % name); continue
    if not b or not a:
        print("FAIL ab %-24s no times (before %s, after %s)" % (name, b, a)); fail = True; continue
    mb, ma = statistics.median(b), statistics.median(a)
    change = 100.0 * (ma - mb) / mb
    ok = abs(change) <= tol
    fail |= not ok
    print("%s ab %-24s before %9.3f  after %9.3f  %+6.2f%%  (runs: %s | %s)" % (
        "PASS" if ok else "FAIL", name, mb, ma, change,
        " ".join("%.3f" % v for v in b), " ".join("%.3f" % v for v in a)))
sys.exit(1 if fail else 0)
PY
note_failure $? 0 "ab: a row outside the tolerance" "$OUT/ab.txt"
