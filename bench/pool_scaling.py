#!/usr/bin/env python3
"""pool_scaling.py - worker pool scaling as whole processes (bench/RESULTS.md).

`seedpipe digest` of the photo folder (the JPEG pipeline of run_jpeg.sh:
imagenet-train, float32 NCHW, batch 64, 2 epochs, manifest to /dev/null),
run as whole processes, each measured here (wall: a monotonic clock around
the child; CPU: the child's user + system time from wait4, which includes
its reaped workers). Every comparison runs in pairs, A then B, alternating
which goes first, and reports the median of the per-pair ratios:

  1. 2 workers vs 1 (speed-up = wall(1) / wall(2)), and each side's busy
     cores (CPU seconds / wall);
  2. the same with a warm epoch cache (--cache DIR, filled once first);
  3. tracing on vs off on 2 workers (cost = wall(on) / wall(off) - 1);
  4. the time to the first batch, process start to the consumer's first
     batch, for 1 and 2 workers, from --trace runs (the trace's clock
     origin is CLOCK_MONOTONIC, as this script's), against the time to
     compute one batch on one core (the median of an in-process
     --threads 1 run's "batch" spans) plus the dataset open ("open");
  5. who hashes the batches (pool.h, sp_pool_digest; chosen by the CPU
     count unless SEEDPIPE_POOL_DIGEST says): the consumer vs the workers,
     with 2 workers and with 1 (speed-up = wall(consumer) / wall(workers)).

Every run must print the same stream digest (checked). The numbers are
from a shared 2-core machine: look at the spread, and run it again when
the load average says others were busy.

  python3 bench/pool_scaling.py [--build build] [--photos out/photos] [--pairs 7]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run_ru(cmd):
    """(wall s, CPU s, stdout, start monotonic ns) of one whole process: its
    user + system time from wait4 (its reaped workers included)."""
    t0 = time.monotonic_ns()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(r)
        try:
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    t1 = time.monotonic_ns()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({status})")
    return (t1 - t0) / 1e9, ru.ru_utime + ru.ru_stime, b"".join(chunks).decode(), t0


def stream_of(out):
    for line in out.splitlines():
        if line.startswith("digest:"):
            return line.rsplit(" ", 1)[1]
    raise SystemExit(f"no digest line in: {out}")


def pairs(name, a, b, n, want):
    """n alternated pairs of commands a and b; returns per-pair rows."""
    rows = []
    for i in range(n):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        r1 = run_ru(first)
        r2 = run_ru(second)
        ra, rb = (r1, r2) if i % 2 == 0 else (r2, r1)
        for r in (ra, rb):
            got = stream_of(r[2])
            if got != want:
                raise SystemExit(f"{name}: stream {got}, expected {want}")
        rows.append((ra, rb))
    return rows


def med(v):
    return statistics.median(v)


def report(title, rows, label_a, label_b, ratio):
    ra = [ratio(a, b) for a, b in rows]
    wa = [a[0] for a, _ in rows]
    wb = [b[0] for _, b in rows]
    ca = [a[1] / a[0] for a, _ in rows]
    cb = [b[1] / b[0] for _, b in rows]
    print(f"== {title}")
    print(f"   {label_a}: wall median {med(wa):.3f} s (min {min(wa):.3f}, max {max(wa):.3f}), "
          f"busy cores {med(ca):.2f}, CPU {med([a[1] for a, _ in rows]):.2f} s")
    print(f"   {label_b}: wall median {med(wb):.3f} s (min {min(wb):.3f}, max {max(wb):.3f}), "
          f"busy cores {med(cb):.2f}, CPU {med([b[1] for _, b in rows]):.2f} s")
    print(f"   ratio per pair: median {med(ra):.3f} (min {min(ra):.3f}, max {max(ra):.3f}) "
          f"[{', '.join(f'{x:.2f}' for x in ra)}]")
    return med(ra)


def first_batch(cmd, trace):
    """Process start to the first batch (s), and the trace's spans."""
    _, _, out, t0 = run_ru(cmd + ["--trace", trace])
    with open(trace) as f:
        d = json.load(f)
    origin = d["otherData"]["origin_monotonic_ns"]
    names = {e["pid"]: e["args"]["name"] for e in d["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    spans = [e for e in d["traceEvents"] if e["ph"] == "X"]
    cons = [p for p, n in names.items() if n == "consumer"][0]
    nexts = [e for e in spans if e["pid"] == cons and e["name"] == "next"]
    fb = min(e["ts"] + e["dur"] for e in nexts)
    return (origin - t0) / 1e9 + fb / 1e6, spans, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--photos", default=os.environ.get("PHOTOS", "out/photos"))
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--ring", default="4")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: scaling,cache,"
                    "trace,first,hasher")
    o = ap.parse_args()
    skip = set(filter(None, o.skip.split(",")))
    tool = os.path.abspath(os.path.join(o.build, "seedpipe"))
    base = [tool, "digest", o.photos, "--pipeline", "imagenet-train", "--dtype", "float32",
            "--seed", "1", "--batch-size", "64", "--epochs", "2", "--out", "/dev/null"]
    w1 = base + ["--workers", "1", "--ring", o.ring]
    w2 = base + ["--workers", "2", "--ring", o.ring]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} UTC, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {o.photos}, {o.pairs} pairs")
    want = stream_of(run_ru(w2)[2])   # warm-up (page cache), and the stream every run must give
    print(f"# stream {want}")
    tmp = tempfile.mkdtemp(prefix="sp-pool-scaling-")
    if "scaling" not in skip:
        rows = pairs("scaling", w1, w2, o.pairs, want)
        report("2 workers vs 1, 2 epochs (speed-up = wall 1 / wall 2)", rows, "1 worker ",
               "2 workers", lambda a, b: a[0] / b[0])
    if "cache" not in skip:
        cache = os.path.join(tmp, "cache")
        run_ru(w2 + ["--cache", cache])   # fills both epochs
        rows = pairs("warm cache", w1 + ["--cache", cache], w2 + ["--cache", cache], o.pairs,
                     want)
        report("warm cache: 2 workers vs 1 (speed-up)", rows, "1 worker ", "2 workers",
               lambda a, b: a[0] / b[0])
    if "trace" not in skip:
        tr = os.path.join(tmp, "t.json")
        rows = pairs("trace", w2 + ["--trace", tr], w2, o.pairs, want)
        r = report("tracing on vs off, 2 workers (cost = wall on / wall off - 1)", rows,
                   "traced  ", "untraced", lambda a, b: a[0] / b[0])
        print(f"   tracing costs {100 * (r - 1):+.1f}% wall (median of pairs)")
    if "first" not in skip:
        print("== time to the first batch (process start to the consumer's first batch)")
        one = base + ["--threads", "1"]
        _, spans, _ = first_batch(one, os.path.join(tmp, "inproc.json"))
        batch = med([e["dur"] for e in spans if e["name"] == "batch"]) / 1e6
        opened = med([e["dur"] for e in spans if e["name"] == "open"]) / 1e6
        print(f"   one batch on one core (in-process, 1 thread, median): {batch * 1e3:.1f} ms; "
              f"dataset open: {opened * 1e3:.1f} ms; target < {(2 * batch + opened) * 1e3:.1f} ms")
        for w, cmd in ((1, w1), (2, w2)):
            fbs = [first_batch(cmd, os.path.join(tmp, f"fb{w}.json"))[0] for _ in range(5)]
            print(f"   {w} worker(s): median {med(fbs) * 1e3:.1f} ms (min {min(fbs) * 1e3:.1f}, "
                  f"max {max(fbs) * 1e3:.1f}) over 5 runs")
    if "hasher" not in skip:
        for w, cmd in ((2, w2), (1, w1)):
            by = {x: ["/usr/bin/env", f"SEEDPIPE_POOL_DIGEST={x}"] + cmd
                  for x in ("consumer", "workers")}
            rows = pairs("hasher", by["consumer"], by["workers"], o.pairs, want)
            report(f"who hashes, {w} worker(s): the consumer vs the workers (speed-up)", rows,
                   "consumer", "workers ", lambda a, b: a[0] / b[0])
    subprocess.run(["rm", "-rf", tmp])
    print(f"# end, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
