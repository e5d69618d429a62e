#!/usr/bin/env bash
# Runs here (the build machine, which has MLIR): compiles the artifacts the GPU machine checks
# into .device/ and copies the header-only dependencies it lacks (nlohmann/json, fmt, the
# generated op table) into .deps/
# with the git commit (.deps/git-commit, for --version). Both folders are
# ignored by git; name them in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
BIN=${BUILD:-build}/bin
rm -rf .device && mkdir -p .device .deps/include
cp -r /usr/include/nlohmann /usr/include/fmt .deps/include/
# The op table generated from the dialect's ODS (no TableGen there; lib/OpTable).
mkdir -p .deps/include/med && cp "${BUILD:-build}"/include/med/{OpTable,PlanShapeRules}.inc .deps/include/med/
# The tree carried there is no git checkout: --version names the commit recorded here.
git describe --always --dirty --abbrev=12 >.deps/git-commit 2>/dev/null || rm -f .deps/git-commit
for f in test/check/{conv,norm,elementwise,data,reduce,loss,spatial-transform}.mlir; do
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
# The same compiled with --data-parallel: part `dist` trains it through NCCL as one rank.
"$BIN/medc" compile --recipe configs/quickstart.yaml --set data.patch=32,32,32 --target cuda \
  --data-parallel -o .device/cuda/quickstart_dp.medc
# Its fused kernels one by one (fusion_check_<k>, `medrun cuda-check --fusions`).
"$BIN/medc" compile --recipe configs/quickstart.yaml --set data.patch=32,32,32 --target cuda \
  --fusion-checks -o .device/cuda/quickstart_fusions.medc
# The block MLP templates' kernels on the GPU against the CPU backend (part `cuda`): the two
# blocks of test/cuda/mlp.test and the wide block of mlp-chunks.test (bf16-mixed, 2 × 16³
# voxels: 64 tiles a sample), with each one-kernel backward (MEDC_MLP_GRAD: the voxel
# split, the expanded channels split across warps; the wide block's: dynamic shared memory
# above 48 KiB).
for grad in stages chunks; do
  for m in test/Transforms/Inputs/mlp-blocks.mlir test/cuda/Inputs/mlp-wide.mlir; do
    b=$(basename "$m" .mlir)
    MEDC_MLP_GRAD=$grad "$BIN/medc" compile "$m" --batch 2 --patch 16,16,16 \
      --enable-pass=med-form-mlp-fusions --loss type=bce_with_logits \
      --train 'clip=0.5 ema=true precision=bf16-mixed' --target cuda -o .device/cuda/${b}_$grad.medc
  done
done
# Its effective recipe: `medrun train` there runs it with no compiler (--artifact).
"$BIN/medc" recipe configs/quickstart.yaml --set data.patch=32,32,32 >.device/cuda/quickstart.json
# The BANIS recipes train with BANIS's augmentation by default; the steps below set
# augment.pipeline=none (the step alone), and row bf16-aug adds the pipeline file.
# The BANIS+ recipe (MedNeXt-L k3, 1->6 affinities, 128³, batch 2, per-channel BCE with
# automatic pos_weight, AdamW with clipping, EMA) with CUDA kernels, for `medcheck --device
# cuda --train-steps` (part `large` of scripts/gpu-check.sh): it holds train_step, the loss
# function and loss_grad that --train-steps and --train-grad run, and infer. About 20 MB of
# kernels (cubin + PTX); no parameters (medcheck draws them with medrun::initParameters).
"$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --target cuda -o .device/cuda/banis_plus.medc
"$BIN/medc" recipe configs/banis_plus.yaml --set augment.pipeline=none >.device/cuda/banis_plus.json
# The same recipe and the quickstart in bf16-mixed (parts `large`, `banis` and `bench`).
"$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed --target cuda \
  -o .device/cuda/banis_plus_bf16.medc
"$BIN/medc" recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed >.device/cuda/banis_plus_bf16.json
# The bf16-mixed step compiled with --data-parallel (its gradient buckets summed over NCCL):
# scripts/gpu-data-parallel.sh trains and benches it on 1..8 GPUs.
"$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed --target cuda \
  --data-parallel -o .device/cuda/banis_plus_bf16_dp.medc
# Part equiv of scripts/gpu-data-parallel.sh (N ranks of batch 2 against one process of batch
# 2N on the same samples): the bf16-mixed step with a loss that is a mean over the samples
# (no mask, no automatic pos_weight: a rank would count those over its own samples), compiled
# with --data-parallel at batch 2, and for one process at batch 2 and 4 (1 and 2 GPUs).
E=(--set precision=bf16-mixed --set loss.mask=false --set loss.auto_pos_weight=false)
"$BIN/medc" recipe configs/banis_plus.yaml --set augment.pipeline=none "${E[@]}" >.device/cuda/banis_plus_bf16_equiv.json
"$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none "${E[@]}" --target cuda --data-parallel \
  -o .device/cuda/banis_plus_bf16_equiv_dp.medc
for b in 2 4; do
  "$BIN/medc" recipe configs/banis_plus.yaml --set augment.pipeline=none "${E[@]}" --set data.batch=$b >.device/cuda/banis_plus_bf16_equiv_b$b.json
  "$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none "${E[@]}" --set data.batch=$b --target cuda \
    -o .device/cuda/banis_plus_bf16_equiv_b$b.medc
done
# The bf16-mixed step under a 16 GiB memory budget (med-recompute; part `bench`, bf16-16g).
# The budget bounds medc's plan (arena and resident state); the runtime adds the convolution
# workspace and two staging slots of the batch, about 1 GiB for BANIS+ (docs/perf.md).
"$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed --memory-budget 16 \
  --target cuda -o .device/cuda/banis_plus_bf16_16g.medc
cp .device/cuda/banis_plus_bf16.json .device/cuda/banis_plus_bf16_16g.json
# MedNeXt-L kernel 5 (the BANIS-L recipe, 1->6, 128³, batch 2) bf16-mixed: part `bench`,
# row bf16-k5 (the k5 target of docs/perf.md).
"$BIN/medc" compile --recipe configs/banis_l_k5.yaml --set augment.pipeline=none --set precision=bf16-mixed --target cuda \
  -o .device/cuda/banis_l_k5_bf16.medc
"$BIN/medc" recipe configs/banis_l_k5.yaml --set augment.pipeline=none --set precision=bf16-mixed >.device/cuda/banis_l_k5_bf16.json
# The augmentation pipelines by themselves (part `augment`: CUDA = CPU batches, their kernel
# time beside PyTorch's batched pipelines).
# Beside each: the same unfused (no resample or reduce fusions: the fused = unfused check
# and the before/after kernel time) and its fusion bodies one by one (--fusion-checks).
for p in nnunet banis; do
  "$BIN/medc" compile models/augment_$p.mlir --target cuda -o .device/cuda/augment_$p.medc
  "$BIN/medc" compile models/augment_$p.mlir --target cuda --disable-pass=med-form-resample-fusions \
    --disable-pass=med-form-reduce-fusions -o .device/cuda/augment_${p}_unfused.medc
  "$BIN/medc" compile models/augment_$p.mlir --target cuda --fusion-checks \
    -o .device/cuda/augment_${p}_fusions.medc
done
# The bf16-mixed step with BANIS's augmentation inside (models/augment_banis.mlir: 138³ raw
# crops and instance ids in, the six affinities computed on the device): part `bench`, row
# bf16-aug, beside bf16 (the augmentation's cost in the step).
A=(--set precision=bf16-mixed --set augment.pipeline=../models/augment_banis.mlir)
"$BIN/medc" compile --recipe configs/banis_plus.yaml "${A[@]}" --target cuda -o .device/cuda/banis_plus_bf16_aug.medc
"$BIN/medc" recipe configs/banis_plus.yaml "${A[@]}" >.device/cuda/banis_plus_bf16_aug.json
# The nnU-Net-style MedNeXt-L recipe (deep supervision, Dice + CE) in fp32 without and with
# nnU-Net's augmentation inside (models/augment_nnunet.mlir: 205³ crops in), and in
# bf16-mixed with it (its targets then stored in bf16): rows nnunet-fp32, nnunet-aug and
# nnunet-bf16-aug of part `bench` (MED_BENCH_PRECISIONS=nnunet).
for v in nnunet_fp32::none nnunet_aug::../models/augment_nnunet.mlir \
         nnunet_bf16_aug:bf16-mixed:../models/augment_nnunet.mlir; do
  IFS=: read -r name precision pipeline <<<"$v"
  N=()
  [ -n "$precision" ] && N+=(--set "precision=$precision")
  [ -n "$pipeline" ] && N+=(--set "augment.pipeline=$pipeline")
  "$BIN/medc" compile --recipe configs/nnunet_mednext_l.yaml "${N[@]}" --target cuda -o ".device/cuda/$name.medc"
  "$BIN/medc" recipe configs/nnunet_mednext_l.yaml "${N[@]}" >".device/cuda/$name.json"
done
# With MED_PREPARE_AB=PASS: the bf16-mixed step again without that optional pass, which part
# `bench` times beside it (the A/B of a change, docs/perf.md).
# With MED_PREPARE_AB_MEDC=PATH instead: the same step compiled by another medc (an older
# commit's build), with that medc's own `medc recipe` document (its compile hash).
if [ -n "${MED_PREPARE_AB_MEDC:-}" ]; then
  "$MED_PREPARE_AB_MEDC" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed \
    --target cuda -o .device/cuda/banis_plus_bf16_ab.medc
  "$MED_PREPARE_AB_MEDC" recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed \
    >.device/cuda/banis_plus_bf16_ab.json
elif [ -n "${MED_PREPARE_AB:-}" ]; then
  "$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=bf16-mixed --target cuda \
    --disable-pass="$MED_PREPARE_AB" -o .device/cuda/banis_plus_bf16_ab.medc
  cp .device/cuda/banis_plus_bf16.json .device/cuda/banis_plus_bf16_ab.json
fi
"$BIN/medc" compile --recipe configs/quickstart.yaml --set data.patch=32,32,32 --set precision=bf16-mixed \
  --target cuda -o .device/cuda/quickstart_bf16.medc
# And in fp16-mixed (dynamic loss scaling): parts `large` and `bench`.
"$BIN/medc" compile --recipe configs/quickstart.yaml --set data.patch=32,32,32 --set precision=fp16-mixed \
  --target cuda -o .device/cuda/quickstart_fp16.medc
"$BIN/medc" compile --recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=fp16-mixed --target cuda \
  -o .device/cuda/banis_plus_fp16.medc
"$BIN/medc" recipe configs/banis_plus.yaml --set augment.pipeline=none --set precision=fp16-mixed >.device/cuda/banis_plus_fp16.json
/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(2024)
d = ".device/cuda/"
np.save(d + "image.npy", rng.standard_normal((2, 1, 32, 32, 32)).astype(np.float32))
np.save(d + "target.npy", (rng.random((2, 3, 32, 32, 32)) < 0.3).astype(np.float32))
np.save(d + "mask.npy", (rng.random((2, 3, 32, 32, 32)) < 0.9).astype(np.float32))
PY
# Kernel source and PTX compress well: the carried tree must stay under 64 MiB.
# scripts/gpu-check.sh unpacks them.
gzip -f .device/cuda/*.medc
# With MED_PREPARE_IMPORT=1: the artifacts of parts import and bench-import too (the networks
# imported from ONNX, .device/import, about 14 MB; scripts/gpu/import.sh).
if [ "${MED_PREPARE_IMPORT:-0}" = 1 ]; then
  MED_IMPORT_ONLY=0 bash scripts/gpu/import.sh prepare
fi
du -sh .device
ls -la .device .device/cuda
