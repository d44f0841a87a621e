"""test_service_cli.py - `seedpipe serve`, `status` and examples/trainer end to end.

On a small shapes dataset (regions named .sp-test-svccli-<pid>-<n>):
 - serve prints exactly one "ready" line; status shows progress, ring,
   workers and clients; the example trainer's stream digest equals
   `seedpipe digest`'s; serve exits 0 after the stream and unlinks its region;
 - serve --resume STATE: the trainer gets the rest of the stream, equal to
   `digest --resume STATE`;
 - --world 2 with two trainers as ranks 0 and 1: each prints the stream
   digest of `seedpipe digest --rank r --world 2`;
 - a trainer SIGKILLed while holding a batch (--hold-and-die): the other rank
   still gets its whole stream and serve reports the client death;
 - a second serve with a live name is refused; after SIGKILL of the service
   its region stays, status and the trainer call it stale, and the next serve
   removes it with a message; SIGTERM makes serve exit 0, unlink the region
   and leave no worker behind;
 - a bad name is refused; verify shows the two service rows equal;
 - no process of ours and no region of ours is left afterwards.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import shutil

from cli_testlib import (alive, assert_nothing_left, finish, procs, region, run, serve,
                         stop_all, worker_pids)

BIN = os.environ.get("SEEDPIPE_BIN")
BUILD = os.environ.get("SP_BUILD_DIR", "")
TRAINER = os.path.join(BUILD, "example_trainer")
PREFIX = f".sp-test-svccli-{os.getpid()}"   # dot: unseen by test_pool's /dev/shm count
_n = [0]


def new_name():
    _n[0] += 1
    return f"{PREFIX}-{_n[0]}"


def trainer(name, *extra, ok=True):
    return run("--name", name, *extra, ok=ok, exe=TRAINER)


def stream_digest(text, prefix):
    for l in text.splitlines():
        if l.startswith(prefix):
            return l.split()[2 if prefix == "stream digest:" else -1].rstrip(",")
    raise AssertionError(f"no '{prefix}' in {text}")


def digest_of(p):
    for l in (p.stdout + p.stderr).splitlines():
        if l.startswith("digest:"):
            return l.split("stream ")[1].strip()
    raise AssertionError(p.stdout + p.stderr)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    if not os.path.exists(TRAINER):
        print(f"SKIP: {TRAINER} not built")
        return 77
    tmp = tempfile.mkdtemp(prefix="sp-test-svccli-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 100, "--size", 32, "--seed", 2)
        common = ["--pipeline", "shapes-train", "--seed", 11, "--epochs", 2, "--batch-size", 8]
        ref = digest_of(run("digest", ds, *common, "--out", "/dev/null"))
        ranks = [digest_of(run("digest", ds, *common, "--rank", r, "--world", 2, "--out",
                               "/dev/null")) for r in (0, 1)]

        # one client
        name = new_name()
        p, line = serve(name, ds, common, "--workers", 2)
        assert f"ready {name} pid {p.pid} world 1 workers 2" in line, line
        st = run("status", name).stdout
        for word in ("service pid", "progress: epoch", "throughput:", "ring: 4 slots",
                     "worker 1: pid", "rank 0: never attached"):
            assert word in st, (word, st)
        t = trainer(name)
        assert stream_digest(t.stdout, "stream digest:") == ref, (t.stdout, ref)
        assert "epoch 0: 13 batches, 100 images" in t.stdout, t.stdout
        rc, out, err = finish(p)
        assert rc == 0, (rc, out, err)
        assert not any(l.startswith("ready") for l in out.splitlines()), out
        assert "served 26 of 26 batches" in out, out
        assert not region(name)

        # two ranks
        name = new_name()
        p, _ = serve(name, ds, common, "--workers", 2, "--world", 2)
        t1 = subprocess.Popen([TRAINER, "--name", name, "--rank", "1"], stdout=subprocess.PIPE,
                              text=True)
        procs.append(t1)
        t0 = trainer(name, "--rank", 0)
        out1, _ = t1.communicate(timeout=30)
        assert t1.returncode == 0
        assert stream_digest(t0.stdout, "stream digest:") == ranks[0], t0.stdout
        assert stream_digest(out1, "stream digest:") == ranks[1], out1
        assert finish(p)[0] == 0 and not region(name)

        # --resume: serve from a saved state; the trainer gets the rest
        st = os.path.join(tmp, "state.json")
        run("digest", ds, *common, "--stop-after", 9, "--save-state", st, "--out", "/dev/null")
        rest = digest_of(run("digest", ds, *common, "--resume", st, "--out", "/dev/null"))
        name = new_name()
        p, _ = serve(name, ds, common, "--workers", 2, "--resume", st)
        t = trainer(name)
        assert stream_digest(t.stdout, "stream digest:") == rest, (t.stdout, rest)
        assert "(17 batches" in t.stdout and "next state: epoch 2 batch 0" in t.stdout, t.stdout
        assert finish(p)[0] == 0 and not region(name)

        # a client dies holding a batch
        name = new_name()
        p, _ = serve(name, ds, common, "--workers", 2, "--world", 2, "--ring", 3)
        d = trainer(name, "--rank", 1, "--hold-and-die", 3, ok=False)
        assert d.returncode == -signal.SIGKILL, d
        t0 = trainer(name, "--rank", 0)
        assert stream_digest(t0.stdout, "stream digest:") == ranks[0], t0.stdout
        rc, out, err = finish(p)
        assert rc == 0 and "1 client death" in out, (out, err)
        assert not region(name)

        # live refusal, stale cleanup, SIGTERM
        name = new_name()
        a, _ = serve(name, ds, common, "--workers", 2)
        b = run("serve", "--name", name, ds, *common, "--workers", 1, ok=False)
        assert b.returncode == 1 and f"is served by pid {a.pid}" in b.stderr, b.stderr
        assert not b.stdout.startswith("ready"), b.stdout
        workers = worker_pids(name)
        assert len(workers) == 2
        a.kill()
        a.wait()
        assert region(name)
        for _ in range(200):
            if not any(alive(w) for w in workers):
                break
            time.sleep(0.01)
        assert not any(alive(w) for w in workers), "workers outlived the killed service"
        s = run("status", name, ok=False)
        assert s.returncode == 1 and "stale" in s.stdout, s.stdout
        t = trainer(name, ok=False)
        assert t.returncode == 1 and "stale" in t.stderr, t.stderr
        c, line = serve(name, ds, common, "--workers", 2)
        workers = worker_pids(name)
        c.send_signal(signal.SIGTERM)
        rc, out, err = finish(c)
        assert rc == 0 and "stopped by a signal" in out, (rc, out, err)
        assert f"removed stale region {name} (service pid {a.pid} is gone)" in err, err
        assert not region(name)
        assert not any(alive(w) for w in workers), "workers outlived SIGTERM"

        # bad names, bad world
        b = run("serve", "--name", "a/b", ds, *common, "--workers", 1, ok=False)
        assert b.returncode == 1 and "only letters" in b.stderr, b.stderr
        b = run("serve", "--name", new_name(), ds, *common, "--workers", 1, "--world", 3,
                ok=False)
        assert b.returncode == 2 and "divisible" in b.stderr, b.stderr

        # verify's service rows
        v = run("verify", ds, *common, "--workers", "1,2", "--no-crash", "--no-resume")
        rows = [l for l in v.stdout.splitlines() if l.startswith("service")]
        assert len(rows) == 2 and all(r.rstrip().endswith("yes") for r in rows), v.stdout
    finally:
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    assert_nothing_left(PREFIX)
    print("service cli: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
