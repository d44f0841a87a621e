"""test_data_untouched.py - nothing is written into the user's data (issue 39
item 7): the persistent index lives in the cache folder (SEEDPIPE_CACHE,
dataset/dataset_cache_dir.c), never beside the data.

Asserts, for an ImageFolder, a list file and a folder of local WebDataset
shards, each older than the index's racy window (so an index is written):
`index`, `inspect`, `digest` in process and with 2 worker processes, twice
(the second run reuses the index), leave the dataset's folder exactly as it
was (every name under it, hidden ones included, with its size and mtime);
the index entries are in the cache folder, the second `index` reuses every
sample, and no run warns; an old sidecar beside the data (an older
version's, `.seedpipe-index`) is still used (reused > 0) and not rewritten,
for the folder, the list file and a shard. Standard library only.
"""
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_testlib import run  # noqa: E402

COMMON = ["--pipeline", "shapes-train", "--seed", "4", "--epochs", "1", "--batch-size", "8"]


def listing(root):
    """Every name under root, hidden ones included, with its size and mtime."""
    out = []
    for dp, dn, fn in os.walk(root):
        for n in dn + fn:
            st = os.lstat(os.path.join(dp, n))
            out.append((os.path.relpath(os.path.join(dp, n), root), st.st_size, st.st_mtime_ns))
    return sorted(out)


def field(out, name):
    m = re.search(rf"^{name}:\s+(.*)$", out, re.M)
    assert m, (name, out)
    return m.group(1)


def runs_leave_untouched(what, ds, root, tmp):
    """Every command over ds twice; root (the folder holding ds) unchanged."""
    before = listing(root)
    assert before, root
    for k in range(2):
        for args in (("index", ds), ("inspect", ds),
                     ("digest", ds, *COMMON, "--out", os.path.join(tmp, "a.jsonl")),
                     ("digest", ds, *COMMON, "--workers", "2", "--out",
                      os.path.join(tmp, "b.jsonl"))):
            p = run(*args)
            assert "warning" not in p.stderr, (what, args, p.stderr)
            assert listing(root) == before, (what, args, "wrote into the data",
                                             sorted(set(listing(root)) - set(before)))
    p = run("index", ds).stdout
    entry = field(p, "index").split(" (")[0]
    assert os.path.dirname(entry) == os.environ["SEEDPIPE_CACHE"], (what, p)
    assert field(p, "hashed").startswith("0 "), (what, p)
    print(f"{what}: {len(before)} names under the data unchanged; index {os.path.basename(entry)}")


def old_sidecar_used(what, ds, entry_tag, sidecar):
    """An older version's sidecar (the same format, beside the data) is read
    while the cache has none, and never rewritten."""
    cache = os.environ["SEEDPIPE_CACHE"]
    p = run("index", ds).stdout
    entry = field(p, "index").split(" (")[0]
    assert os.path.basename(entry).startswith(entry_tag + "-"), p
    os.rename(entry, sidecar)
    st = os.stat(sidecar)
    data = open(sidecar, "rb").read()
    p = run("index", ds)
    assert "warning" not in p.stderr, p.stderr
    assert field(p.stdout, "index") == f"{sidecar} (up to date)", p.stdout
    reused = int(field(p.stdout, "reused").split()[0])
    assert reused > 0 and field(p.stdout, "hashed").startswith("0 "), p.stdout
    run("digest", ds, *COMMON, "--out", os.path.join(cache, "..", "c.jsonl"))
    st2 = os.stat(sidecar)
    assert (st2.st_ino, st2.st_mtime_ns, st2.st_size) == (st.st_ino, st.st_mtime_ns, st.st_size)
    assert open(sidecar, "rb").read() == data
    assert not [n for n in os.listdir(cache) if n.startswith(entry_tag + "-")], os.listdir(cache)
    print(f"{what}: the old sidecar beside the data used ({reused} reused), not rewritten")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SEEDPIPE_CACHE"] = os.path.join(tmp, "cache")   # this test's own
        root = os.path.join(tmp, "data")
        ds = os.path.join(root, "shapes")
        run("make-shapes", ds, "--count", "40", "--size", "24", "--seed", "3")
        with open(os.path.join(root, "train.txt"), "w") as f:
            for c in sorted(os.listdir(ds)):
                for n in sorted(os.listdir(os.path.join(ds, c)))[:3]:
                    f.write(f"shapes/{c}/{n}\t{len(c) % 3}\n")
        shards = os.path.join(tmp, "shards")
        run("shard", ds, shards, "--max-count", "10")
        time.sleep(2.5)   # older than the racy window: an index is written
        runs_leave_untouched("ImageFolder", ds, ds, tmp)
        runs_leave_untouched("list file", os.path.join(root, "train.txt"), root, tmp)
        runs_leave_untouched("WebDataset shards", shards, shards, tmp)
        # a read-only dataset folder: no warning either (tested above as the
        # runs' stderr; here with every write bit off, when not root)
        ro = os.path.join(tmp, "ro")
        shutil.copytree(ds, os.path.join(ro, "shapes"))
        for dp, dn, _ in os.walk(ro, topdown=False):
            os.chmod(dp, 0o555)
        time.sleep(2.2)
        runs_leave_untouched("read-only ImageFolder", os.path.join(ro, "shapes"), ro, tmp)
        for dp, dn, _ in os.walk(ro):
            os.chmod(dp, 0o755)
        # the old sidecars beside the data: read, never written
        shutil.rmtree(os.environ["SEEDPIPE_CACHE"])
        old_sidecar_used("ImageFolder", ds, "folder", os.path.join(ds, ".seedpipe-index"))
        old_sidecar_used("list file", os.path.join(root, "train.txt"), "list",
                         os.path.join(root, ".train.txt.seedpipe-index"))
        one = os.path.join(tmp, "one-shard")   # one shard: its index is the one printed
        run("shard", ds, one, "--max-count", "100")
        time.sleep(2.5)
        old_sidecar_used("a WebDataset shard", one, "tar",
                         os.path.join(one, "." + [n for n in os.listdir(one)
                                                  if n.endswith(".tar")][0] + ".seedpipe-index"))
    print("test_data_untouched: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
