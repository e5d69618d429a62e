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
ls -la .device
