"""test_service_ranks.py - one data service per node: `serve --world K --ranks A-B`, `verify --world`.

On a small shapes dataset, world 4, batch 8 (regions named .sp-test-svcrk-<pid>-<n>):
 - two services, `--ranks 0-1` and `--ranks 2-3`, each print their range in
   the ready line and in `status`; four example trainers attach with their
   GLOBAL ranks (0, 1 to the first, 2, 3 to the second) and each prints the
   stream digest of `seedpipe digest --rank R --world 4`; both services serve
   their whole stream and exit 0;
 - a rank the service does not serve is refused, naming the service and its
   range ("serves ranks 2-3 of world 4; rank 0 is served by another node's
   service"); a range past the world, or one without --world, is a usage error;
 - a range that is not one rank of a smaller world (`--ranks 1-3`, next to
   `--ranks 0-0`) is served the same way (a span of slices) and refuses
   --cache with the reason;
 - a node does not decode other nodes' samples: in a copy of the dataset
   whose every sample at the positions of ranks 0-1 (epoch 0) is corrupt,
   `digest --rank 0` fails, yet a `--ranks 2-3` service with on-error fail
   serves ranks 2 and 3 their streams, equal to the clean dataset's;
 - `verify --world 1,2,4` passes (in-process ranks and two services per
   world size, equal to world 1); with the per-worker rng mode (the classic
   PyTorch scheme, whose draws follow each loader's own sample counter) the
   ranks' slices are not the global batch: exit 1 and the first divergence
   is named (world 2, epoch 0 batch 0, position 4 = rank 1's first sample);
   a world size that does not divide the batch size is a usage error;
 - no process of ours and no region of ours is left afterwards.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from cli_testlib import assert_nothing_left, finish, procs, region, run, serve, stop_all

BIN = os.environ.get("SEEDPIPE_BIN")
BUILD = os.environ.get("SP_BUILD_DIR", "")
TRAINER = os.path.join(BUILD, "example_trainer")
PREFIX = f".sp-test-svcrk-{os.getpid()}"   # dot: unseen by test_pool's /dev/shm count
_n = [0]


def new_name():
    _n[0] += 1
    return f"{PREFIX}-{_n[0]}"


def digest_of(p):
    for l in (p.stdout + p.stderr).splitlines():
        if l.startswith("digest:"):
            return l.split("stream ")[1].strip()
    raise AssertionError(p.stdout + p.stderr)


def stream_digest(text):
    for l in text.splitlines():
        if l.startswith("stream digest:"):
            return l.split()[2]
    raise AssertionError(f"no 'stream digest:' in {text}")


def trainers(names_by_rank):
    """Start one example trainer per (rank, region name) at once; their stdout by rank."""
    ps = {}
    for r, name in names_by_rank.items():
        p = subprocess.Popen([TRAINER, "--name", name, "--rank", str(r)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        procs.append(p)
        ps[r] = p
    out = {}
    for r, p in ps.items():
        o, e = p.communicate(timeout=60)
        assert p.returncode == 0, (r, p.returncode, o, e)
        out[r] = o
    return out


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    if not os.path.exists(TRAINER):
        print(f"SKIP: {TRAINER} not built")
        return 77
    tmp = tempfile.mkdtemp(prefix="sp-test-svcrk-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 100, "--size", 32, "--seed", 2)
        common = ["--pipeline", "shapes-train", "--seed", 11, "--epochs", 2, "--batch-size", 8]
        want = {r: digest_of(run("digest", ds, *common, "--rank", r, "--world", 4, "--out",
                                 "/dev/null")) for r in range(4)}
        assert len(set(want.values())) == 4, want

        # two services, ranks 0-1 and 2-3 of world 4
        a, b = new_name(), new_name()
        pa, la = serve(a, ds, common, "--workers", 2, "--world", 4, "--ranks", "0-1")
        pb, lb = serve(b, ds, common, "--workers", 2, "--world", 4, "--ranks", "2-3")
        assert f"ready {a} pid {pa.pid} world 4 ranks 0-1 workers 2" in la, la
        assert f"ready {b} pid {pb.pid} world 4 ranks 2-3 workers 2" in lb, lb
        st = run("status", b).stdout
        for word in ("clients (ranks 2-3 of world 4", "rank 2: never attached",
                     "rank 3: never attached"):
            assert word in st, (word, st)
        assert "rank 0:" not in st and "rank 1:" not in st, st
        t = run("--name", b, "--rank", 0, ok=False, exe=TRAINER)
        assert t.returncode == 1, t
        assert (f"service {b} serves ranks 2-3 of world 4; rank 0 is served by another "
                f"node's service") in t.stderr, t.stderr
        t = run("--name", a, "--rank", 4, ok=False, exe=TRAINER)
        assert t.returncode == 1 and "world 4" in t.stderr, t.stderr
        got = trainers({0: a, 1: a, 2: b, 3: b})
        for r in range(4):
            assert stream_digest(got[r]) == want[r], (r, got[r], want[r])
            assert f"rank {r} of 4" in got[r], got[r]
        for p in (pa, pb):
            rc, out, err = finish(p)
            assert rc == 0 and "served 26 of 26 batches" in out, (rc, out, err)
        assert not region(a) and not region(b)
        print("ranks 0-1 + 2-3: each rank's stream equals digest --rank R --world 4")

        # usage errors
        for extra, word in ((["--world", 4, "--ranks", "2-4"], "need A <= B < --world 4"),
                            (["--ranks", "0-1"], "--ranks needs --world"),
                            (["--world", 4, "--ranks", "3-1"], "need A <= B"),
                            (["--world", 4, "--ranks", "x"], "expected A-B")):
            p = run("serve", "--name", new_name(), ds, *common, "--workers", 1, *extra, ok=False)
            assert p.returncode == 2 and word in p.stderr, (extra, p.stderr)

        # an unaligned range: ranks 0 and 1-3 (a span of 3 slices)
        a, b = new_name(), new_name()
        p = run("serve", "--name", b, ds, *common, "--workers", 1, "--world", 4, "--ranks", "1-3",
                "--cache", os.path.join(tmp, "cache"), ok=False)
        assert p.returncode == 1 and "a cache entry holds one rank's stream" in p.stderr, p.stderr
        pa, _ = serve(a, ds, common, "--workers", 2, "--world", 4, "--ranks", "0")
        pb, lb = serve(b, ds, common, "--workers", 3, "--world", 4, "--ranks", "1-3")
        assert "world 4 ranks 1-3" in lb, lb
        got = trainers({0: a, 1: b, 2: b, 3: b})
        for r in range(4):
            assert stream_digest(got[r]) == want[r], (r, got[r], want[r])
        for p in (pa, pb):
            assert finish(p)[0] == 0
        print("ranks 0 + 1-3: each rank's stream equals digest --rank R --world 4")

        # ranks 2-3 never decode the samples of ranks 0-1
        one = ["--pipeline", "shapes-train", "--seed", 11, "--epochs", 1, "--batch-size", 8]
        clean = {r: digest_of(run("digest", ds, *one, "--rank", r, "--world", 4, "--out",
                                  "/dev/null")) for r in (2, 3)}
        bad = os.path.join(tmp, "shapes-bad")
        shutil.copytree(ds, bad)
        paths = sorted(os.path.relpath(os.path.join(d, f), bad)
                       for d, _, fs in os.walk(bad) for f in fs if d != bad)   # class/file
        listed = run("split", bad, "--split", "all=1", "--subset", "all").stdout.split()
        assert listed == paths, "the canonical order is the sorted relative paths"
        order = [int(x) for x in run("order", bad, "--seed", 11, "--epoch", 0).stdout.split()]
        hit = [order[p] for p in range(len(order)) if p % 8 < 4]   # ranks 0-1 of world 4
        for i in hit:
            with open(os.path.join(bad, paths[i]), "wb") as f:
                f.write(b"broken")
        p = run("digest", bad, *one, "--rank", 0, "--world", 4, "--out", "/dev/null", ok=False)
        assert p.returncode == 1, p
        name = new_name()
        pb, _ = serve(name, bad, one, "--workers", 2, "--world", 4, "--ranks", "2-3",
                      "--on-error", "fail")
        got = trainers({2: name, 3: name})
        for r in (2, 3):
            assert stream_digest(got[r]) == clean[r], (r, got[r], clean[r])
        rc, out, err = finish(pb)
        assert rc == 0 and "served 13 of 13 batches" in out and "failed" not in err, (out, err)
        print(f"ranks 2-3 served to the end with the {len(hit)} samples of ranks 0-1 corrupt")

        # verify --world
        v = run("verify", ds, *common, "--workers", "1,2", "--world", "1,2,4", "--no-crash",
                "--no-resume", "--no-cache")
        rows = [l for l in v.stdout.splitlines() if l.startswith("world ")]
        assert len(rows) == 4 and all(r.rstrip().endswith("yes") for r in rows), v.stdout
        assert "world 4, services 0-1 + 2-3" in v.stdout, v.stdout
        assert any(l.startswith("in-process, world 1") and l.rstrip().endswith("reference")
                   for l in v.stdout.splitlines()), v.stdout
        assert "verify: all configurations give identical streams" in v.stdout, v.stdout
        assert "world sizes 1,2,4" in v.stdout, v.stdout
        v = run("verify", ds, *common, "--workers", 1, "--world", "1,2", "--rng-mode",
                "per-worker", "--no-crash", "--no-resume", "--no-service", "--no-cache", ok=False)
        assert v.returncode == 1, (v.returncode, v.stdout, v.stderr)
        assert any(l.startswith("workers 1") and l.rstrip().endswith("yes")
                   for l in v.stdout.splitlines()), v.stdout
        assert any(l.startswith("world 2, in-process ranks") and l.rstrip().endswith("NO")
                   for l in v.stdout.splitlines()), v.stdout
        assert ("world 2, in-process ranks: first divergence from world 1 at epoch 0, batch 0"
                in v.stdout), v.stdout
        assert "position 4 (rank 1 of world 2, its position 0)" in v.stdout, v.stdout
        assert "in world 1" in v.stdout and "in world 2" in v.stdout, v.stdout
        assert "verify: MISMATCH" in v.stdout, v.stdout
        v = run("verify", ds, *common, "--world", "1,3", ok=False)
        assert v.returncode == 2 and "not divisible by 3" in v.stderr, v.stderr
        print("verify --world: 1,2,4 equal; per-worker rng diverges at rank 1's first sample")
    finally:
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    assert_nothing_left(PREFIX)
    print("service ranks: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
