#!/usr/bin/env bash
# bench/ab_tool.sh REV [BUILD] - this tree's tool against the tool of git
# revision REV (e.g. the commit before a refactor), on the same photos with
# the same commands: the in-process loader (1 thread) and the worker pool
# (2 workers), the JPEG pipeline of bench/pool_scaling.sh.
#
# The two tools run in turn (new, old, new, old, ...) so that the machine's
# drift hits both; each pair gives a wall-clock ratio new/old, and the
# median of PAIRS (default 7) pairs is the figure (min and max show the
# spread). The stream digests of both tools must agree, or it fails.
#
# Each tool keeps its dataset index in a cache folder of its own
# (ab-index-new/ in BUILD, ab-index/ in build-ab-REV/): index versions
# differ between revisions, and one shared folder would have each tool
# rebuild the other's index at every run.
#
# REV's tool is built by bench/ab_old_tool.sh in build-ab-REV/ (git archive, RelWithDebInfo, no
# CUDA, no MPI, no tests); OLD_TOOL=path skips that build. BUILD (default
# build) holds this tree's tool. Photos: out/photos (bench_make_photos, 2000
# images), made if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/ab_tool.sh REV [BUILD]}
build=${2:-build}
pairs=${PAIRS:-7}
new="$build/seedpipe"
[ -x "$new" ] || { echo "ab_tool: $new not built" >&2; exit 1; }
old=$(bash bench/ab_old_tool.sh "$rev")   # built once, in build-ab-REV/
photos=${PHOTOS:-out/photos}
if [ ! -d "$photos" ]; then
  if [ ! -d /usr/share/backgrounds/mate ]; then
    apt-get update -qq && apt-get install -y -qq mate-backgrounds >/dev/null
  fi
  "$build/bench/bench_make_photos" "$photos" --count 2000
fi
newenv=(env "SEEDPIPE_CACHE=$PWD/$build/ab-index-new")
oldenv=(env "SEEDPIPE_CACHE=$(cd "$(dirname "$old")" && pwd)/ab-index")
common=(--pipeline imagenet-train --dtype float32 --seed 1 --epochs 1 --batch-size 64 --out /dev/null)

# "SECONDS DIGEST" of one run: wall seconds and the printed stream digest
run() {
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$@" 2>&1) || { echo "$out" >&2; return 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1 $(grep -oE 'stream [0-9a-f]{32}' <<<"$out" | tail -1 | cut -d' ' -f2)" |
    awk '{printf "%.4f %s\n", $2 - $1, $3}'
}

echo "== this tree ($new) vs $rev ($old): $pairs pairs, $(nproc) cores"
for mode in "--threads 1" "--workers 2 --ring 4"; do
  # shellcheck disable=SC2086
  run "${newenv[@]}" "$new" digest "$photos" "${common[@]}" $mode >/dev/null   # warm the page cache
  # shellcheck disable=SC2086
  run "${oldenv[@]}" "$old" digest "$photos" "${common[@]}" $mode >/dev/null   # and each index
  ratios=()
  for _ in $(seq "$pairs"); do
    # shellcheck disable=SC2086
    read -r a da < <(run "${newenv[@]}" "$new" digest "$photos" "${common[@]}" $mode)
    # shellcheck disable=SC2086
    read -r b db < <(run "${oldenv[@]}" "$old" digest "$photos" "${common[@]}" $mode)
    [ -n "$da" ] && [ "$da" = "$db" ] || { echo "ab_tool: the streams differ: '$da' vs '$db'" >&2; exit 1; }
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", a / b}')")
  done
  sorted=$(printf '%s\n' "${ratios[@]}" | sort -n)
  echo "$mode: new/old wall median $(sed -n "$(( (pairs + 1) / 2 ))p" <<<"$sorted")" \
       "(min $(head -1 <<<"$sorted"), max $(tail -1 <<<"$sorted")); both stream $da"
done
