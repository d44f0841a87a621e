#!/usr/bin/env bash
# valgrind.sh - Valgrind memcheck over a small matrix of pipelines and
# output types: no batch byte may come from memory that was never written.
#
#   bash tests/valgrind.sh [BUILD_DIR]      (default build; needs Debian's valgrind)
#
# Each run is `seedpipe digest` in-process (1 and 2 threads) on a shapes
# dataset of PNG and JPEG files; memcheck follows every uninitialised byte
# into the batch digest and the manifest, so a sample the pipeline did not
# write whole (the center_crop n+1 bug served such bytes) is an error here
# (exit 99), as is any invalid read or write. ASan/UBSan (scripts/test.sh)
# do not see uninitialised reads; this does.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin="$build/seedpipe"
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed (apt-get install valgrind)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" make-shapes "$tmp/shapes" --count 12 --size 24 >/dev/null

norm="normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225"
runs=(
  "center_crop size=25;uint8;nchw;1"
  "center_crop size=25,24;uint8;nhwc;2"
  "center_crop size=30,17;float32;nchw;1"
  "resize size=20 | center_crop size=21,19;uint8;nchw;1"
  "random_resized_crop size=16 | hflip | color_jitter brightness=0.4 contrast=0.4 saturation=0.4 | $norm;float32;nhwc;2"
  "imagenet-eval;bfloat16;nchw;1"
  "decode mode=gray | resize size=13 | center_crop size=14 | vflip;float16;nchw;1"
  "decode dct=auto | random_resized_crop size=8 | grayscale p=0.5 | $norm;float32;nchw;1"
)
n=0
for r in "${runs[@]}"; do
  IFS=';' read -r spec dtype layout threads <<<"$r"
  valgrind -q --error-exitcode=99 --track-origins=yes \
    "$bin" digest "$tmp/shapes" --pipeline "$spec" --dtype "$dtype" --layout "$layout" \
    --threads "$threads" --seed 3 --epochs 1 --batch-size 5 --out "$tmp/m.jsonl" >/dev/null
  n=$((n + 1))
  echo "memcheck clean: $spec ($dtype, $layout, $threads thread(s))"
done
# A token corpus (docs/tokens.md): every integer of a window written, in
# both packings (docs: the padding and repeated cu_seqlens too).
/usr/bin/python3 - "$tmp/corpus" <<'PY'
import random, struct, sys
random.seed(4)
docs = [[random.randrange(1, 60000) for _ in range(random.choice([0, 1, 3, 7, 9, 20, 41]))]
        for _ in range(40)]
lens = [len(d) for d in docs]
with open(sys.argv[1] + ".bin", "wb") as f:
    for d in docs:
        f.write(struct.pack("<%dH" % len(d), *d))
ptrs, off = [], 0
for n in lens:
    ptrs.append(off)
    off += 2 * n
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
    f.write(struct.pack("<%di" % len(lens), *lens) + struct.pack("<%dq" % len(ptrs), *ptrs))
    f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
PY
for r in "concat;int32;1;--eod 65535" "docs;int32;2;" "docs;int64;1;--pad 9"; do
  IFS=';' read -r packing dtype threads extra <<<"$r"
  # shellcheck disable=SC2086
  valgrind -q --error-exitcode=99 --track-origins=yes \
    "$bin" digest "$tmp/corpus" --seq-len 8 --packing "$packing" --dtype "$dtype" $extra \
    --threads "$threads" --seed 3 --epochs 2 --batch-size 5 --out "$tmp/m.jsonl" >/dev/null
  n=$((n + 1))
  echo "memcheck clean: tokens $packing ($dtype, $threads thread(s))"
done
echo "valgrind: $n passed, 0 failed"
