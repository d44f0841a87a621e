"""test_webdataset.py - WebDataset tar shards as a dataset kind, `seedpipe shard`
and `seedpipe split`.

On a shapes ImageFolder (PNG and JPEG files) sharded by `seedpipe shard
--max-count 7`:
 - the shards (the folder, one brace pattern, each listed) stream the same
   batch digests as the ImageFolder: in-process, on 1 and 3 workers, through
   `serve` + the example trainer, and through the cache (cold, then warm);
   `inspect` says webdataset with the same sample count and class counts;
   the shard bytes are the same when written twice (fixed tar metadata);
 - the per-shard index: a shard seconds old is not recorded (racy); later
   the index is written, then reused (no shard read); a damaged index file
   is ignored and its shard read again; --rebuild and SEEDPIPE_INDEX=off read
   every shard; the fingerprint is the same every way;
 - shards written by Python's tarfile (GNU and pax formats, long member
   names, members in subfolders, extra .json members) read too;
 - hostile shards: a shard cut inside a member (that sample is a named
   error; under --on-error skip the others stream), a member that is a
   symlink, a character device or a FIFO, a key without an image, a key
   without a label, a bad label, two images under one key, keys that are
   not adjacent, a file that is not a tar, a shard cut between members
   without its end-of-archive block, a folder holding both class folders and
   shards: each a clear error naming the shard (and member), no crash, no
   hang;
 - `seedpipe split` lists one subset's paths; the subsets partition the
   dataset, their sizes match `inspect --split`, and after more files are
   added every listed path stays in its subset.
"""
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

from cli_testlib import finish, procs, run, serve

BIN = os.environ.get("SEEDPIPE_BIN")
TRAINER = os.path.join(os.environ.get("SP_BUILD_DIR", ""), "example_trainer")
COMMON = ["--pipeline", "shapes-train", "--seed", 9, "--epochs", 2, "--batch-size", 8]


def digest_of(p):
    for l in (p.stdout + p.stderr).splitlines():
        if l.startswith("digest:"):
            return l.split("stream ")[1].strip()
    raise AssertionError(p.stdout + p.stderr)


def digest(ds, *extra, ok=True):
    p = run("digest", ds, *COMMON, *extra, "--out", "/dev/null", ok=ok, timeout=120)
    return digest_of(p) if ok else p


def add(tf, name, data=b"", kind=tarfile.REGTYPE, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    for k, v in kw.items():
        setattr(ti, k, v)
    tf.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def shard(path, members, fmt=tarfile.USTAR_FORMAT):
    with tarfile.open(path, "w", format=fmt) as tf:
        for m in members:
            add(tf, *m[:2], **(m[2] if len(m) > 2 else {}))


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-wds-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 60, "--size", 32, "--seed", 5)
        sh = os.path.join(tmp, "shards")
        out = run("shard", ds, sh, "--max-count", 7).stdout
        assert "wrote 60 samples" in out and "into 9 shards" in out, out
        names = sorted(os.listdir(sh))
        # the shards and the dataset index object beside them (test_remote.py reads it)
        assert names == ["seedpipe.index"] + [f"shard-{i:06d}.tar" for i in range(9)], names
        names = names[1:]
        # deterministic bytes
        sh2 = os.path.join(tmp, "shards2")
        run("shard", ds, sh2, "--max-count", 7)
        for n in names + ["seedpipe.index"]:
            with open(os.path.join(sh, n), "rb") as a, open(os.path.join(sh2, n), "rb") as b:
                assert a.read() == b.read(), n
        again = run("shard", ds, sh, ok=False)
        assert again.returncode != 0 and "already holds .tar shards" in again.stderr, again.stderr
        # standard tools read them
        with tarfile.open(os.path.join(sh, names[0])) as tf:
            assert tf.getnames()[:2] == ["000000000.png", "000000000.cls"], tf.getnames()[:4]

        # the per-shard index: a second open reads no shard; a damaged index
        # file is ignored and that shard read again; the same fingerprint
        idx0 = run("index", sh).stdout   # the shards are seconds old: racy, not recorded
        assert "hashed:      60" in idx0 and "not rewritten" in idx0, idx0
        time.sleep(2.5)
        idx1 = run("index", sh).stdout
        assert "hashed:      60" in idx1 and "written now" in idx1, idx1
        idx2 = run("index", sh).stdout
        assert "reused:      60 samples" in idx2 and "hashed:      0" in idx2, (idx1, idx2)
        # in the index cache folder (SEEDPIPE_CACHE), nothing beside the shards
        first_idx = re.search(r"^index:\s+(\S+) \(one per shard\)", idx2, re.M).group(1)
        assert os.path.dirname(first_idx) == os.environ["SEEDPIPE_CACHE"], idx2
        assert sorted(os.listdir(sh)) == sorted(names + ["seedpipe.index"]), os.listdir(sh)
        with open(first_idx, "r+b") as f:   # damage it: ignored, rebuilt
            f.seek(40)
            f.write(b"\xff\xff")
        idx3 = run("index", sh).stdout
        assert "hashed:      7 samples" in idx3 and "reused:      53" in idx3, idx3
        fp = lambda t: next(l for l in t.splitlines() if l.startswith("fingerprint"))
        assert fp(idx1) == fp(idx2) == fp(idx3), (idx1, idx3)
        assert "hashed:      60" in run("index", sh, "--rebuild").stdout
        off = run("index", sh, env={"SEEDPIPE_INDEX": "off"}).stdout
        assert "index:       none" in off and fp(off) == fp(idx1), off

        ins = run("inspect", sh).stdout
        ref_ins = run("inspect", ds).stdout
        assert "kind:        webdataset" in ins and "samples:     60" in ins, ins
        counts = lambda t: [l.split()[-1] for l in t.splitlines() if l.startswith("    ")]
        assert counts(ins) == counts(ref_ins), (ins, ref_ins)

        ref = digest(ds)
        pattern = os.path.join(sh, "shard-{000000..000008}.tar")
        for d, extra in ((sh, []), (pattern, []), (sh, ["--workers", 1]),
                         (sh, ["--workers", 3])):
            assert digest(d, *extra) == ref, (d, extra)
        cache = os.path.join(tmp, "cache")
        cold = run("digest", sh, *COMMON, "--workers", 2, "--cache", cache, "--out", "/dev/null")
        warm = run("digest", sh, *COMMON, "--workers", 2, "--cache", cache, "--out", "/dev/null")
        assert digest_of(cold) == ref and digest_of(warm) == ref
        assert "cache" in (warm.stdout + warm.stderr), warm.stderr
        print(f"shards == folder: in-process, pattern, 1 and 3 workers, cache cold and warm: {ref}")
        if os.path.exists(TRAINER):
            name = f".sp-test-wds-{os.getpid()}"
            p, _ = serve(name, sh, COMMON, "--workers", 2)
            t = run("--name", name, exe=TRAINER, timeout=60)
            got = next(l.split()[2].rstrip(",") for l in t.stdout.splitlines()
                       if l.startswith("stream digest:"))
            assert finish(p)[0] == 0
            assert got == ref, (got, ref)
            print("shards through serve + example trainer: same stream")
        else:
            print(f"SKIP: {TRAINER} not built; not run: the service case")

        # shards from Python's tarfile: GNU and pax, long names, subfolders, extras
        cls0 = os.path.join(ds, min(c for c in os.listdir(ds) if not c.startswith(".")))
        with open(os.path.join(cls0, min(os.listdir(cls0))), "rb") as f:
            img = f.read()
        ext = "png" if img[:4] == b"\x89PNG" else "jpg"
        py = os.path.join(tmp, "py")
        os.mkdir(py)
        long = "d/" + "x" * 150
        shard(os.path.join(py, "a.tar"), [(f"{long}.{ext}", img), (f"{long}.cls", b"3"),
                                          (f"{long}.json", b"{}")], tarfile.GNU_FORMAT)
        shard(os.path.join(py, "b.tar"), [(f"./sub/k1.{ext}", img), ("./sub/k1.cls", b"1\n"),
                                          (f"{'y' * 120}.{ext.upper()}", img),
                                          (f"{'y' * 120}.cls", b"0")], tarfile.PAX_FORMAT)
        ins = run("inspect", py).stdout
        assert "samples:     3" in ins and "classes:     4" in ins, ins
        digest(py)
        print("tarfile shards (GNU, pax, long names, subfolders, extra members): read")

        # hostile shards
        def bad(name, members, want, fmt=tarfile.USTAR_FORMAT, expect_open=False):
            d = os.path.join(tmp, "bad-" + name)
            os.mkdir(d)
            shard(os.path.join(d, "s.tar"), [(f"ok.{ext}", img), ("ok.cls", b"0")] + members,
                  fmt)
            p = digest(d, ok=False)
            assert p.returncode != 0, (name, p.stdout)
            assert want in p.stderr and "s.tar" in p.stderr, (name, p.stderr)
            if not expect_open:
                s = run("digest", d, *COMMON, "--on-error", "skip", "--out", "/dev/null")
                assert "digest:" in s.stdout + s.stderr, (name, s.stderr)
            return d
        bad("symlink", [(f"k.{ext}", b"", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}),
                        ("k.cls", b"1")], "is a symbolic link")
        bad("chardev", [(f"k.{ext}", b"", {"type": tarfile.CHRTYPE, "devmajor": 1,
                                           "devminor": 3}), ("k.cls", b"1")],
            "is a character device")
        bad("fifo", [(f"k.{ext}", b"", {"type": tarfile.FIFOTYPE}), ("k.cls", b"1")],
            "is a FIFO")
        bad("hardlink", [(f"k.{ext}", b"", {"type": tarfile.LNKTYPE, "linkname": f"ok.{ext}"}),
                         ("k.cls", b"1")], "is a hard link")
        bad("noimage", [("k.cls", b"1"), ("k.json", b"{}")], "a key without an image")
        bad("nolabel", [(f"k.{ext}", img)], "no .cls label")
        bad("badlabel", [(f"k.{ext}", img), ("k.cls", b"-4")], "label is not an integer")
        bad("twoimages", [(f"k.{ext}", img), (f"k.{ext}", img), ("k.cls", b"1")],
            "a second image")
        bad("apart", [(f"k.{ext}", img), ("j.cls", b"1"), ("k.cls", b"1")],
            "appears again after other keys", expect_open=True)
        # cut inside a member: the cut sample is the error, the rest stream
        d = os.path.join(tmp, "bad-cut")
        os.mkdir(d)
        full = os.path.join(d, "s.tar")
        shard(full, [(f"ok.{ext}", img), ("ok.cls", b"0"), (f"k.{ext}", img), ("k.cls", b"1")])
        data = open(full, "rb").read()
        pad = (len(img) + 511) // 512 * 512
        k_data = 512 + pad + 512 + 512 + 512   # ok.png, ok.cls, then k.png's header
        open(full, "wb").write(data[:k_data + len(img) // 2])
        p = digest(d, ok=False)
        assert p.returncode != 0 and f"s.tar/k.{ext}" in p.stderr and "truncated" in p.stderr, \
            p.stderr
        s = run("digest", d, *COMMON, "--on-error", "skip", "--out", "/dev/null")
        assert "digest:" in s.stdout + s.stderr
        # cut between members: no end-of-archive block
        open(full, "wb").write(data[:k_data + pad])
        p = digest(d, ok=False)
        assert "without the end-of-archive block" in p.stderr, p.stderr
        # not a tar
        open(full, "wb").write(b"\x89PNG\r\n\x1a\n" + b"\0" * 600)
        p = digest(d, ok=False)
        assert "not a tar header" in p.stderr and "s.tar" in p.stderr, p.stderr
        # class folders and shards side by side
        mixed = os.path.join(tmp, "mixed")
        shutil.copytree(ds, mixed)
        shutil.copy(os.path.join(sh, names[0]), mixed)
        p = digest(mixed, ok=False)
        assert "both class folders" in p.stderr, p.stderr
        print("hostile shards: symlink, char device, FIFO, hard link, no image, no label, bad "
              "label, two images, keys apart, cut inside a member (skippable), cut between "
              "members, not a tar, mixed folder: named errors")

        # seedpipe split
        spec = ["--split", "train=0.7,val=0.3", "--split-seed", 4]
        lists = {}
        for sub in ("train", "val"):
            p = run("split", ds, *spec, "--subset", sub)
            lists[sub] = p.stdout.split()
            assert f"{len(lists[sub])} of 60 samples in {sub}" in p.stderr, p.stderr
        assert sorted(lists["train"] + lists["val"]) == sorted(
            os.path.join(c, f) for c in os.listdir(ds) if not c.startswith(".")
            for f in os.listdir(os.path.join(ds, c)))
        ins = run("inspect", ds, *spec).stdout
        assert f"val          {len(lists['val'])} samples" in ins, ins
        more = os.path.join(tmp, "more")
        os.mkdir(more)
        for sub in ("train", "val"):
            shutil.rmtree(more)
            shutil.copytree(ds, more)
            run("make-shapes", os.path.join(tmp, "extra"), "--count", 40, "--size", 32,
                "--seed", 8)
            for c in [c for c in os.listdir(os.path.join(tmp, "extra")) if c[0] != "."]:
                os.makedirs(os.path.join(more, c), exist_ok=True)
                for f in os.listdir(os.path.join(tmp, "extra", c)):
                    shutil.copy(os.path.join(tmp, "extra", c, f),
                                os.path.join(more, c, "new-" + f))
            shutil.rmtree(os.path.join(tmp, "extra"))
            grown = set(run("split", more, *spec, "--subset", sub).stdout.split())
            assert set(lists[sub]) <= grown, (sub, set(lists[sub]) - grown)
        print(f"split: train {len(lists['train'])} + val {len(lists['val'])} = 60; "
              "every listed path stays in its subset after 40 files are added")
        print("test_webdataset: passed")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
