#!/usr/bin/env bash
# test.sh - set up, build, and run every test: the ctest suite (C tests,
# Python reference tests, GPU tests that skip without a device), then the
# whole C suite again under AddressSanitizer + UndefinedBehaviorSanitizer,
# the multi-threaded tests under ThreadSanitizer, and each fuzz target
# briefly (libFuzzer with clang).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh -DSEEDPIPE_WERROR=ON
ctest --test-dir build --output-on-failure -j2

echo "== the same suite under AddressSanitizer + UndefinedBehaviorSanitizer =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSEEDPIPE_SANITIZE=ON \
      -DSEEDPIPE_CUDA=OFF -DSEEDPIPE_WERROR=ON -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build-asan -j"$(nproc)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j2

echo "== ThreadSanitizer: the multi-threaded tests =="
bash tests/tsan.sh
echo "== fuzz targets, 10 s each (longer runs: docs/fuzzing.md) =="
bash tests/fuzz/run.sh 10
