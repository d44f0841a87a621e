#!/usr/bin/python3
"""soak.py - soak test of `seedpipe serve` under random worker kills (issue 7, item 5).

A benchmark, not a CI test: run by hand, prints numbers, exits non-zero on
any wrong byte or leak.

  1. makes (or reuses) the built-in shapes dataset out/soak-shapes
     (make-shapes --count 2000 --size 48);
  2. computes the expected stream of each rank in-process:
     `seedpipe digest --rank r --world 2` for EPOCHS epochs -> one manifest
     per rank (every batch digest) and its "stream" digest;
  3. starts `seedpipe serve --world 2 --workers 3` on a unique region name
     and attaches 2 clients (rank 0 and rank 1), each in its own process;
  4. while they run, SIGKILLs a random live worker (pid from `seedpipe
     status NAME`, checked to be a child of the service) every U(lo, hi)
     seconds, from a seeded RNG;
  5. checks what each client got: CLIENT=check (default) is a client on the
     C client API (libseedpipe.so through ctypes) that compares every
     batch's (epoch, index) and digest with the rank's manifest line at that
     stream position; CLIENT=trainer runs build/example_trainer and
     compares its "stream digest" with the manifest's stream digest (one
     comparison per rank);
  6. reports batches served, kills performed, worker deaths the service
     noticed (its final line), mismatches and wall time; checks that the
     service, every worker pid ever seen and the clients are gone and that
     /dev/shm holds no entry with the region's name.

Exit 0 only when: both clients got their full stream with 0 mismatches, the
service exited 0 having served every batch, nothing leaked, all within
TIMEOUT. Everything started is killed on exit (also on Ctrl-C / SIGTERM).

Environment (defaults):
  EPOCHS=20  KILL_EVERY=0.2-1.0 (seconds, uniform)  KILL_SEED=1
  WORKERS=3  BATCH=64  SEED=1 (pipeline seed)  PIPELINE=shapes-train
  DATASET=out/soak-shapes  BUILD=build  CLIENT=check|trainer
  TIMEOUT=110 (seconds for the serve phase; the run fails past it)
  CACHE=DIR (serve --cache DIR: the first run fills the epoch cache while
  workers are killed mid-write, a second run with the same DIR reads it
  while workers are killed mid-read; the service's cache line is printed)

  /usr/bin/python3 bench/soak.py
  EPOCHS=200 TIMEOUT=600 /usr/bin/python3 bench/soak.py
"""
import ctypes
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
BIN = os.path.join(BUILD, "seedpipe")
TRAINER = os.path.join(BUILD, "example_trainer")
LIB = os.path.join(BUILD, "libseedpipe.so")
# the client (sp__client_*) as spt_client_* (tests/testing_lib.c; a test build)
TESTING_LIB = os.path.join(BUILD, "libseedpipe_testing.so")
WORLD = 2


# ---- the checking client (child process): C client API through ctypes ---------------------

class SpError(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class SpBatch(ctypes.Structure):   # sp_batch (include/seedpipe/pool.h), as tests/faults
    _fields_ = [("capacity", ctypes.c_uint32), ("count", ctypes.c_uint32),
                ("epoch", ctypes.c_uint32), ("index", ctypes.c_uint64),
                ("images", ctypes.c_void_p), ("labels", ctypes.c_void_p),
                ("indices", ctypes.c_void_p), ("nskipped", ctypes.c_uint32),
                ("skipped", ctypes.c_void_p), ("nsubstituted", ctypes.c_uint32),
                ("substituted", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("_reserved", ctypes.c_uint8 * 256)]   # include/seedpipe/loader.h, and room


class SpDigest(ctypes.Structure):
    _fields_ = [("hi", ctypes.c_uint64), ("lo", ctypes.c_uint64)]


def read_manifest(path):
    """[(epoch, batch, digest hex)] in stream order (the header line skipped)."""
    with open(path) as f:
        lines = f.read().splitlines()
    return [(b["epoch"], b["batch"], b["digest"]) for b in map(json.loads, lines[1:])]


def client_main(name, rank, manifest):
    """Take the whole stream of `rank`; compare every batch with the manifest
    line at the same position; print one JSON line with the counts."""
    exp = read_manifest(manifest)
    lib = ctypes.CDLL(TESTING_LIB)
    lib.spt_client_batch_digest.restype = SpDigest
    lib.spt_client_batch_digest.argtypes = [ctypes.c_void_p, ctypes.POINTER(SpBatch)]
    err = SpError()
    c = ctypes.c_void_p()
    res = {"rank": rank, "batches": 0, "expected": len(exp), "mismatches": 0,
           "first_mismatch": None, "error": None}
    if lib.spt_client_attach(name.encode(), rank, ctypes.byref(c), ctypes.byref(err)) != 0:
        res["error"] = "attach: " + err.msg.decode(errors="replace")
        print(json.dumps(res), flush=True)
        return 1
    v = SpBatch()
    while True:
        rc = lib.spt_client_next(c, ctypes.byref(v), ctypes.byref(err))
        if rc == 1:       # SP_END
            break
        if rc != 0:
            res["error"] = err.msg.decode(errors="replace")
            break
        d = lib.spt_client_batch_digest(c, ctypes.byref(v))
        got = (v.epoch, v.index, f"{d.hi:016x}{d.lo:016x}")
        i = res["batches"]
        if i >= len(exp) or got != exp[i]:
            res["mismatches"] += 1
            if res["first_mismatch"] is None:
                res["first_mismatch"] = {"position": i, "got": got,
                                         "expected": exp[i] if i < len(exp) else None}
        res["batches"] += 1
        if lib.spt_client_release(c, ctypes.byref(v), ctypes.byref(err)) != 0:
            res["error"] = "release: " + err.msg.decode(errors="replace")
            break
    lib.spt_client_detach(c)
    print(json.dumps(res), flush=True)
    return 0 if res["error"] is None else 1


# ---- the driver ------------------------------------------------------------------------

started = []        # Popen objects we own
seen_workers = set()
state = {"name": None, "tmp": None, "serve": None}


def alive(pid):
    """True unless the pid is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def wait_dead(pids, secs=5.0):
    t = time.time() + secs
    while time.time() < t and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def cleanup():
    """Kill whatever of ours is still running, remove our region and temp dir."""
    for p in started:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM if p is state["serve"] else signal.SIGKILL)
            except OSError:
                pass
    for p in started:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for w in wait_dead(sorted(seen_workers), 2.0):
        # only a pid still parented to our (now dead) service, or reparented
        # seedpipe worker of this run: check the command line first
        try:
            with open(f"/proc/{w}/cmdline", "rb") as f:
                if b"seedpipe" in f.read():
                    os.kill(w, signal.SIGKILL)
        except OSError:
            pass
    if state["name"] and os.path.exists(f"/dev/shm/{state['name']}"):
        os.unlink(f"/dev/shm/{state['name']}")
    if state["tmp"]:
        shutil.rmtree(state["tmp"], ignore_errors=True)


def on_signal(sig, _frm):
    cleanup()
    sys.exit(128 + sig)


def worker_pids(name, serve_pid):
    """Live worker pids from `seedpipe status NAME`, checked to be children of the service."""
    p = subprocess.run([BIN, "status", name], capture_output=True, text=True, timeout=10)
    pids = []
    for line in p.stdout.splitlines():
        t = line.split()
        if len(t) >= 5 and t[0] == "worker" and t[2] == "pid" and t[4].startswith("alive"):
            pid = int(t[3])
            seen_workers.add(pid)
            if ppid(pid) == serve_pid:
                pids.append(pid)
    return pids


def env_float_range(s):
    lo, hi = (float(x) for x in re.split(r"[-,:]", s))
    assert 0 < lo <= hi, f"KILL_EVERY={s}: want lo-hi seconds, 0 < lo <= hi"
    return lo, hi


def main():
    epochs = int(os.environ.get("EPOCHS", "20"))
    lo, hi = env_float_range(os.environ.get("KILL_EVERY", "0.2-1.0"))
    kill_seed = int(os.environ.get("KILL_SEED", "1"))
    workers = int(os.environ.get("WORKERS", "3"))
    batch = int(os.environ.get("BATCH", "64"))
    seed = os.environ.get("SEED", "1")
    pipeline = os.environ.get("PIPELINE", "shapes-train")
    dataset = os.path.join(ROOT, os.environ.get("DATASET", "out/soak-shapes"))
    client = os.environ.get("CLIENT", "check")
    timeout = float(os.environ.get("TIMEOUT", "110"))
    assert client in ("check", "trainer"), "CLIENT=check|trainer"
    for f in (BIN, TRAINER, LIB):
        if not os.path.exists(f):
            sys.exit(f"soak: {f} missing (build first)")

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t_start = time.time()
    tmp = state["tmp"] = tempfile.mkdtemp(prefix="sp-soak-")
    name = state["name"] = f"sp-soak-{os.getpid()}-{int(t_start)}"

    if not os.path.isdir(dataset):
        subprocess.run([BIN, "make-shapes", dataset, "--count", "2000", "--size", "48"],
                       check=True, stdout=subprocess.DEVNULL)
    common = ["--pipeline", pipeline, "--seed", seed, "--batch-size", str(batch),
              "--epochs", str(epochs)]

    # expected streams, both ranks in parallel (one thread each)
    t0 = time.time()
    refs = []
    for r in range(WORLD):
        out = os.path.join(tmp, f"rank{r}.jsonl")
        p = subprocess.Popen([BIN, "digest", dataset, *common, "--threads", "1", "--rank",
                              str(r), "--world", str(WORLD), "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(p)
        refs.append((p, out))
    expected = []
    for p, out in refs:
        so, se = p.communicate()
        m = re.search(r"stream ([0-9a-f]{32})", so)
        if p.returncode != 0 or not m:
            sys.exit(f"soak: digest failed: {so}{se}")
        expected.append((out, m.group(1), len(read_manifest(out))))
    t_ref = time.time() - t0

    print(f"soak: {dataset}, {pipeline}, seed {seed}, batch {batch}, {epochs} epochs, "
          f"world {WORLD}, {workers} workers, region {name}, client {client}, "
          f"kill every U({lo}, {hi}) s (kill seed {kill_seed}), {os.cpu_count()} cores",
          flush=True)
    print(f"expected: rank 0 {expected[0][2]} batches stream {expected[0][1]}; "
          f"rank 1 {expected[1][2]} batches stream {expected[1][1]} ({t_ref:.1f} s)",
          flush=True)

    # the service
    t0 = time.time()
    serve_out = open(os.path.join(tmp, "serve.out"), "w+")
    cache = os.environ.get("CACHE")
    sp = subprocess.Popen([BIN, "serve", "--name", name, dataset, *common, "--workers",
                           str(workers), "--world", str(WORLD),
                           *(["--cache", cache] if cache else [])],
                          stdout=serve_out, stderr=subprocess.STDOUT, text=True)
    started.append(sp)
    state["serve"] = sp
    while True:
        serve_out.seek(0)
        first = serve_out.readline()
        if first.startswith("ready"):
            break
        if sp.poll() is not None or time.time() - t0 > 20:
            serve_out.seek(0)
            sys.exit(f"soak: serve did not start: {serve_out.read()}")
        time.sleep(0.02)
    worker_pids(name, sp.pid)

    # the clients
    clients = []
    for r in range(WORLD):
        if client == "check":
            cmd = [sys.executable, os.path.abspath(__file__), "--client", name, str(r),
                   expected[r][0]]
        else:
            cmd = [TRAINER, "--name", name, "--rank", str(r)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(p)
        clients.append(p)

    # the killer
    rng = random.Random(kill_seed)
    kills, kill_log, timed_out = 0, [], False
    deadline = t0 + timeout
    next_kill = time.time() + rng.uniform(lo, hi)
    while any(p.poll() is None for p in clients):
        now = time.time()
        if now > deadline:
            timed_out = True
            break
        if now >= next_kill:
            try:
                pids = worker_pids(name, sp.pid) if sp.poll() is None else []
            except subprocess.TimeoutExpired:
                pids = []
            if pids:
                w = rng.choice(pids)
                try:
                    os.kill(w, signal.SIGKILL)
                    kills += 1
                    kill_log.append(round(now - t0, 2))
                except ProcessLookupError:
                    pass
            next_kill = time.time() + rng.uniform(lo, hi)
        time.sleep(0.01)

    results = []
    if not timed_out:
        for r, p in enumerate(clients):
            so, se = p.communicate(timeout=30)
            results.append((p.returncode, so, se))
        try:
            sp.wait(timeout=30)
        except subprocess.TimeoutExpired:
            timed_out = True
    t_serve = time.time() - t0
    # a last look at the workers before the service is stopped (records every pid seen)
    if sp.poll() is None:
        try:
            worker_pids(name, sp.pid)
        except subprocess.TimeoutExpired:
            pass
    cleanup_needed = timed_out or sp.poll() is None
    if cleanup_needed:
        cleanup()
    serve_out.seek(0)
    serve_text = serve_out.read()
    serve_out.close()
    lines_out = serve_text.strip().splitlines()
    cache_line = next((ln for ln in lines_out if ln.startswith("cache ")), "")
    lines_out = [ln for ln in lines_out if not ln.startswith("cache ")]
    last = lines_out[-1] if lines_out else ""

    # outcome
    fail = []
    mismatches = 0
    got_batches = []
    for r, (rc, so, se) in enumerate(results):
        if client == "check":
            try:
                res = json.loads(so.strip().splitlines()[-1])
            except (ValueError, IndexError):
                res = {"batches": 0, "mismatches": 0, "error": f"no result: {so}{se}"}
            mismatches += res["mismatches"]
            got_batches.append(res["batches"])
            if res["mismatches"]:
                fail.append(f"rank {r}: {res['mismatches']} mismatches, first "
                            f"{res['first_mismatch']}")
            if res["error"] or res["batches"] != expected[r][2]:
                fail.append(f"rank {r}: {res['batches']} of {expected[r][2]} batches, "
                            f"error {res['error']}")
            print(f"rank {r}: {res['batches']} batches checked one by one against the "
                  f"manifest, {res['mismatches']} mismatches", flush=True)
        else:
            m = re.search(r"stream digest: ([0-9a-f]{32}) \((\d+) batches", so)
            n = int(m.group(2)) if m else 0
            got_batches.append(n)
            ok = bool(m) and m.group(1) == expected[r][1] and rc == 0
            mismatches += 0 if ok else 1
            if not ok:
                fail.append(f"rank {r}: rc {rc}, got {m.group(0) if m else se.strip()!r}, "
                            f"expected stream {expected[r][1]}")
            print(f"rank {r}: stream digest {m.group(1) if m else '-'} ({n} batches) "
                  f"{'==' if ok else '!='} expected {expected[r][1]}", flush=True)
    if timed_out:
        fail.append(f"timed out after {timeout:.0f} s")
    m = re.search(r"served (\d+) of (\d+) batches", last)
    served = f"{m.group(1)} of {m.group(2)}" if m else "?"
    if sp.returncode != 0 or not m or m.group(1) != m.group(2):
        fail.append(f"serve: rc {sp.returncode}, last line {last!r}")
    m = re.search(r"(\d+) worker deaths?", last)
    noticed = int(m.group(1)) if m else -1

    # leaks
    ours = [sp.pid] + [p.pid for p in clients]
    left = wait_dead(ours + sorted(seen_workers), 5.0)
    if left:
        fail.append(f"processes left: {left}")
    if os.path.exists(f"/dev/shm/{name}"):
        fail.append(f"region /dev/shm/{name} left")
    cleanup()

    print(f"served {served} batches (clients took {' + '.join(map(str, got_batches))}); "
          f"worker kills {kills}; worker deaths noticed by the service {noticed}; "
          f"mismatches {mismatches}; serve phase {t_serve:.1f} s, "
          f"wall {time.time() - t_start:.1f} s", flush=True)
    if cache_line:
        print(cache_line, flush=True)
    print(f"serve: {last}", flush=True)
    print(f"kills at (s after serve start): {kill_log}", flush=True)
    leaked = [f for f in fail if "left" in f]
    print(f"leaks: {'YES' if leaked else 'none'} ({len(seen_workers)} worker pids seen, "
          f"service and clients: {'see FAIL' if leaked else 'all gone'}; "
          f"/dev/shm/{name}: {'see FAIL' if leaked else 'absent'})", flush=True)
    if fail:
        for f in fail:
            print("FAIL: " + f, flush=True)
        return 1
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--client":
        sys.exit(client_main(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    try:
        rc = main()
    finally:
        cleanup()
    sys.exit(rc)
