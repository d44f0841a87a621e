"""cli_testlib.py - helpers shared by the CLI-level tests (stdlib only).

Running the `seedpipe` CLI ($SEEDPIPE_BIN), starting `seedpipe serve` and
waiting for its `ready` line, and looking at processes through /proc (is a
pid alive, which children of this test are left); corpus() and status() for
the third-party data in $SP_SHARED_DATA, which a fresh clone lacks (the C
tests have sp_test_corpus / sp_test_status in check.h). Not a test itself:
ctest only runs tests/test_*.py.
"""
import os
import subprocess

BIN = os.environ.get("SEEDPIPE_BIN")

# Every process started by serve() (the tests kill what is left at the end).
procs = []

# The corpus paths that corpus() found missing (status() turns them into 77).
skipped = []


def corpus(rel, what=None):
    """$SP_SHARED_DATA/rel (a folder or file) when it exists; else prints a SKIP
    line naming the path (and what is not run), records it and returns None.
    The test runs its other parts and ends with sys.exit(status())."""
    root = os.environ.get("SP_SHARED_DATA")
    path = os.path.join(root or "../shared/data", rel)
    if os.path.exists(path):
        return path
    print(f"SKIP: {path} not found (SP_SHARED_DATA={root or 'unset, default ../shared/data'}; "
          f"the third-party corpora, see README)" + (f"; not run: {what}" if what else ""),
          flush=True)
    skipped.append(path)
    return None


def status():
    """What a test returns once every part ran or was skipped: 77 (ctest:
    skipped) when corpus() skipped a part, else 0 (a failed check has raised)."""
    return 77 if skipped else 0


def run(*args, ok=True, env=None, exe=None, timeout=60):
    """Run the CLI (or exe) with args; env entries are added to os.environ."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([exe or BIN, *map(str, args)], capture_output=True, text=True, env=e,
                       timeout=timeout)
    if ok and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({p.returncode}): "
                             f"{p.stdout}{p.stderr}")
    return p


def serve(name, ds, common, *extra, env=None):
    """Start `seedpipe serve --name name ds ...`; returns (process, ready line)."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen([BIN, "serve", "--name", name, ds, *map(str, common),
                          *map(str, extra)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    procs.append(p)
    line = p.stdout.readline()
    assert line.startswith("ready "), (line, p.stderr.read() if p.poll() is not None else "")
    return p, line


def stop_all():
    """Stop every process serve() (or a test) put in procs: SIGTERM first (a
    service unlinks its region), SIGKILL after 5 s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def region(name):
    """Does the shared-memory region NAME exist?"""
    return os.path.exists(f"/dev/shm/{name}")


def assert_nothing_left(prefix):
    """No shared-memory region named prefix* and no child process of this
    test is left (a service test's last check)."""
    left = [f for f in os.listdir("/dev/shm") if f.startswith(prefix)]
    assert not left, f"regions left: {left}"
    kids = children_left()
    assert not kids, f"processes left: {kids}"


def final_digest(out):
    """The final-weights digest `seedpipe train` printed."""
    for line in out.splitlines():
        if line.startswith("final weights digest "):
            return line.split()[3]
    raise AssertionError(f"no final weights digest in: {out}")


def finish(p, timeout=20):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def worker_pids(name):
    out = run("status", name).stdout
    return [int(l.split()[3]) for l in out.splitlines() if l.strip().startswith("worker ")]


def alive(pid):
    """True while pid exists and is neither a zombie nor dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return s[s.rindex(")") + 2] not in "ZX"
    except OSError:
        return False


def children_left(live_only=False):
    """Pids whose parent is this test (live_only: zombies of finished Popens excluded)."""
    me = str(os.getpid())
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[1] == me and not (live_only and fields[0] in "ZX"):
            left.append(pid)
    return left
