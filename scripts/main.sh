#!/usr/bin/env bash
# main.sh - the main job on the built-in dataset: set up and build, make the
# shapes dataset, summarise it, write a digest manifest of two epochs (with 1
# and 2 threads, which must agree) and a picture of one augmented batch.
# Then it serves the stream from worker processes over shared memory to the
# example trainer (examples/trainer.c), proves the guarantee with `verify`
# across worker counts (with a worker killed, a stop/resume, the service to
# one client and to 2 ranks), streams through the epoch cache cold and warm,
# and shows the contrast: the classic
# per-worker seeding diverges; last, trains the small CNN on the stream with
# 1 and 3 loader workers and checks the final weights are identical.
# Everything lands in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
sp=build/seedpipe
mkdir -p out
$sp make-shapes out/shapes --count 1000 --size 64 --seed 1
$sp inspect out/shapes
common=(--pipeline shapes-train --seed 42 --epochs 2 --batch-size 64)
$sp digest out/shapes "${common[@]}" --threads 1 --out out/shapes-digest.jsonl
$sp digest out/shapes "${common[@]}" --threads 2 --out out/shapes-digest-t2.jsonl
if cmp -s out/shapes-digest.jsonl out/shapes-digest-t2.jsonl; then
  echo "main: manifests for --threads 1 and --threads 2 are identical"
else
  echo "main: MANIFESTS DIFFER between thread counts" >&2; exit 1
fi
$sp dump out/shapes --pipeline shapes-train --seed 42 --epoch 0 --batch 0 \
    --batch-size 64 --out out/shapes-batch0.png
# The service: 3 worker processes behind a named shared-memory region; the
# example C trainer attaches and consumes the stream without copies. Its
# stream digest must equal the in-process one.
name="seedpipe-main-$$"
$sp serve --name "$name" out/shapes "${common[@]}" --workers 3 > out/serve.log 2>&1 &
svc=$!
trap 'kill $svc 2>/dev/null || true' EXIT
until grep -q '^ready' out/serve.log; do
  kill -0 "$svc" 2>/dev/null || { cat out/serve.log; exit 1; }
  sleep 0.05
done
head -n 1 out/serve.log
$sp status "$name"
build/example_trainer --name "$name" | tee out/trainer.log
wait "$svc"
trap - EXIT
tail -n 1 out/serve.log
want=$($sp digest out/shapes "${common[@]}" --out /dev/null 2>&1 | grep -oE 'stream [0-9a-f]{32}' | cut -d' ' -f2)
got=$(grep -oE 'stream digest: [0-9a-f]{32}' out/trainer.log | cut -d' ' -f3)
if [ -n "$got" ] && [ "$want" = "$got" ]; then
  echo "main: the trainer's stream over shared memory equals the in-process stream ($got)"
else
  echo "main: TRAINER STREAM DIFFERS ($got vs $want)" >&2; exit 1
fi
$sp digest out/shapes "${common[@]}" --workers 2 --out out/shapes-digest-w2.jsonl
$sp diff out/shapes-digest.jsonl out/shapes-digest-w2.jsonl
$sp verify out/shapes --pipeline shapes-train --seed 42 --epochs 2 --batch-size 64 \
    --workers 1,2,3,4
# The epoch cache: the first run computes and stores each epoch (the
# workers compress and write), the second reads them back; both manifests
# equal the uncached one.
rm -rf out/cache
for pass in cold warm; do
  $sp digest out/shapes "${common[@]}" --workers 2 --cache out/cache \
      --out out/shapes-digest-cache-$pass.jsonl | tail -n 2
  $sp diff out/shapes-digest.jsonl out/shapes-digest-cache-$pass.jsonl >/dev/null || {
    echo "main: THE CACHED STREAM DIFFERS ($pass)" >&2; exit 1; }
done
echo "main: cold and warm cached streams equal the uncached one"
echo "main: the classic per-worker seeding, for contrast (expected to diverge):"
if $sp verify out/shapes --pipeline shapes-train --seed 42 --epochs 1 --batch-size 64 \
    --workers 1,2 --rng-mode per-worker --no-crash --no-resume; then
  echo "main: per-worker mode did not diverge?" >&2; exit 1
fi
# A short training run of the deterministic CPU reference CNN on batches
# from the worker pool (shared memory), with 1 and with 3 workers: the
# final-weights digests must be equal.
tp="random_resized_crop size=32 scale=0.5,1 | hflip p=0.5 | normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25"
for w in 1 3; do
  $sp train out/shapes --pipeline "$tp" --dtype float32 --seed 7 --epochs 3 --batch-size 32 \
      --workers $w --threads 2 --out out/train-w$w.json | tee out/train-w$w.log
done
d1=$(grep -oE 'final weights digest [0-9a-f]{32}' out/train-w1.log)
d3=$(grep -oE 'final weights digest [0-9a-f]{32}' out/train-w3.log)
if [ -n "$d1" ] && [ "$d1" = "$d3" ]; then
  echo "main: training on 1 and 3 loader workers gives the same weights (${d1##* })"
else
  echo "main: TRAINED WEIGHTS DIFFER between worker counts ($d1 / $d3)" >&2; exit 1
fi
echo "main: done; see out/shapes-digest.jsonl, out/shapes-batch0.png and out/train-w1.json"
