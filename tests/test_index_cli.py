"""test_index_cli.py - `seedpipe index DATASET [--rebuild]` (the persistent
dataset index, include/seedpipe/dataset.h).

Asserts, on a shapes ImageFolder older than the index's racy window: the
first `index` hashes every file and writes its index into the cache folder
($SEEDPIPE_CACHE, here a folder of the test's own), nothing into DATASET; the
second reuses every hash and writes nothing; `--rebuild` hashes all again;
a damaged sidecar is reported on stderr with its path and rebuilt;
SEEDPIPE_INDEX=off reports no index; the fingerprint is the same in every
run and equals `inspect`'s. Standard library only.
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_testlib import run  # noqa: E402


def fields(out):
    return dict(re.findall(r"^(\w+):\s+(.*)$", out, flags=re.M))


def listing(root):
    """Every name under root, hidden ones included, with its size and mtime."""
    out = []
    for dp, dn, fn in os.walk(root):
        for n in dn + fn:
            st = os.lstat(os.path.join(dp, n))
            out.append((os.path.relpath(os.path.join(dp, n), root), st.st_size, st.st_mtime_ns))
    return sorted(out)


def main():
    with tempfile.TemporaryDirectory() as d:
        ds = os.path.join(d, "ds")
        run("make-shapes", ds, "--count", "30", "--size", "16")
        time.sleep(3)   # older than the racy window: the stats can vouch for the files
        cache = os.path.join(d, "cache")
        os.environ["SEEDPIPE_CACHE"] = cache
        before = listing(ds)
        want = fields(run("inspect", ds, env={"SEEDPIPE_INDEX": "off"}).stdout)["fingerprint"]
        first = fields(run("index", ds).stdout)
        sidecar = first["index"].split(" (")[0]
        assert first["index"] == f"{sidecar} (written now)", first
        assert re.fullmatch(re.escape(cache) + r"/folder-[0-9a-f]{32}", sidecar), sidecar
        assert os.stat(cache).st_mode & 0o777 == 0o700, oct(os.stat(cache).st_mode)
        assert listing(ds) == before, "index wrote into the dataset"
        assert first["hashed"].startswith("30 ") and first["reused"].startswith("0 "), first
        second = fields(run("index", ds).stdout)
        assert second["index"] == f"{sidecar} (up to date)", second
        assert second["reused"].startswith("30 ") and second["hashed"].startswith("0 "), second
        again = fields(run("index", ds, "--rebuild").stdout)
        assert again["hashed"].startswith("30 ") and "written now" in again["index"], again
        with open(sidecar, "r+b") as f:
            f.seek(40)
            f.write(b"\xff\xff\xff\xff")
        p = run("index", ds)
        assert f"warning: dataset index {sidecar}: checksum mismatch (damaged); rebuilt" in p.stderr, \
            p.stderr
        assert fields(p.stdout)["hashed"].startswith("30 "), p.stdout
        off = fields(run("index", ds, env={"SEEDPIPE_INDEX": "off"}).stdout)
        assert off["index"].startswith("none"), off
        for r in (first, second, again, fields(p.stdout), off):
            assert r["fingerprint"] == want, (r, want)
        assert listing(ds) == before, "index wrote into the dataset"
        # a cache folder others may write: refused, every file hashed, the run works
        os.chmod(cache, 0o777)
        p = run("index", ds)
        assert "others may write" in p.stderr and "no index kept" in p.stderr, p.stderr
        assert fields(p.stdout)["hashed"].startswith("30 "), p.stdout
        assert fields(p.stdout)["fingerprint"] == want
        os.chmod(cache, 0o700)
    print("test_index_cli: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
