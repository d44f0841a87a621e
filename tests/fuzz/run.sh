#!/usr/bin/env bash
# run.sh [SECONDS] - build the libFuzzer targets (clang, ASan + UBSan) in
# build-fuzz/ and run each for SECONDS (default 30) of wall time, one after
# the other, on its seed corpus: tests/fuzz/corpus/<name>/ plus, for the
# decoder, ../shared/data/{pngsuite,jpeg-bugs,jpeg-crashtest} (read in
# place, never copied; one that is absent, as in a fresh clone, is named in
# a SKIP line and the decoder fuzzes from the repo's own seeds). New inputs
# go to build-fuzz/corpus/<name>/ (kept between runs), crash reproducers to
# build-fuzz/artifacts/.
# Prints execs, coverage and corpus size per target; exits 1 if any target
# crashed, leaked, timed out or ran out of memory (the reproducer is named).
#
#   FUZZ_TARGETS="state ring" bash tests/fuzz/run.sh 60    # a subset
#   bash tests/fuzz/run.sh 0                               # build only
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
B=build-fuzz
targets=${FUZZ_TARGETS:-"decode pipeline idx list tar dsobject manifest state cache_batch cache_manifest ring trace mix tokens coco"}
shared=${SP_SHARED_DATA:-$(cd .. && pwd)/shared/data}

if [ ! -f $B/CMakeCache.txt ]; then
  cmake -S . -B $B -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSEEDPIPE_FUZZ=ON -DSEEDPIPE_CUDA=OFF >/dev/null || exit 1
fi
cmake --build $B --target fuzz_all -j"${FUZZ_BUILD_JOBS:-2}" >$B/build.log 2>&1 ||
  { tail -30 $B/build.log; echo "fuzz: build failed"; exit 1; }
[ "$secs" = 0 ] && { echo "fuzz: built"; exit 0; }

mkdir -p $B/artifacts $B/logs
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fail=0
printf '%-16s %10s %8s %8s %8s  %s\n' target execs exec/s cov corpus result
for t in $targets; do
  bin=$B/tests/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz: no target $t"; fail=1; continue; }
  mkdir -p $B/corpus/$t
  dirs=($B/corpus/$t tests/fuzz/corpus/$t)
  maxlen=65536
  if [ "$t" = decode ]; then
    maxlen=262144
    for d in pngsuite jpeg-bugs jpeg-crashtest; do
      if [ -d "$shared/$d" ]; then
        dirs+=("$shared/$d")
      else
        echo "SKIP: $shared/$d not found (SP_SHARED_DATA=${SP_SHARED_DATA:-unset};" \
             "the third-party corpora, see README); not run: those seeds for fuzz_decode" \
             "(it starts from tests/fuzz/corpus/decode and build-fuzz/corpus/decode)"
      fi
    done
  fi
  log=$B/logs/$t.log
  "$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=512 -malloc_limit_mb=512 -max_len=$maxlen \
         -print_final_stats=1 -artifact_prefix=$B/artifacts/$t- "${dirs[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corp=$(grep -o 'corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ $rc -eq 0 ]; then res=ok; else
    res="CRASH (rc $rc): $(grep -m1 -E 'ERROR: |SUMMARY: |runtime error' "$log" | cut -c1-120)"
    art=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | cut -d' ' -f5)
    [ -n "$art" ] && res="$res; reproducer $art (log $log)"
    fail=1
  fi
  printf '%-16s %10s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${corp:-?}" "$res"
done
exit $fail
