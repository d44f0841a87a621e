#!/usr/bin/env bash
# test.sh - set up, build, and run every test: the ctest suite (C tests,
# Python reference tests, GPU tests that skip without a device), the C
# cases again under another MALLOC_PERTURB_, Valgrind memcheck over a
# matrix of pipelines (tests/valgrind.sh), then the whole C suite again under AddressSanitizer + UndefinedBehaviorSanitizer,
# the multi-threaded tests under ThreadSanitizer, each fuzz target briefly
# (libFuzzer with clang), and the builds users make: clang Release, gcc
# Release against a newer xxHash header, cmake --install with an outside
# program, and the Python wheel in a bare venv. Warnings are errors in
# every build here (SEEDPIPE_WERROR=ON; users' builds leave it off).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
stage() { echo; echo "== [${SECONDS}s] $* =="; }

bash scripts/setup.sh -DSEEDPIPE_WERROR=ON -DSEEDPIPE_TEST_HOOKS=ON
ctest --test-dir build --output-on-failure -j2

stage "the C suite again with MALLOC_PERTURB_=165 (glibc fills malloc'd and freed memory)"
# No test, digest or comparison may depend on what memory held: run under
# another fill byte, every C case must pass again (tests/test_malloc_perturb.py
# compares the manifests of a pipeline matrix across fill bytes directly).
MALLOC_PERTURB_=165 ctest --test-dir build --output-on-failure -j2 -R '^test_'

stage "Valgrind memcheck: a matrix of pipelines and dtypes, no uninitialised byte"
bash tests/valgrind.sh build

stage "the same suite under AddressSanitizer + UndefinedBehaviorSanitizer"
# (MPI off: OpenMPI's own allocations would be leak reports; this build's
# tool shows the refusals of a build without MPI instead)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSEEDPIPE_SANITIZE=ON \
      -DSEEDPIPE_CUDA=OFF -DSEEDPIPE_MPI=OFF -DSEEDPIPE_WERROR=ON -DSEEDPIPE_TEST_HOOKS=ON -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build-asan -j"$(nproc)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j2

stage "ThreadSanitizer: the multi-threaded tests"
bash tests/tsan.sh
stage "fuzz targets, 10 s each (longer runs: docs/fuzzing.md)"
bash tests/fuzz/run.sh 10

stage "clang, Release, warnings are errors (everything: library, tool, tests, benches)"
cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release \
      -DSEEDPIPE_WERROR=ON -DSEEDPIPE_CUDA=OFF -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build-clang -j"$(nproc)" >build-clang/build.log 2>&1 \
  || { tail -40 build-clang/build.log; exit 1; }
echo "clang Release build: OK"

stage "gcc, Release, against the newer xxHash header of Debian 13 / Ubuntu 24.04"
bash tests/xxhash_newer.sh

stage "cmake --install and an outside program (pkg-config, find_package, add_subdirectory)"
bash tests/install/run.sh build

stage "the Python wheel: sdist, wheel, auditwheel repair, a bare venv"
bash tests/wheel.sh build/seedpipe
stage "all tests done"
