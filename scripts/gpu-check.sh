#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .device/ and .deps/ carried
# (scripts/gpu-prepare.sh makes them). Builds the runtime half against the PyTorch there
# (LibTorch 2.11), then runs medcheck on every carried artifact and prints a table last.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
N=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$N/cu13/lib:$N/cudnn/lib:$N/nccl/lib:${LD_LIBRARY_PATH:-}
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
echo "torch $(python3 -c 'import torch; print(torch.__version__)'), C++11 ABI $ABI"
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DMED_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$ABI" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
echo "built medrun and medcheck in $(( $(date +%s) - start )) s"

status=0
: >"$OUT/check.log"
for a in .device/*.medc; do
  for precision in f32 f64; do
    extra=()
    case "$(basename "$a")" in grad-*) extra=(--grad) ;; esac
    if ./build-gpu/bin/medcheck "$a" --precision "$precision" "${extra[@]}" >>"$OUT/check.log" 2>&1; then
      r=ok
    else
      r=FAILED; status=1
    fi
    summary=$(grep -E "outputs checked" "$OUT/check.log" | tail -1)
    printf '%-22s %-4s %-7s %s\n' "$(basename "$a")" "$precision" "$r" "$summary" >>"$OUT/table.txt"
  done
done
echo
echo "medcheck against LibTorch $(python3 -c 'import torch; print(torch.__version__)') (CPU):"
cat "$OUT/table.txt"
exit $status
