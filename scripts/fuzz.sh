#!/usr/bin/env bash
# The sanitizer build: configures FUZZ_BUILD (default build-fuzz) with clang-19,
# AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer coverage (-DMED_FUZZ=ON), builds
# only the fuzz targets (test/fuzz) and the runtime's unit tests, runs those, then runs every
# fuzz target for SECONDS (default 10, what CI runs) from seed corpora made from the test
# inputs, after replaying the regression inputs of test/fuzz/regressions/<target>/.
# Any crash, sanitizer report, leak, uncaught exception or timeout fails the script.
#
# usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (targets: artifact npy safetensors torch skeleton recipe mlir onnx hdf5 zarr nifti npy-volume)
# Seeds need the tools of the ordinary build (BUILD, default build: scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
BUILD=${BUILD:-build}
SECONDS_EACH=${1:-10}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(artifact npy safetensors torch skeleton recipe mlir onnx hdf5 zarr nifti npy-volume)

if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$FUZZ_BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DMED_FUZZ=ON \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
fi
cmake --build "$FUZZ_BUILD" -j "$(nproc)" --target medrun-unittests \
  $(printf 'fuzz-%s ' "${TARGETS[@]}")

# Leaks are findings too; UBSan reports stop the program (-fno-sanitize-recover).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "fuzz: the runtime's unit tests under ASan and UBSan"
# In nproc shards at once (gtest's sharding): the tests are single-threaded and slow at -O0.
shards=$(nproc)
for ((i = 0; i < shards; i++)); do
  (cd "$FUZZ_BUILD/test/runtime" && GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
     ./medrun-unittests --gtest_brief=1 >"../../unittests-$i.log" 2>&1) &
done
ut_status=0
for ((i = 0; i < shards; i++)); do wait -n || ut_status=1; done
for ((i = 0; i < shards; i++)); do tail -3 "$FUZZ_BUILD/unittests-$i.log"; done
if [ $ut_status != 0 ]; then
  for ((i = 0; i < shards; i++)); do grep -B5 -A30 -E '\[  FAILED  \]|ERROR: |runtime error' "$FUZZ_BUILD/unittests-$i.log" | head -120 || true; done
  echo "FAIL: the runtime's unit tests under ASan and UBSan ($FUZZ_BUILD/unittests-*.log)"
  exit 1
fi

# Seed corpora, made fresh from the test inputs.
SEEDS="$FUZZ_BUILD/seeds"
rm -rf "$SEEDS" && mkdir -p "$SEEDS"/{artifact,npy,safetensors,torch,skeleton,recipe,mlir,onnx,hdf5,zarr,nifti,npy-volume}
MEDC="$BUILD/bin/medc" MEDRUN="$BUILD/bin/medrun"
"$MEDC" compile test/medrun/Inputs/tiny.mlir --batch 1 --patch 3,3,3 -o "$SEEDS/artifact/tiny.medc"
"$MEDC" compile test/medrun/Inputs/tiny_loss.mlir --batch 1 --patch 2,2,3 --train "clip=1.0 ema=true" \
  -o "$SEEDS/artifact/step.medc"
"$MEDC" compile test/medrun/Inputs/tiny.mlir --batch 1 --patch 3,3,3 --target cuda \
  -o "$SEEDS/artifact/tiny-cuda.medc" 2>/dev/null || echo "fuzz: no CUDA seed (medc without NVRTC)"
"$MEDRUN" init "$SEEDS/artifact/tiny.medc" -o "$SEEDS/safetensors/tiny.safetensors" >/dev/null
/usr/bin/python3 - "$SEEDS/npy" <<'PY'
import sys, numpy as np
d = sys.argv[1]
np.save(d + "/f32.npy", np.arange(24, dtype=np.float32).reshape(2, 3, 4))
np.save(d + "/f64-fortran.npy", np.asfortranarray(np.ones((3, 2))))
np.save(d + "/i64-scalar.npy", np.array(7, dtype=np.int64))
np.save(d + "/u8.npy", np.zeros((4,), dtype=np.uint8))
np.save(d + "/f16-be.npy", np.ones((2, 2), dtype=">f2"))
PY
/usr/bin/python3 - "$SEEDS/torch" <<'PY'
import argparse, collections, sys, torch
d = sys.argv[1]
sd = collections.OrderedDict(w=torch.arange(24.).reshape(2, 3, 4), b=torch.ones(3, dtype=torch.float16))
torch.save(sd, d + "/plain.pth")
torch.save({"epoch": 1, "state_dict": collections.OrderedDict(("module." + k, v.t() if v.dim() == 2 else v)
                                                              for k, v in sd.items()),
            "hparams": argparse.Namespace(lr=1e-3)}, d + "/nested.pth")
torch.save(sd, d + "/legacy.pth", _use_new_zipfile_serialization=False)
PY
# Skeletons (docs/skeletons.md) for fuzz-skeleton's 4x5x6 volume: voxels, positions with a
# spacing, x, y, z order, node ids, float integers, two skeletons.
/usr/bin/python3 - "$SEEDS/skeleton" <<'PY'
import json, sys
d = sys.argv[1]
seeds = {
    "voxels": {"nodes": [{"skeleton": 1, "voxel": [0, 0, v]} for v in range(6)],
               "edges": [[i, i + 1] for i in range(5)]},
    "positions": {"axes": "zyx", "spacing": [2, 1, 1],
                  "nodes": [{"node": 10, "skeleton": 3, "voxel": [1, 2, 3], "position": [2.0, 2.0, 3.0]},
                            {"node": 11, "skeleton": 3, "position": [4.5, 2.0, 3.2]},
                            {"node": 12, "skeleton": 3, "position": [6.0, 4.0, 5.0], "radius": 1}],
                  "edges": [[10, 11], [11, 12]]},
    "xyz-two": {"axes": "xyz", "spacing": [1, 1, 4],
                "nodes": [{"node": 0, "skeleton": 7, "voxel": [5, 4, 3]},
                          {"node": 1, "skeleton": 7, "voxel": [5.0, 3, 3]},
                          {"node": 2, "skeleton": 2, "voxel": [0, 0, 0]},
                          {"node": 3, "skeleton": 2, "voxel": [1, 1, 1]},
                          {"node": 4, "skeleton": 2, "voxel": [2, 1, 1]}],
                "edges": [[0, 1], [2, 3], [3, 4]]},
}
for name, doc in seeds.items():
    json.dump(doc, open("%s/%s.json" % (d, name), "w"))
PY
cp configs/*.yaml test/medrun/Inputs/tiny_recipe.yaml "$SEEDS/recipe/"
/usr/bin/python3 - "$SEEDS/mlir" test/Dialect/*.mlir test/Transforms/*.mlir test/medrun/Inputs/*.mlir <<'PY'
import os, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    for i, part in enumerate(open(path).read().split("// -----")):
        open(os.path.join(out, "%s.%d.mlir" % (os.path.basename(path), i)), "w").write(part)
PY
# ONNX: the hand-written text models and a small exported network (torch.onnx.export).
cp test/import/Inputs/*.txtpb "$SEEDS/onnx/"
/usr/bin/python3 test/import/Inputs/onnx_check.py export plainconvunet --out "$SEEDS/onnx-export" \
  --shape 1,1,16,16,16 >/dev/null
cp "$SEEDS/onnx-export/plainconvunet.onnx" "$SEEDS/onnx/" && rm -rf "$SEEDS/onnx-export"
# HDF5 and Zarr volumes: small arrays of every layout, codec and dtype the readers take, and
# issue 36's crash files (test/medrun/reliability-*.test); a Zarr array as fuzz-zarr's input.
/usr/bin/python3 test/medrun/Inputs/reliability_volumes.py fuzz-seeds "$SEEDS/hdf5" "$SEEDS/zarr"
# NIfTI and .npy volumes: small valid files (NIfTI-1/-2, .nii.gz, channels in dim[4], scaled)
# and the malformed headers of test/medrun/reliability-nifti.test and reliability-npy.test.
/usr/bin/python3 - "$SEEDS" <<'PY'
import sys, numpy as np, nibabel as nib
d = sys.argv[1]
a = np.arange(60, dtype=np.int16).reshape(5, 4, 3)
nib.save(nib.Nifti1Image(a, np.diag([0.5, 1, 2, 1])), d + "/nifti/i16.nii")
nib.save(nib.Nifti2Image(a.astype(np.float32), np.eye(4)), d + "/nifti/f32-n2.nii")
nib.save(nib.Nifti1Image(np.zeros((3, 4, 2, 2), np.uint8), np.eye(4)), d + "/nifti/channels.nii")
s = nib.Nifti1Image(a, np.eye(4))
s.header.set_slope_inter(2.0, -1.0)
nib.save(s, d + "/nifti/scaled.nii")
nib.save(nib.Nifti1Image(a.astype(np.float64), np.eye(4)), d + "/nifti/f64.nii.gz")
np.save(d + "/npy-volume/f32.npy", np.arange(60, dtype=np.float32).reshape(3, 4, 5))
np.save(d + "/npy-volume/channels.npy", np.zeros((2, 3, 4, 5), np.uint16))
np.save(d + "/npy-volume/f8-1x.npy", np.ones((1, 3, 2, 2, 1)))
PY
/usr/bin/python3 test/medrun/Inputs/reliability_files.py nifti "$SEEDS/nifti"
/usr/bin/python3 test/medrun/Inputs/reliability_files.py npy "$SEEDS/npy-volume"

# fuzz-hdf5: libhdf5 runs in the reader's child process (runtime/src/io/Hdf5.cpp), where its
# crashes, sanitizer reports (the child prints them on stderr; only exit statuses count here)
# and hangs become the reader's Error, as for any malformed file. A hang ends after
# MEDRUN_HDF5_TIMEOUT seconds, well inside -timeout: 1 s, as a hang costs the run that long
# (a request of a fuzz input's file takes milliseconds; one that takes longer is an Error
# too, never a finding).
export MEDRUN_HDF5_TIMEOUT=1
# One target per core at once; each reports in $FUZZ_BUILD/fuzz-<target>.result.
fuzz_one() {
  local t=$1
  bin="$FUZZ_BUILD/test/fuzz/fuzz-$t"
  # fuzz-hdf5: libhdf5 allocates what a malformed file declares, and a failed malloc is an
  # error it reports (ASan would stop at the size). Allocations past the fuzzer's memory limit
  # fail in the allocator: libFuzzer's own check runs after an allocation succeeded, and in
  # libhdf5's child process (which inherits it) it wrote an empty "oom-" input and ended
  # the child instead of letting libhdf5 see the failure (a `new` that large still stops
  # with a report).
  hdf5opts=""
  [ "$t" != hdf5 ] || hdf5opts=:allocator_may_return_null=1:max_allocation_size_mb=4000
  export LSAN_OPTIONS=suppressions=$PWD/test/fuzz/hdf5.lsan.supp
  if [ -d "test/fuzz/regressions/$t" ] && [ -n "$(ls -A "test/fuzz/regressions/$t")" ]; then
    ASAN_OPTIONS=$ASAN_OPTIONS:allow_user_poisoning=0$hdf5opts "$bin" -runs=1 "test/fuzz/regressions/$t"/* 2>"$FUZZ_BUILD/fuzz-$t-regressions.log" ||
      { tail -30 "$FUZZ_BUILD/fuzz-$t-regressions.log"; echo "FAIL: fuzz-$t regression input"; return 1; }
  fi
  corpus="$FUZZ_BUILD/corpus/$t"
  mkdir -p "$corpus" "$FUZZ_BUILD/findings/$t"
  # fuzz-mlir and fuzz-onnx link LLVM's libraries, built without ASan: their inline allocators poison
  # memory that the uninstrumented copies never unpoison (false reports), so it runs without
  # user poisoning.
  opts=$ASAN_OPTIONS$hdf5opts
  [ "$t" != mlir ] && [ "$t" != onnx ] || opts=$ASAN_OPTIONS:allow_user_poisoning=0
  if ASAN_OPTIONS=$opts "$bin" "$corpus" "$SEEDS/$t" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=4096 \
       -max_len=1048576 -print_final_stats=1 -artifact_prefix="$FUZZ_BUILD/findings/$t/" \
       >"$FUZZ_BUILD/fuzz-$t.log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$FUZZ_BUILD/fuzz-$t.log" | grep -o '[0-9]*$')
    echo "fuzz-$t: ${runs:-?} executions in ${SECONDS_EACH} s, no findings"
  else
    tail -40 "$FUZZ_BUILD/fuzz-$t.log"
    echo "FAIL: fuzz-$t (the input is in $FUZZ_BUILD/findings/$t/)"
    return 1
  fi
}
status=0 running=0
for t in "${TARGETS[@]}"; do
  if [ $running -ge "$(nproc)" ]; then wait -n || status=1; running=$((running - 1)); fi
  fuzz_one "$t" >"$FUZZ_BUILD/fuzz-$t.result" 2>&1 &
  running=$((running + 1))
done
while [ $running -gt 0 ]; do wait -n || status=1; running=$((running - 1)); done
for t in "${TARGETS[@]}"; do cat "$FUZZ_BUILD/fuzz-$t.result"; done
exit $status
