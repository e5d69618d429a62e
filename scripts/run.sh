#!/usr/bin/env bash
# The main command: builds, then trains MedNeXt-S on the embedded synthetic data
# (configs/quickstart.yaml: about 2.5 minutes on two CPU cores, 10 s on an H200). The loss
# falls, a checkpoint
# lands in runs/quickstart/checkpoints/. Extra arguments go to `medrun train`, e.g.
# --steps 300, --set data.patch=48,48,48. Each run starts over (--overwrite); to continue a
# run instead: build/bin/medrun train configs/quickstart.yaml --resume --steps 300.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BIN=${BUILD:-build}/bin
exec "$BIN/medrun" train configs/quickstart.yaml --overwrite "$@"
