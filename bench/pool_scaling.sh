#!/usr/bin/env bash
# pool_scaling.sh - worker pool benchmarks (bench/RESULTS.md).
#  1. Scaling, as whole processes (bench/pool_scaling.py): `seedpipe digest`
#     of the photo folder of run_jpeg.sh (imagenet-train, float32 NCHW,
#     batch 64, 2 epochs), 2 workers vs 1 in alternated pairs (median of
#     PAIRS, default 7) with each side's busy cores (CPU seconds / wall);
#     the same on a warm epoch cache; tracing on vs off; the time to the
#     first batch for 1 and 2 workers. Every run must give the same stream.
#  2. Hand-off: batches/s and p50/p99 latency of handing a ready batch to
#     the consumer, trivial pipeline (bench_pool_handoff), 1 and 2 workers.
# BUILD=build-pool PAIRS=7 bash bench/pool_scaling.sh   (default BUILD=build)
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
/usr/bin/python3 bench/pool_scaling.py --build "$build" --photos "$photos" --pairs "${PAIRS:-7}" \
  ${SKIP:+--skip "$SKIP"}
echo
echo "== hand-off: trivial pipeline"
for w in 1 2; do
  "$build/bench/bench_pool_handoff" --workers "$w" --ring 4 --batch 64 --batches "${BATCHES:-4000}"
done
