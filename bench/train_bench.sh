#!/usr/bin/env bash
# train_bench.sh - step time of the training core: CPU reference, CUDA strict,
# CUDA fast; run-to-run digests; how long the GPU waits for data.
#
#   bench/train_bench.sh [BUILD_DIR] [OUT_DIR]
#
# Needs `seedpipe train` (programs/cli_train.c) in BUILD_DIR/seedpipe. Without a
# CUDA device (or a build without CUDA) the CUDA rows are skipped with a note.
# Knobs (environment): COUNT (images, default 2048), SIZE (px, default 32),
# BATCH (default 64), EPOCHS (default 2), WORKERS (pool workers, default 4),
# THREADS (CPU backend threads, default: nproc), PYTHON (the interpreter that
# has torch for the PyTorch peer, default python3; e.g. PYTHON=/usr/bin/python3
# where python3 is a torch-less pyenv), OMP_PASSIVE=1 (the peer runs with
# OMP_WAIT_POLICY=PASSIVE: fairer on a machine whose cores are busy),
# SEEDPIPE_ISA=sse2|avx2|avx512 (caps the CPU reference's SIMD level; the
# weights digest must not change).
# Writes OUT_DIR/train_bench.md (a table) and the run records.
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-bench-out}
SP="$BUILD/seedpipe"
COUNT=${COUNT:-2048}; SIZE=${SIZE:-32}; BATCH=${BATCH:-64}; EPOCHS=${EPOCHS:-2}
WORKERS=${WORKERS:-4}; THREADS=${THREADS:-$(nproc)}; PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
if "$SP" train 2>&1 | grep -q "unknown command"; then
  echo "train_bench: $SP has no 'train' command (wire cmd_train into programs/cli.c)"; exit 1
fi
DS="$OUT/shapes-$SIZE"
[ -d "$DS" ] || "$SP" make-shapes "$DS" --count "$COUNT" --size "$SIZE" --seed 1 >/dev/null
PIPE="random_resized_crop size=$SIZE scale=0.6,1 | hflip p=0.5 | normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25"
common=(train "$DS" --seed 1 --epochs "$EPOCHS" --batch-size "$BATCH" --pipeline "$PIPE"
        --dtype float32 --workers "$WORKERS")

run() {  # name, extra args...
  local name=$1; shift
  echo "== $name" >&2
  if "$SP" "${common[@]}" "$@" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1; then
    local st dw dg
    st=$(sed -n 's/^step time \([0-9.]*\) ms.*/\1/p' "$OUT/$name.log")
    dw=$(sed -n 's/.*data wait \([0-9.]*\) ms.*/\1/p' "$OUT/$name.log")
    dg=$(sed -n 's/^final weights digest \([0-9a-f]*\).*/\1/p' "$OUT/$name.log")
    echo "| $name | $st | $dw | $dg |"
  else
    echo "| $name | failed: $(tail -1 "$OUT/$name.log") | | |"
  fi
}

{
  echo "# train_bench: ${COUNT} shapes images ${SIZE}px, batch ${BATCH}, ${EPOCHS} epochs, ${WORKERS} pool workers"
  echo
  echo "$(date -u) on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
  echo
  echo "| run | step ms | data wait ms/step | final weights digest |"
  echo "|---|---|---|---|"
  run cpu-t$THREADS --device cpu --train-threads "$THREADS"
  run cuda-strict-1 --device cuda --mode strict
  run cuda-strict-2 --device cuda --mode strict
  run cuda-fast-1 --device cuda --mode fast
  run cuda-fast-2 --device cuda --mode fast
} | tee "$OUT/train_bench.md"

{
  echo
  echo "## CPU vs CUDA (strict), 50 steps, each twice"
  echo '```'
  "$SP" train "$DS" --seed 1 --batch-size "$BATCH" --pipeline "$PIPE" --dtype float32 \
    --train-threads "$THREADS" --compare-devices 50 --out "$OUT/compare.json" 2>&1 || true
  echo '```'
  echo
  echo "## PyTorch CPU peer (same model, batch, threads)"
  echo '```'
  "$PYTHON" "$(dirname "$0")/train_torch.py" --size "$SIZE" --batch "$BATCH" --threads "$THREADS" \
    --cuda ${OMP_PASSIVE:+--omp-passive} > "$OUT/torch.log" 2>&1 || true
  cat "$OUT/torch.log"
  echo '```'
} | tee -a "$OUT/train_bench.md"

python3 - "$OUT" "$THREADS" <<'PY' | tee -a "$OUT/train_bench.md"
import json, os, re, sys
out, threads = sys.argv[1], sys.argv[2]
def grab(name, pat):
    p = os.path.join(out, name)
    m = re.search(pat, open(p).read()) if os.path.exists(p) else None
    return float(m.group(1)) if m else None
sp = grab(f"cpu-t{threads}.log", r"step time ([0-9.]+) ms")
pt = grab("torch.log", r"cpu step time ([0-9.]+) ms")
cpu = os.path.join(out, f"cpu-t{threads}.json")
simd = json.load(open(cpu))["device"].get("conv_simd", "?") if os.path.exists(cpu) else "?"
if sp and pt:
    print(f"\nseedpipe CPU reference {sp:.2f} ms/step (convolutions: {simd}) vs PyTorch CPU "
          f"{pt:.2f} ms/step ({threads} threads): {sp / pt:.2f}x (target <= 2x)")
def rec(n):
    p = os.path.join(out, n + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
s1, s2, f1, f2 = (rec(n) for n in ("cuda-strict-1", "cuda-strict-2", "cuda-fast-1", "cuda-fast-2"))
print()
if s1 and s2:
    print("strict run-to-run bit-identical weights:", s1["final_weights_digest"] == s2["final_weights_digest"])
    print("strict run-to-run identical step losses:", s1["step_loss"] == s2["step_loss"])
if f1 and f2:
    print("fast run-to-run identical weights:", f1["final_weights_digest"] == f2["final_weights_digest"])
if s1 and f1:
    print("cuda device:", json.dumps(s1["device"]))
PY
