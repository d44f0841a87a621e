#!/usr/bin/env bash
# main.sh - the main job on the built-in dataset: set up and build, make the
# shapes dataset, summarise it, write a digest manifest of two epochs (with 1
# and 2 threads, which must agree) and a picture of one augmented batch.
# Then it proves the guarantee with `verify` across worker counts (with a
# worker killed and a stop/resume), and shows the contrast: the classic
# per-worker seeding diverges. Everything lands in out/.
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
$sp digest out/shapes "${common[@]}" --workers 2 --out out/shapes-digest-w2.jsonl
$sp diff out/shapes-digest.jsonl out/shapes-digest-w2.jsonl
$sp verify out/shapes --pipeline shapes-train --seed 42 --epochs 2 --batch-size 64 \
    --workers 1,2,3,4
echo "main: the classic per-worker seeding, for contrast (expected to diverge):"
if $sp verify out/shapes --pipeline shapes-train --seed 42 --epochs 1 --batch-size 64 \
    --workers 1,2 --rng-mode per-worker --no-crash --no-resume; then
  echo "main: per-worker mode did not diverge?" >&2; exit 1
fi
echo "main: done; see out/shapes-digest.jsonl and out/shapes-batch0.png"
