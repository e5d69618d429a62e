#!/usr/bin/env bash
# Runs here (the build machine, which has MLIR): compiles the artifacts the GPU machine checks
# into .device/ and copies the header-only dependencies it lacks into .deps/. Both folders are
# ignored by git; name them in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
BIN=${BUILD:-build}/bin
rm -rf .device && mkdir -p .device .deps/include
cp -r /usr/include/nlohmann .deps/include/
for f in test/check/{conv,norm,elementwise,data,reduce,loss}.mlir; do
  "$BIN/medc" compile "$f" -o ".device/$(basename "$f" .mlir).medc"
done
for f in test/check/grad-{conv,norm,elementwise,data,loss}.mlir; do
  [ -f "$f" ] && "$BIN/medc" compile "$f" --grad -o ".device/$(basename "$f" .mlir).medc"
done
for m in mednext_s mednext_b_k5; do
  "$BIN/medc" compile "models/$m.mlir" --patch 64,64,64 -o ".device/$m.medc"
done

# CUDA backend: MedNeXt-S k3 (the quickstart recipe) at 32³, batch 2, with CUDA kernels
# (NVRTC, sm_90), and fixed random inputs for `medrun cuda-check` (scripts/gpu-check.sh).
mkdir -p .device/cuda
"$BIN/medc" compile --recipe configs/quickstart.yaml --set data.patch=32,32,32 --target cuda \
  -o .device/cuda/quickstart.medc
# Its effective recipe: `medrun train` there runs it with no compiler (--artifact).
"$BIN/medc" recipe configs/quickstart.yaml --set data.patch=32,32,32 >.device/cuda/quickstart.json
/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(2024)
d = ".device/cuda/"
np.save(d + "image.npy", rng.standard_normal((2, 1, 32, 32, 32)).astype(np.float32))
np.save(d + "target.npy", (rng.random((2, 3, 32, 32, 32)) < 0.3).astype(np.float32))
np.save(d + "mask.npy", (rng.random((2, 3, 32, 32, 32)) < 0.9).astype(np.float32))
PY
du -sh .device
ls -la .device .device/cuda
