#!/usr/bin/env bash
# dist_bench.sh - data-parallel `seedpipe train`: step time at np 1, 2, 4 against
# the single process, the exchange's share of the step, the data wait per rank.
#
#   bash bench/dist_bench.sh [BUILD_DIR] [--size PX] [--count N] [--batch B] [--epochs E]
#
# One single-process run and `mpirun -np 2` and `-np 4` runs of the same job
# (shapes set made here, global batch B, one loader thread and one training
# thread per rank), in one go, so the ratios compare runs on the same
# machine at the same moment. Per rank, `seedpipe train` reports the mean
# step time, the part of it spent in the exchanges (MPI_Allgatherv of the
# slice sizes and of the aligned spans' sums: it includes waiting for the
# slowest rank), the bytes received per step and the mean data wait. The
# final-weights digest of every run must be the single process's (checked).
# On a machine with fewer cores than ranks the ranks share cores: the step
# time then shows the oversubscription, not the method (the table says how
# many cores there are).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then build="$1"; shift; fi
size=32 count=960 batch=48 epochs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size="$2"; shift 2 ;;
    --count) count="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    *) echo "dist_bench: unknown option $1" >&2; exit 2 ;;
  esac
done
bin="$build/seedpipe"
command -v mpirun >/dev/null || { echo "dist_bench: SKIP: no mpirun (apt-get install openmpi-bin)"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" make-shapes "$tmp/ds" --count "$count" --size "$size" --seed 2 >/dev/null
common=(train "$tmp/ds" --seed 1 --epochs "$epochs" --batch-size "$batch" --threads 1
        --train-threads 1)

"$bin" "${common[@]}" --out "$tmp/r1.json" >"$tmp/np1.log"
for np in 2 4; do
  mpirun -np "$np" --oversubscribe --bind-to none "$bin" "${common[@]}" --out "$tmp/r$np.json" \
    >"$tmp/np$np.log" 2>"$tmp/np$np.err" || { cat "$tmp/np$np.err"; exit 1; }
done

python3 - "$tmp" "$(nproc)" "$size" "$batch" <<'EOF'
import json, re, sys
tmp, cores, size, batch = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def digest(log):
    return re.search(r"final weights digest (\w+)", log).group(1)
one = open(f"{tmp}/np1.log").read()
m = re.search(r"step time ([\d.]+) ms, data wait ([\d.]+) ms \(means of (\d+) steps", one)
t1, w1, steps = float(m.group(1)), float(m.group(2)), int(m.group(3))
params = json.load(open(f"{tmp}/r1.json"))["config"]["model"]["params"]
print(f"data-parallel train: shapes {size} px, global batch {batch}, {steps} steps, "
      f"{params} parameters, {cores} cores")
print(f"{'ranks':>5} {'step ms':>8} {'vs np 1':>8} {'exchange ms':>12} {'share':>6} "
      f"{'KB/step':>8}  data wait ms per rank")
print(f"{1:>5} {t1:8.2f} {1.0:8.2f} {'-':>12} {'-':>6} {'-':>8}  {w1:.2f}")
ok = True
for np in (2, 4):
    log = open(f"{tmp}/np{np}.log").read()
    rows = sorted((int(r), float(s), float(x), float(kb), float(w)) for r, s, x, kb, w in
                  re.findall(r"rank (\d+)/\d+: step time ([\d.]+) ms \(exchange ([\d.]+) ms, "
                             r"([\d.]+) KB\), data wait ([\d.]+) ms", log))
    assert len(rows) == np, log
    step = max(r[1] for r in rows)       # the job moves at its slowest rank
    exch = sum(r[2] for r in rows) / np
    share = exch / (sum(r[1] for r in rows) / np)
    waits = " ".join(f"{r[4]:.2f}" for r in rows)
    print(f"{np:>5} {step:8.2f} {step / t1:8.2f} {exch:12.2f} {100 * share:5.0f}% "
          f"{rows[0][3]:8.1f}  {waits}")
    ok &= digest(log) == digest(one)
print("final weights: " + ("the same bits at np 1, 2, 4 (" + digest(one) + ")" if ok
                           else "DIFFER (a bug)"))
sys.exit(0 if ok else 1)
EOF
