#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .device/ and .deps/ carried
# (scripts/gpu-prepare.sh makes them). Builds the runtime half against the PyTorch there
# (LibTorch 2.11), then
#   medcheck  every carried test artifact against LibTorch (CPU), f32 and f64;
#   cuda      the CUDA backend against the CPU backend on MedNeXt-S k3 (quickstart recipe,
#             32³, batch 2): `infer`, then three `train_step`s, each backend continuing
#             from its own updated parameters; every output and every updated parameter
#             must agree to a relative error norm of 1e-4; per-op-kind kernel times.
#   bench     PyTorch's MedNeXt-L step on the same GPU (bench/mednext_torch.py), eager and
#             torch.compile
# and prints a short table last. MED_GPU_CHECKS selects the parts (default: "medcheck cuda").
# Every command runs under `timeout`, so the script ends even if a kernel hangs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CHECKS=${MED_GPU_CHECKS:-medcheck cuda}
N=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$N/cu13/lib:$N/cudnn/lib:$N/nccl/lib:${LD_LIBRARY_PATH:-}
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
echo "torch $(python3 -c 'import torch; print(torch.__version__)'), C++11 ABI $ABI"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: no GPU listed"
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DMED_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$ABI" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; echo "FAIL: configure"; exit 1; }
cmake --build build-gpu -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; echo "FAIL: build"; exit 1; }
echo "built medrun and medcheck in $(( $(date +%s) - start )) s"

status=0
: >"$OUT/table.txt"
: >"$OUT/cuda.txt"

if [[ " $CHECKS " == *" medcheck "* ]]; then
  : >"$OUT/check.log"
  for a in .device/*.medc; do
    for precision in f32 f64; do
      extra=()
      case "$(basename "$a")" in grad-*) extra=(--grad) ;; esac
      if timeout 300 ./build-gpu/bin/medcheck "$a" --precision "$precision" "${extra[@]}" >>"$OUT/check.log" 2>&1; then
        r=ok
      else
        r=FAILED; status=1
      fi
      summary=$(grep -E "outputs checked" "$OUT/check.log" | tail -1)
      printf '%-22s %-4s %-7s %s\n' "$(basename "$a")" "$precision" "$r" "$summary" >>"$OUT/table.txt"
    done
  done
fi

if [[ " $CHECKS " == *" cuda "* ]]; then
  C=.device/cuda
  M=./build-gpu/bin/medrun
  # cuda-check NAME TIMEOUT ARGS...: one comparison, its log in $OUT/cuda-NAME.log, its
  # summary line (PASS/FAIL ...) in the table. On failure, rerun once with a synchronization
  # after every launch, which names the kernel of an asynchronous CUDA error.
  cuda_check() {
    local name=$1 limit=$2; shift 2
    local log="$OUT/cuda-$name.log"
    echo "== $name: medrun cuda-check $*"
    MEDRUN_CUDA_POISON=1 timeout "$limit" "$M" cuda-check "$@" >"$log" 2>&1
    local rc=$?
    cat "$log"
    if [ $rc -ne 0 ]; then
      status=1
      [ $rc -eq 124 ] && echo "FAIL $name: timed out after $limit s" >>"$log"
      echo "-- $name failed (exit $rc); rerunning with MEDRUN_CUDA_SYNC=1"
      MEDRUN_CUDA_SYNC=1 MEDRUN_CUDA_POISON=1 timeout "$limit" "$M" cuda-check "$@" 2>&1 | tail -5
    fi
    local line
    line=$(grep -E "^(PASS|FAIL)" "$log" | tail -1)
    [ -z "$line" ] && line="FAIL $name: $(grep -E 'medrun:' "$log" | tail -1)"
    printf '%-14s %s\n' "$name" "$line" >>"$OUT/cuda.txt"
  }
  if [ -f "$C/quickstart.medc" ]; then
    "$M" info "$C/quickstart.medc" | tail -1
    cuda_check infer 240 "$C/quickstart.medc" --func infer --input "image=$C/image.npy" --profile
    cuda_check train_step 480 "$C/quickstart.medc" --func train_step --input "image=$C/image.npy" \
      --input "target=$C/target.npy" --input "mask=$C/mask.npy" --input lr=0.003 --input step=1 \
      --input ema_decay=0.99 --repeat 3 --profile
    # The training loop on the GPU: the quickstart recipe (32³) for 100 steps; the mean loss
    # of the last 10 steps must be below 90% of the first 10.
    echo "== train: medrun train --device cuda"
    rm -rf "$OUT/run"
    timeout 480 "$M" train "$C/quickstart.json" --artifact "$C/quickstart.medc" --device cuda \
      --steps 100 --set checkpoint.every=50 --out "$OUT/run" --progress lines >"$OUT/train.log" 2>&1
    rc=$?
    tail -6 "$OUT/train.log"
    line=$(python3 - "$OUT/run/metrics.jsonl" "$rc" <<'PY'
import json, sys
try:
    l = [json.loads(x)["loss"] for x in open(sys.argv[1])]
    a, b = sum(l[:10]) / 10, sum(l[-10:]) / 10
    t = [json.loads(x)["step_time"] for x in open(sys.argv[1])][5:]
    ok = sys.argv[2] == "0" and len(l) == 100 and b < 0.9 * a
    print("%s train: %d steps, rc %s, mean loss %.4f (first 10) -> %.4f (last 10), median step %.1f ms"
          % ("PASS" if ok else "FAIL", len(l), sys.argv[2], a, b, 1e3 * sorted(t)[len(t) // 2]))
except Exception as e:
    print("FAIL train: %s" % e)
PY
)
    case "$line" in PASS*) ;; *) status=1 ;; esac
    printf '%-14s %s\n' "train" "$line" >>"$OUT/cuda.txt"
  else
    echo "FAIL cuda: $C/quickstart.medc missing (run scripts/gpu-prepare.sh here first)" >>"$OUT/cuda.txt"
    status=1
  fi
fi

if [[ " $CHECKS " == *" bench "* ]]; then
  # Ours first: the BANIS+ recipe's training step (MedNeXt-L k3, 1->6, batch 2, 128³, fp32)
  # on the CUDA backend, 3 warm-up and 20 timed steps (medrun bench; docs/perf.md).
  echo "== bench: medrun bench"
  timeout 480 ./build-gpu/bin/medrun bench .device/cuda/banis_plus.json \
    --artifact .device/cuda/banis_plus.medc --device cuda --steps 20 \
    --json "$OUT/medrun-bench.json" >"$OUT/medrun-bench.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    status=1
    echo "FAIL medrun bench (exit $rc$([ $rc -eq 124 ] && echo ', timed out after 480 s'))" >>"$OUT/medrun-bench.log"
  fi
  tail -40 "$OUT/medrun-bench.log"
  # PyTorch on the same GPU: MedNeXt-L k3, 1->3, batch 2, 128³, bf16 autocast, fused AdamW,
  # eager and torch.compile (bench/mednext_torch.py).
  echo "== bench: PyTorch"
  timeout 900 python3 bench/mednext_torch.py --size L --patch 128 --batch 2 --modes eager,compile \
    >"$OUT/bench.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    status=1
    echo "FAIL bench (exit $rc)" >>"$OUT/bench.log"
  fi
  tail -3 "$OUT/bench.log"
fi

echo
if [ -s "$OUT/bench.log" ] || [ -s "$OUT/medrun-bench.log" ]; then
  echo "Training step on this GPU (ours: fp32, 1->6; PyTorch: bf16 autocast, 1->3):"
  [ -s "$OUT/bench.log" ] && grep -E "^(MedNeXt|torch|FAIL)" "$OUT/bench.log"
  if [ -s "$OUT/medrun-bench.json" ]; then
    python3 - "$OUT/medrun-bench.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
t = b["ms_per_step"]
print("medrun %-7s %8.1f ms/step  peak %6.2f GiB  (%s, min %.1f, max %.1f ms; %.1f TFLOP/s)"
      % (b["device"], t["median"], b["peak_memory_bytes"] / 2**30, b["precision"], t["min"],
         t["max"], b["tflops"]))
PY
  elif [ -s "$OUT/medrun-bench.log" ]; then
    grep -E "^FAIL|medrun:" "$OUT/medrun-bench.log" | tail -2
  fi
fi
if [ -s "$OUT/table.txt" ]; then
  echo "medcheck against LibTorch $(python3 -c 'import torch; print(torch.__version__)') (CPU):"
  cat "$OUT/table.txt"
fi
if [ -s "$OUT/cuda.txt" ]; then
  echo "CUDA backend vs CPU backend (MedNeXt-S k3, 32³, batch 2; relative error norm <= 1e-4):"
  cat "$OUT/cuda.txt"
fi
[ $status -eq 0 ] && echo "ALL PASS" || echo "SOME CHECKS FAILED"
exit $status
