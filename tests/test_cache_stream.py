"""test_cache_stream.py - `digest --cache` never changes a byte of the stream.

Cold then warm runs through the epoch cache, in-process and on the worker
pool (1 and 3 workers), give manifests identical to the uncached run; a
byte flipped in a cached batch file is reported (naming the file) and the
stream is still identical (the batch is recomputed, never served).
Standard library only; the CLI is $SEEDPIPE_BIN.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("SEEDPIPE_BIN")


def run(*args):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"seedpipe {' '.join(map(str, args))}: {p.returncode}: {p.stderr}")
    return p


def lines(path):
    with open(path) as f:
        return f.read().splitlines()[1:]   # batch lines (the header names versions)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-cache-stream-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 150, "--size", 40, "--seed", 3)
        common = ["--pipeline", "random_resized_crop size=32 scale=0.4,1 | hflip p=0.5 | "
                  "normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25",
                  "--dtype", "float32", "--seed", 11, "--epochs", 2, "--batch-size", 16]
        ref = os.path.join(tmp, "ref.jsonl")
        run("digest", ds, *common, "--out", ref)
        want = lines(ref)
        assert len(want) == 2 * 10

        for workers in (0, 1, 3):
            cache = os.path.join(tmp, f"cache-w{workers}")
            for attempt in ("cold", "warm"):
                out = os.path.join(tmp, f"w{workers}-{attempt}.jsonl")
                p = run("digest", ds, *common, "--workers", workers, "--cache", cache,
                        "--out", out)
                assert lines(out) == want, f"workers {workers} {attempt}: stream changed"
                assert "cache:" not in p.stderr, p.stderr
            entries = [d for d in os.listdir(cache) if not d.startswith(".")]
            assert len(entries) == 2, f"expected one entry per epoch, got {entries}"

        # `cache build --workers 2`: the pool's workers fill it; a warm digest
        # then reads every batch and computes none.
        cache = os.path.join(tmp, "cache-build-w2")
        p = run("cache", "build", ds, "--cache", cache, *common,
                "--workers", 2)
        assert "2 committed" in p.stdout, p.stdout
        out = os.path.join(tmp, "built.jsonl")
        p = run("digest", ds, *common, "--workers", 2, "--cache", cache, "--out", out)
        assert lines(out) == want, "cache build --workers: stream changed"
        assert "20 batches read, 0 computed" in p.stdout, p.stdout

        # verify --cache DIR: the stream through an existing cache (read by
        # 2 workers, 1 worker and the service) equals the in-process one.
        p = run("verify", ds, *common, "--workers", "1,2", "--cache", cache, "--no-crash",
                "--no-resume")
        assert "cache (--cache), workers 2" in p.stdout and "identical" in p.stdout, p.stdout
        assert os.path.isdir(cache), "verify removed the user's cache"

        # An entry of a split's subset records the split: `cache verify
        # --recompute` rebuilds the same subset and finds the same bytes.
        cache = os.path.join(tmp, "cache-split")
        run("cache", "build", ds, "--cache", cache, *common, "--split", "train=0.7,val=0.3",
            "--subset", "val", "--split-seed", 5)
        p = run("cache", "verify", cache, "--recompute", 6)
        assert "0 differ" in p.stdout, p.stdout
        assert "6 batches recomputed" in p.stdout, p.stdout

        # A rank's stream (rank 1 of 2) is its own entry: cold and warm on
        # the pool equal the uncached rank stream.
        rank = ["--rank", 1, "--world", 2]
        ref1 = os.path.join(tmp, "rank1.jsonl")
        run("digest", ds, *common, *rank, "--out", ref1)
        cache = os.path.join(tmp, "cache-rank1")
        for attempt in ("cold", "warm"):
            out = os.path.join(tmp, f"rank1-{attempt}.jsonl")
            p = run("digest", ds, *common, *rank, "--workers", 2, "--cache", cache, "--out", out)
            assert lines(out) == lines(ref1), f"rank 1 {attempt}: stream changed"
        assert f"{len(lines(ref1))} batches read, 0 computed" in p.stdout, p.stdout

        # A flipped byte in a cached batch: reported once by path, recomputed.
        cache = os.path.join(tmp, "cache-w3")
        victim = sorted(glob.glob(os.path.join(cache, "*", "b*")))[3]
        with open(victim, "r+b") as f:
            f.seek(os.path.getsize(victim) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x40]))
        out = os.path.join(tmp, "flipped.jsonl")
        p = run("digest", ds, *common, "--workers", 0, "--cache", cache, "--out", out)
        assert lines(out) == want, "a corrupt cache file changed the stream"
        assert os.path.basename(victim) in p.stderr, p.stderr
        assert os.listdir(os.path.join(cache, ".corrupt")), "corrupt entry not moved aside"
    finally:
        shutil.rmtree(tmp)
    print("cache stream: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
