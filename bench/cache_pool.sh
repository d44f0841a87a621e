#!/usr/bin/env bash
# cache_pool.sh - the epoch cache on the worker pool: an epoch computed by W
# workers vs the same epoch filled into the cache (cold) and read from it
# (warm) by the same W workers, in one run, interleaved, best of ROUNDS.
#
#   bench/cache_pool.sh [BUILD_DIR] [DATASET]
#
# Every pass is `seedpipe digest --workers W --out /dev/null` (the consumer
# hashes every batch in all three, so the peer is the same); each pass's
# stream digest must equal the computed one or the script fails. DATASET
# defaults to out/photos (bench/README.md: bench_make_photos) or, if that is
# missing, a generated shapes set. Knobs: WORKERS (default: nproc), ROUNDS
# (3), PIPELINE (imagenet-train), DTYPE (float32), BATCH (64). Prints a
# markdown table.
set -euo pipefail
BUILD=${1:-build}
SP="$BUILD/seedpipe"
DS=${2:-out/photos}
WORKERS=${WORKERS:-$(nproc)}; ROUNDS=${ROUNDS:-3}
PIPELINE=${PIPELINE:-imagenet-train}; DTYPE=${DTYPE:-float32}; BATCH=${BATCH:-64}
TMP=$(mktemp -d /tmp/sp-cache-pool.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if [ ! -d "$DS" ]; then
  DS="$TMP/shapes"
  "$SP" make-shapes "$DS" --count 4096 --size 96 --seed 1 >/dev/null
  [ "$PIPELINE" = imagenet-train ] && PIPELINE="random_resized_crop size=64 | hflip p=0.5 | normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25"
fi
common=(digest "$DS" --pipeline "$PIPELINE" --dtype "$DTYPE" --seed 1 --batch-size "$BATCH"
        --epochs 1 --workers "$WORKERS" --out /dev/null)

# pass NAME [args...]: prints "seconds stream-digest" of one pass
pass() {
  shift
  local out
  out=$("$SP" "${common[@]}" "$@" 2>&1)
  echo "$out" | sed -n 's/^digest: .* in \([0-9.]*\) s (.*stream \([0-9a-f]*\)$/\1 \2/p'
}

best() { printf '%s\n' "$@" | sort -g | head -1; }
comp=(); cold=(); warm=(); want=""
for r in $(seq "$ROUNDS"); do
  read -r t d < <(pass computed); comp+=("$t"); want=${want:-$d}
  [ "$d" = "$want" ] || { echo "computed pass changed the stream ($d vs $want)"; exit 1; }
  rm -rf "$TMP/cache"
  read -r t d < <(pass cold --cache "$TMP/cache"); cold+=("$t")
  [ "$d" = "$want" ] || { echo "cold pass changed the stream ($d vs $want)"; exit 1; }
  read -r t d < <(pass warm --cache "$TMP/cache"); warm+=("$t")
  [ "$d" = "$want" ] || { echo "warm pass changed the stream ($d vs $want)"; exit 1; }
done
C=$(best "${comp[@]}"); F=$(best "${cold[@]}"); W=$(best "${warm[@]}")
stored=$(du -sm "$TMP/cache" | cut -f1)
echo "# cache_pool: $(basename "$DS"), $PIPELINE, $DTYPE, batch $BATCH, $WORKERS workers, best of $ROUNDS ($(nproc) cores)"
echo
echo "| pass | seconds | vs computed |"
echo "|---|---|---|"
echo "| computed (no cache) | $C | 1.00x |"
echo "| cold (compute + fill) | $F | $(awk "BEGIN{printf \"%.2f\", $F / $C}")x the time |"
echo "| warm (read) | $W | **$(awk "BEGIN{printf \"%.2f\", $C / $W}")x faster** |"
echo
echo "entry on disk: ${stored} MB; every pass's stream digest equal ($want)"
