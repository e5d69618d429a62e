#!/usr/bin/env bash
# Installs what is missing, configures once and builds everything (incrementally, with ccache).
# BUILD selects the build directory (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD=${BUILD:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DPython3_EXECUTABLE=/usr/bin/python3
fi
cmake --build "$BUILD" -j "$(nproc)"
