"""test_shm_small.py - `seedpipe serve` when /dev/shm is smaller than its region.

Docker gives a container a 64 MB /dev/shm; ftruncate on tmpfs reserves
nothing, so a service used to print `ready` and then lose worker after
worker to SIGBUS. Now the region is reserved when it is created. In a
private mount namespace (`unshare -m`) with a 150 MB tmpfs on /dev/shm:
 - imagenet-train float32, batch 64, ring 8 (a 308 MB region): serve fails
   within its timeout, before `ready`, naming /dev/shm, the bytes needed and
   free and what to change; no worker is started (no death reported) and no
   region is left in /dev/shm;
 - the same with a ring that fits (batch 16, ring 2): serve prints `ready`
   and the example trainer attached to it gets the stream digest that
   `seedpipe digest` computes outside the namespace.
Needs root (or CAP_SYS_ADMIN) for the namespace; exits 77 with a SKIP line
where `unshare -m` is not allowed (an unprivileged container).
"""
import os
import shutil
import subprocess
import sys
import tempfile

from cli_testlib import finish, procs, run, serve

BIN = os.environ.get("SEEDPIPE_BIN")
TRAINER = os.path.join(os.environ.get("SP_BUILD_DIR", ""), "example_trainer")
SHM_MB = 150
COMMON = ["--pipeline", "imagenet-train", "--dtype", "float32", "--seed", 5, "--epochs", 1]


def stream_digest(text):
    for l in text.splitlines():
        if l.startswith("stream digest:"):
            return l.split()[2].rstrip(",")
    raise AssertionError(f"no stream digest in {text}")


def inside(ds, want):
    """Runs in the namespace: mount the small /dev/shm, then the two cases."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SHM_MB}m", "tmpfs", "/dev/shm"],
                   check=True, timeout=20)
    # too big: refused before ready
    p = run("serve", "--name", "sp-test-shm-big", ds, *COMMON, "--batch-size", 64,
            "--workers", 2, "--ring", 8, ok=False, timeout=30)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "ready" not in p.stdout, p.stdout
    msg = p.stderr
    for word in ("sp-test-shm-big", "/dev/shm is too small", "needs 308.6 MB", "MB free of",
                 "--ring", "--shm-size"):
        assert word in msg, (word, msg)
    assert "death" not in msg and "died" not in msg, msg
    assert os.listdir("/dev/shm") == [], os.listdir("/dev/shm")
    print(f"too big: refused before ready: {msg.strip()}")
    # fits: the same stream as always
    name = "sp-test-shm-fits"
    s, line = serve(name, ds, COMMON, "--batch-size", 16, "--workers", 2, "--ring", 2)
    t = run("--name", name, exe=TRAINER, timeout=60)
    got = stream_digest(t.stdout)
    rc, out, err = finish(s, timeout=30)
    assert rc == 0 and "0 worker deaths" in out, (rc, out, err)
    assert got == want, (got, want)
    assert os.listdir("/dev/shm") == [], os.listdir("/dev/shm")
    print(f"fits (batch 16, ring 2): {line.split(' fingerprint')[0].strip()}; "
          f"stream digest {got} = seedpipe digest's")
    return 0


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    if len(sys.argv) == 4 and sys.argv[1] == "--inside":
        try:
            return inside(sys.argv[2], sys.argv[3])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    if not os.path.exists(TRAINER):
        print(f"SKIP: {TRAINER} not built")
        return 77
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-m", "true"], capture_output=True, timeout=20).returncode != 0:
        print("SKIP: `unshare -m` is not allowed here (needs root or CAP_SYS_ADMIN); "
              "not run: serve against a 150 MB /dev/shm")
        return 77
    tmp = tempfile.mkdtemp(prefix="sp-test-shm-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 96, "--size", 64, "--seed", 3)
        d = run("digest", ds, *COMMON, "--batch-size", 16, "--out", "/dev/null")
        want = next(l.split("stream ")[1].strip() for l in (d.stdout + d.stderr).splitlines()
                    if l.startswith("digest:"))
        p = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), "--inside", ds, want],
                           capture_output=True, text=True, timeout=180)
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        assert p.returncode == 0, p.returncode
        print("test_shm_small: passed")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
