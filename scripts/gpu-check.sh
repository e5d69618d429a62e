#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .device/ and .deps/ carried
# (scripts/gpu-prepare.sh makes them). Builds the runtime half against the PyTorch there
# (LibTorch 2.11), then
#   medcheck  every carried test artifact against LibTorch (CPU), f32 and f64;
#   cuda      the CUDA backend against the CPU backend on MedNeXt-S k3 (quickstart recipe,
#             32³, batch 2): each fused kernel alone (cuda-check --fusions), the block
#             MLP templates' gradients on small blocks (bf16, 2e-3; each one-kernel
#             backward: scripts/gpu-prepare.sh), `infer`, then
#             three `train_step`s, each backend continuing
#             from its own updated parameters; every output and every updated parameter
#             must agree to a relative error norm of 1e-4; per-op-kind kernel times; the
#             training loop (100 steps, the loss must fall). The mixed-precision steps are
#             checked against torch autocast (part large), not against the CPU backend.
#   large     the CUDA backend against LibTorch on the same GPU (medcheck --device cuda, torch
#             on CUDA with TF32 off, f32, relative error norm <= 1e-3): one BANIS+ training
#             step (MedNeXt-L k3, 1->6, 128³, batch 2; gradients, parameters, AdamW
#             moments, EMA) and its `infer`, then MedNeXt-S k3 (quickstart, 32³): three
#             steps and `infer`. Each side needs most of the GPU for MedNeXt-L, in turn:
#             ours releases its device memory before torch runs and torch's cache is
#             released before ours runs; torch's allocator grows expandable segments
#             (PYTORCH_CUDA_ALLOC_CONF); each row's `memory` lines give each side's peak
#             device memory. Torch's autograd reference of the MedNeXt-L training rows
#             runs in parts (medcheck --torch-recompute: activation checkpointing, the
#             same gradients): in one piece its f32 reference alone ran out of memory on
#             an H100 (79.18 GiB; docs/perf.md, 2026-12-06).
#             Then bf16-mixed and fp16-mixed (medcheck --against-autocast): the same BANIS+
#             step (also compiled with --memory-budget 16: med-recompute, the block MLPs'
#             templates) and the quickstart's compiled with precision=bf16-mixed and fp16-mixed,
#             ours and torch autocast to bf16 / f16 (f16: with torch's GradScaler) each
#             measured against torch f32; ours' relative error at most 1.5x autocast's on
#             every tensor (loss, grad_norm, bf16 gradients, parameters, moments, EMA), ours'
#             loss scaling as GradScaler's. Negative control: the quickstart's bf16-mixed
#             step against autocast to f16 (three fewer mantissa bits than f16 asks for) must
#             fail.
#   dist      data-parallel launch with the real NCCL (docs/distributed.md): medrun dist-check
#             as a job of one rank, under --gpus 1 and under --gpus <the GPUs nvidia-smi lists>;
#             negative control: one rank more than GPUs must fail naming a rank; then
#             `medrun train --data-parallel` of the quickstart (a communicator of one rank),
#             the loss falling
#   profile   Nsight Compute per kernel over one step (MED_PROFILE_KERNELS, _COUNT, _ARTIFACT)
#   layout    the block MLP's 1x1x1 products in NCDHW vs channels-last, and the transposes a
#             channels-last MLP would need (bench/layout.py; the layout decision in docs/perf.md)
#   conv-layout  PlainConvUNet 3d_fullres's convolutions through cuDNN in NCDHW vs
#             channels-last (bench/conv_layout.py), and f32 convolutions' error against f64
#             with cuDNN's heuristic vs timed algorithm choice (scripts/gpu/conv_precision.py)
#   augment   the augmentation pipelines alone (models/augment_{nnunet,banis}.mlir compiled by
#             themselves into .device/cuda/augment_<p>.medc): the CUDA backend's batch equals the
#             CPU backend's for the same key (medrun run; image <= 1e-5, targets exact; another
#             key must differ), cuda-check --profile's kernel time, and PyTorch's batched
#             pipelines on the same GPU (bench/augment_torch.py)
#   mma       the block MLP forward's sm_90a variant (wgmma): the budgeted BANIS+ step with
#             MEDRUN_MMA=wgmma against torch autocast, and medrun bench of it under each
#             MEDRUN_MMA (mma.sync, wgmma, auto)
#   bench     medrun bench of the BANIS+ step (fp32, bf16-mixed, fp16-mixed; bf16 also under
#             --memory-budget 16 and at kernel 5), then PyTorch's MedNeXt-L step on the same
#             GPU (bench/mednext_torch.py), eager and torch.compile
#   ab        a change's times before against after in one call (scripts/gpu/ab.sh; the
#             before side made here by scripts/gpu/prepare-ab.sh COMMIT): the BANIS+ bf16-mixed
#             step, MedNeXt-L k5 and both augmentation pipelines; each row within 2%
#   converge  training is unchanged by speed (scripts/gpu/converge.sh, which states the rule;
#             its unfused artifact made here by `scripts/gpu/converge.sh prepare`): BANIS+
#             bf16-mixed, 500 steps with the default passes and with the fused templates'
#             passes disabled (same seed), and unfused with a second seed; the fused-unfused
#             difference of the 50-step window means within the seed-to-seed spread
#   mlp       the fused block MLP with its copy pipeline against the same templates one tile
#             at a time and against the unfused default (scripts/gpu/mlp-ab.sh; its fused
#             artifacts made here by `scripts/gpu/mlp-ab.sh prepare`): medrun bench of the
#             BANIS+ bf16-mixed step per side, the mlp, mlp_grad, 1x1x1 and gelu rows with
#             their share of the copy bandwidth
#   stencil   medc's stencil variants: parity (tiled) against rows (the default: the k3
#             stencils streamed along H), or the sides MED_STENCIL_SIDES names (MEDC_STENCIL; all
#             but rows compiled here by `scripts/gpu/stencil-ab.sh prepare`): first the streamed
#             kernels against the CPU backend (cuda-check of the depthwise test network's step,
#             fp32 and bf16-mixed), then medrun bench of the BANIS+ bf16-mixed step and
#             MedNeXt-L k5, each side twice alternating, the depthwise rows
#   import    the networks imported from ONNX (scripts/gpu/import.sh, which lists them; its
#             artifacts made here by `scripts/gpu/import.sh prepare`): PlainConvUNet, ResEncUNet
#             (small and the presets' full-size network), SegResNet and MedNeXt-S at small sizes,
#             each training step against LibTorch on the GPU (f32) and against torch autocast
#             (bf16-mixed), and each fused kernel alone (cuda-check --fusions)
#   bench-import  medrun bench of PlainConvUNet 3d_fullres and ResEncUNet-L (bf16-mixed,
#             nnU-Net's recipe) beside PyTorch eager and torch.compile (bench/import_torch.py)
#   budget    the memory budget's curve (scripts/gpu/budget.sh; its artifacts made here by
#             `scripts/gpu/budget.sh prepare`): medrun bench of the BANIS+ bf16-mixed step
#             without a budget, without med-recompute and under --memory-budget 20, 16, 12,
#             8 GiB: ms/step, peak
# and prints a short table last (MED_BENCH_TORCH=0: bench times ours only; MED_BENCH_TORCH_MODES:
# eager,compile by default; MED_BENCH_TORCH_KERNELS: "3" by default, "3 5"; MED_BENCH_PRECISIONS
# picks among "fp32 bf16 fp16"; MED_LARGE_ONLY=REGEX runs the rows of part large whose name
# matches). MED_GPU_CHECKS selects the parts (default:
# "medcheck cuda large"). MED_GPU_BUNDLE=DIR also packs everything under $OUT into
# DIR/gpu-check.tgz (run with OUT elsewhere where only a few files come back).
# Every command runs under `timeout`, so the script ends even if a kernel hangs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CHECKS=${MED_GPU_CHECKS:-medcheck cuda large}
N=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$N/cu13/lib:$N/cudnn/lib:$N/nccl/lib:${LD_LIBRARY_PATH:-}
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
echo "torch $(python3 -c 'import torch; print(torch.__version__)'), C++11 ABI $ABI"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: no GPU listed"
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DMED_BUILD_COMPILER=OFF -DCMAKE_BUILD_TYPE=Release \
  -DMED_GIT_COMMIT="$(cat .deps/git-commit 2>/dev/null)" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$ABI" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; echo "FAIL: configure"; exit 1; }
cmake --build build-gpu -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; echo "FAIL: build"; exit 1; }
echo "built medrun and medcheck in $(( $(date +%s) - start )) s"
./build-gpu/bin/medrun --version # the commit (.deps/git-commit) and the GPU libraries found

for z in .device/cuda/*.medc.gz; do [ -f "$z" ] && gunzip -f "$z"; done # gpu-prepare.sh packed them
status=0
: >"$OUT/table.txt"
: >"$OUT/cuda.txt"
: >"$OUT/large.txt"

if [[ " $CHECKS " == *" medcheck "* ]]; then
  : >"$OUT/check.log"
  for a in .device/*.medc; do
    for precision in f32 f64; do
      extra=()
      case "$(basename "$a")" in grad-*) extra=(--grad) ;; esac
      if timeout 300 ./build-gpu/bin/medcheck "$a" --precision "$precision" "${extra[@]}" >>"$OUT/check.log" 2>&1; then
        r=ok
      else
        r=FAILED; status=1
      fi
      summary=$(grep -E "outputs checked" "$OUT/check.log" | tail -1)
      printf '%-22s %-4s %-7s %s\n' "$(basename "$a")" "$precision" "$r" "$summary" >>"$OUT/table.txt"
    done
  done
fi

# train_falls NAME TABLE LIMIT STEPS WINDOW RECIPE.json ARTIFACT [--set ...]: `medrun train
# --device cuda` for STEPS steps; PASS when it exits 0 and the mean loss of the last WINDOW
# steps is below 90% of the first WINDOW's. One line in TABLE.
train_falls() {
  local name=$1 table=$2 limit=$3 steps=$4 window=$5 recipe=$6 artifact=$7; shift 7
  echo "== $name: medrun train $recipe --device cuda --steps $steps $*"
  rm -rf "$OUT/run-$name"
  timeout "$limit" ./build-gpu/bin/medrun train "$recipe" --artifact "$artifact" --device cuda \
    --steps "$steps" --set checkpoint.every=50 --out "$OUT/run-$name" --progress lines "$@" \
    >"$OUT/train-$name.log" 2>&1
  local rc=$?
  grep -E "device|memory" "$OUT/train-$name.log" | head -3
  tail -4 "$OUT/train-$name.log"
  local line
  line=$(python3 - "$OUT/run-$name/metrics.jsonl" "$rc" "$steps" "$window" "$name" <<'PY'
import json, sys
path, rc, steps, w, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    rows = [json.loads(x) for x in open(path)]
    l = [r["loss"] for r in rows]
    a, b = sum(l[:w]) / w, sum(l[-w:]) / w
    t = sorted(r["step_time"] for r in rows[1:])
    ok = rc == "0" and len(l) == steps and b < 0.9 * a
    wait = sum(r.get("data_wait", 0) for r in rows[1:]) / max(1e-9, sum(r["step_time"] for r in rows[1:]))
    print("%s %s: %d steps, rc %s, mean loss %.4f (first %d) -> %.4f (last %d), median step %.1f ms, data wait %.1f%%"
          % ("PASS" if ok else "FAIL", name, len(l), rc, a, w, b, w, 1e3 * t[len(t) // 2], 100 * wait))
except Exception as e:
    print("FAIL %s: %s" % (name, e))
PY
)
  case "$line" in PASS*) ;; *) status=1 ;; esac
  printf '%-14s %s\n' "$name" "$line" >>"$table"
}

if [[ " $CHECKS " == *" cuda "* ]]; then
  C=.device/cuda
  M=./build-gpu/bin/medrun
  # cuda-check NAME TIMEOUT ARGS...: one comparison, its log in $OUT/cuda-NAME.log, its
  # summary line (PASS/FAIL ...) in the table. On failure, rerun once with a synchronization
  # after every launch, which names the kernel of an asynchronous CUDA error.
  cuda_check() { # (environment variables set before the call reach medrun)
    local name=$1 limit=$2; shift 2
    local log="$OUT/cuda-$name.log"
    echo "== $name: medrun cuda-check $*"
    MEDRUN_CUDA_POISON=1 timeout "$limit" "$M" cuda-check "$@" >"$log" 2>&1
    local rc=$?
    cat "$log"
    if [ $rc -ne 0 ]; then
      status=1
      [ $rc -eq 124 ] && echo "FAIL $name: timed out after $limit s" >>"$log"
      echo "-- $name failed (exit $rc); rerunning with MEDRUN_CUDA_SYNC=1"
      MEDRUN_CUDA_SYNC=1 MEDRUN_CUDA_POISON=1 timeout "$limit" "$M" cuda-check "$@" 2>&1 | tail -5
    fi
    local line
    line=$(grep -E "^(PASS|FAIL)" "$log" | tail -1)
    [ -z "$line" ] && line="FAIL $name: $(grep -E 'medrun:' "$log" | tail -1)"
    printf '%-14s %s\n' "$name" "$line" >>"$OUT/cuda.txt"
  }
  if [ -f "$C/quickstart.medc" ]; then
    "$M" info "$C/quickstart.medc" | tail -1
    cuda_check infer 240 "$C/quickstart.medc" --func infer --input "image=$C/image.npy" --profile
    # Each fused kernel alone (one function per fusion body; random inputs).
    [ -f "$C/quickstart_fusions.medc" ] && cuda_check fusions 240 "$C/quickstart_fusions.medc" --fusions
    # The block MLP templates (bf16 operands: 2e-3, as under the emulation in test/cuda).
    for art in "$C"/mlp-blocks_*.medc "$C"/mlp-wide_*.medc; do
      [ -f "$art" ] && cuda_check "$(basename "$art" .medc)" 120 "$art" --func loss_grad --tolerance 2e-3
    done
    cuda_check train_step 480 "$C/quickstart.medc" --func train_step --input "image=$C/image.npy" \
      --input "target=$C/target.npy" --input "mask=$C/mask.npy" --input lr=0.003 --input step=1 \
      --input ema_decay=0.99 --repeat 3 --profile
    # The training loop on the GPU: the quickstart recipe (32³) for 100 steps; the mean loss
    # of the last 10 steps must be below 90% of the first 10.
    train_falls train "$OUT/cuda.txt" 480 100 10 "$C/quickstart.json" "$C/quickstart.medc"
    # The f16 and bf16 conversions' cvt instructions against the CPU emulation's integer
    # definitions, exhaustively (scripts/gpu/convert.py; its controls, cvt.rz and pack2's
    # halves swapped, must differ).
    echo "== convert: scripts/gpu/convert.py"
    line=$(timeout 300 python3 scripts/gpu/convert.py lib/Target/Cuda/prelude.cuh 2>&1 | tail -3 | tr '\n' ' ')
    echo "$line"
    case "$line" in *"PASS convert"*) ;; *) status=1 ;; esac
    printf '%-14s %s\n' convert "$line" >>"$OUT/cuda.txt"
    # The GELU's erfc and exponential with the MUFU instructions, against float64 (the bounds
    # of test/cuda/gelu.test; its control, a wrong coefficient, must fail).
    echo "== gelu-erf: scripts/gpu/gelu-erf.py"
    line=$(timeout 300 python3 scripts/gpu/gelu-erf.py lib/Target/Cuda/prelude.cuh 2>&1 | tail -7 | tr '\n' ' ')
    echo "$line"
    case "$line" in *"PASS gelu-erf"*) ;; *) status=1 ;; esac
    printf '%-14s %s\n' gelu-erf "$line" >>"$OUT/cuda.txt"
    # No mixed-precision rows here: the CUDA backend and the CPU backend sum in different
    # orders, and in bf16 or f16 storage that difference is not bounded by anything a
    # tolerance could be derived from soundly (gradients that vanish mathematically are
    # rounding noise on each side; AdamW's first update moves each element whose gradient
    # sign the two orders round differently by 2 lr, whatever its size). The acceptance
    # checks of bf16-mixed and fp16-mixed are against torch autocast (part large); the
    # emulation in CI, which sums in the CPU backend's order, compares the two backends in
    # both precisions (test/cuda).
  else
    echo "FAIL cuda: $C/quickstart.medc missing (run scripts/gpu-prepare.sh here first)" >>"$OUT/cuda.txt"
    status=1
  fi
fi

if [[ " $CHECKS " == *" large "* ]]; then
  C=.device/cuda
  # torch's caching allocator maps memory into growing segments instead of keeping blocks
  # of the sizes first asked for: what it reserves stays near what it allocates (0.1-0.3
  # GiB apart at MedNeXt-L's f32 reference peak on an H100).
  export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
  # large NAME LIMIT ARGS...: one `medcheck --device cuda` run (torch on the GPU too), its log
  # in $OUT/large-NAME.log; its summary line (steps or outputs checked) and time line in the
  # table, or its error. A failure or a timeout marks this row and the status, nothing else.
  large() {
    local name=$1 limit=$2; shift 2
    [[ "$name" =~ ${MED_LARGE_ONLY:-.} ]] || return 0 # MED_LARGE_ONLY=REGEX: some rows only
    local log="$OUT/large-$name.log"
    echo "== $name: medcheck $*"
    timeout "$limit" ./build-gpu/bin/medcheck "$@" >"$log" 2>&1
    local rc=$?
    grep -E "^memory" "$log" | cut -c1-300 # each side's peak device memory
    tail -15 "$log"
    local r=ok line
    [ $rc -ne 0 ] && { r=FAILED; status=1; }
    line=$(grep -E "(steps|outputs) checked" "$log" | tail -1)
    local timing
    timing=$(grep -E "^(train_step|infer)  time" "$log" | tail -1 | sed -e 's/  */ /g')
    [ -n "$timing" ] && line="$line; $timing"
    [ $rc -eq 124 ] && line="timed out after $limit s; $line"
    [ -z "$line" ] && line=$(grep -E "^medcheck" "$log" | tail -1)
    [ -z "$line" ] && line="exit $rc, no summary"
    printf '%-18s %-7s %s\n' "$name" "$r" "$line" >>"$OUT/large.txt"
  }
  if [ -f "$C/banis_plus.medc" ]; then
    ./build-gpu/bin/medrun info "$C/banis_plus.medc" | tail -1
    large banis_plus.train 900 "$C/banis_plus.medc" --device cuda --train-steps 1 --train-grad --tolerance 1e-3 \
      --torch-recompute
    large banis_plus.infer 900 "$C/banis_plus.medc" --device cuda --func infer --tolerance 1e-3
  else
    echo "banis_plus         FAILED $C/banis_plus.medc missing (run scripts/gpu-prepare.sh here first)" >>"$OUT/large.txt"
    status=1
  fi
  if [ -f "$C/quickstart.medc" ]; then
    large quickstart.train 300 "$C/quickstart.medc" --device cuda --train-steps 3 --train-grad --tolerance 1e-3
    large quickstart.infer 300 "$C/quickstart.medc" --device cuda --func infer --tolerance 1e-3
  fi
  # bf16-mixed and fp16-mixed against torch autocast (bf16; f16 with GradScaler) and torch
  # f32, three runs in turn per step. fp16-mixed artifacts have no <loss>_grad (their
  # gradients exist only scaled, inside the step): no --train-grad.
  for m in banis_plus_bf16:bf16:1:900 banis_plus_bf16_16g:bf16:1:900 quickstart_bf16:bf16:3:300 banis_plus_fp16:f16:1:900 quickstart_fp16:f16:3:300; do
    IFS=: read -r a p steps limit <<<"$m"
    grad=()
    [ "$p" = bf16 ] && grad=(--train-grad)
    [[ "$a" == banis_plus* ]] && grad+=(--torch-recompute) # MedNeXt-L: the reference in parts
    if [ -f "$C/$a.medc" ]; then
      large "$a.autocast" "$limit" "$C/$a.medc" --device cuda --torch-device cuda --precision "$p" \
        --against-autocast --train-steps "$steps" "${grad[@]}"
    else
      printf '%-18s %-7s %s\n' "$a.autocast" FAILED "$C/$a.medc missing (run scripts/gpu-prepare.sh here first)" >>"$OUT/large.txt"
      status=1
    fi
  done
  # Negative control of the fp16 check: the quickstart's bf16-mixed step (8-bit mantissas)
  # against autocast to f16 (11-bit) must fail the same rule (on the CPU, where autocast
  # has only bf16, ours' bf16 errors are 3 to 16 times ours' f16 errors). The row passes
  # when medcheck ran to its summary and counted failed steps; an error or a timeout is no
  # pass.
  if [ -f "$C/quickstart_bf16.medc" ] && [[ control.bf16_f16 =~ ${MED_LARGE_ONLY:-.} ]]; then
    log="$OUT/large-control_bf16_vs_f16.log"
    echo "== control: medcheck quickstart_bf16 against autocast to f16 (must fail)"
    timeout 300 ./build-gpu/bin/medcheck "$C/quickstart_bf16.medc" --device cuda --torch-device cuda \
      --precision bf16 --against-autocast --autocast-type f16 --train-steps 3 >"$log" 2>&1
    rc=$?
    tail -5 "$log"
    line=$(grep -E "steps checked, [1-9][0-9]* failed" "$log" | tail -1)
    if [ $rc -eq 1 ] && [ -n "$line" ]; then
      printf '%-18s %-7s %s\n' control.bf16_f16 ok "fails as it must: $line" >>"$OUT/large.txt"
    else
      printf '%-18s %-7s %s\n' control.bf16_f16 FAILED "exit $rc, expected failed steps: $(tail -1 "$log")" >>"$OUT/large.txt"
      status=1
    fi
  fi
fi

if [[ " $CHECKS " == *" banis "* ]]; then
  # The BANIS+ recipe (MedNeXt-L k3, 1->6, 128³, batch 2) trained on the GPU on synthetic
  # data: 30 steps in fp32, in bf16-mixed and in bf16-mixed with BANIS's augmentation in the
  # step; the loss must fall; the data wait is reported as a share of the step time.
  C=.device/cuda
  : >"$OUT/banis.txt"
  train_falls banis.fp32 "$OUT/banis.txt" 400 30 5 "$C/banis_plus.json" "$C/banis_plus.medc"
  [ -f "$C/banis_plus_bf16.medc" ] &&
    train_falls banis.bf16 "$OUT/banis.txt" 400 30 5 "$C/banis_plus_bf16.json" "$C/banis_plus_bf16.medc"
  # With BANIS's augmentation in the step (2 data workers cut 138³ crops and ids).
  [ -f "$C/banis_plus_bf16_aug.medc" ] &&
    train_falls banis.aug "$OUT/banis.txt" 400 30 5 "$C/banis_plus_bf16_aug.json" "$C/banis_plus_bf16_aug.medc"
fi

# note_failure RC LIMIT WHAT LOG: a command that exited RC (124: ran past LIMIT s) fails the
# run and says so in LOG.
note_failure() {
  [ "$1" -eq 0 ] && return
  status=1
  echo "FAIL $3 (exit $1$([ "$1" -eq 124 ] && echo ", timed out after $2 s"))" >>"$4"
}

if [[ " $CHECKS " == *" bench "* ]]; then
  # Ours first: the BANIS+ recipe's training step (MedNeXt-L k3, 1->6, batch 2, 128³) on the
  # CUDA backend in fp32 and in bf16-mixed, 3 warm-up and 20 timed steps each (medrun bench;
  # docs/perf.md).
  : >"$OUT/medrun-bench.log"
  # bf16-ab: the bf16-mixed step without one pass (gpu-prepare.sh with MED_PREPARE_AB=PASS);
  # bf16-16g: compiled with --memory-budget 16 (med-recompute: the goal is <= 16 GiB peak with
  # the step within 10% of bf16's).
  # bf16-k5: MedNeXt-L kernel 5 (the BANIS-L recipe).
  # bf16-aug: bf16 with BANIS's augmentation and affinities inside the step (138³ crops in).
  # nnunet-fp32, nnunet-aug: the nnU-Net-style MedNeXt-L step (fp32), without and with
  # nnU-Net's augmentation inside (205³ crops in), nnunet-bf16-aug the latter in bf16-mixed;
  # MED_BENCH_PRECISIONS=nnunet selects them.
  for v in fp32:banis_plus bf16:banis_plus_bf16 bf16-ab:banis_plus_bf16_ab bf16-16g:banis_plus_bf16_16g \
           bf16-k5:banis_l_k5_bf16 bf16-aug:banis_plus_bf16_aug nnunet-fp32:nnunet_fp32 \
           nnunet-aug:nnunet_aug nnunet-bf16-aug:nnunet_bf16_aug fp16:banis_plus_fp16; do
    p=${v%%:*} a=${v#*:}
    [[ " ${MED_BENCH_PRECISIONS:-fp32 bf16 fp16} " == *" ${p%%-*} "* ]] || continue
    [ -f ".device/cuda/$a.medc" ] || continue
    echo "== bench: medrun bench $a"
    timeout 300 ./build-gpu/bin/medrun bench ".device/cuda/$a.json" --artifact ".device/cuda/$a.medc" \
      --device cuda --steps 20 --json "$OUT/medrun-bench-$p.json" >"$OUT/medrun-bench-$p.log" 2>&1
    note_failure $? 300 "medrun bench $p" "$OUT/medrun-bench.log"
    tail -32 "$OUT/medrun-bench-$p.log"
  done
  # PyTorch on the same GPU: MedNeXt-L, 1->6, batch 2, 128³, bf16 autocast, fused AdamW,
  # eager and torch.compile (bench/mednext_torch.py); kernel 3, or the kernels of
  # MED_BENCH_TORCH_KERNELS ("3 5").
  if [ "${MED_BENCH_TORCH:-1}" != 0 ]; then # MED_BENCH_TORCH=0: ours only
    : >"$OUT/bench.log"
    for k in ${MED_BENCH_TORCH_KERNELS:-3}; do
      echo "== bench: PyTorch, kernel $k"
      timeout 420 python3 bench/mednext_torch.py --size L --kernel "$k" --classes 6 --patch 128 --batch 2 \
        --modes "${MED_BENCH_TORCH_MODES:-eager,compile}" >"$OUT/bench-k$k.log" 2>&1
      note_failure $? 420 "bench kernel $k" "$OUT/bench-k$k.log"
      tail -3 "$OUT/bench-k$k.log"
      cat "$OUT/bench-k$k.log" >>"$OUT/bench.log"
    done
  fi
fi

if [[ " $CHECKS " == *" augment "* ]]; then
  # The augmentation pipelines alone (docs/augment.md), batch 2, one channel, 128³ out:
  # nnU-Net's (205³ image and i32 classes -1 .. 2 -> image and five deep-supervision
  # targets) and BANIS's (138³ image and i32 ids -> image, six affinities and masks), ours
  # compiled from models/augment_<p>.mlir by itself for CUDA (`medc compile
  # models/augment_<p>.mlir --target cuda -o .device/cuda/augment_<p>.medc` here, after
  # scripts/gpu-prepare.sh), on the synthetic inputs of bench/augment_torch.py
  # (--save-inputs). Per pipeline:
  #   - `medrun run --func augment` on the CPU and the CUDA backend with key 12 (nnU-Net: a
  #     rotated and a cropped sample; BANIS: one sample through RandAffine, one not), and the
  #     outputs compared: the image within 1e-5 (max abs), targets and masks exactly;
  #     negative control: the CUDA backend with key 13 against the CPU's key 12 must fail;
  #   - fused = unfused: the same pipeline compiled without its resample and reduce fusions
  #     (augment_<p>_unfused.medc) on the CUDA backend with key 12, compared as above, and
  #     every fusion body by itself against the CPU (`cuda-check --fusions` of
  #     augment_<p>_fusions.medc);
  #   - `medrun cuda-check --func augment --profile`: the relative error norm of every output
  #     (<= 1e-5) and the kernel time of one warm run (the sum over the launches, events
  #     around each: medrun has no warm median of a plain function; part bench times the
  #     pipelines inside the step), fused and unfused;
  # then PyTorch's batched pipelines on the same GPU (bench/augment_torch.py --check: its
  # own sanity check, then the median of 50 calls by CUDA events).
  C=.device/cuda
  M=./build-gpu/bin/medrun
  A=${TMPDIR:-/tmp}/med-augment # volumes and logs (about 0.5 GB): not in $OUT
  rm -rf "$A" && mkdir -p "$A"
  : >"$OUT/augment.txt"
  echo "== augment: inputs (bench/augment_torch.py --save-inputs)"
  timeout 120 python3 bench/augment_torch.py --device cpu --save-inputs "$A/in" >"$A/inputs.log" 2>&1
  note_failure $? 120 "augment inputs" "$OUT/augment.txt"
  cat "$A/inputs.log"
  for p in nnunet banis; do
    a="$C/augment_$p.medc"
    if [ ! -f "$a" ]; then
      echo "FAIL augment.$p: $a missing (make it on the build machine after scripts/gpu-prepare.sh: build/bin/medc compile models/augment_$p.mlir --target cuda -o $a)" >>"$OUT/augment.txt"
      status=1
      continue
    fi
    in=(--func augment --input "image=$A/in/${p}_image.npy" --input "seg=$A/in/${p}_seg.npy")
    u="$C/augment_${p}_unfused.medc"
    for r in cpu:12:$a cuda:12:$a cuda:13:$a cuda:12-unfused:$u; do
      d=${r%%:*} r=${r#*:} k=${r%%:*} art=${r#*:}
      echo "== augment: medrun run $art --device $d, key $k"
      timeout 120 "$M" run "$art" "${in[@]}" --input "rng=${k%-*}" --device "$d" \
        --out "$A/$p-$d-$k" >"$A/$p-$d-$k.log" 2>&1
      note_failure $? 120 "augment.$p: medrun run $(basename "$art") --device $d key $k" "$OUT/augment.txt"
      tail -1 "$A/$p-$d-$k.log"
    done
    python3 - "$A" "$p" >>"$OUT/augment.txt" <<'PY'
import glob, os, sys
import numpy as np
root, p = sys.argv[1], sys.argv[2]
def load(d):
    return {os.path.basename(f)[:-4]: np.load(f) for f in sorted(glob.glob(os.path.join(root, d, "*.npy")))}
def compare(a, b):
    if not a or sorted(a) != sorted(b):
        return False, "outputs missing: %s vs %s" % (sorted(a), sorted(b))
    ok, parts = True, []
    for k in sorted(a):
        if a[k].shape != b[k].shape:
            ok = False; parts.append("%s shapes %s vs %s" % (k, a[k].shape, b[k].shape)); continue
        if k == "image":
            # The project's rule (cuda-check): relative error norm <= 1e-5. Exact bits are
            # not to be had: the noise's log and cos and the statistics' sums round apart.
            d = a[k].astype(np.float64) - b[k]
            e = float(np.linalg.norm(d) / max(np.linalg.norm(b[k].astype(np.float64)), 1e-30))
            ok &= e <= 1e-5
            parts.append("image rel.err %.1e (max_abs %.1e)" % (e, float(np.max(np.abs(d)))))
        else:
            n = int(np.sum(a[k] != b[k]))
            ok &= n == 0
            parts.append("%s %d of %d differ" % (k, n, a[k].size))
    return ok, ", ".join(parts)
try:
    cpu, cuda, ctrl = (load("%s-%s" % (p, r)) for r in ("cpu-12", "cuda-12", "cuda-13"))
    ok, text = compare(cuda, cpu)
    print("%s augment.%s CUDA = CPU (key 12; image rel.err <= 1e-5, targets exact): %s"
          % ("PASS" if ok else "FAIL", p, text))
    same, text = compare(ctrl, cpu)
    differ = not same and bool(ctrl) and sorted(ctrl) == sorted(cpu)  # ran, and differs
    print("%s augment.%s control, CUDA key 13 against CPU key 12 must differ: %s"
          % ("PASS" if differ else "FAIL", p, text))
    ok, text = compare(cuda, load("%s-cuda-12-unfused" % p))
    print("%s augment.%s fused = unfused on CUDA (key 12): %s" % ("PASS" if ok else "FAIL", p, text))
except Exception as e:
    print("FAIL augment.%s comparison: %s" % (p, e))
PY
    echo "== augment: medrun cuda-check $C/augment_${p}_fusions.medc --fusions"
    timeout 180 "$M" cuda-check "$C/augment_${p}_fusions.medc" --fusions >"$A/$p-fusions.log" 2>&1
    note_failure $? 180 "augment.$p: cuda-check --fusions" "$OUT/augment.txt"
    tail -2 "$A/$p-fusions.log"
    grep -E "^(PASS|FAIL) fusions:" "$A/$p-fusions.log" | sed -e "s/^\(PASS\|FAIL\) fusions:/\1 augment.$p fusions:/" >>"$OUT/augment.txt"
    for art in "$a" "$u"; do
      v=$(basename "$art" .medc)
      echo "== augment: medrun cuda-check $art --profile"
      timeout 180 "$M" cuda-check "$art" "${in[@]}" --input rng=12 --tolerance 1e-5 --profile \
        >"$A/$v-cuda-check.log" 2>&1
      rc=$?
      tail -3 "$A/$v-cuda-check.log"
      line=$(grep -E "^(PASS|FAIL)" "$A/$v-cuda-check.log" | tail -1)
      total=$(awk '/kernel time by op kind/ {on = 1} on && $1 == "total" {print $2}' "$A/$v-cuda-check.log")
      [ $rc -ne 0 ] && status=1
      [ -z "$line" ] && line="FAIL augment: exit $rc, no summary"
      echo "$line" | sed -e "s/^\(PASS\|FAIL\) augment:/\1 $v cuda-check:/" >>"$OUT/augment.txt"
      printf 'medrun %-20s %8s ms/batch  (one warm run: the sum of its launches'"'"' kernel times, cuda-check --profile)\n' \
        "$v" "${total:-?}" >>"$OUT/augment.txt"
      grep -A40 "kernel time by op kind" "$A/$v-cuda-check.log" >"$OUT/augment-$v-profile.txt" || true
    done
  done
  echo "== augment: PyTorch, bench/augment_torch.py"
  timeout 300 python3 bench/augment_torch.py --check --json "$A/torch.json" >"$OUT/augment-torch.log" 2>&1
  note_failure $? 300 "bench/augment_torch.py" "$OUT/augment.txt"
  cat "$OUT/augment-torch.log"
  grep -E "^check " "$OUT/augment-torch.log" | sed 's/^check \([a-z]*\): \(PASS\|FAIL\)\(.*\)/\2 torch \1 --check\3/' >>"$OUT/augment.txt"
  grep -qE "^FAIL" "$OUT/augment.txt" && status=1
fi

if [[ " $CHECKS " == *" mma "* ]]; then
  # The block MLP forward's sm_90a variant (wgmma) against its mma.sync kernel, on the step
  # whose block MLPs run the mlp templates (BANIS+ bf16-mixed under --memory-budget 16): the
  # step with MEDRUN_MMA=wgmma against torch autocast (part large's rule), then medrun bench
  # of it under MEDRUN_MMA=mma.sync, wgmma and auto (each kernel measured once, an empty
  # choice cache), with the variants each ran.
  : >"$OUT/mma.txt"
  a=banis_plus_bf16_16g
  if [ -f ".device/cuda/$a.medc" ]; then
    echo "== mma: medcheck $a with MEDRUN_MMA=wgmma against autocast"
    MEDRUN_MMA=wgmma timeout 900 ./build-gpu/bin/medcheck ".device/cuda/$a.medc" --device cuda \
      --torch-device cuda --precision bf16 --against-autocast --train-steps 1 --train-grad \
      >"$OUT/mma-check.log" 2>&1
    rc=$?
    tail -5 "$OUT/mma-check.log"
    line=$(grep -E "steps checked" "$OUT/mma-check.log" | tail -1)
    [ $rc -ne 0 ] && status=1
    printf '%-6s %s %s\n' "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "wgmma $a.autocast:" "${line:-exit $rc}" >>"$OUT/mma.txt"
    for mode in mma.sync wgmma auto; do
      echo "== mma: medrun bench $a, MEDRUN_MMA=$mode"
      MEDRUN_MMA=$mode MEDRUN_CACHE=$(mktemp -d) timeout 300 ./build-gpu/bin/medrun bench \
        ".device/cuda/$a.json" --artifact ".device/cuda/$a.medc" --device cuda --steps 20 \
        --json "$OUT/mma-$mode.json" >"$OUT/mma-$mode.log" 2>&1
      note_failure $? 300 "medrun bench MEDRUN_MMA=$mode" "$OUT/mma.txt"
      python3 - "$OUT/mma-$mode.json" "$mode" "$(grep -E '^kernel variants:' "$OUT/mma-$mode.log")" <<'PY' >>"$OUT/mma.txt"
import json, sys
try:
    b = json.load(open(sys.argv[1]))
    t = b["ms_per_step"]
    print("medrun bf16-16g MEDRUN_MMA=%-8s %7.1f ms/step (min %.1f, max %.1f)  peak %.2f GiB  %s"
          % (sys.argv[2], t["median"], t["min"], t["max"], b["peak_memory_bytes"] / 2**30, sys.argv[3]))
except Exception as e:
    print("FAIL MEDRUN_MMA=%s: %s" % (sys.argv[2], e))
PY
      grep -E "fusion:mlp" "$OUT/mma-$mode.log" | head -4 | sed 's/^/    /' >>"$OUT/mma.txt"
    done
  else
    echo "FAIL mma: .device/cuda/$a.medc missing (run scripts/gpu-prepare.sh here first)" >>"$OUT/mma.txt"
    status=1
  fi
fi

if [[ " $CHECKS " == *" conv-layout "* ]]; then
  echo "== conv-layout: bench/conv_layout.py, scripts/gpu/conv_precision.py"
  timeout 300 python3 bench/conv_layout.py >"$OUT/conv-layout.txt" 2>"$OUT/conv-layout.log" ||
    { rc=$?; tail -5 "$OUT/conv-layout.log"; note_failure $rc 300 "bench/conv_layout.py" "$OUT/conv-layout.txt"; }
  timeout 300 python3 scripts/gpu/conv_precision.py >>"$OUT/conv-layout.txt" 2>>"$OUT/conv-layout.log" ||
    { rc=$?; tail -5 "$OUT/conv-layout.log"; note_failure $rc 300 "scripts/gpu/conv_precision.py" "$OUT/conv-layout.txt"; }
fi

if [[ " $CHECKS " == *" layout "* ]]; then
  echo "== layout: bench/layout.py"
  timeout 300 python3 bench/layout.py >"$OUT/layout.txt" 2>"$OUT/layout.log" ||
    { rc=$?; tail -5 "$OUT/layout.log"; note_failure $rc 300 "bench/layout.py" "$OUT/layout.txt"; }
fi

if [[ " $CHECKS " == *" profile "* ]]; then
  # Nsight Compute over the first MED_PROFILE_COUNT (default 120) launches of the kernels
  # whose names match MED_PROFILE_KERNELS (default: the mlp templates) in one step of
  # MED_PROFILE_ARTIFACT (default banis_plus_bf16): time, registers, occupancy, tensor pipe,
  # memory, spills and stall reasons per kernel (scripts/gpu/ncu_table.py). Clocks left as
  # they are (METHOD.md); cuDNN's choice by heuristic so that nothing is timed under ncu
  # (MED_PROFILE_CUDNN=off: the generated convolution kernels instead of cuDNN).
  # MED_PROFILE_SECTIONS adds ncu sections (e.g. "ComputeWorkloadAnalysis InstructionStats":
  # each pipe's share of issue and the executed instruction mix), kept in profile.csv.
  a=${MED_PROFILE_ARTIFACT:-banis_plus_bf16}
  echo "== profile: ncu on medrun bench $a"
  MEDRUN_CUDNN=${MED_PROFILE_CUDNN:-heuristic} timeout 900 ncu --clock-control none --csv --page raw \
    -k "regex:${MED_PROFILE_KERNELS:-^mlp}" --launch-count "${MED_PROFILE_COUNT:-120}" \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    $(for x in ${MED_PROFILE_SECTIONS:-}; do printf -- '--section %s ' "$x"; done) \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum \
    ./build-gpu/bin/medrun bench ".device/cuda/$a.json" --artifact ".device/cuda/$a.medc" \
    --device cuda --steps 1 --warmup 0 >"$OUT/profile.csv" 2>"$OUT/profile.log"
  note_failure $? 900 "ncu profile" "$OUT/profile.log"
  python3 scripts/gpu/ncu_table.py "$OUT/profile.csv" >"$OUT/profile.txt" 2>>"$OUT/profile.log" ||
    { status=1; tail -20 "$OUT/profile.log"; }
fi

if [[ " $CHECKS " == *" dist "* ]]; then
  : >"$OUT/dist.txt"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "$gpus" -ge 1 ] || gpus=1
  for args in "" "--gpus 1" "--gpus $gpus" "--gpus $((gpus + 1))"; do
    echo "== dist: medrun dist-check $args"
    MEDRUN_DIST_TIMEOUT=60 timeout 180 ./build-gpu/bin/medrun dist-check $args >"$OUT/dist.log" 2>&1
    rc=$?
    tail -12 "$OUT/dist.log"
    if [ "$args" = "--gpus $((gpus + 1))" ]; then # the control: must fail, naming a rank
      if [ $rc -ne 0 ] && grep -qE "^medrun: rank [0-9]+ \(pid" "$OUT/dist.log"; then
        echo "PASS control: medrun dist-check $args fails: $(grep -E '^medrun: rank [0-9]+ \(pid' "$OUT/dist.log" | head -1)" >>"$OUT/dist.txt"
      else
        status=1; echo "FAIL control: medrun dist-check $args (exit $rc) did not fail naming a rank" >>"$OUT/dist.txt"
      fi
    elif [ $rc -eq 0 ]; then
      echo "PASS medrun dist-check $args: $(grep -c '^dist-check rank' "$OUT/dist.log") rank(s) exact; $(grep '^dist-check rank 0' "$OUT/dist.log")" >>"$OUT/dist.txt"
    else
      status=1; echo "FAIL medrun dist-check $args (exit $rc)" >>"$OUT/dist.txt"
    fi
  done
  # The data-parallel training path with the real NCCL as a communicator of one rank
  # (--data-parallel, the quickstart compiled with --data-parallel): 100 steps, the loss
  # must fall as in part cuda's single-process training.
  if [ -f .device/cuda/quickstart_dp.medc ]; then
    train_falls train-dp "$OUT/dist.txt" 480 100 10 .device/cuda/quickstart.json \
      .device/cuda/quickstart_dp.medc --data-parallel
  fi
fi

if [[ " $CHECKS " == *" ab "* ]]; then
  : >"$OUT/ab.txt"
  source scripts/gpu/ab.sh
fi

if [[ " $CHECKS " == *" converge "* ]]; then
  source scripts/gpu/converge.sh # sets status=1 on failure; its table in $OUT/converge.txt
fi

if [[ " $CHECKS " == *" stencil "* ]]; then
  source scripts/gpu/stencil-ab.sh # its table in $OUT/stencil.txt
fi

if [[ " $CHECKS " == *" mlp "* ]]; then
  source scripts/gpu/mlp-ab.sh # its table in $OUT/mlp.txt
fi

if [[ " $CHECKS " == *" import "* || " $CHECKS " == *" bench-import "* ]]; then
  source scripts/gpu/import.sh # its tables in $OUT/import.txt and $OUT/bench-import.txt
fi

if [[ " $CHECKS " == *" budget "* ]]; then
  source scripts/gpu/budget.sh # its table in $OUT/budget.txt
fi

echo
if [ -s "$OUT/bench.log" ] || ls "$OUT"/medrun-bench-*.log >/dev/null 2>&1; then
  echo "Training step on this GPU (MedNeXt-L k3, 1->6, batch 2, 128³; PyTorch: bf16 autocast):"
  [ -s "$OUT/bench.log" ] && grep -E "^(MedNeXt|torch|FAIL)" "$OUT/bench.log"
  for p in fp32 bf16 bf16-ab bf16-16g bf16-k5 bf16-aug nnunet-fp32 nnunet-aug nnunet-bf16-aug fp16; do
    [ -s "$OUT/medrun-bench-$p.json" ] || continue
    python3 - "$OUT/medrun-bench-$p.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
t = b["ms_per_step"]
print("medrun %-7s %8.1f ms/step  peak %6.2f GiB  (%s, min %.1f, max %.1f ms; %.1f TFLOP/s) %s"
      % (b["device"], t["median"], b["peak_memory_bytes"] / 2**30, b["precision"], t["min"],
         t["max"], b["tflops"], sys.argv[1].rsplit("-", 1)[-1][:-5]))
PY
  done
  [ -s "$OUT/medrun-bench.log" ] && cat "$OUT/medrun-bench.log"
fi
if [ -s "$OUT/ab.txt" ]; then
  echo "Before against after on this GPU (scripts/gpu/ab.sh):"
  cat "$OUT/ab.txt"
fi
if [ -s "$OUT/stencil.txt" ]; then
  cat "$OUT/stencil.txt"
fi
if [ -s "$OUT/mlp.txt" ]; then
  cat "$OUT/mlp.txt"
fi
if [ -s "$OUT/converge.txt" ]; then
  echo "Training unchanged by speed (part converge, scripts/gpu/converge.sh):"
  cat "$OUT/converge.txt"
fi
if [ -s "$OUT/mma.txt" ]; then
  echo "Block MLP forward, mma.sync vs its sm_90a wgmma variant (BANIS+ bf16-mixed, --memory-budget 16):"
  cat "$OUT/mma.txt"
fi
if [ -s "$OUT/augment.txt" ]; then
  echo "Augmentation pipelines alone (batch 2, 1 channel, 128³ out; issue 14's targets: nnU-Net <= 0.5 ms, BANIS <= 0.3 ms):"
  [ -s "$OUT/augment-torch.log" ] && grep -E "^torch aug-" "$OUT/augment-torch.log"
  cat "$OUT/augment.txt"
fi
if [ -s "$OUT/table.txt" ]; then
  echo "medcheck against LibTorch $(python3 -c 'import torch; print(torch.__version__)') (CPU):"
  cat "$OUT/table.txt"
fi
if [ -s "$OUT/cuda.txt" ]; then
  echo "CUDA backend vs CPU backend (MedNeXt-S k3, 32³, batch 2; relative error norm <= 1e-4):"
  cat "$OUT/cuda.txt"
fi
if [ -s "$OUT/large.txt" ]; then
  echo "CUDA backend vs LibTorch on the GPU (medcheck --device cuda, TF32 off; f32: relative error norm <= 1e-3; *.autocast: bf16-/fp16-mixed, error vs torch f32 <= 1.5x torch autocast's (gradients and moments: or within one bf16/f16 rounding); control.*: a wrong variant that must fail):"
  cat "$OUT/large.txt"
fi
if [ -s "$OUT/banis.txt" ]; then
  echo "medrun train --device cuda, BANIS+ (MedNeXt-L k3, 1->6, 128³, batch 2, synthetic data):"
  cat "$OUT/banis.txt"
fi
if [ -s "$OUT/profile.txt" ]; then
  echo "Nsight Compute, kernels matching ${MED_PROFILE_KERNELS:-^mlp} (scripts/gpu/ncu_table.py):"
  cat "$OUT/profile.txt"
fi
if [ -s "$OUT/layout.txt" ]; then
  echo "Block MLP products by activation layout, bf16 through cuBLAS (bench/layout.py):"
  cat "$OUT/layout.txt"
fi
if [ -s "$OUT/conv-layout.txt" ]; then
  echo "PlainConvUNet's convolutions in cuDNN by layout, and f32 precision by algorithm choice:"
  cat "$OUT/conv-layout.txt"
fi
if [ -s "$OUT/dist.txt" ]; then
  echo "medrun dist-check with NCCL (docs/distributed.md):"
  cat "$OUT/dist.txt"
fi
if [ -s "$OUT/bench-import.txt" ]; then
  cat "$OUT/bench-import.txt"
fi
if [ -s "$OUT/budget.txt" ]; then
  echo "BANIS+ bf16-mixed step by memory budget (scripts/gpu/budget.sh; medrun bench, 20 steps):"
  cat "$OUT/budget.txt"
fi
if [ -s "$OUT/import.txt" ]; then
  echo "Imported networks on the GPU (scripts/gpu/import.sh; *.train: CUDA vs LibTorch f32, rel. error norm <= 1e-3; *.autocast: bf16-mixed vs torch autocast; *.fusions: each fused kernel vs the CPU backend; control.*: must fail):"
  cat "$OUT/import.txt"
fi
# MED_GPU_BUNDLE=DIR: everything written under $OUT as one archive in DIR (a caller that gets
# back only a few files: one archive instead of a log, a json and a table per part).
if [ -n "${MED_GPU_BUNDLE:-}" ]; then
  mkdir -p "$MED_GPU_BUNDLE" && tar czf "$MED_GPU_BUNDLE/gpu-check.tgz" -C "$OUT" . ||
    echo "could not bundle $OUT into $MED_GPU_BUNDLE"
fi
[ $status -eq 0 ] && echo "ALL PASS" || echo "SOME CHECKS FAILED"
exit $status
