#!/usr/bin/env bash
# tests/ab_outputs.sh REV [BUILD] - every file the tool writes, byte for
# byte, from this tree's tool and from the tool of git revision REV (the
# commit before a refactor that must change no output). Run by hand around
# such a change (it needs a second build, so it is not a ctest case); it
# fails naming the first file that differs.
#
# Compared, each made by both tools from the same inputs in their own
# folders: the built-in shapes dataset (every PNG), the persistent index
# (of one copy of the images: in the index cache folder, SEEDPIPE_CACHE,
# or DATASET/.seedpipe-index from a tool older than the cache folder), the
# WebDataset shards (not their per-shard index files, whose place changed
# with the cache folder) and the dataset index object,
# the digest manifests of the shapes and of the shards (in-process, 3 worker
# processes, a stop and resume at another worker count, a mixture), the
# saved resume state, the epoch cache's files and manifest (cold), the
# warm run's manifest, `order`, `explain` and `inspect` output, and the
# run record of a short CPU training. Paths the output names (the folders)
# are made the same by running both tools in folders of the same name.
#
# REV's tool is built by bench/ab_old_tool.sh in build-ab-REV/ (git archive, no CUDA, no MPI, no
# tests), as bench/ab_tool.sh does; OLD_TOOL=path skips that build.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: tests/ab_outputs.sh REV [BUILD]}
build=${2:-build}
new="$(pwd)/$build/seedpipe"
[ -x "$new" ] || { echo "ab_outputs: $new not built" >&2; exit 1; }
old=$(bash bench/ab_old_tool.sh "$rev")   # built once, in build-ab-REV/

work=$(mktemp -d /tmp/ab_outputs.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
pipe='random_resized_crop size=36 scale=0.3,1 | hflip p=0.5 | color_jitter brightness=0.4 contrast=0.4 saturation=0.4 | normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225'

# run TOOL SIDE: every output of one tool under $work/SIDE (made in $work/x,
# the same absolute path for both sides, then renamed). Both read the same
# input folder, $work/in (the index keeps each file's stat, so it is
# compared on one copy of the images), with no index left there between.
run() {
  local tool=$1 side=$2 x="$work/x" in="$work/in"
  rm -rf "$x" "$work/idx" "$in/shapes/.seedpipe-index" && mkdir -p "$x"
  (
    cd "$x"
    export SEEDPIPE_CACHE="$work/idx"
    "$tool" make-shapes made --count 300 --size 40 --seed 7 >log.make 2>&1
    "$tool" index "$in/shapes" >log.index 2>&1
    if [ -f "$in/shapes/.seedpipe-index" ]; then mv "$in/shapes/.seedpipe-index" index.bin
    else mv "$work"/idx/folder-* index.bin; fi
    "$tool" shard "$in/shapes" shards --max-count 64 >log.shard 2>&1
    printf '2\t%s\n1\tshards\nlength\t400\n' "$in/shapes" >mix.mix
    "$tool" inspect "$in/shapes" >inspect.txt 2>&1
    "$tool" inspect mix.mix >inspect_mix.txt 2>&1
    "$tool" order "$in/shapes" --seed 5 --epoch 1 >order.txt 2>&1
    "$tool" explain "$in/shapes" --pipeline "$pipe" --seed 5 --epoch 1 --sample 17 \
      >explain.txt 2>&1
    local s="$in/shapes" d=(--pipeline "$pipe" --dtype float32 --seed 5 --batch-size 32 --epochs 2)
    "$tool" digest "$s" "${d[@]}" --out m_inproc.jsonl >/dev/null
    "$tool" digest "$s" "${d[@]}" --workers 3 --out m_pool.jsonl >/dev/null
    "$tool" digest shards "${d[@]}" --workers 2 --out m_shards.jsonl >/dev/null
    "$tool" digest mix.mix "${d[@]}" --out m_mix.jsonl >/dev/null
    "$tool" digest "$s" "${d[@]}" --workers 2 --stop-after 5 --save-state state.json \
      --out m_part.jsonl >/dev/null
    "$tool" digest "$s" "${d[@]}" --workers 3 --resume state.json --out m_rest.jsonl >/dev/null
    "$tool" digest "$s" "${d[@]}" --workers 2 --cache cache --out m_cold.jsonl >/dev/null
    "$tool" digest "$s" "${d[@]}" --workers 2 --cache cache --out m_warm.jsonl >/dev/null
    "$tool" train "$s" --seed 3 --batch-size 16 --epochs 1 --out record.json >log.train 2>&1
    rm -f "$s/.seedpipe-index" shards/.*.seedpipe-index
  )
  rm -rf "$work/idx"
  mv "$x" "$work/$side"
}
"$new" make-shapes "$work/in/shapes" --count 300 --size 40 --seed 7 >/dev/null
# The index marks a file changed within 2 s of it as racy (to hash again):
# let the images age past that, so both sides write the same flags.
sleep 3
run "$old" old
run "$new" new

# Left out, as not outputs of the data: the logs; the run record's
# "environment" and "seconds" (compared without them); the cache
# MANIFEST's "created" time and the checksum over it (compared without
# those two lines).
status=0
count=0
while IFS= read -r f; do
  case "$f" in log.*|record.json) continue ;; esac
  count=$((count + 1))
  case "$f" in
    */MANIFEST) same() { cmp -s <(grep -v '^created \|^checksum ' "$1") \
                                <(grep -v '^created \|^checksum ' "$2"); } ;;
    *) same() { cmp -s "$1" "$2"; } ;;
  esac
  if ! same "$work/old/$f" "$work/new/$f"; then
    echo "ab_outputs: $f differs between $rev and this tree"
    status=1
  fi
done < <(cd "$work/old" && find . -type f | sed 's|^\./||' | sort)
extra=$(comm -13 <(cd "$work/old" && find . -type f | sort) <(cd "$work/new" && find . -type f | sort))
[ -z "$extra" ] || { echo "ab_outputs: only this tree wrote: $extra"; status=1; }
python3 - "$work/old/record.json" "$work/new/record.json" <<'EOF' || status=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def strip(r):
    return {k: v for k, v in r.items() if k not in ("environment", "seconds")}
if strip(a) != strip(b):
    print("ab_outputs: the run records differ:", sorted(k for k in a if a.get(k) != b.get(k)))
    sys.exit(1)
EOF
if [ $status -eq 0 ]; then
  echo "ab_outputs: $count files byte-identical between $rev and this tree, and the run record's data"
fi
exit $status
