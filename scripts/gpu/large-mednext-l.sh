#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .device/ and .deps/ carried
# (scripts/gpu/prepare-large.sh, or scripts/gpu-prepare.sh, makes them): the MedNeXt-L rows
# of scripts/gpu-check.sh part `large` inside one device call of at most 10 minutes. It
# builds medcheck alone (not medrun) and runs the same medcheck commands as part `large`:
#   banis_plus.train               fp32 step, --train-grad, against torch f32 on the GPU
#   banis_plus.infer               fp32 infer
#   banis_plus_bf16.autocast       bf16-mixed step against torch autocast (and torch f32)
#   banis_plus_fp16.autocast       fp16-mixed step against torch autocast with GradScaler
#   banis_plus_bf16_16g.autocast   the bf16-mixed step under --memory-budget 16
# Each row's medcheck prints `memory  ours ...` and `memory  torch ...` lines: the peak device
# memory of each side in turn (cuMemGetInfo sampled, torch's allocator's peaks). The training
# rows run torch's autograd reference in parts (--torch-recompute, as part `large`), which
# prints a `torch recompute` line: the segments and the estimates.
# MED_DEADLINE (seconds from the start, default 570): a row starts only with at least
# MED_ROW_MIN (default 100) seconds left, and its timeout is what is left, so that the
# table is printed inside the call; a row not started says so (run it in a next call on the
# same machine: the build is kept). MED_LARGE_ONLY=REGEX picks rows by name.
# MED_GPU_FREE_GIB=G (e.g. 79 on an H200 when no H100 is lent): before the rows, another
# process takes all but G GiB of what is free on the GPU and holds it until the end, so that
# the rows see the memory of a smaller GPU; the `memory` lines' "in use" then include what it
# holds (printed first).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
start=$(date +%s)
DEADLINE=${MED_DEADLINE:-570}
ROW_MIN=${MED_ROW_MIN:-100}
N=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$N/cu13/lib:$N/cudnn/lib:$N/nccl/lib:${LD_LIBRARY_PATH:-}
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
echo "date $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(cat .deps/git-commit 2>/dev/null)"
echo "torch $(python3 -c 'import torch; print(torch.__version__)')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: no GPU listed"
if [ ! -x build-gpu/bin/medcheck ] || [ -n "$(find tools/medcheck runtime -newer build-gpu/bin/medcheck -type f 2>/dev/null | head -1)" ]; then
  cmake -S . -B build-gpu -G Ninja -DMED_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
    -DMED_GIT_COMMIT="$(cat .deps/git-commit 2>/dev/null)" \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$ABI" \
    >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; echo "FAIL: configure"; exit 1; }
  cmake --build build-gpu -j "$(nproc)" --target medcheck >"$OUT/build.log" 2>&1 ||
    { tail -60 "$OUT/build.log"; echo "FAIL: build"; exit 1; }
fi
echo "medcheck built in $(( $(date +%s) - start )) s"
for z in .device/cuda/*.medc.gz; do [ -f "$z" ] && gunzip -f "$z"; done
C=.device/cuda
holder=
if [ -n "${MED_GPU_FREE_GIB:-}" ]; then
  python3 - "$MED_GPU_FREE_GIB" "$OUT/holder.ready" <<'PY' &
import sys, time, torch
free, total = torch.cuda.mem_get_info()
hold = max(0, free - int(float(sys.argv[1]) * 2**30))
x = torch.empty(hold, dtype=torch.uint8, device="cuda") if hold else None
torch.cuda.synchronize()
free2, _ = torch.cuda.mem_get_info()
print("holder: %.2f GiB taken by another process (free %.2f -> %.2f GiB of %.2f)" % (hold / 2**30, free / 2**30, free2 / 2**30, total / 2**30), flush=True)
open(sys.argv[2], "w").write("ready")
time.sleep(3600)
PY
  holder=$!
  for _ in $(seq 120); do [ -f "$OUT/holder.ready" ] && break; sleep 0.5; done
  [ -f "$OUT/holder.ready" ] || { echo "FAIL: the holder did not start"; kill "$holder"; exit 1; }
  rm -f "$OUT/holder.ready"
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
fi
# As part `large`: torch's allocator in expandable segments (see scripts/gpu-check.sh).
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
echo "PYTORCH_CUDA_ALLOC_CONF=$PYTORCH_CUDA_ALLOC_CONF"
status=0
: >"$OUT/large.txt"
row() { # NAME ARGS...: one medcheck run, as part `large` of scripts/gpu-check.sh
  local name=$1; shift
  [[ "$name" =~ ${MED_LARGE_ONLY:-.} ]] || return 0
  local left=$(( DEADLINE - ($(date +%s) - start) ))
  if [ "$left" -lt "$ROW_MIN" ]; then
    printf '%-28s %-7s %s\n' "$name" "not run" "${left} s left in this call" >>"$OUT/large.txt"
    status=1
    return 0
  fi
  local log="$OUT/large-$name.log" t0=$(date +%s)
  echo "== $name: medcheck $* (timeout $left s)"
  timeout "$left" ./build-gpu/bin/medcheck "$@" >"$log" 2>&1
  local rc=$?
  grep -E "^(memory|devices|torch recompute)|medcheck:|out of memory" "$log" | cut -c1-400
  tail -3 "$log"
  local r=ok line
  [ $rc -ne 0 ] && { r=FAILED; status=1; }
  line=$(grep -E "(steps|outputs) checked" "$log" | tail -1)
  [ $rc -eq 124 ] && line="timed out after $left s; $line"
  [ -z "$line" ] && line=$(grep -E "^medcheck" "$log" | tail -1 | cut -c1-300)
  [ -z "$line" ] && line="exit $rc, no summary"
  printf '%-28s %-7s %s (%d s)\n' "$name" "$r" "$line" $(( $(date +%s) - t0 )) >>"$OUT/large.txt"
}
row banis_plus.train "$C/banis_plus.medc" --device cuda --train-steps 1 --train-grad --tolerance 1e-3 \
  --torch-recompute
row banis_plus.infer "$C/banis_plus.medc" --device cuda --func infer --tolerance 1e-3
row banis_plus_bf16.autocast "$C/banis_plus_bf16.medc" --device cuda --torch-device cuda \
  --precision bf16 --against-autocast --train-steps 1 --train-grad --torch-recompute
row banis_plus_fp16.autocast "$C/banis_plus_fp16.medc" --device cuda --torch-device cuda \
  --precision f16 --against-autocast --train-steps 1 --torch-recompute
row banis_plus_bf16_16g.autocast "$C/banis_plus_bf16_16g.medc" --device cuda --torch-device cuda \
  --precision bf16 --against-autocast --train-steps 1 --train-grad --torch-recompute
echo "CUDA backend vs LibTorch on the GPU, MedNeXt-L rows of part large ($(( $(date +%s) - start )) s):"
cat "$OUT/large.txt"
echo "peak device memory of each side (GiB; ours = our run with torch's live tensors beside it):"
for f in "$OUT"/large-*.log; do
  [ -f "$f" ] || continue
  n=$(basename "$f" .log)
  grep -E "^(memory|torch recompute)" "$f" | sed -e "s/^/${n#large-}  /" | cut -c1-300
done
[ -n "$holder" ] && kill "$holder"
[ $status -eq 0 ] && echo "ALL PASS" || echo "SOME CHECKS FAILED"
exit $status
