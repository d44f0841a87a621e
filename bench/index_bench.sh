#!/usr/bin/env bash
# bench/index_bench.sh [N] [WORKDIR] - the persistent dataset index at scale
# (dataset/dataset_index.c). Makes an ImageFolder of N small files (default
# 1,280,000: ImageNet-1k's count, 1000 classes, 200-300 bytes each, so it
# fits any disk; random bytes, so the index's decode check never decodes
# one: only JPEGs are decoded, once, when hashed) and a list file naming the same
# files, then times with the tool, each through /usr/bin/time:
#   full    SEEDPIPE_INDEX=off: every file read and hashed (what every open
#           cost before the index; the peer of the same run)
#   build   --rebuild: hash every file in threads and write the index
#   reopen  stat every file, trust the index, read no sample file
# and prints wall time, peak RSS during the open, and the resident memory
# per sample the open dataset keeps (VmRSS after the open, minus the tool's
# own, divided by N; the peak also holds the walk's and the index's
# temporary buffers). The files were just written, so they
# are in the page cache: "full" and "build" are hashing speed from memory,
# not the disk's. Work files in WORKDIR (default /tmp/sp-index-bench; about
# 5 GB of 4 KiB blocks for 1.28 M files), removed at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-1280000}
W=${2:-/tmp/sp-index-bench}
export SEEDPIPE_CACHE="$W/index-cache"   # the indexes (dataset_cache_dir.c), removed with W
S=$ROOT/build/seedpipe
[ -x "$S" ] || { echo "build first: $S"; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }
rm -rf "$W"; mkdir -p "$W"
trap 'rm -rf "$W"' EXIT

echo "== making $N files in $W/ds (1000 classes) and $W/list.txt"
python3 - "$W" "$N" <<'PY'
import os, random, sys
w, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
classes = 1000
with open(os.path.join(w, "list.txt"), "w") as lst:
    for c in range(classes):
        d = os.path.join(w, "ds", f"n{c:08d}")
        os.makedirs(d)
        for i in range(c, n, classes):
            name = f"{i:08d}.jpg"
            fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, rng.randbytes(200 + rng.randrange(100)))
            os.close(fd)
            lst.write(f"ds/n{c:08d}/{name}\t{c}\n")
PY
sync; sleep 3   # written back, and older than the index's racy window

run() {  # LABEL ENV... -- ARGS
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local out
  out=$( { env "${envs[@]}" /usr/bin/time -f "TIME %e %M" "$S" "$@" >"$W/out.txt"; } 2>&1 )
  local t m
  read -r _ t m <<<"$(grep '^TIME' <<<"$out")"
  local fp reused hashed res
  fp=$(sed -n 's/^fingerprint: *//p' "$W/out.txt")
  res=$(sed -n 's/^resident: *\([0-9]*\) kB/\1/p' "$W/out.txt")
  reused=$(sed -n 's/^reused: *\([0-9]*\).*/\1/p' "$W/out.txt")
  hashed=$(sed -n 's/^hashed: *\([0-9]*\).*/\1/p' "$W/out.txt")
  printf '%-20s %7.2f s  peak RSS %7.1f MB  kept %6.1f B/sample  reused %s hashed %s  %s\n' \
    "$label" "$t" "$(echo "$m / 1024" | bc -l)" "$(echo "($res - $BASE) * 1024 / $N" | bc -l)" \
    "${reused:--}" "${hashed:--}" "$fp"
}
BASE=$( { /usr/bin/time -f "%M" "$S" help >/dev/null; } 2>&1 | tail -1 )
echo "== the tool alone: ${BASE} KB; $(nproc) CPUs"
for ds in "$W/ds" "$W/list.txt"; do
  echo "== $(basename "$ds")"
  run "full (no index)" SEEDPIPE_INDEX=off -- index "$ds"
  run "build (--rebuild)" A=1 -- index "$ds" --rebuild
  run "reopen" A=1 -- index "$ds"
  run "reopen again" A=1 -- index "$ds"
done
ls -la "$SEEDPIPE_CACHE"/folder-* "$SEEDPIPE_CACHE"/list-* | awk '{print "index", $NF, $5, "bytes"}'
