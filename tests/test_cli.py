"""test_cli.py - the seedpipe command-line tool end to end (stdlib only).

make-shapes is deterministic; inspect prints counts and the fingerprint;
digest manifests are identical for --threads 1 and 2 and have one line per
batch with the documented keys; dump writes a real PNG of the batch grid;
bad input gives exit status 1 and a message naming the file or word.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

BIN = os.environ.get("SEEDPIPE_BIN")


def run(*args, ok=True):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise AssertionError(f"seedpipe {' '.join(map(str, args))} failed ({p.returncode}): {p.stderr}")
    return p


def tree_bytes(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def png_size(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    w = int.from_bytes(data[16:20], "big")
    h = int.from_bytes(data[20:24], "big")
    # every chunk's CRC is valid
    pos = 8
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        typ = data[pos + 4:pos + 8]
        crc = int.from_bytes(data[pos + 8 + n:pos + 12 + n], "big")
        assert zlib.crc32(data[pos + 4:pos + 8 + n]) == crc, f"bad CRC in {typ}"
        pos += 12 + n
    return w, h


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-cli-")
    try:
        a, b, c = (os.path.join(tmp, n) for n in "abc")
        run("make-shapes", a, "--count", 120, "--size", 48, "--seed", 5)
        run("make-shapes", b, "--count", 120, "--size", 48, "--seed", 5)
        run("make-shapes", c, "--count", 120, "--size", 48, "--seed", 6)
        ta, tb, tc = tree_bytes(a), tree_bytes(b), tree_bytes(c)
        assert len(ta) == 120, len(ta)
        assert ta == tb, "make-shapes is not deterministic for a seed"
        assert ta != tc, "a different seed gave the same dataset"
        assert sum(k.endswith(".png") for k in ta) == 60
        assert sum(k.endswith(".jpg") for k in ta) == 60

        out = run("inspect", a).stdout
        assert "samples:     120" in out, out
        fp = [l for l in out.splitlines() if l.startswith("fingerprint:")][0].split()[1]
        assert len(fp) == 32 and int(fp, 16) >= 0
        assert fp not in run("inspect", c).stdout

        m1, m2 = os.path.join(tmp, "m1.jsonl"), os.path.join(tmp, "m2.jsonl")
        common = ["--pipeline", "shapes-train", "--seed", 9, "--epochs", 2, "--batch-size", 16]
        run("digest", a, *common, "--threads", 1, "--out", m1)
        run("digest", a, *common, "--threads", 2, "--out", m2)
        l1, l2 = open(m1).read().splitlines(), open(m2).read().splitlines()
        assert l1 == l2, "manifests differ between --threads 1 and 2"
        # the pixel-value ops of issue 39 (and hue): the same at 1 and 3 threads
        pix = ("random_resized_crop size=32 | invert p=0.3 | posterize bits=2 p=0.5 | "
               "solarize threshold=90 p=0.5 | autocontrast p=0.5 | equalize p=0.5 | "
               "sharpness factor=0.4 p=0.5 | color_jitter contrast=0.3 hue=-0.1,0.3 | "
               "random_apply ops=1 p=0.4 | invert p=1")
        m3, m4 = os.path.join(tmp, "m3.jsonl"), os.path.join(tmp, "m4.jsonl")
        pcommon = ["--pipeline", pix, "--seed", 9, "--epochs", 1, "--batch-size", 16]
        run("digest", a, *pcommon, "--threads", 1, "--out", m3)
        run("digest", a, *pcommon, "--threads", 3, "--out", m4)
        assert open(m3).read() == open(m4).read(), "pixel ops differ between --threads 1 and 3"
        head = json.loads(l1[0])
        assert head["seedpipe_manifest"] == 1 and head["seed"] == 9 and head["samples"] == 120
        rows = [json.loads(l) for l in l1[1:]]
        assert len(rows) == 2 * 8, len(rows)
        assert [(r["epoch"], r["batch"]) for r in rows] == [(e, i) for e in range(2) for i in range(8)]
        for e in range(2):
            idx = sorted(i for r in rows if r["epoch"] == e for i in r["indices"])
            assert idx == list(range(120)), "an epoch is not a permutation of the dataset"
        assert len({r["digest"] for r in rows}) == len(rows)
        # another seed gives another stream
        m3 = os.path.join(tmp, "m3.jsonl")
        run("digest", a, "--pipeline", "shapes-train", "--seed", 10, "--epochs", 2,
            "--batch-size", 16, "--out", m3)
        assert open(m3).read().splitlines()[1:] != l1[1:]

        # order matches the manifest's indices
        order = [int(x) for x in run("order", a, "--seed", 9, "--epoch", 1).stdout.split()]
        assert order[:16] == rows[8]["indices"]

        g = os.path.join(tmp, "grid.png")
        run("dump", a, "--pipeline", "shapes-train", "--seed", 9, "--epoch", 0, "--batch", 1,
            "--batch-size", 16, "--out", g)
        w, h = png_size(g)
        assert w > 4 * 32 and h > 4 * 32, (w, h)

        # bad input: clear errors
        p = run("inspect", os.path.join(tmp, "nope"), ok=False)
        assert p.returncode == 1 and "nope" in p.stderr, p.stderr
        p = run("digest", a, "--pipeline", "hflip p=0.5 | blur k=3", "--out", m3, ok=False)
        assert p.returncode == 1 and "blur" in p.stderr, p.stderr
        # a size far beyond int range is refused, not converted (fuzz find)
        p = run("digest", a, "--pipeline", "resize size=2499999999999", "--out", m3, ok=False)
        assert p.returncode == 1 and "size" in p.stderr, p.stderr
        p = run("digest", a, "--frobnicate", 1, "--out", m3, ok=False)
        assert p.returncode == 2 and "frobnicate" in p.stderr, p.stderr
        p = run("rng", "--key", "0", "zz", "--counter", 0, 0, 0, 0, ok=False)
        assert p.returncode == 2 and "zz" in p.stderr
        assert run("rng", "--key", 0, 0, "--counter", 0, 0, 0, 0).stdout.strip() == \
            "6627e8d5 e169c58d bc57ac4c 9b00dbd8"
    finally:
        shutil.rmtree(tmp)
    print("cli: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
