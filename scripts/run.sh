#!/usr/bin/env bash
# The main command: builds, then trains MedNeXt-S on the embedded synthetic data
# (configs/quickstart.yaml: a few minutes on two CPU cores). The loss falls, a checkpoint
# lands in runs/quickstart/checkpoints/. Extra arguments go to `medrun train`, e.g.
# --steps 300, --set data.patch=48,48,48, --resume.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BIN=${BUILD:-build}/bin
exec "$BIN/medrun" train configs/quickstart.yaml "$@"
