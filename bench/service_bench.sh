#!/usr/bin/env bash
# service_bench.sh - what the service costs over the in-process pool.
#  1. Delivery rate: the same stream (same workers, ring) consumed
#     a) in-process by `seedpipe digest --workers W` (the pool's consumer
#        hashes every batch), and
#     b) through `seedpipe serve` by examples/trainer --bench in another
#        process (attach, next, digest, release), timed from attach to end;
#     both print the same stream digest. Overhead = 1 - b / a (target < 3%);
#     as the machine is shared, also the CPU seconds (user + sys, workers
#     included) of a) vs b) (serve + trainer), which load does not skew.
#     Run for the JPEG pipeline (imagenet-train float32, batch 64, photos of
#     run_jpeg.sh) and for a trivial pipeline (IDX 28x28 gray, hflip), where
#     the per-batch machinery dominates.
#  2. Hand-off latency through the client API (trivial pipeline), from the
#     trainer: "ready" = duration of sp__client_next() for a batch already
#     published; "wake-up" = from the last worker's store into the slot to
#     sp__client_next() returning, for batches the client waited for (worker
#     -> service -> client: two futex wake-ups). Target p99 < 100 us.
# BUILD=build-svc bash bench/service_bench.sh   (default BUILD=build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
workers=${WORKERS:-2}
reps=${REPS:-2}
photos=${PHOTOS:-out/photos}
tmp=$(mktemp -d /tmp/sp-service-bench-XXXXXX)
name="sp-bench-$$"
cleanup() {
  [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# A trivial dataset: 4096 gray 28x28 images in IDX files (no decode).
python3 - "$tmp" <<'EOF'
import struct, sys
d = sys.argv[1]
n = 4096
with open(f"{d}/bench-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 28, 28))
    for i in range(n):
        f.write(bytes(((i * 7 + k * 13) & 255) for k in range(784)))
with open(f"{d}/bench-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">II", 0x801, n))
    f.write(bytes(i % 10 for i in range(n)))
EOF

rate() {   # images/s from a digest or trainer output
  grep -oE '\(([0-9]+) images/s\)|delivered [0-9]+ images/s' | grep -oE '[0-9]+' | head -1
}

cpu() { awk '{printf "%.3f", $1 + $2}' "$1"; }   # user + sys seconds (children included)

one() {   # label dataset args...
  local label=$1 ds=$2
  shift 2
  for rep in $(seq "$reps"); do
    local d s
    d=$(/usr/bin/time -f "%U %S" -o "$tmp/cpu.d" \
        "$build/seedpipe" digest "$ds" "$@" --workers "$workers" --ring 4 --out /dev/null 2>&1)
    /usr/bin/time -f "%U %S" -o "$tmp/cpu.s" \
      "$build/seedpipe" serve --name "$name" "$ds" "$@" --workers "$workers" --ring 4 \
      > "$tmp/serve.out" 2>&1 &
    spid=$!
    for _ in $(seq 500); do grep -q '^ready' "$tmp/serve.out" 2>/dev/null && break; sleep 0.01; done
    s=$(/usr/bin/time -f "%U %S" -o "$tmp/cpu.t" "$build/example_trainer" --name "$name" --bench)
    wait "$spid"
    spid=
    local a b ca cb
    a=$(echo "$d" | rate)
    b=$(echo "$s" | rate)
    ca=$(cpu "$tmp/cpu.d")
    cb=$(python3 -c "print(f'{$(cpu "$tmp/cpu.s") + $(cpu "$tmp/cpu.t"):.3f}')")
    echo "-- $label, rep $rep: in-process pool $a images/s, service->client $b images/s," \
         "wall overhead $(python3 -c "print(f'{(1 - $b / $a) * 100:.1f}%')");" \
         "CPU in-process ${ca} s, service+workers+client ${cb} s" \
         "($(python3 -c "print(f'{($cb / $ca - 1) * 100:+.1f}%')"))"
    echo "   digest: $(echo "$d" | grep -oE 'stream [0-9a-f]{32}')" \
         " trainer: $(echo "$s" | grep -oE 'stream digest: [0-9a-f]{32}')"
    echo "$s" | grep -E 'latency' | sed 's/^/   /'
  done
}

echo "== service vs in-process pool: $workers workers, ring 4, $(nproc) cores"
one "trivial (IDX 28x28, hflip, batch 64, 32 epochs)" "$tmp/bench-images-idx3-ubyte" \
  --pipeline "hflip p=0.5" --seed 1 --epochs 32 --batch-size 64 --drop-last
if [ -d "$photos" ]; then
  one "JPEG (imagenet-train float32, batch 64, 1 epoch)" "$photos" \
    --pipeline imagenet-train --dtype float32 --seed 1 --epochs 1 --batch-size 64
else
  echo "(no $photos: run bench/run_jpeg.sh first for the JPEG row)"
fi
