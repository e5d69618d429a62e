#!/usr/bin/env bash
# Runs here (the build machine): the part of scripts/gpu-prepare.sh that the MedNeXt-L rows of
# part `large` need, for scripts/gpu/large-mednext-l.sh: .deps/ (header-only dependencies, the
# generated op table, the commit) and the four BANIS+ artifacts (fp32, bf16-mixed, bf16-mixed
# under --memory-budget 16, fp16-mixed) in .device/cuda/, compressed. Carry .device and .deps.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
[ -x "$BUILD/bin/medc" ] || bash scripts/build.sh >/dev/null
BIN=$BUILD/bin
rm -rf .device && mkdir -p .device/cuda .deps/include/med
cp -r /usr/include/nlohmann /usr/include/fmt .deps/include/
cp "$BUILD"/include/med/*.inc .deps/include/med/ # OpTable.inc and the other generated tables
git describe --always --dirty --abbrev=12 >.deps/git-commit 2>/dev/null || rm -f .deps/git-commit
R="configs/banis_plus.yaml --set augment.pipeline=none" # the step alone (word-split below)
"$BIN/medc" compile --recipe $R --target cuda -o .device/cuda/banis_plus.medc
"$BIN/medc" compile --recipe $R --set precision=bf16-mixed --target cuda -o .device/cuda/banis_plus_bf16.medc
"$BIN/medc" compile --recipe $R --set precision=bf16-mixed --memory-budget 16 --target cuda \
  -o .device/cuda/banis_plus_bf16_16g.medc
"$BIN/medc" compile --recipe $R --set precision=fp16-mixed --target cuda -o .device/cuda/banis_plus_fp16.medc
gzip -f .device/cuda/*.medc
du -sh .device .deps
