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
import sys

if not __debug__:   # python -O: every check below would be skipped, and pass
    sys.exit("the tests check with assert: run them without -O / PYTHONOPTIMIZE")

BIN = os.environ.get("SEEDPIPE_BIN")

# The persistent indexes of the datasets the tests make go to a cache folder
# of the tests' own (ctest sets one for every test), never into ~/.cache.
if not os.environ.get("SEEDPIPE_CACHE"):
    import atexit
    import shutil
    import tempfile
    os.environ["SEEDPIPE_CACHE"] = tempfile.mkdtemp(prefix="sp-test-index-cache.")
    atexit.register(shutil.rmtree, os.environ["SEEDPIPE_CACHE"], True)

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


def xxh64():
    """XXH3-64 of bytes through libxxhash (ctypes), for tests that forge an
    index file's checksum; None where the library cannot be loaded."""
    import ctypes
    import ctypes.util
    for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash") or "", "libxxhash.so"):
        if name:
            try:
                lib = ctypes.CDLL(name)
                lib.XXH3_64bits.restype = ctypes.c_uint64
                lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
                return lambda b: lib.XXH3_64bits(b, len(b))
            except OSError:
                pass
    return None


def sanitizer_preload(lib):
    """A SEEDPIPE_SANITIZE=ON library needs the ASan/UBSan runtimes first in
    the process: the paths ldd resolves for them, ASan first ([] if none)."""
    try:
        out = subprocess.run(["ldd", lib], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    pre = []
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith(("libasan.so", "libubsan.so")) and "=>" in parts:
            path = parts[parts.index("=>") + 1]
            if os.path.exists(path):
                pre.append(path)
    pre.sort(key=lambda p: "libasan" not in p)
    return pre


def preload_env(lib, env):
    """env with the sanitizer runtimes LD_PRELOADed when lib needs them
    (CPython's own allocations look leaked to LeakSanitizer: leaks off)."""
    pre = sanitizer_preload(lib)
    if pre:
        env["LD_PRELOAD"] = " ".join(pre + ([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []))
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return env


def reexec_for(lib):
    """Before ctypes loads a sanitized lib into this python (ASan aborts the
    process when its runtime is not first): run this script again with the
    runtimes preloaded. Returns when nothing is needed, or once preloaded."""
    if os.environ.get("SP_SANITIZER_REEXEC") or not os.path.exists(lib):
        return
    env = preload_env(lib, dict(os.environ))
    if env.get("LD_PRELOAD") != os.environ.get("LD_PRELOAD"):
        env["SP_SANITIZER_REEXEC"] = "1"
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
