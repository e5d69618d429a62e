#!/usr/bin/env bash
# The long fuzzing runs (scripts/fuzz-runs.sh) on the lent GPU machine's 16 CPU cores, where
# this build machine has two. Two halves:
#
#   scripts/gpu/fuzz-bundle.sh prepare [TARGET...]    (here, after scripts/fuzz.sh built
#       FUZZ_BUILD, default build-fuzz, and its seeds) copies the fuzz targets, their seed
#       corpora, the LeakSanitizer suppressions and every shared library the targets load
#       beyond glibc's (Debian's libhdf5, libblosc, ... are not on the GPU machine) into
#       .device/fuzz/ (FUZZ_BUNDLE), debug sections stripped (symbols kept for the reports),
#       packed as .device/fuzz.tar.gz to carry.
#   scripts/gpu/fuzz-bundle.sh run [TARGET...]        (there, from the repository root)
#       unpacks it and runs scripts/fuzz-runs.sh on it: RUNS executions per target
#       (1,000,000) over JOBS jobs per target (default: the cores over the targets); the
#       logs of each target and any finding go to $OUT (fuzz-<target>.txt, findings tarred).
#
# Targets default to the volume readers: hdf5 zarr nifti (17 MB packed). fuzz-mlir and
# fuzz-onnx load Debian's libLLVM (over 100 MB, past what a call carries): they run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:?usage: scripts/gpu/fuzz-bundle.sh prepare|run [TARGET...]}
shift
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(hdf5 zarr nifti)
BUNDLE=${FUZZ_BUNDLE:-.device/fuzz}

case "$mode" in
prepare)
  FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/test/fuzz" "$BUNDLE/seeds" "$BUNDLE/lib"
  for t in "${TARGETS[@]}"; do
    bin="$FUZZ_BUILD/test/fuzz/fuzz-$t"
    [ -x "$bin" ] || { echo "fuzz-bundle: $bin is missing (run scripts/fuzz.sh first)" >&2; exit 1; }
    [ -d "$FUZZ_BUILD/seeds/$t" ] || { echo "fuzz-bundle: $FUZZ_BUILD/seeds/$t is missing (run scripts/fuzz.sh first)" >&2; exit 1; }
    objcopy --strip-debug "$bin" "$BUNDLE/test/fuzz/fuzz-$t"
    cp -r "$FUZZ_BUILD/seeds/$t" "$BUNDLE/seeds/$t"
    # Every library the loader resolves, but glibc's own (the GPU machine's newer glibc
    # serves binaries linked against this one's).
    ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
      grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so' |
      while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done
  done
  # Regressions are replayed by fuzz.sh, not here; the suppressions fuzz-runs.sh reads.
  tar -C "$(dirname "$BUNDLE")" -czf "$BUNDLE.tar.gz" "$(basename "$BUNDLE")"
  du -sh "$BUNDLE" "$BUNDLE.tar.gz"
  ;;
run)
  [ -d "$BUNDLE" ] || tar -C "$(dirname "$BUNDLE")" -xzf "$BUNDLE.tar.gz"
  out=${OUT:-/tmp/out}
  mkdir -p "$out"
  cores=$(nproc)
  export JOBS=${JOBS:-$(( cores / ${#TARGETS[@]} > 0 ? cores / ${#TARGETS[@]} : 1 ))}
  export RUNS=${RUNS:-1000000}
  echo "fuzz-bundle: ${TARGETS[*]}: $RUNS executions each over $JOBS jobs ($cores cores), $(date -u)"
  status=0
  LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    FUZZ_BUILD="$BUNDLE" bash scripts/fuzz-runs.sh "${TARGETS[@]}" | tee "$out/fuzz-runs.txt" || status=1
  for t in "${TARGETS[@]}"; do
    cat "$BUNDLE/long/$t"/fuzz-*.log > "$out/fuzz-$t.txt" 2>/dev/null || true
    if [ -n "$(ls -A "$BUNDLE/long/$t/findings" 2>/dev/null)" ]; then
      tar -C "$BUNDLE/long/$t" -czf "$out/findings-$t.tar.gz" findings
    fi
  done
  echo "fuzz-bundle: done $(date -u), status $status"
  exit $status
  ;;
*)
  echo "usage: scripts/gpu/fuzz-bundle.sh prepare|run [TARGET...]" >&2
  exit 2
  ;;
esac
