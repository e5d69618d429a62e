#!/usr/bin/env bash
# Long fuzzing runs to a fixed number of executions: RUNS per target (default 1,000,000),
# split over JOBS libFuzzer jobs (default 4) per target, every target at once. Uses the
# targets scripts/fuzz.sh built (FUZZ_BUILD, default build-fuzz) and its seed corpora
# (FUZZ_BUILD/seeds: run scripts/fuzz.sh once first). Prints one line per target:
# executions, findings (inputs kept in FUZZ_BUILD/long/<target>/findings), exit status.
#
# FUZZ_MAX_TIME=S stops each job after S seconds (libFuzzer's -max_total_time), so that a run
# cut short by a time limit still reports its executions.
#
# usage: scripts/fuzz-runs.sh [TARGET...]       (default: artifact npy safetensors torch skeleton recipe mlir onnx hdf5 zarr nifti npy-volume)
# The executions and results of each run go to docs/reliability.md.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZ_BUILD=$(realpath "${FUZZ_BUILD:-build-fuzz}")
export LSAN_OPTIONS=suppressions=$PWD/test/fuzz/hdf5.lsan.supp # libhdf5's own leaks (scripts/fuzz.sh)
RUNS=${RUNS:-1000000} JOBS=${JOBS:-4}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(artifact npy safetensors torch skeleton recipe mlir onnx hdf5 zarr nifti npy-volume)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export MEDRUN_HDF5_TIMEOUT=1 # fuzz-hdf5: a hang in libhdf5's process is an Error after 1 s (scripts/fuzz.sh)
status=0
for t in "${TARGETS[@]}"; do
  work="$FUZZ_BUILD/long/$t"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/findings"
  opts=$ASAN_OPTIONS
  [ "$t" != mlir ] && [ "$t" != onnx ] || opts=$ASAN_OPTIONS:allow_user_poisoning=0 # see docs/reliability.md
  [ "$t" != hdf5 ] || opts=$ASAN_OPTIONS:allocator_may_return_null=1:max_allocation_size_mb=4000 # as scripts/fuzz.sh
  (cd "$work" && ASAN_OPTIONS=$opts "$FUZZ_BUILD/test/fuzz/fuzz-$t" corpus "$FUZZ_BUILD/seeds/$t" \
     -runs=$((RUNS / JOBS)) -jobs="$JOBS" -workers="$JOBS" -timeout=20 -rss_limit_mb=4096 \
     -max_len=1048576 ${FUZZ_MAX_TIME:+-max_total_time=$FUZZ_MAX_TIME} -print_final_stats=1 -artifact_prefix=findings/ >run.log 2>&1
   echo $? >exit) &
done
wait
for t in "${TARGETS[@]}"; do
  work="$FUZZ_BUILD/long/$t"
  runs=$(cat "$work"/fuzz-*.log 2>/dev/null | grep -o 'stat::number_of_executed_units: *[0-9]*' |
         awk '{s += $NF} END {print s + 0}')
  # libFuzzer keeps an input that ran over 10 s (-report_slow_units) as slow-unit-*: on a
  # loaded machine at nice 19 that is the scheduler, not the reader; a hang is a timeout-*
  # (-timeout=20). Slow units are listed, replayed by hand, and not counted as findings.
  findings=$(ls "$work/findings" | grep -vc '^slow-unit-')
  slow=$(ls "$work/findings" | grep -c '^slow-unit-')
  rc=$(cat "$work/exit")
  [ "$rc" = 0 ] && [ "$findings" = 0 ] && [ "$runs" -ge "$RUNS" ] || status=1
  echo "fuzz-$t: $runs executions in $JOBS jobs, $findings findings, exit $rc$([ "$slow" = 0 ] || echo ", $slow slow units (over 10 s; not findings)")"
done
exit $status
