#!/usr/bin/env bash
# mix_bench.sh [RUNS] - a weighted mixture's images/s against its largest
# source alone, whole processes, alternated pairs (issue 29; target >= 0.97x).
#
# Two cases: the 2,000 photo crops of run_jpeg.sh (500x375 JPEG; pipeline
# imagenet-train, float32) and 20,000 small shapes images (32x32; shapes-
# train, uint8), where the per-sample cost is smallest and any overhead of
# the mixture shows most. Each mixture is the ImageFolder (weight 0.75, its
# largest source) with the same images as WebDataset shards (weight 0.25),
# `length` = the folder's size, so both runs stream the same number of
# images of the same kind; the mixture adds its schedule (a table read and
# a 64-slot count per sample), the source's own permutation and the
# indirection to the source. RUNS pairs (default 5) of `seedpipe digest
# --workers 2`, run folder, mixture, folder, mixture ...: it prints the
# median wall time of each, the ratio folder/mixture of wall times (= the
# mixture's images/s over the folder's; >= 0.97 is the target) and the
# ratio of each pair. Both persistent indexes are warm (a first run of each
# builds them), so no open reads a sample. The output goes to
# bench/RESULTS.md by hand, with this command line.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
[ -x build/seedpipe ] || bash scripts/setup.sh
out=${OUT:-out}
photos=${PHOTOS:-$out/photos}
[ -d "$photos" ] || build/bench/bench_make_photos "$photos" --count 2000
[ -d "$out/shapes-20k" ] || build/seedpipe make-shapes "$out/shapes-20k" --count 20000 --size 32 >/dev/null
[ -d "$out/photos-shards" ] || build/seedpipe shard "$photos" "$out/photos-shards" --max-count 500 >/dev/null
[ -d "$out/shapes-20k-shards" ] || build/seedpipe shard "$out/shapes-20k" "$out/shapes-20k-shards" --max-count 5000 >/dev/null
mkmix() {  # out.mix folder shards length
  printf 'length\t%s\n0.75\t%s\n0.25\t%s\n' "$4" "$(realpath "$2")" "$(realpath "$3")" >"$1"
}
mkmix "$out/photos.mix" "$photos" "$out/photos-shards" 2000
mkmix "$out/shapes-20k.mix" "$out/shapes-20k" "$out/shapes-20k-shards" 20000

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

bench() {  # name folder mix pipeline dtype
  local name=$1 folder=$2 mix=$3 pipe=$4 dtype=$5 tf tm pairs=""
  local args=(--pipeline "$pipe" --dtype "$dtype" --seed 1 --epochs 1 --batch-size 64 --workers 2 --out /dev/null)
  build/seedpipe digest "$folder" "${args[@]}" >/dev/null 2>&1   # warms the indexes
  build/seedpipe digest "$mix" "${args[@]}" >/dev/null 2>&1
  : >/tmp/sp-mix-bench-f; : >/tmp/sp-mix-bench-m
  for _ in $(seq "$runs"); do
    t0=$(now); build/seedpipe digest "$folder" "${args[@]}" >/dev/null 2>&1; t1=$(now)
    build/seedpipe digest "$mix" "${args[@]}" >/dev/null 2>&1; t2=$(now)
    echo "$t1 - $t0" | bc >>/tmp/sp-mix-bench-f
    echo "$t2 - $t1" | bc >>/tmp/sp-mix-bench-m
    pairs="$pairs $(printf '%.3f' "$(echo "($t1 - $t0) / ($t2 - $t1)" | bc -l)")"
  done
  tf=$(median </tmp/sp-mix-bench-f); tm=$(median </tmp/sp-mix-bench-m)
  printf '%-11s folder %.3f s  mixture %.3f s  mixture/folder images/s %.3f  (median of %d; pairs:%s)\n' \
         "$name" "$tf" "$tm" "$(echo "$tf / $tm" | bc -l)" "$runs" "$pairs"
  rm -f /tmp/sp-mix-bench-f /tmp/sp-mix-bench-m
}
bench photos "$photos" "$out/photos.mix" imagenet-train float32
bench shapes-20k "$out/shapes-20k" "$out/shapes-20k.mix" shapes-train uint8
