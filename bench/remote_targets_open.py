#!/usr/bin/env python3
"""remote_targets_open.py [RUNS] - opening a Loader with annotations="@json"
(each sample's KEY.json member, docs/targets.md) over HTTP against the same
shards on local disk, in one run.

N samples (default 1000; N=...) of seeded noise PNGs (SIZE x SIZE, default
24: about 2 KB a sample, members close together; SIZE=128: about 50 KB,
every member its own range), each with 1 to 4 random boxes, are sharded by
`seedpipe shard --max-count 100 --annotations FILE` and served by nginx on
127.0.0.1, directly (round trip ~0) and behind tests/remote_servers.py's
proxy at LATENCY_MS (default 20). Then RUNS (default 5) times, local and
remote in turn (the first of each pair alternating), in this process (2.5
s after sharding, so the local open keeps its per-shard index from the
first open on, as for shards that are not brand new):

    seedpipe.Loader(DATASET, pipeline="resize size=16,16 | targets
                    max_boxes=4", annotations="@json", batch_size=32)

opened and closed; it prints the median open time of each, remote/local,
the same without annotations (the dataset alone: the index object), and
the requests the members took (the nginx log, @json open minus plain open).
Timings live here and in bench/RESULTS.md, never in a test.
"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
os.environ.setdefault("SEEDPIPE_LIB", os.path.join(ROOT, "build", "libseedpipe.so"))
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1"
import remote_servers as rs  # noqa: E402
import seedpipe  # noqa: E402

BIN = os.path.join(ROOT, "build", "seedpipe")
SPEC = "resize size=16,16 | targets max_boxes=4"


def make(d, n, size):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(1)
    rnd = random.Random(1)
    src = os.path.join(d, "src")
    os.makedirs(os.path.join(src, "img"))
    images, anns = [], []
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(
            os.path.join(src, "img", f"{i:06d}.png"))
        images.append({"id": i, "file_name": f"img/{i:06d}.png"})
        for _ in range(rnd.randint(1, 4)):
            x, y = rnd.uniform(0, size / 2), rnd.uniform(0, size / 2)
            anns.append({"id": len(anns), "image_id": i, "category_id": rnd.randint(1, 80),
                         "bbox": [x, y, rnd.uniform(1, size / 2), rnd.uniform(1, size / 2)],
                         "iscrowd": 0})
    os.makedirs(os.path.join(d, "www"))
    path = os.path.join(d, "instances.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": anns, "categories": []}, f)
    p = subprocess.run([BIN, "shard", src, os.path.join(d, "www", "s"), "--max-count", "100",
                        "--annotations", path], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"seedpipe shard: {p.stderr}")
    time.sleep(2.5)   # past SP_DS_RACY_NS: the first local open writes its per-shard index


def open_time(ds, ann):
    t0 = time.perf_counter()
    spec = SPEC if ann else "resize size=16,16"
    with seedpipe.Loader(ds, pipeline=spec, annotations=ann, batch_size=32) as ld:
        fp = ld.fingerprint
    return time.perf_counter() - t0, fp


def pairs(local, remote, ann, runs):
    tl, tr = [], []
    for k in range(runs):
        order = [(local, tl), (remote, tr)] if k % 2 == 0 else [(remote, tr), (local, tl)]
        for ds, acc in order:
            acc.append(open_time(ds, ann)[0])
    return statistics.median(tl), statistics.median(tr)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    n = int(os.environ.get("N", "1000"))
    size = int(os.environ.get("SIZE", "24"))
    latency = float(os.environ.get("LATENCY_MS", "20"))
    tmp = tempfile.mkdtemp(prefix="sp-remote-targets-")
    os.chmod(tmp, 0o755)
    ng = px = None
    try:
        make(tmp, n, size)
        shards = os.path.join(tmp, "www", "s")
        ns = len([f for f in os.listdir(shards) if f.endswith(".tar")])
        leaf = f"shard-{{000000..{ns - 1:06d}}}.tar"
        local = os.path.join(shards, leaf)
        tar_bytes = sum(os.path.getsize(os.path.join(shards, f)) for f in os.listdir(shards))
        ng = rs.Nginx(os.path.join(tmp, "www"), tmp)
        px = rs.Proxy(ng.port, tmp, latency_ms=latency)
        print(f"{n} samples ({size}x{size} noise PNG, {tar_bytes / n / 1024:.1f} KiB of shard "
              f"a sample), {ns} shards; median of {runs}")
        for name, base in (("nginx direct", ng.url), (f"proxy {latency:g} ms", px.url)):
            url = f"{base}/s/{leaf}"
            fl, fr = open_time(local, "@json")[1], open_time(url, "@json")[1]
            if fl != fr:
                sys.exit(f"fingerprints differ: local {fl}, remote {fr}")
            r0 = len(ng.requests())
            open_time(url, None)
            r1 = len(ng.requests())
            open_time(url, "@json")
            r2 = len(ng.requests())
            members = (r2 - r1) - (r1 - r0)
            jl, jr = pairs(local, url, "@json", runs)
            pl, pr = pairs(local, url, None, runs)
            print(f"{name}: @json open local {jl * 1e3:.1f} ms, remote {jr * 1e3:.1f} ms, "
                  f"remote/local {jr / jl:.2f}; without annotations local {pl * 1e3:.1f} ms, "
                  f"remote {pr * 1e3:.1f} ms, remote/local {pr / pl:.2f}; the members took "
                  f"{members} requests ({members / n:.3f} a sample)")
    finally:
        if px:
            px.stop()
        if ng:
            ng.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
