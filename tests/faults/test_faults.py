"""test_faults.py - the fault matrix (issue 7), end to end through the CLI.

Every row injects one fault into a small shapes stream (60 images, batch 8,
2 epochs = 16 batches) and asserts four things:
  message  what the user sees names the fault (and the file, region or pid);
  bytes    no wrong byte was served: every batch digest that was delivered
           equals the clean run's manifest line for that (epoch, batch);
  leaks    no process of ours, no /dev/shm region of ours, no cache
           temporary and no mount is left behind;
  resume   the stream goes on where DESIGN.md says (a respawned worker redoes
           its work; a client resumes from its loader state with `serve
           --resume`; the cache goes on uncached; the on-error policy acts).

Rows: SIGKILL of a worker (idle and mid-stream), a worker crash on a poison
sample (on-error fail and skip; a test hook: skipped with the reason unless
SP_TEST_HOOKS=1, which ctest sets for a build with SEEDPIPE_TEST_HOOKS=ON),
the worker of one sample killed 3 times (digest and serve unchanged) and
every time (the respawn bound's error; the same hook),
SIGKILL of the service, SIGKILL of a client holding a batch, SIGTERM of the
service, a disk that fills during a cache
write (tmpfs of 256 KiB; skipped with the reason if mount fails), a file
that changes or disappears mid-epoch, a corrupt file under each --on-error
policy, a stale region and a hostile region (garbage, bad offsets, too big,
hostile counts, mode 0644, another owner).

Clients are driven through the C client API (libseedpipe.so via ctypes, a
child process per client: `test_faults.py --client NAME RANK`, reading
commands on stdin), so a test can hold a batch, wait, and see errors.
Regions are named .sp-faults-<pid>-<n>. Prints a table; exit 0 when every
row passes, 77 (skip) when the CLI is missing.
"""
import ctypes
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_testlib import alive, finish, procs, run, worker_pids  # noqa: E402
from cli_testlib import children_left as _children_left  # noqa: E402
from cli_testlib import serve as _serve  # noqa: E402


def serve(name, ds, common, *extra, env=None):
    return _serve(name, ds, common, *extra, env=env)[0]


def children_left():
    return _children_left(live_only=True)

BIN = os.environ.get("SEEDPIPE_BIN", "")
BUILD = os.environ.get("SP_BUILD_DIR") or os.path.dirname(BIN)
LIB = os.path.join(BUILD, "libseedpipe.so")
# the client (sp__client_*) as spt_client_* (tests/testing_lib.c; a test build)
TESTING_LIB = os.path.join(BUILD, "libseedpipe_testing.so")
TRAINER = os.path.join(BUILD, "example_trainer")
PREFIX = f".sp-faults-{os.getpid()}"
_n = [0]
mounts = []


# ---- the client child: the C client API through ctypes ------------------------------

class SpError(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class SpBatch(ctypes.Structure):
    _fields_ = [("capacity", ctypes.c_uint32), ("count", ctypes.c_uint32),
                ("epoch", ctypes.c_uint32), ("index", ctypes.c_uint64),
                ("images", ctypes.c_void_p), ("labels", ctypes.c_void_p),
                ("indices", ctypes.c_void_p), ("nskipped", ctypes.c_uint32),
                ("skipped", ctypes.c_void_p), ("nsubstituted", ctypes.c_uint32),
                ("substituted", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("_reserved", ctypes.c_uint8 * 256)]   # include/seedpipe/loader.h, and room


class SpDigest(ctypes.Structure):
    _fields_ = [("hi", ctypes.c_uint64), ("lo", ctypes.c_uint64)]


def client_main(name, rank):
    """stdin commands: 'next' -> 'batch E B HEX' | 'end' | 'error MSG';
    'release' (oldest held); 'state' -> the loader state line; 'quit'."""
    lib = ctypes.CDLL(TESTING_LIB)
    lib.spt_client_batch_digest.restype = SpDigest
    lib.spt_client_batch_digest.argtypes = [ctypes.c_void_p, ctypes.POINTER(SpBatch)]
    err = SpError()
    c = ctypes.c_void_p()
    rc = lib.spt_client_attach(name.encode(), rank, ctypes.byref(c), ctypes.byref(err))
    out = sys.stdout
    if rc != 0:
        out.write("attach-error " + err.msg.decode(errors="replace") + "\n")
        out.flush()
        return 1
    out.write("attached\n")
    out.flush()
    held = []
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "next":
            v = SpBatch()
            rc = lib.spt_client_next(c, ctypes.byref(v), ctypes.byref(err))
            if rc == 0:
                d = lib.spt_client_batch_digest(c, ctypes.byref(v))
                held.append(v)
                out.write(f"batch {v.epoch} {v.index} {d.hi:016x}{d.lo:016x}\n")
            elif rc == 1:
                out.write("end\n")
            else:
                out.write("error " + err.msg.decode(errors="replace") + "\n")
        elif cmd == "release":
            v = held.pop(0)
            lib.spt_client_release(c, ctypes.byref(v), ctypes.byref(err))
            out.write("released\n")
        elif cmd == "state":
            st = ctypes.create_string_buffer(512)   # sp_loader_state (< 512 bytes)
            buf = ctypes.create_string_buffer(4096)
            lib.sp_client_state(c, st)
            lib.sp_loader_state_format(st, buf, ctypes.c_size_t(4096))
            out.write("state " + buf.value.decode().strip() + "\n")
        elif cmd == "quit":
            break
        out.flush()
    lib.spt_client_detach(c)
    out.write("detached\n")
    out.flush()
    return 0


CLIENT_ENV = None   # set by client_env(): the environment of the client children


def client_env():
    """A library built with -fsanitize=address (build-asan) cannot be loaded
    into python unless the ASan runtime comes first: preload it (and keep
    ASan's leak checker off: python itself is not leak-clean)."""
    env = dict(os.environ)
    probe = [sys.executable, "-c", f"import ctypes; ctypes.CDLL({LIB!r})"]
    if subprocess.run(probe, capture_output=True, env=env).returncode == 0:
        return env
    ldd = subprocess.run(["ldd", LIB], capture_output=True, text=True).stdout
    pre = [l.split("=>")[1].split()[0] for l in ldd.splitlines()
           if "=>" in l and "libasan" in l]
    env["LD_PRELOAD"] = ":".join(pre)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    if subprocess.run(probe, capture_output=True, env=env).returncode != 0:
        return None
    return env


class Client:
    def __init__(self, name, rank=0):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--client", name,
                                   str(rank)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=CLIENT_ENV)
        procs.append(self.p)
        self.first = self.p.stdout.readline().strip()

    def cmd(self, c):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def take(self, n, release=True):
        got = []
        for _ in range(n):
            r = self.cmd("next")
            got.append(r)
            if not r.startswith("batch"):
                break
            if release:
                self.cmd("release")
        return got

    def quit(self):
        if self.p.poll() is None:
            try:
                self.cmd("quit")
            except (BrokenPipeError, OSError):
                pass
        self.p.wait(timeout=10)


# ---- helpers -------------------------------------------------------------------------------

def new_name():
    _n[0] += 1
    return f"{PREFIX}-{_n[0]}"


def wait_dead(pids, secs=3.0):
    t = time.time() + secs
    while time.time() < t and any(alive(p) for p in pids):
        time.sleep(0.01)
    return not any(alive(p) for p in pids)


def regions():
    return sorted(f for f in os.listdir("/dev/shm") if f.startswith(PREFIX))


def manifest(path):
    with open(path) as f:
        ls = f.read().splitlines()
    return [json.loads(l) for l in ls[1:]]


def by_pos(lines):
    return {(b["epoch"], b["batch"]): b for b in lines}


def check_served(got, ref, start=0):
    """got: client lines 'batch E B HEX'; each must equal the reference's digest."""
    keys = list(ref.keys())
    n = 0
    for i, g in enumerate(got):
        if not g.startswith("batch"):
            continue
        _, e, b, d = g.split()
        k = (int(e), int(b))
        assert k == keys[start + i], f"batch {k} delivered at stream position {start + i}"
        assert d == ref[k]["digest"], f"wrong bytes served for batch {k}"
        n += 1
    return n


def sample_paths(ds):
    """Relative sample paths in canonical (byte-wise sorted) order."""
    rel = []
    for root, _, files in os.walk(ds):
        for f in files:
            if f.lower().endswith((".png", ".jpg", ".jpeg")) and not f.startswith("."):
                rel.append(os.path.relpath(os.path.join(root, f), ds))
    return sorted(rel, key=lambda s: s.encode())


def no_leaks(extra_dirs=()):
    kids = children_left()
    assert not kids, f"processes left: {kids}"
    assert not regions(), f"regions left: {regions()}"
    for d in extra_dirs:
        if os.path.isdir(d):
            left = os.listdir(d)
            assert not left, f"temporaries left in {d}: {left}"


# ---- the rows ----------------------------------------------------------------------------

class Ctx:
    pass


def row_worker_kill(x):
    """SIGKILL of a worker mid-stream: respawned, its work redone, stream unchanged."""
    name = new_name()
    p = serve(name, x.ds, x.common, "--workers", 2, "--ring", 2)
    cl = Client(name)
    assert cl.first == "attached", cl.first
    got = cl.take(3)
    workers = worker_pids(name)
    os.kill(workers[0], signal.SIGKILL)        # idle (ring full) ...
    got += cl.take(2)
    os.kill(worker_pids(name)[1], signal.SIGKILL)   # ... and again, while the ring refills
    got += cl.take(20)
    assert got[-1] == "end", got[-3:]
    n = check_served(got, x.ref)
    assert n == 16, n
    cl.quit()
    rc, out, err = finish(p)
    # the first kill is always noticed (work was left); the second one only
    # if the stream still needed that worker
    assert rc == 0 and ("1 worker death," in out or "2 worker deaths" in out), (rc, out, err)
    assert wait_dead(workers)
    no_leaks()
    return "serve: 'N worker deaths'", f"{n}/16 batches = clean", "respawned, work redone"


def row_poison(x):
    """A worker that crashes on one sample (SEEDPIPE_TEST_CRASH_SAMPLE=17: a
    test hook, only in builds configured with SEEDPIPE_TEST_HOOKS=ON, for
    which ctest sets SP_TEST_HOOKS=1)."""
    if os.environ.get("SP_TEST_HOOKS") != "1":
        return None, None, ("SKIP: the crash hook is compiled only with "
                            "-DSEEDPIPE_TEST_HOOKS=ON (SP_TEST_HOOKS=1 not set)")
    env = {"SEEDPIPE_TEST_CRASH_SAMPLE": "17"}
    out = os.path.join(x.tmp, "poison.jsonl")
    p = run("digest", x.ds, *x.common, "--workers", 2, "--out", out, ok=False, env=env)
    assert p.returncode == 1, p
    assert "worker process died 2 times while computing it" in p.stderr, p.stderr
    assert f"sample 17: " in p.stderr, p.stderr
    p = run("digest", x.ds, *x.common, "--workers", 2, "--on-error", "skip", "--out", out,
            env=env)
    got = manifest(out)
    n = 0
    for b in got:
        k = (b["epoch"], b["batch"])
        if 17 in b.get("skipped", []):
            assert 17 not in b["indices"]
            n += 1
        else:
            assert b == x.ref[k], f"batch {k} differs"
    assert n == 2, n   # once per epoch
    no_leaks()
    return "'worker process died 2 times' + sample", "others = clean; 17 skipped", "on-error acts"


def row_kill_poison(x):
    """The worker computing sample 17 is killed (SIGKILL raised by the
    SEEDPIPE_TEST_CRASH_SIGNAL hook, which the pool cannot tell from the
    OOM killer's) 3 times in a row, more than the crash budget of 2: served
    and digested unchanged under --on-error fail. Killed every time: the
    respawn bound ends the stream with a named error, nothing substituted."""
    if os.environ.get("SP_TEST_HOOKS") != "1":
        return None, None, ("SKIP: the crash hook is compiled only with "
                            "-DSEEDPIPE_TEST_HOOKS=ON (SP_TEST_HOOKS=1 not set)")
    env = {"SEEDPIPE_TEST_CRASH_SAMPLE": "17", "SEEDPIPE_TEST_CRASH_SIGNAL": "9",
           "SEEDPIPE_TEST_CRASH_TIMES": "3"}
    out = os.path.join(x.tmp, "kill17.jsonl")
    run("digest", x.ds, *x.common, "--workers", 2, "--out", out, env=env)
    got = manifest(out)
    assert len(got) == 16 and all(b == x.ref[(b["epoch"], b["batch"])] for b in got)
    name = new_name()
    p = serve(name, x.ds, x.common, "--workers", 2, "--ring", 2, env=env)
    cl = Client(name)
    assert cl.first == "attached", cl.first
    got = cl.take(20)
    assert got[-1] == "end", got[-3:]
    n = check_served(got, x.ref)
    assert n == 16, n
    cl.quit()
    rc, sout, err = finish(p)
    assert rc == 0 and "6 worker deaths" in sout, (rc, sout, err)
    # killed every time: the run's respawn bound, a named error, no substitute
    env.pop("SEEDPIPE_TEST_CRASH_TIMES")
    name = new_name()
    p = serve(name, x.ds, x.common, "--workers", 2, "--ring", 2, "--on-error", "substitute",
              env=env)
    cl = Client(name)
    got = cl.take(20)
    cl.quit()
    rc, sout, err = finish(p)
    assert got[-1].startswith("error ") and "respawn bound reached" in got[-1] and \
        "SIGKILL" in got[-1], got[-1]
    m = check_served(got, x.ref)
    assert m < 8, m   # only batches of epoch 0 before sample 17's, all clean
    assert rc != 0 and "respawn bound reached" in err, (rc, sout, err)
    no_leaks()
    return "3 kills: none; always: 'respawn bound reached'", \
        f"16/16 digest and served = clean; {m} clean then error", "redone; bound ends the run"


def row_service_kill(x):
    """SIGKILL of the service: region stays, clients see it, next serve cleans up."""
    name = new_name()
    p = serve(name, x.ds, x.common, "--workers", 2, "--ring", 2)
    workers = worker_pids(name)
    cl = Client(name)
    got = cl.take(3)
    state = cl.cmd("state")[6:]
    assert json.loads(state)["batch"] == 3, state
    p.kill()
    p.wait()
    r = cl.take(20)   # what was published before the kill may still be read; then an error
    assert r[-1].startswith("error ") and name in r[-1], r
    got += r[:-1]
    cl.quit()
    assert wait_dead(workers), "workers outlived the killed service"
    assert os.path.exists(f"/dev/shm/{name}"), "region vanished"
    s = run("status", name, ok=False)
    assert s.returncode == 1 and "stale" in s.stdout, s.stdout
    t = run("--name", name, ok=False, exe=TRAINER)
    assert t.returncode == 1 and "stale" in t.stderr, t.stderr
    # resume where the client stood, through a fresh service on the same name
    st = os.path.join(x.tmp, "svc-kill.state")
    with open(st, "w") as f:
        f.write(state + "\n")
    q = serve(name, x.ds, x.common, "--workers", 2, "--resume", st)
    cl = Client(name)
    got2 = cl.take(20)
    cl.quit()
    rc, out, err = finish(q)
    assert rc == 0 and f"removed stale region {name} (service pid {p.pid} is gone)" in err, err
    n = check_served(got, x.ref)
    n2 = check_served(got2, x.ref, start=3)
    assert n2 == 13, n2
    no_leaks()
    return f"client: '{r[-1][6:50]}...'; status: 'stale'; serve: 'removed stale region'", \
        f"{n}+{n2} = clean", "serve --resume at client state"


def row_client_kill(x):
    """SIGKILL of a client holding a batch: the other rank gets its whole stream."""
    name = new_name()
    p = serve(name, x.ds, x.common, "--workers", 2, "--world", 2, "--ring", 3)
    d = run("--name", name, "--rank", 1, "--hold-and-die", 3, ok=False, exe=TRAINER)
    assert d.returncode == -signal.SIGKILL, d
    t0 = Client(name, 0)
    got = t0.take(20)
    t0.quit()
    refs = {k: v for k, v in x.rank0.items()}
    n = check_served(got, refs)
    assert got[-1] == "end" and n == 16, got[-2:]
    rc, out, err = finish(p)
    assert rc == 0 and "1 client death" in out, (rc, out, err)
    no_leaks()
    return "serve: '1 client death'", f"rank 0: {n}/16 = clean", "other rank goes on"


def row_service_term(x):
    """SIGTERM of the service: exit 0, region unlinked, workers gone, client told."""
    name = new_name()
    p = serve(name, x.ds, x.common, "--workers", 2, "--ring", 2)
    workers = worker_pids(name)
    cl = Client(name)
    got = cl.take(5)
    state = cl.cmd("state")[6:]
    p.send_signal(signal.SIGTERM)
    rc, out, err = finish(p)
    assert rc == 0 and "stopped by a signal" in out, (rc, out, err)
    assert not os.path.exists(f"/dev/shm/{name}")
    assert wait_dead(workers), "workers outlived SIGTERM"
    r = cl.take(20)
    # batches already published may still be read from the mapping; then the end
    assert r[-1].startswith("error ") and name in r[-1], r
    cl.quit()
    st = os.path.join(x.tmp, "svc-term.state")
    with open(st, "w") as f:
        f.write(state + "\n")
    q = serve(name, x.ds, x.common, "--workers", 1, "--resume", st)
    cl = Client(name)
    got2 = cl.take(20)
    cl.quit()
    assert finish(q)[0] == 0
    n = check_served(got + [l for l in r if l.startswith("batch")], x.ref)
    n2 = check_served(got2, x.ref, start=5)
    assert n2 == 11, n2
    no_leaks()
    return f"serve: 'stopped by a signal'; client: '{r[-1][6:60]}...'", \
        f"{n}+{n2} = clean", "serve --resume at client state"


def row_disk_full(x):
    """The cache's disk fills during a write: warning, stream unchanged, nothing left."""
    mnt = os.path.join(x.tmp, "mnt")
    os.makedirs(mnt)
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt],
                       capture_output=True, text=True)
    if m.returncode != 0:
        return None, None, f"SKIP: mount tmpfs failed: {m.stderr.strip()}"
    mounts.append(mnt)
    try:
        cache = os.path.join(mnt, "c")
        for workers in (2, 0):
            out = os.path.join(x.tmp, f"full{workers}.jsonl")
            p = run("digest", x.ds, *x.common, "--workers", workers, "--cache", cache,
                    "--out", out)
            assert "No space left on device" in p.stderr, p.stderr
            assert manifest(out) == list(x.ref.values()), "stream changed by a full disk"
            tmpd = os.path.join(cache, ".tmp")
            assert os.path.isdir(tmpd) and not os.listdir(tmpd), os.listdir(tmpd)
        # a clean cache afterwards: what is committed verifies
        v = run("cache", "verify", cache, ok=False)
        assert v.returncode == 0, v.stdout + v.stderr
    finally:
        subprocess.run(["umount", mnt], check=True)
        mounts.remove(mnt)
    no_leaks()
    return "'cache: ...: No space left on device'", "16/16 = clean (pool and in-process)", \
        "goes on uncached; .tmp empty"


def row_file_changes(x):
    """A dataset file replaced or deleted after indexing, mid-epoch (service ring full)."""
    ds = os.path.join(x.tmp, "ds-change")
    shutil.copytree(x.ds, ds)
    paths = sample_paths(ds)
    keys = list(x.ref.keys())
    # a sample of batch 5 (not yet computed: the ring holds 2 batches)
    victim = x.ref[keys[5]]["indices"][0]
    vpath = os.path.join(ds, paths[victim])
    other = os.path.join(ds, paths[(victim + 1) % len(paths)])
    rows = []
    for policy, how in (("fail", "replace"), ("skip", "delete")):
        if how == "replace":
            shutil.copy(vpath, vpath + ".orig")
        name = new_name()
        p = serve(name, ds, x.common, "--workers", 1, "--ring", 2, "--on-error", policy)
        time.sleep(0.2)
        if how == "replace":
            shutil.copy(other, vpath)          # new content under the old name
        else:
            os.rename(vpath, vpath + ".gone")
        cl = Client(name)
        got = cl.take(20)
        cl.quit()
        rc, out, err = finish(p)
        if policy == "fail":
            assert got[-1].startswith("error ") and paths[victim] in got[-1] and \
                "changed since" in got[-1], got[-1]
            n = check_served(got, x.ref)
            assert n == 5, n   # batches 0-4 delivered, all clean; nothing after
            assert rc != 0 and paths[victim] in err, (rc, out, err)
            rows.append(f"fail: '{got[-1][6:60]}...'")
        else:
            assert got[-1] == "end", got[-1]
            n = 0
            for g in got[:-1]:
                _, e, b, d = g.split()
                k = (int(e), int(b))
                if victim in x.ref[k]["indices"]:
                    assert d != x.ref[k]["digest"]
                else:
                    assert d == x.ref[k]["digest"], f"batch {k} wrong"
                    n += 1
            assert rc == 0 and "No such file or directory" in err, (rc, out, err)
            rows.append("skip: 'No such file or directory', sample skipped")
        if how == "replace":
            os.replace(vpath + ".orig", vpath)
        else:
            os.rename(vpath + ".gone", vpath)
        no_leaks()
    return "; ".join(rows), "fail: 5 clean then error; skip: others clean", \
        "fail stops at the batch; skip goes on"


def row_corrupt(x):
    """A corrupt (truncated) file in the dataset under each --on-error policy."""
    ds = os.path.join(x.tmp, "ds-corrupt")
    shutil.copytree(x.ds, ds)
    paths = sample_paths(ds)
    victim = 23
    vp = os.path.join(ds, paths[victim])
    with open(vp, "rb") as f:
        data = f.read()
    with open(vp, "wb") as f:
        f.write(data[:len(data) // 2])
    res = []
    for policy in ("fail", "skip", "substitute"):
        mans = []
        for workers in (0, 2):
            out = os.path.join(x.tmp, f"corrupt-{policy}-{workers}.jsonl")
            p = run("digest", ds, *x.common, "--on-error", policy, "--workers", workers,
                    "--out", out, ok=(policy != "fail"))
            if policy == "fail":
                assert p.returncode == 1 and paths[victim] in p.stderr, p.stderr
                continue
            assert paths[victim] in p.stderr, p.stderr
            got = manifest(out)
            for b in got:
                k = (b["epoch"], b["batch"])
                if victim in x.ref[k]["indices"]:
                    if policy == "skip":
                        assert b["skipped"] == [victim] and victim not in b["indices"], b
                    else:
                        assert b["substituted"][0][0] == victim, b
                else:
                    assert b == x.ref[k], f"{policy}: batch {k} differs from the clean run"
            mans.append(got)
        if policy != "fail":
            assert mans[0] == mans[1], f"{policy}: workers 0 and 2 differ"
        res.append(policy)
    no_leaks()
    return "fail: names the file; skip/substitute: listed per sample", \
        "other batches = clean; workers 0 = 2", "policy applied identically"


def row_stale_region(x):
    """A stale region (dead owner) and a garbage one under our name."""
    name = new_name()
    p = serve(name, x.ds, x.common, "--workers", 1)
    with open(f"/dev/shm/{name}", "rb") as f:
        image = f.read()
    p.kill()
    p.wait()
    time.sleep(0.1)
    s = run("status", name, ok=False)
    assert s.returncode == 1 and "stale" in s.stdout, s.stdout
    q = serve(name, x.ds, x.common, "--workers", 1)
    q.send_signal(signal.SIGTERM)
    rc, out, err = finish(q)
    assert "removed stale region" in err, err
    # garbage of a header's size and more: refused, never removed, never a crash
    g = new_name()
    with open(f"/dev/shm/{g}", "wb") as f:
        f.write(os.urandom(len(image)))
    os.chmod(f"/dev/shm/{g}", 0o600)
    s = run("status", g, ok=False)
    assert s.returncode == 1 and "not a seedpipe region" in s.stderr, s.stderr
    cl = Client(g)
    assert cl.first.startswith("attach-error") and "not a seedpipe region" in cl.first, cl.first
    cl.quit()
    b = run("serve", "--name", g, x.ds, *x.common, "--workers", 1, ok=False)
    assert b.returncode == 1 and "is not a (stale) seedpipe region" in b.stderr, b.stderr
    assert os.path.exists(f"/dev/shm/{g}")
    os.unlink(f"/dev/shm/{g}")
    x.region_image = image
    no_leaks()
    return "'stale' / 'removed stale region'; garbage: 'not a seedpipe region'", \
        "nothing served", "next serve takes the name"


def row_hostile_region(x):
    """A region with a valid magic but hostile fields, a wrong mode, another owner."""
    img = bytearray(x.region_image)
    # a live owner: this test process (its start time is what the header must name)
    struct.pack_into("<i", img, x.owner_off, os.getpid())
    cases = []

    def case(label, mutate, expect, mode=0o600, owner=None):
        b = bytearray(img)
        mutate(b)
        name = new_name()
        path = f"/dev/shm/{name}"
        with open(path, "wb") as f:
            f.write(b)
        os.chmod(path, mode)
        if owner is not None:
            os.chown(path, owner, owner)
        cl = Client(name)
        cl.quit()
        t = run("--name", name, ok=False, exe=TRAINER)
        os.unlink(path)
        assert cl.first.startswith("attach-error") and expect in cl.first, (label, cl.first)
        assert t.returncode == 1 and expect in t.stderr, (label, t.stderr)
        cases.append(label)

    u64 = lambda off, v: (lambda b: struct.pack_into("<Q", b, off, v))
    u32 = lambda off, v: (lambda b: struct.pack_into("<I", b, off, v))
    case("slot_size+64", lambda b: struct.pack_into("<Q", b, 48, struct.unpack_from("<Q", b, 48)[0] + 64),
         "offsets disagree")
    def bigger(b):   # consistent sizes, but 4x the slots the file holds
        ns = struct.unpack_from("<I", b, 24)[0] * 4
        struct.pack_into("<I", b, 24, ns)
        so, ss = struct.unpack_from("<QQ", b, 40)
        struct.pack_into("<Q", b, 16, so + ss * ns)
    case("region_size > file", bigger, "header says")
    case("nslots=2^31", u32(24, 1 << 31), "hostile header")
    case("cap=0", u32(28, 0), "hostile header")
    case("sample_bytes=2^60", u64(32, 1 << 60), "hostile header")
    case("version 99", u32(8, 99), "layout version 99")
    case("truncated file", lambda b: b.__delitem__(slice(len(b) // 2, None)), "region")
    case("mode 0644", lambda b: None, "mode 0644, expected 0600", mode=0o644)
    if os.geteuid() == 0:   # only root can give a file away
        case("owner uid 65534", lambda b: None, "owned by uid 65534", owner=65534)
    no_leaks()
    return f"{len(cases)} cases refused with a message", "nothing served, no crash", \
        "attach refused"


ROWS = [
    ("SIGKILL worker", row_worker_kill),
    ("worker crash (poison)", row_poison),
    ("worker killed on a sample", row_kill_poison),
    ("SIGKILL service", row_service_kill),
    ("SIGKILL client holding", row_client_kill),
    ("SIGTERM service", row_service_term),
    ("disk full (cache)", row_disk_full),
    ("file changes mid-epoch", row_file_changes),
    ("corrupt file x policy", row_corrupt),
    ("stale region", row_stale_region),
    ("hostile region", row_hostile_region),
]


def main():
    if not BIN or not os.path.exists(BIN) or not os.path.exists(TESTING_LIB):
        print(f"SKIP: SEEDPIPE_BIN ({BIN}) or {TESTING_LIB} missing")
        return 77
    if not os.path.exists(TRAINER):
        print(f"SKIP: {TRAINER} not built")
        return 77
    global CLIENT_ENV
    CLIENT_ENV = client_env()
    if CLIENT_ENV is None:
        print(f"SKIP: {LIB} cannot be loaded with ctypes (even with the ASan runtime preloaded)")
        return 77
    t_start = time.time()
    x = Ctx()
    x.tmp = tempfile.mkdtemp(prefix="sp-faults-")
    results = []
    failed = 0
    try:
        x.ds = os.path.join(x.tmp, "shapes")
        run("make-shapes", x.ds, "--count", 60, "--size", 24, "--seed", 2)
        x.common = ["--pipeline", "shapes-train", "--seed", 11, "--epochs", 2,
                    "--batch-size", 8]
        ref = os.path.join(x.tmp, "ref.jsonl")
        run("digest", x.ds, *x.common, "--out", ref)
        x.ref = by_pos(manifest(ref))
        assert len(x.ref) == 16
        r0 = os.path.join(x.tmp, "rank0.jsonl")
        run("digest", x.ds, *x.common, "--rank", 0, "--world", 2, "--out", r0)
        x.rank0 = by_pos(manifest(r0))
        x.region_image = None
        # offset of owner_pid in the ring header: after 17 u64/u32 fields (ring_layout.h)
        x.owner_off = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 8 + 8 * 8 + 8 + 8
        for label, fn in ROWS:
            t0 = time.time()
            try:
                if fn is row_hostile_region and x.region_image is None:
                    raise AssertionError("needs the stale-region row's image")
                msg, data, resume = fn(x)
                if msg is None:
                    results.append((label, "skip", "", "", resume, time.time() - t0))
                else:
                    results.append((label, "ok", msg, data, resume, time.time() - t0))
            except Exception as e:   # one row's failure must not hide the others
                failed += 1
                results.append((label, "FAIL", f"{type(e).__name__}: {e}"[:300], "", "",
                                time.time() - t0))
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                for r in regions():
                    os.unlink(f"/dev/shm/{r}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for m in mounts:
            subprocess.run(["umount", m])
        shutil.rmtree(x.tmp, ignore_errors=True)
    print(f"{'row':<24} {'result':<6} {'secs':>5}  message | bytes | resume")
    for label, res, msg, data, resume, secs in results:
        print(f"{label:<24} {res:<6} {secs:5.1f}  {msg} | {data} | {resume}")
    left = regions()
    kids = children_left()
    if left or kids:
        print(f"FAIL: left behind: regions {left}, processes {kids}")
        failed += 1
    print(f"fault matrix: {len(results) - failed} of {len(results)} rows passed "
          f"in {time.time() - t_start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--client":
        sys.exit(client_main(sys.argv[2], int(sys.argv[3])))
    sys.exit(main())
