#!/usr/bin/env bash
# tsan.sh - the multi-threaded C tests under ThreadSanitizer (build-tsan/).
# Threads are TSan's business; the shared-memory protocol between forked
# processes is not (TSan cannot see another process's accesses): the pool
# and service tests still run here for their threaded parts.
# Exits non-zero on any report (halt_on_error) or test failure.
#
#   bash tests/tsan.sh                 # the default set
#   TSAN_TESTS="test_loader" bash tests/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# test_train (loader threads 2 x CPU threads 2) takes ~6 min under TSan: add it by hand.
tests=${TSAN_TESTS:-"test_loader test_api test_cache test_pool test_nn test_train_dist test_service test_dataset_index test_stream test_trace"}
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEEDPIPE_CUDA=OFF -DSEEDPIPE_MPI=OFF -DSEEDPIPE_TEST_HOOKS=ON \
      -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -g" \
      -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
      -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >/dev/null
# shellcheck disable=SC2086
cmake --build build-tsan -j"${TSAN_BUILD_JOBS:-2}" --target seedpipe_cli $tests
regex="^($(echo $tests | tr ' ' '|'))(\\..*)?\$"   # the file's test, or its cases
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  ctest --test-dir build-tsan --output-on-failure -j"${TSAN_JOBS:-1}" -R "$regex"
