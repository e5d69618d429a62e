#!/usr/bin/env bash
# The test command: builds everything and runs every test (lit, unit, model counts, docs)
# under ctest. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${BUILD:-build}" --output-on-failure -j "$(nproc)"
