#!/usr/bin/env bash
# The main command. Builds the compiler, then analyses and compiles MedNeXt-L for the
# BANIS set-up (batch 2, 128^3 patch). Extra arguments go to `medc stats`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BIN=${BUILD:-build}/bin
MODEL=models/mednext_l.mlir
"$BIN/medc" stats "$MODEL" --batch 2 --patch 128,128,128 "$@"
"$BIN/medc" compile "$MODEL" --batch 2 --patch 128,128,128 -o "${BUILD:-build}/mednext_l.b2.mlir"
echo
echo "compiled: ${BUILD:-build}/mednext_l.b2.mlir (inlined, static shapes)"
