#!/usr/bin/env bash
# The test command: builds everything and runs every test (lit, unit, model counts, docs)
# under ctest, then the sanitizer build: the unit tests under ASan and UBSan and every fuzz
# target for FUZZ_SECONDS (default 10) each (scripts/fuzz.sh). CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${BUILD:-build}" --output-on-failure -j "$(nproc)"
# The tests passed: their scratch directories (lit's Output/, ≈ 7 GB of checkpoints and
# exports, each made anew by its test) go before the sanitizer build needs the disk.
if [ -d "${BUILD:-build}/test" ]; then
  find "${BUILD:-build}/test" -type d -name Output -prune -exec rm -rf {} +
fi
bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
