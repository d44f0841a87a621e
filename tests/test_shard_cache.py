"""test_shard_cache.py - the shard cache owns only what it wrote, bounds
what it writes, and survives a full disk (docs/remote.md "Shard cache",
docs/security.md), against nginx on 127.0.0.1 (tests/remote_servers.py;
skipped visibly, exit 77, where nginx cannot start).

On a shapes dataset sharded by `seedpipe shard --max-count 8` (12 shards),
`seedpipe digest URL --shard-cache DIR` gives the local stream and:
 - the copies live in DIR/seedpipe-shards-UID (mode 0700), never in DIR:
   a user's precious.tar beside them, and a folder of local shards named
   as the cache, survive a size bound smaller than two shards;
 - a DIR owned by another user, or writable by others without the sticky
   bit, is refused naming it; a sticky shared folder (mode 1777, like /tmp)
   is used through the private folder; a private folder planted by another
   user, or a link in its place, is refused naming it;
 - a size bound smaller than one shard writes nothing (each sample read
   from the store by range), the same stream;
 - a full disk (a 1 MiB tmpfs this test mounts, filled to a few KiB; skipped
   visibly where mounting is not permitted): the same stream, exit 0, one
   warning naming ENOSPC and the folder per process;
 - temporary files of killed writers (.KEY.tar.tmp-*) are removed by the
   next open once unchanged for 10 s, a live writer's (locked) is left; a
   kill storm (runs SIGKILLed mid-download, through the fault proxy adding
   300 ms a request) leaves some, and none after the next run.
"""
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import remote_servers as rs
from cli_testlib import run

BIN = os.environ.get("SEEDPIPE_BIN")
COMMON = ["--pipeline", "shapes-train", "--seed", 9, "--epochs", 1, "--batch-size", 8]
PATTERN = "shard-{000000..000011}.tar"
ENV = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
skipped = []


def skip(what, why):
    print(f"SKIP: {what}: {why}", flush=True)
    skipped.append(what)


def digest(ds, *extra, ok=True):
    p = run("digest", ds, *COMMON, *extra, "--out", "/dev/null", ok=ok, env=ENV, timeout=120)
    if not ok:
        return p
    for l in (p.stdout + p.stderr).splitlines():
        if l.startswith("digest:"):
            return l.split("stream ")[1].strip(), p.stderr
    raise AssertionError(p.stdout + p.stderr)


def private(d):
    return os.path.join(d, f"seedpipe-shards-{os.geteuid()}")


def folder_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) if os.path.isdir(d) else 0


def ownership(tmp, url, ref, size):
    # a user's file beside the cache, and local shards named as the cache
    mine = os.path.join(tmp, "mine")
    os.makedirs(mine)
    with open(os.path.join(mine, "precious.tar"), "wb") as f:
        f.write(b"precious" * 1000)
    os.utime(os.path.join(mine, "precious.tar"), (1, 1))   # the oldest .tar there
    assert digest(url, "--workers", 2, "--shard-cache", mine, "--shard-cache-size",
                  2 * size - 1)[0] == ref
    assert open(os.path.join(mine, "precious.tar"), "rb").read() == b"precious" * 1000
    assert sorted(os.listdir(mine)) == ["precious.tar", os.path.basename(private(mine))]
    assert os.stat(private(mine)).st_mode & 0o7777 == 0o700
    copies = os.listdir(private(mine))
    assert copies and all(len(c) == 36 and c.endswith(".tar") for c in copies), copies
    assert folder_bytes(private(mine)) <= 2 * size, folder_bytes(private(mine))
    shards = os.path.join(tmp, "local-shards")
    shutil.copytree(os.path.join(tmp, "www", "data"), shards)
    before = {f: os.path.getsize(os.path.join(shards, f)) for f in os.listdir(shards)}
    assert digest(url, "--shard-cache", shards, "--shard-cache-size", size + 10)[0] == ref
    after = {f: os.path.getsize(os.path.join(shards, f)) for f in os.listdir(shards)
             if not f.startswith("seedpipe-shards-")}
    assert before == after, (before, after)
    print("shard cache: a user's precious.tar and a folder of local shards used as the cache "
          "are left alone; copies only in the private folder (0700)", flush=True)

    # folders that are not the user's own
    other = os.path.join(tmp, "other")
    os.makedirs(other)
    os.chown(other, 12345, 12345)
    p = digest(url, "--shard-cache", other, ok=False)
    assert p.returncode != 0 and f"shard cache {other}: owned by uid 12345" in p.stderr, p.stderr
    assert os.listdir(other) == []
    shared = os.path.join(tmp, "shared")
    os.makedirs(shared)
    os.chmod(shared, 0o777)
    p = digest(url, "--shard-cache", shared, ok=False)
    assert p.returncode != 0 and f"shard cache {shared}: mode 0777: others may write it" in \
        p.stderr, p.stderr
    assert os.listdir(shared) == []
    os.chmod(shared, 0o1777)   # sticky, like /tmp: used through the private folder
    assert digest(url, "--shard-cache", shared)[0] == ref
    assert os.listdir(shared) == [os.path.basename(private(shared))]
    assert os.stat(private(shared)).st_mode & 0o7777 == 0o700
    assert len(os.listdir(private(shared))) == 12
    planted = os.path.join(tmp, "planted")
    os.makedirs(private(planted))
    os.chown(private(planted), 12345, 12345)
    p = digest(url, "--shard-cache", planted, ok=False)
    assert p.returncode != 0 and f"shard cache {private(planted)}: owned by uid 12345" in \
        p.stderr, p.stderr
    os.chown(private(planted), os.geteuid(), os.getegid())
    os.chmod(private(planted), 0o755)
    p = digest(url, "--shard-cache", planted, ok=False)
    assert p.returncode != 0 and "mode 0755, expected 0700: refused" in p.stderr, p.stderr
    linked = os.path.join(tmp, "linked")
    os.makedirs(linked)
    os.symlink(mine, private(linked))
    p = digest(url, "--shard-cache", linked, ok=False)
    assert p.returncode != 0 and "not a folder (a link or a file in its place)" in p.stderr, \
        p.stderr
    print("shard cache: another user's folder, a non-sticky shared one, a planted or linked "
          "private folder refused by name; a sticky shared folder used through 0700", flush=True)


def bounds(tmp, url, ref, size):
    tiny = os.path.join(tmp, "tiny")
    got, err = digest(url, "--workers", 2, "--shard-cache", tiny, "--shard-cache-size",
                      size // 2)
    assert got == ref and "warning" not in err, err
    assert folder_bytes(private(tiny)) == 0, os.listdir(private(tiny))
    print(f"shard cache: a bound ({size // 2} B) below one shard ({size} B): nothing written, "
          "the same stream", flush=True)


def full_disk(tmp, url, ref, size):
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", mnt],
                       capture_output=True, text=True)
    if p.returncode != 0:
        skip("shard cache on a full disk (tmpfs)", f"mount not permitted: {p.stderr.strip()}")
        return
    try:
        os.makedirs(private(mnt), mode=0o700)
        with open(os.path.join(mnt, "filler"), "wb") as f:   # leave less than one shard
            f.write(b"\0" * (1024 * 1024 - size // 2 - 8192))
        got, err = digest(url, "--workers", 2, "--shard-cache", mnt)
        assert got == ref, err
        warns = [l for l in err.splitlines() if "warning: shard cache" in l]
        assert warns and all("(ENOSPC)" in l and private(mnt) in l for l in warns), err
        assert len(warns) <= 3, err   # once a process (the tool and 2 workers)
        assert not [f for f in os.listdir(private(mnt)) if ".tmp-" in f]
        print(f"shard cache: a full disk: the same stream, {len(warns)} warning(s): "
              f"{warns[0]}", flush=True)
    finally:
        subprocess.run(["umount", mnt])


def tmp_files(tmp, url, ref):
    d = os.path.join(tmp, "storm")
    assert digest(url, "--shard-cache", d)[0] == ref
    pd = private(d)
    dead = os.path.join(pd, "." + "0" * 32 + ".tar.tmp-0123456789abcdef")
    with open(dead, "wb") as f:
        f.write(b"x" * 100)
    os.utime(dead, (time.time() - 60, time.time() - 60))
    live = os.path.join(pd, "." + "1" * 32 + ".tar.tmp-fedcba9876543210")
    holder = subprocess.Popen([sys.executable, "-c",
        "import fcntl,sys,time\nf=open(sys.argv[1],'wb')\nfcntl.flock(f,fcntl.LOCK_EX)\n"
        "print('locked',flush=True)\ntime.sleep(60)", live], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    os.utime(live, (time.time() - 60, time.time() - 60))
    other = os.path.join(pd, ".user.tar.tmp-1")   # not a name the cache writes: left alone
    open(other, "wb").close()
    os.utime(other, (1, 1))
    assert digest(url, "--shard-cache", d)[0] == ref
    assert not os.path.exists(dead) and os.path.exists(live) and os.path.exists(other)
    holder.kill()
    holder.wait()
    os.remove(live)
    os.remove(other)
    # a kill storm: cold runs SIGKILLed mid-download (through the proxy adding
    # 300 ms to each request, so downloads are in flight), again and again
    try:
        px = rs.Proxy(int(url.split(":")[2].split("/")[0]), tmp, latency_ms=300, seed=3)
    except rs.Unavailable as e:
        skip("shard cache kill storm (proxy)", e)
        return
    slow = f"{px.url}/data/{PATTERN}"
    left = 0
    for k in range(6):
        shutil.rmtree(pd, ignore_errors=True)
        p = subprocess.Popen([BIN, "digest", slow, *map(str, COMMON), "--workers", "3",
                              "--shard-cache", d, "--out", "/dev/null"],
                             env=dict(os.environ, **ENV), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.5 + 0.1 * k)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        time.sleep(0.2)
        tmps = [f for f in os.listdir(pd) if ".tmp-" in f] if os.path.isdir(pd) else []
        left += len(tmps)
        for f in tmps:   # older than the writer-is-gone threshold
            os.utime(os.path.join(pd, f), (time.time() - 60, time.time() - 60))
        if tmps:
            assert digest(url, "--shard-cache", d)[0] == ref
            assert not [f for f in os.listdir(pd) if ".tmp-" in f], os.listdir(pd)
    px.stop()
    assert left > 0, "the storm killed no writer mid-download"
    print(f"shard cache: a dead writer's temporary file removed at the next open, a live "
          f"(locked) one and a foreign name kept; a kill storm left {left} temporary "
          f"file(s), none after the next run", flush=True)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-shard-cache-")
    os.chmod(tmp, 0o755)
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 96, "--size", 32, "--seed", 5)
        data = os.path.join(tmp, "www", "data")
        os.makedirs(os.path.join(tmp, "www"))
        run("shard", ds, data, "--max-count", 8)
        size = max(os.path.getsize(os.path.join(data, f)) for f in os.listdir(data)
                   if f.endswith(".tar"))
        ref = digest(os.path.join(data, PATTERN))[0]
        try:
            ng = rs.Nginx(os.path.join(tmp, "www"), tmp)
        except rs.Unavailable as e:
            skip("shard cache (nginx)", e)
            return 77
        try:
            url = f"{ng.url}/data/{PATTERN}"
            ownership(tmp, url, ref, size)
            bounds(tmp, url, ref, size)
            full_disk(tmp, url, ref, size)
            tmp_files(tmp, url, ref)
        finally:
            ng.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("shard cache: ok" + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
