#!/usr/bin/env bash
# run_jpeg.sh - the decode + augment benchmark of bench/README.md.
# Makes (once) a JPEG ImageFolder of 2,000 photo crops (500x375, q90) from
# Debian's mate-backgrounds, then runs bench_decode_pipeline: images/s of
# decode + random_resized_crop 224 + hflip + normalize (float32 NCHW, batch
# 64, one thread) next to raw TurboJPEG full decode, in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d /usr/share/backgrounds/mate ]; then
  apt-get update -qq && apt-get install -y -qq mate-backgrounds >/dev/null
fi
[ -x build/bench/bench_decode_pipeline ] || bash scripts/setup.sh
photos=${PHOTOS:-out/photos}
[ -d "$photos" ] || build/bench/bench_make_photos "$photos" --count 2000
build/bench/bench_decode_pipeline "$photos" --seconds "${SECONDS_PER_RUN:-6}"
echo "-- full loader path (read + hash check + pipeline + digest), seedpipe digest, 1 thread:"
build/seedpipe digest "$photos" --pipeline imagenet-train --dtype float32 --seed 1 \
   --epochs 1 --batch-size 64 --threads 1 --out /dev/null
