#!/usr/bin/env bash
# shard_bench.sh [RUNS] - WebDataset shards against the same images as an
# ImageFolder, on the worker pool (2 workers), whole process, in turn.
#
# Two datasets: the 2,000 photo crops of run_jpeg.sh (500x375 JPEG, ~37 KB
# each; shards of 500), and 20,000 small shapes images (32x32 PNG/JPEG,
# ~1 KB each; shards of 5,000), where opening a file per sample costs the
# most. For each, `seedpipe shard` writes the shards once, then RUNS pairs
# (default 5) of `seedpipe digest --workers 2` run folder, shards, folder,
# shards ...; it prints the median wall time of each, the ratio
# folder/shards (> 1: the shards are faster) and checks that both stream
# the same digest. Both persistent indexes are warm (built by a first run,
# in the index cache folder: the folder's and one per shard), so neither
# open reads a sample.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
[ -x build/seedpipe ] || bash scripts/setup.sh
if [ ! -d /usr/share/backgrounds/mate ]; then
  apt-get update -qq && apt-get install -y -qq mate-backgrounds >/dev/null
fi
out=${OUT:-out}
photos=${PHOTOS:-$out/photos}
[ -d "$photos" ] || build/bench/bench_make_photos "$photos" --count 2000
[ -d "$out/shapes-20k" ] || build/seedpipe make-shapes "$out/shapes-20k" --count 20000 --size 32 >/dev/null
[ -d "$out/photos-shards" ] || build/seedpipe shard "$photos" "$out/photos-shards" --max-count 500 >/dev/null
[ -d "$out/shapes-20k-shards" ] || build/seedpipe shard "$out/shapes-20k" "$out/shapes-20k-shards" --max-count 5000 >/dev/null

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

bench() {  # name folder shards pipeline dtype
  local name=$1 folder=$2 shards=$3 pipe=$4 dtype=$5 tf ts d1 d2
  local args=(--pipeline "$pipe" --dtype "$dtype" --seed 1 --epochs 1 --batch-size 64 --workers 2 --out /dev/null)
  d1=$(build/seedpipe digest "$folder" "${args[@]}" 2>&1 | sed -n 's/.*stream //p')   # warms the index
  d2=$(build/seedpipe digest "$shards" "${args[@]}" 2>&1 | sed -n 's/.*stream //p')
  [ "$d1" = "$d2" ] || { echo "$name: digests differ: $d1 vs $d2"; exit 1; }
  : >/tmp/sp-shard-bench-f; : >/tmp/sp-shard-bench-s
  for _ in $(seq "$runs"); do
    t0=$(now); build/seedpipe digest "$folder" "${args[@]}" >/dev/null 2>&1; t1=$(now)
    build/seedpipe digest "$shards" "${args[@]}" >/dev/null 2>&1; t2=$(now)
    echo "$t1 - $t0" | bc >>/tmp/sp-shard-bench-f
    echo "$t2 - $t1" | bc >>/tmp/sp-shard-bench-s
  done
  tf=$(median </tmp/sp-shard-bench-f); ts=$(median </tmp/sp-shard-bench-s)
  printf '%-12s folder %.3f s  shards %.3f s  folder/shards %.2f  (median of %d, stream %s)\n' \
         "$name" "$tf" "$ts" "$(echo "$tf / $ts" | bc -l)" "$runs" "$d1"
}
bench photos "$photos" "$out/photos-shards" imagenet-train float32
bench shapes-20k "$out/shapes-20k" "$out/shapes-20k-shards" shapes-train uint8
