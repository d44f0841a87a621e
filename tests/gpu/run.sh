#!/usr/bin/env bash
# tests/gpu/run.sh - build seedpipe with CUDA and run everything GPU-side:
# the GPU tests (tests/gpu/test_*.cu: philox on device, the CUDA training
# backend strict/fast/CPU comparison), the CPU training tests as a sanity
# check, and the training benchmark (bench/train_bench.sh).
#
#   tests/gpu/run.sh [BUILD_DIR]        (default build-gpu; results in $OUT or BUILD_DIR/gpu-results)
#
# Exit status: 0 if every GPU test passed (a skip counts as failure here:
# this script is meant for a machine with a GPU).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
RES=${OUT:-$BUILD/gpu-results}
mkdir -p "$RES"
nvidia-smi > "$RES/nvidia-smi.txt" 2>&1 || true
echo "== configure + build ($BUILD)"
cmake -S "$ROOT" -B "$BUILD" -DSEEDPIPE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$RES/configure.log" 2>&1 \
  || { tail -30 "$RES/configure.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" > "$RES/build.log" 2>&1 || { tail -40 "$RES/build.log"; exit 1; }
status=0
echo "== GPU tests"
for t in "$BUILD"/tests/gpu/gpu_test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  echo "-- $name"
  timeout 300 "$t" 2>&1 | tee "$RES/$name.log"
  rc=${PIPESTATUS[0]}
  echo "   exit $rc"
  [ "$rc" -eq 0 ] || status=1
done
echo "== CPU training tests (sanity)"
(cd "$BUILD/tests" && for t in test_nn test_train; do
   SP_SHARED_DATA="$ROOT/../shared/data" timeout 300 ./$t > "$RES/$t.log" 2>&1; echo "-- $t exit $?"; tail -3 "$RES/$t.log"; done)
echo "== training benchmark"
WORKERS=${WORKERS:-8} THREADS=${THREADS:-$(nproc)} timeout 400 "$ROOT/bench/train_bench.sh" "$BUILD" "$RES/bench" \
  || echo "benchmark failed (see $RES/bench)"
echo "== results in $RES; GPU tests: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
