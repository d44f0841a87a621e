#!/usr/bin/env bash
# pool_scaling.sh - worker pool benchmarks (bench/RESULTS.md).
#  1. Scaling: images/s of the JPEG pipeline (imagenet-train, float32 NCHW,
#     batch 64) on the photo folder of run_jpeg.sh, in-process (1 thread)
#     and on the pool with 1 and 2 workers, one epoch each, manifests to
#     /dev/null; the stream digests printed must all be equal.
#  2. Hand-off: batches/s and p50/p99 latency of handing a ready batch to
#     the consumer, trivial pipeline (bench_pool_handoff), 1 and 2 workers.
# BUILD=build-pool bash bench/pool_scaling.sh   (default BUILD=build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
photos=${PHOTOS:-out/photos}
if [ ! -d "$photos" ]; then
  if [ ! -d /usr/share/backgrounds/mate ]; then
    apt-get update -qq && apt-get install -y -qq mate-backgrounds >/dev/null
  fi
  "$build/bench/bench_make_photos" "$photos" --count 2000
fi
common=(--pipeline imagenet-train --dtype float32 --seed 1 --epochs 1 --batch-size 64 --out /dev/null)
echo "== scaling: JPEG pipeline on $photos ($(nproc) cores)"
echo "-- in-process, 1 thread:"
"$build/seedpipe" digest "$photos" "${common[@]}" --threads 1
for w in 1 2; do
  echo "-- pool, $w worker(s):"
  "$build/seedpipe" digest "$photos" "${common[@]}" --workers "$w" --ring 4
done
echo
echo "== hand-off: trivial pipeline"
for w in 1 2; do
  "$build/bench/bench_pool_handoff" --workers "$w" --ring 4 --batch 64 --batches "${BATCHES:-4000}"
done
