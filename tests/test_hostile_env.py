"""test_hostile_env.py - a hostile folder, cache directory or planted file gets
a named error (or the right result) in bounded time and memory.

The environment around the parsers (docs/security.md, "The environment"):
 - size before bytes: a sparse 2 GB file where a small one is expected (the
   dataset index sidecar, a shard's index, a cache MANIFEST, a cache batch
   file, a manifest given to `seedpipe diff`, a pipeline @file, a list
   file) costs no more than a few MB: each seedpipe run here must peak
   under 256 MB, and still give the right stream (a sidecar, shard index or
   cache entry not trusted is rebuilt or recomputed) or a named error;
 - no FIFO blocks: a FIFO where a pipeline file, list file, loader state,
   manifest, shard index or cache batch is expected is refused (or passed
   over) at once (every run has a 30 s timeout; none may reach it);
 - no write through a planted symlink: a symlink at the name of a loader
   state, a shard, an image written by `dump` is replaced, and the file it
   pointed to is unchanged;
 - shared memory: a FIFO under a region's name makes `status` and `serve`
   refuse at once; another user's region of mode 0666 is not read by
   `status`; a region's strings (the dataset path) are printed with their
   control bytes escaped, never as terminal escape sequences;
 - sizes never taken on trust: a shard index whose member sizes were forged
   (checksum recomputed) is not trusted and the shard is read instead, the
   same stream; a cache manifest forged to name "@FILE" as its pipeline
   makes `cache verify --recompute` refuse it without opening FILE.
The stream digests are checked against the plain run's each time.
"""
import glob
import os
import resource
import sys
import tempfile
import time

import cli_testlib as t

MB = 1 << 20
common = ["--pipeline", "shapes-train", "--seed", "4", "--epochs", "1", "--batch-size", "8"]


def peak_mb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def run(*args, ok=True, env=None):
    p = t.run(*args, ok=ok, env=env, timeout=30)
    assert peak_mb() < 256, f"{args}: a run peaked at {peak_mb():.0f} MB"
    return p


def stream(ds, tmp, *extra, env=None):
    out = os.path.join(tmp, "s.jsonl")
    p = run("digest", ds, *common, *extra, "--out", out, env=env)
    return p.stdout.split("stream ")[1].split()[0]


def sparse(path, size=2 << 30):
    with open(path, "wb") as f:
        f.truncate(size)


def sizes_first(tmp):
    ds = os.path.join(tmp, "ds")
    run("make-shapes", ds, "--count", 24, "--size", 16)
    want = stream(ds, tmp)
    # the dataset's persistent index (in the cache folder): a sparse 2 GB file
    side = run("index", ds).stdout.split("index:")[1].split()[0]
    assert side.startswith(os.environ["SEEDPIPE_CACHE"] + "/"), side
    sparse(side)
    p = run("index", ds)
    assert "limit" in p.stderr and "rebuilt" in p.stderr and os.path.getsize(side) < MB, p.stderr
    sparse(side)
    assert stream(ds, tmp) == want
    # a pipeline file, a list file, a manifest for diff
    for name, args in (("spec", ("digest", ds, "--pipeline", "@SPARSE", "--seed", 1, "--epochs", 1,
                                 "--out", os.path.join(tmp, "y.jsonl"))),
                       ("list", ("inspect", "SPARSE")),
                       ("m.jsonl", ("diff", "SPARSE", "SPARSE"))):
        f = os.path.join(tmp, name)
        sparse(f)
        p = run(*[a.replace("SPARSE", f) if isinstance(a, str) else a for a in args], ok=False)
        assert p.returncode != 0 and f in p.stderr, p.stderr
        os.unlink(f)
    return ds, want


def cache_entry(ds, tmp, want):
    cache = os.path.join(tmp, "cache")
    assert stream(ds, tmp, "--cache", cache) == want
    entry = [d for d in glob.glob(os.path.join(cache, "*")) if len(os.path.basename(d)) == 32][0]
    sparse(os.path.join(entry, "b00000001"))
    assert stream(ds, tmp, "--cache", cache) == want        # recomputed, not 2 GB read
    assert stream(ds, tmp, "--cache", cache) == want
    entry = [d for d in glob.glob(os.path.join(cache, "*")) if len(os.path.basename(d)) == 32][0]
    sparse(os.path.join(entry, "MANIFEST"))
    assert stream(ds, tmp, "--cache", cache) == want
    return cache


def fifos(ds, tmp, want):
    f = os.path.join(tmp, "fifo")
    os.mkfifo(f)
    for args in (("digest", ds, "--pipeline", "@" + f, "--seed", 1, "--epochs", 1, "--out",
                  os.path.join(tmp, "z.jsonl")),
                 ("inspect", f),
                 ("diff", f, f),
                 ("digest", ds, *common, "--resume", f, "--out", os.path.join(tmp, "z.jsonl"))):
        p = run(*args, ok=False)
        assert p.returncode != 0 and f in p.stderr and \
            ("FIFO" in p.stderr or "not a directory or a regular file" in p.stderr), (args, p.stderr)
    os.unlink(f)


def symlinks(ds, tmp, want):
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    state = os.path.join(tmp, "state.json")
    os.symlink(victim, state)
    run("digest", ds, *common, "--save-state", state, "--stop-after", 1, "--out",
        os.path.join(tmp, "w.jsonl"))
    assert not os.path.islink(state) and open(victim).read() == "precious\n"
    grid = os.path.join(tmp, "grid.png")
    os.symlink(victim, grid)
    run("dump", ds, "--pipeline", "shapes-train", "--seed", 1, "--epoch", 0, "--batch", 0,
        "--out", grid)
    assert not os.path.islink(grid) and open(victim).read() == "precious\n"
    shards = os.path.join(tmp, "shards")
    os.mkdir(shards)
    os.symlink(victim, os.path.join(shards, "shard-000000.tar"))
    p = run("shard", ds, shards, "--max-count", 10, ok=False)
    # an existing name is refused or replaced, never written through
    assert open(victim).read() == "precious\n", p.stderr
    return shards


def forged_shard_index(ds, tmp, want, h64):
    shards = os.path.join(tmp, "shards2")
    run("shard", ds, shards, "--max-count", 10)
    assert stream(shards, tmp) == want
    time.sleep(2.2)   # a shard changed within 2 s is not indexed
    run("inspect", shards)
    out = run("index", shards).stdout
    idx = [out.split("index:")[1].split()[0]]   # the first shard's, in the cache folder
    assert os.path.isfile(idx[0]), out
    b = bytearray(open(idx[0], "rb").read())
    # the first sample's size (u32 count after the stat key; then u32 len +
    # path, i32 label, u64 offset, u64 size): set it to 32 TB
    key = 8 + 4 + 6 * 8
    rl = int.from_bytes(b[key:key + 4], "little")
    pos = key + 4 + rl + 4
    ml = int.from_bytes(b[pos:pos + 4], "little")
    at = pos + 4 + ml + 4 + 8
    b[at:at + 8] = (32 << 40).to_bytes(8, "little")
    b[-8:] = h64(bytes(b[:-8])).to_bytes(8, "little")
    with open(idx[0], "wb") as f:
        f.write(b)
    assert stream(shards, tmp) == want
    # a FIFO where a shard's index is expected: passed over, the shard read
    os.unlink(idx[0])
    os.mkfifo(idx[0])
    assert stream(shards, tmp) == want


def forged_manifest(ds, tmp, h64):
    cache = os.path.join(tmp, "cache2")
    stream(ds, tmp, "--cache", cache)
    secret = os.path.join(tmp, "secret.txt")
    with open(secret, "w") as f:
        f.write("hflip p=1\n")
    os.chmod(secret, 0)   # opening it would fail loudly for a non-root user too
    man = glob.glob(os.path.join(cache, "*", "MANIFEST"))[0]
    lines = open(man).read().splitlines(keepends=True)
    lines = [f"pipeline @{secret}\n" if l.startswith("pipeline ") else l for l in lines
             if not l.startswith("checksum ")]
    body = "".join(lines).encode()
    with open(man, "wb") as f:
        f.write(body + b"checksum %016x\n" % h64(body))
    before = os.stat(secret).st_atime_ns
    p = run("cache", "verify", cache, "--recompute", 1, "--dataset", ds, ok=False)
    assert "not a canonical spec" in p.stdout + p.stderr, p.stdout + p.stderr
    assert os.stat(secret).st_atime_ns == before


def regions(tmp):
    name = f".sp-hostile-{os.getpid()}"
    shm = f"/dev/shm/{name}"
    os.mkfifo(shm)
    try:
        for args in (("status", name), ("serve", "--name", name, os.path.join(tmp, "ds"),
                                         *common, "--workers", 1)):
            p = run(*args, ok=False)
            assert p.returncode != 0 and "FIFO" in p.stderr, (args, p.stderr)
    finally:
        os.unlink(shm)
    if os.geteuid() == 0:   # another user's region: only root can make one here
        with open(shm, "wb") as f:
            f.write(b"\x1b[31m" * 16384)   # more than a header (80 KB)
        os.chown(shm, 65534, 65534)
        os.chmod(shm, 0o666)
        try:
            p = run("status", name, ok=False)
            assert p.returncode != 0 and "uid 65534" in p.stderr and "\x1b" not in p.stdout, p.stderr
        finally:
            os.unlink(shm)
    evil = os.path.join(tmp, "evil\x1b]0;pwned\x07\x1b[31m")
    os.symlink(os.path.join(tmp, "ds"), evil)
    svc, _ = t.serve(name, evil, common, "--workers", 1)
    try:
        p = run("status", name)
        assert "\x1b" not in p.stdout + p.stderr and "\\x1b]0;pwned\\x07" in p.stdout, p.stdout
    finally:
        t.stop_all()


def main():
    h64 = t.xxh64()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SEEDPIPE_CACHE"] = os.path.join(tmp, "index-cache")   # its own
        ds, want = sizes_first(tmp)
        print("sparse 2 GB sidecar, spec, list and manifest files: named errors or rebuilt, "
              f"peak {peak_mb():.0f} MB")
        cache_entry(ds, tmp, want)
        print("sparse cache batch and MANIFEST: recomputed, same stream")
        fifos(ds, tmp, want)
        print("FIFOs as pipeline file, dataset, manifest, state: refused at once")
        symlinks(ds, tmp, want)
        print("symlinks planted at a state, an image and a shard: replaced or refused, the "
              "target unchanged")
        regions(tmp)
        print("regions: a FIFO under the name refused at once by status and serve, another "
              "user's 0666 region not read, the dataset path's escape bytes printed escaped")
        if h64 is None:
            print("SKIP: libxxhash not found: the forged shard index and manifest parts")
            return 77
        forged_shard_index(ds, tmp, want, h64)
        print("a shard index with forged sizes and a FIFO for one: the shard is read, same stream")
        forged_manifest(ds, tmp, h64)
        print("a cache manifest naming @FILE as its pipeline: refused, FILE not opened")
    return 0


if __name__ == "__main__":
    sys.exit(main())
