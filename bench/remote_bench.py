#!/usr/bin/env python3
"""remote_bench.py [RUNS] - the JPEG pipeline on the worker pool reading the same
shards from local disk and over HTTP through a latency proxy, in one run.

The 2,000 photo crops of run_jpeg.sh (500x375 JPEG q90, ~37 KB each) are
sharded by `seedpipe shard --max-count 100` (20 shards and the index
object) into out/remote-www/photos, served by nginx on 127.0.0.1 behind
tests/remote_servers.py's proxy, which delays every request by LATENCY_MS
(default 20: one round trip). Then RUNS pairs (default 5) of

    seedpipe digest DATASET --pipeline imagenet-train --dtype float32 --seed 1
        --epochs 1 --batch-size 64 --workers W --out /dev/null

run in pairs, local then remote, then remote then local, ... (W = WORKERS,
default 2; the machine's other load falls on both alike); it prints
the median images/s of each, remote/local, and from the proxy's counts the
requests a sample, the mean and largest number of requests in flight and
the bytes read a sample; and checks that both stream the same digest.
SEEDPIPE_PREFETCH (the loader's read-ahead chunk) is passed through.
Timings live here and in bench/RESULTS.md, never in a test.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import remote_servers as rs  # noqa: E402

BIN = os.path.join(ROOT, "build", "seedpipe")


def run(*args):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True,
                       env=dict(os.environ, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1"))
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))}: {p.stderr}")
    return p.stdout + p.stderr


def digest(ds, workers):
    t0 = time.monotonic()
    out = run("digest", ds, "--pipeline", "imagenet-train", "--dtype", "float32", "--seed", 1,
              "--epochs", 1, "--batch-size", 64, "--workers", workers, "--out", "/dev/null")
    t = time.monotonic() - t0
    return t, out.split("stream ")[1].split()[0]


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    workers = int(os.environ.get("WORKERS", "2"))
    latency = float(os.environ.get("LATENCY_MS", "20"))
    out = os.path.join(ROOT, os.environ.get("OUT", "out"))
    photos = os.environ.get("PHOTOS", os.path.join(out, "photos"))
    os.makedirs(out, exist_ok=True)
    if not os.path.isdir(photos):
        subprocess.run([os.path.join(ROOT, "build", "bench", "bench_make_photos"), photos,
                        "--count", "2000"], check=True)
    www = os.path.join(out, "remote-www")
    shards = os.path.join(www, "photos")
    if not os.path.isdir(shards):
        os.makedirs(www, exist_ok=True)
        run("shard", photos, shards, "--max-count", 100)
    n = int([l for l in run("inspect", shards).splitlines()
             if l.startswith("samples:")][0].split()[1])
    tmp = tempfile.mkdtemp(prefix="sp-remote-bench-")
    os.chmod(tmp, 0o755)
    ng = px = None
    try:
        ng = rs.Nginx(os.path.abspath(www), tmp)
        px = rs.Proxy(ng.port, tmp, latency_ms=latency)
        url = f"{px.url}/photos/shard-{{000000..{(n + 99) // 100 - 1:06d}}}.tar"
        local = os.path.join(shards, f"shard-{{000000..{(n + 99) // 100 - 1:06d}}}.tar")
        _, d_local = digest(local, workers)   # warms the per-shard index and the page cache
        _, d_remote = digest(url, workers)
        if d_local != d_remote:
            sys.exit(f"streams differ: local {d_local}, remote {d_remote}")
        before = px.stats_now()
        tl, tr = [], []
        for k in range(runs):   # pairs in turn: local first, then remote first
            if k % 2 == 0:
                tl.append(digest(local, workers)[0])
                tr.append(digest(url, workers)[0])
            else:
                tr.append(digest(url, workers)[0])
                tl.append(digest(local, workers)[0])
        after = px.stats_now()
    finally:
        if px:
            px.stop()
        if ng:
            ng.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    ml, mr = statistics.median(tl), statistics.median(tr)
    reqs = after["requests"] - before["requests"]
    nbytes = after["bytes"] - before["bytes"]
    busy = after["busy_s"] - before["busy_s"]
    print(f"dataset: {n} JPEG samples, shards of 100; {workers} workers; proxy round trip "
          f"{latency:g} ms; prefetch chunk {os.environ.get('SEEDPIPE_PREFETCH', '16 (default)')}")
    print(f"local  {n / ml:8.1f} images/s  (median of {runs}: {ml:.3f} s)")
    print(f"remote {n / mr:8.1f} images/s  (median of {runs}: {mr:.3f} s)")
    print(f"remote/local {ml / mr:.2f}   (stream {d_local} both)")
    print(f"requests a sample {reqs / (runs * n):.3f}; bytes read a sample {nbytes / (runs * n):.0f}; "
          f"requests in flight: mean {busy / sum(tr):.1f}, max {after['max_inflight']}")


if __name__ == "__main__":
    main()
