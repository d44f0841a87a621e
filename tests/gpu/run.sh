#!/usr/bin/env bash
# tests/gpu/run.sh - build seedpipe with CUDA and run everything GPU-side, on
# a machine with an NVIDIA GPU, in about 5-8 minutes (H200, 16 cores):
#   1. preflight: nvidia-smi sees a GPU, nvcc, cmake, pkg-config, cuDNN
#      (system, or the nvidia-cudnn wheel of python3), the host libraries
#      (system, or a carried .gpudeps/ made by tests/gpu/fetch_deps.sh);
#   2. configure + build (only the targets used here);
#   3. the GPU tests (tests/gpu/test_*.cu): philox on device; the CUDA
#      training backend: strict run-to-run bits, CPU vs GPU difference,
#      strict refusals, fast mode;
#   4. the training benchmark (bench/train_bench.sh): CPU, CUDA strict x2,
#      CUDA fast x2 step times and data wait (the GPU's idle time waiting
#      for the loader), --compare-devices, the PyTorch peer;
#   5. the CPU tests of the shared arithmetic (sanity).
# Fails loudly and early (exit 2) when the machine is not fit; exit 1 when a
# GPU test failed; 0 otherwise. Every stage has its own time limit.
#
#   tests/gpu/run.sh [BUILD_DIR]          (default build-gpu)
#
# Results: $OUT (the device tool's folder) or BUILD_DIR/gpu-results gets at
# most 6 files: SUMMARY.md (paste into bench/RESULTS.md), gpu_tests.log,
# train_bench.md, nvidia-smi.txt, logs.tar.gz (configure/build logs, run
# records, bench logs), and build.log.tail on a build failure. SUMMARY.md
# is written as the stages go, so a run cut short still reports.
# Knobs: BUILD_TIMEOUT (s, 360), BENCH_TIMEOUT (s, 240), WORKERS (8),
# THREADS (nproc), CUDNN_ROOT (dir with include/cudnn.h and lib/libcudnn.so*),
# SEEDPIPE_GPU_DEPS (default ROOT/.gpudeps).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
RES=${OUT:-$BUILD/gpu-results}
WORK=$BUILD/gpu-work
mkdir -p "$RES" "$WORK" || { echo "run.sh: cannot create $RES / $WORK"; exit 2; }
SUMMARY=$RES/SUMMARY.md
T0=$(date +%s)
status=0

say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - T0 ))s; }
finish() {   # pack what did not get its own file
  tar -C "$WORK" --exclude="./bench/shapes-*" -czf "$RES/logs.tar.gz" . 2>/dev/null
  say ""
  say "run.sh finished after $(elapsed): $1"
}
die() {
  say "FATAL: $*"
  finish "FAILED EARLY"
  exit 2
}

: > "$SUMMARY"
say "# seedpipe GPU run ($(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'))"
say ""

# ---- 1. preflight ---------------------------------------------------------------
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi > "$RES/nvidia-smi.txt" 2>&1 || die "nvidia-smi failed: $(tail -1 "$RES/nvidia-smi.txt")"
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
[ -n "$GPU" ] || die "nvidia-smi lists no GPU"
say "- GPU: $GPU; $(nproc) CPU cores"
export PATH=$PATH:/usr/local/cuda/bin
command -v nvcc >/dev/null || die "nvcc not found (PATH, /usr/local/cuda/bin)"
say "- nvcc: $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
command -v cmake >/dev/null || die "cmake not found"

# Host libraries: system ones, or a carried prefix of unpacked .debs.
DEPS=${SEEDPIPE_GPU_DEPS:-$ROOT/.gpudeps}
CMAKE_EXTRA=()
if [ -d "$DEPS/root/usr" ]; then
  D=$DEPS/root
  LIBDIR=$D/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$LIBDIR:$D/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_SYSROOT_DIR=$D
  export PKG_CONFIG_LIBDIR=$LIBDIR/pkgconfig:$D/usr/share/pkgconfig
  if ! command -v pkg-config >/dev/null && [ -x "$D/usr/bin/pkgconf" ]; then
    mkdir -p "$WORK/bin" && ln -sf "$D/usr/bin/pkgconf" "$WORK/bin/pkg-config"
    export PATH=$WORK/bin:$PATH
  fi
  CMAKE_EXTRA+=("-DCMAKE_PREFIX_PATH=$D/usr")
  say "- host libraries from the carried prefix $DEPS"
fi
command -v pkg-config >/dev/null || die "pkg-config not found (carry .gpudeps: tests/gpu/fetch_deps.sh)"
missing=""
for m in libturbojpeg libjpeg libzstd libxxhash libpng zlib libwebp libtiff-4; do
  pkg-config --exists "$m" || missing="$missing $m"
done
[ -z "$missing" ] || die "host libraries missing:$missing (run tests/gpu/fetch_deps.sh where apt works and carry .gpudeps)"

# cuDNN: given, system, or python3's nvidia-cudnn wheel (PyTorch's).
if [ -z "${CUDNN_ROOT:-}" ]; then
  for d in /usr /usr/local/cuda; do
    if [ -f "$d/include/cudnn.h" ] || [ -f "$d/include/x86_64-linux-gnu/cudnn.h" ]; then CUDNN_ROOT=$d; break; fi
  done
fi
if [ -z "${CUDNN_ROOT:-}" ]; then
  CUDNN_ROOT=$(python3 -c 'import nvidia.cudnn as m, os; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
[ -n "${CUDNN_ROOT:-}" ] || die "cuDNN not found (no cudnn.h in /usr, /usr/local/cuda, or python3's nvidia.cudnn; set CUDNN_ROOT)"
CUDNN_INC=$(dirname "$(find "$CUDNN_ROOT/include" -maxdepth 2 -name cudnn.h 2>/dev/null | head -1)")
CUDNN_LIB=$(find "$CUDNN_ROOT"/lib* "$CUDNN_ROOT"/lib/x86_64-linux-gnu -maxdepth 1 -name 'libcudnn.so*' 2>/dev/null | sort | head -1)
[ -f "$CUDNN_INC/cudnn.h" ] && [ -n "$CUDNN_LIB" ] || die "cuDNN under $CUDNN_ROOT lacks cudnn.h or libcudnn.so*"
export LD_LIBRARY_PATH=$(dirname "$CUDNN_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CUDNN_VER=$(sed -n 's/^#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) *\([0-9]*\).*/\2/p' "$CUDNN_INC/cudnn_version.h" 2>/dev/null | paste -sd.)
say "- cuDNN ${CUDNN_VER:-?}: $CUDNN_INC, $CUDNN_LIB"
say "- preflight ok ($(elapsed))"

# ---- 2. configure + build -------------------------------------------------------------
echo "== configure + build ($BUILD)"
timeout 120 cmake -S "$ROOT" -B "$BUILD" -DSEEDPIPE_CUDA=ON -DSEEDPIPE_CUDA_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCUDNN_INCLUDE_DIR="$CUDNN_INC" -DCUDNN_LIBRARY="$CUDNN_LIB" "${CMAKE_EXTRA[@]}" \
  > "$WORK/configure.log" 2>&1 || { tail -30 "$WORK/configure.log"; die "cmake configure failed (configure.log in logs.tar.gz)"; }
TARGETS=(seedpipe_cli gpu_test_philox_gpu gpu_test_train_gpu test_nn_shared test_nn)
timeout "${BUILD_TIMEOUT:-360}" cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" \
  > "$WORK/build.log" 2>&1 || { tail -60 "$WORK/build.log" | tee "$RES/build.log.tail"; die "build failed or timed out"; }
say "- built (${TARGETS[*]}) ($(elapsed))"

# ---- 3. GPU tests ---------------------------------------------------------------
echo "== GPU tests"
: > "$RES/gpu_tests.log"
say ""
say "## GPU tests"
for t in gpu_test_philox_gpu gpu_test_train_gpu; do
  echo "-- $t" | tee -a "$RES/gpu_tests.log"
  timeout 300 "$BUILD/tests/gpu/$t" > "$WORK/$t.log" 2>&1
  rc=$?
  cat "$WORK/$t.log" >> "$RES/gpu_tests.log"
  tail -40 "$WORK/$t.log"
  case $rc in
    0) r=PASS ;; 77) r="SKIPPED (no device seen: counts as a failure here)"; status=1 ;;
    124) r="TIMED OUT"; status=1 ;; *) r="FAIL (exit $rc)"; status=1 ;;
  esac
  say "- $t: $r"
  grep -E '^(gpu-summary|FAIL|FATAL)' "$WORK/$t.log" | sed 's/^gpu-summary: /  - /; s/^FAIL/  - FAIL/; s/^FATAL/  - FATAL/' >> "$SUMMARY"
done
say "($(elapsed))"

# ---- 4. benchmark -----------------------------------------------------------------
echo "== training benchmark"
say ""
say "## Training benchmark (bench/train_bench.sh, WORKERS=${WORKERS:-8}, THREADS=${THREADS:-$(nproc)})"
WORKERS=${WORKERS:-8} THREADS=${THREADS:-$(nproc)} PYTHON=${PYTHON:-python3} \
  timeout "${BENCH_TIMEOUT:-240}" "$ROOT/bench/train_bench.sh" "$BUILD" "$WORK/bench" > "$WORK/bench.out" 2>&1
brc=$?
[ -f "$WORK/bench/train_bench.md" ] && cp "$WORK/bench/train_bench.md" "$RES/train_bench.md"
[ $brc -eq 0 ] || say "- benchmark exit $brc$([ $brc -eq 124 ] && echo ' (timed out: BENCH_TIMEOUT)')"
if [ -f "$WORK/bench/train_bench.md" ]; then
  cat "$WORK/bench/train_bench.md" >> "$SUMMARY"
  python3 - "$WORK/bench" >> "$SUMMARY" 2>&1 <<'PY'
import os, re, sys
d = sys.argv[1]
def st(name):
    p = os.path.join(d, name + ".log")
    if not os.path.exists(p): return None
    m = re.search(r"step time ([0-9.]+) ms, data wait ([0-9.]+) ms", open(p).read())
    return (float(m.group(1)), float(m.group(2))) if m else None
rows = {n: st(n) for n in ("cuda-strict-1", "cuda-strict-2", "cuda-fast-1", "cuda-fast-2")}
print("\n### derived (issue 6 targets)\n")
s = [v for k, v in rows.items() if k.startswith("cuda-strict") and v]
f = [v for k, v in rows.items() if k.startswith("cuda-fast") and v]
if s and f:
    ms, mf = min(x[0] for x in s), min(x[0] for x in f)
    print(f"- strict / fast step time: {ms:.3f} / {mf:.3f} ms = {ms / mf:.2f}x (target <= 1.3x)")
for k, v in rows.items():
    if v:
        print(f"- {k}: data wait {v[1]:.3f} ms of {v[0]:.3f} ms step = {100 * v[1] / v[0]:.1f}% "
              "(GPU idle waiting for data; target < 5%)")
if not any(rows.values()):
    print("- no CUDA rows in the benchmark (see logs.tar.gz: bench/*.log)")
PY
else
  say "- no train_bench.md (see bench.out in logs.tar.gz)"; tail -20 "$WORK/bench.out"
fi
say "($(elapsed))"

# ---- 5. CPU tests of the shared arithmetic --------------------------------------------
echo "== CPU sanity"
say ""
say "## CPU sanity"
for t in test_nn_shared test_nn; do
  (cd "$BUILD/tests" && SP_SHARED_DATA="$ROOT/../shared/data" timeout 120 "./$t") > "$WORK/$t.log" 2>&1
  rc=$?
  say "- $t: $([ $rc -eq 0 ] && echo ok || { [ $rc -eq 77 ] && echo skipped || echo "FAIL (exit $rc)"; })"
done

finish "GPU tests $([ $status -eq 0 ] && echo PASS || echo FAIL)"
echo "== results in $RES:"; ls -l "$RES"
cat "$SUMMARY"
exit $status
