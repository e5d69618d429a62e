#!/usr/bin/env bash
# Runs here, after scripts/gpu-prepare.sh: the "before" side of part `ab` of
# scripts/gpu-check.sh (a change's step and augmentation times, before against after, in one
# call on one GPU). Usage: scripts/gpu/prepare-ab.sh COMMIT
#   - builds medc at COMMIT in .ab/before (a git worktree inside the checkout, so that ccache,
#     whose base_dir is the checkout, reuses this tree's objects; .ab/ is ignored by git),
#   - compiles with it the artifacts part `ab` times (BANIS+ bf16-mixed k3 and MedNeXt-L k5,
#     both augmentation pipelines) into .device/ab/, with their recipes,
#   - packs COMMIT's source as .device/ab/src.tar.gz: the GPU machine builds its medrun.
# The "after" side is this tree's, from scripts/gpu-prepare.sh (.device/cuda/).
set -euo pipefail
cd "$(dirname "$0")/../.."
COMMIT=$(git rev-parse --verify "${1:?usage: scripts/gpu/prepare-ab.sh COMMIT}^{commit}")
W=.ab/before
if [ ! -d "$W" ]; then
  git worktree add --detach "$W" "$COMMIT" >/dev/null
else
  git -C "$W" checkout --detach -q "$COMMIT"
fi
if [ ! -f "$W/build/build.ninja" ]; then
  cmake -S "$W" -B "$W/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
fi
cmake --build "$W/build" -j "$(nproc)" --target medc >/dev/null
M=$W/build/bin/medc
D=.device/ab
rm -rf "$D" && mkdir -p "$D"
# The recipes name their models and pipelines relative to the recipe: run from the worktree.
B=(--set precision=bf16-mixed --set augment.pipeline=none --target cuda)
(cd "$W" && build/bin/medc compile --recipe configs/banis_plus.yaml "${B[@]}" -o "$OLDPWD/$D/banis_plus_bf16.medc")
(cd "$W" && build/bin/medc recipe configs/banis_plus.yaml --set precision=bf16-mixed --set augment.pipeline=none >"$OLDPWD/$D/banis_plus_bf16.json")
(cd "$W" && build/bin/medc compile --recipe configs/banis_l_k5.yaml "${B[@]}" -o "$OLDPWD/$D/banis_l_k5_bf16.medc")
(cd "$W" && build/bin/medc recipe configs/banis_l_k5.yaml --set precision=bf16-mixed --set augment.pipeline=none >"$OLDPWD/$D/banis_l_k5_bf16.json")
for p in nnunet banis; do
  "$M" compile "$W/models/augment_$p.mlir" --target cuda -o "$D/augment_$p.medc"
done
git -C "$W" archive --format=tar.gz -o "$PWD/$D/src.tar.gz" HEAD
echo "$COMMIT" >"$D/commit"
gzip -f "$D"/*.medc
du -sh "$D"
