#!/usr/bin/env python3
"""samplers.py [RUNS] - the samplers' cost against the plain shuffled epoch
(docs/determinism.md section 13), whole `seedpipe digest` processes, in one
run, alternated, RUNS rounds (default 5).

Two datasets: 200,000 one-pixel IDX samples with `hflip p=0` (no decode,
almost no work per sample: the per-position cost of the order shows most)
and 20,000 shapes 32x32 PNG with shapes-train (a decode and augment per
sample). Per dataset and round: the shuffled epoch (the peer), the weighted
draw (`--weights`, one weight per sample, `--replacement`, `--num-samples` =
the samples), the same without replacement (every sample once, drawn by
weight: each worker computes the epoch's draws), the uniform draw
(`--replacement`), `--repeat 2` and `--num-samples 2N`
(two rounds). Each prints images/s (positions / wall time) as the median of
the rounds and its ratio to the shuffled epoch's. `--workers 2`,
`--batch-size 256`, `--out /dev/null`. Output goes to bench/RESULTS.md by
hand, with this command line.
"""
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("SEEDPIPE_BIN", os.path.join(HERE, "..", "build", "seedpipe"))


def make_idx(folder, n):
    img = os.path.join(folder, "big-images-idx3-ubyte")
    with open(img, "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 1, 1) + bytes(i % 251 for i in range(n)))
    with open(os.path.join(folder, "big-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
    return img


def run(data, pipeline, flags):
    cmd = [BIN, "digest", data, "--pipeline", pipeline, "--seed", "1", "--batch-size", "256",
           "--workers", "2", "--out", "/dev/null"] + flags
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tmp = tempfile.mkdtemp(prefix="sp-bench-samplers-")
    n_idx, n_shapes = 200000, 20000
    idx = make_idx(tmp, n_idx)
    shapes = os.path.join(tmp, "shapes")
    subprocess.run([BIN, "make-shapes", shapes, "--count", str(n_shapes), "--size", "32"],
                   check=True, capture_output=True)
    for data, pipe, n in ((idx, "hflip p=0", n_idx), (shapes, "shapes-train", n_shapes)):
        wfile = os.path.join(tmp, f"w{n}.txt")
        with open(wfile, "w") as f:
            f.write("\n".join(str(1 + i % 10) for i in range(n)) + "\n")
        cases = [("shuffle (peer)", [], n),
                 ("weighted draw", ["--weights", wfile, "--replacement", "--num-samples",
                                    str(n)], n),
                 ("weighted, no repl.", ["--weights", wfile, "--num-samples", str(n)], n),
                 ("uniform draw", ["--replacement", "--num-samples", str(n)], n),
                 ("repeat 2", ["--repeat", "2"], 2 * n),
                 ("2 rounds", ["--num-samples", str(2 * n)], 2 * n)]
        run(data, pipe, [])   # warm the persistent index and the page cache
        times = {name: [] for name, _, _ in cases}
        for _ in range(runs):
            for name, flags, _ in cases:
                times[name].append(run(data, pipe, flags))
        base = None
        print(f"{os.path.basename(data)}: {n} samples, {pipe}")
        for name, _, m in cases:
            rate = m / statistics.median(times[name])
            base = base or rate
            print(f"  {name:18s} {rate:12.0f} images/s  {rate / base:.3f}  "
                  f"(runs: {' '.join(f'{t:.3f}' for t in times[name])} s)")
    subprocess.run(["rm", "-rf", tmp], check=True)


if __name__ == "__main__":
    main()
