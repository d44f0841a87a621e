#!/usr/bin/env python3
"""test_mix.py - weighted mixtures of datasets (NAME.mix) through the CLI.

Run by ctest with python3 (standard library only) and $SEEDPIPE_BIN:
  - proportions: `seedpipe order MIX --order sequential` (the schedule in
    slot order) for many weights and lengths, two to ten sources, weights
    like 0.999/0.001 and 1/3 written with 16 digits: over EVERY prefix of
    the epoch each source's count is within one sample of weight x length,
    and an epoch holds the sources' exact quotas;
  - the reference: the shuffled epochs equal tests/philox_ref.py's
    mix_order() (written from docs/determinism.md section 10), for several
    seeds, epochs and lengths; a source's draws go through its whole
    permutation before repeating (pass by pass);
  - an ImageFolder mixed with WebDataset shards streams the same batch
    digests in-process, on 1 and 3 workers, as world 2 and 4 (the ranks'
    slices concatenated are the global batch), resumed at another worker
    count, through the cache cold and warm, and through `seedpipe serve` to
    2 ranks (the per-rank digests of `digest --rank R --world 2`);
  - labels are offset per source, inspect names the sources;
  - a corrupt image in one source behaves as it does alone under
    --on-error: fail names the file, skip skips exactly its draws; a
    source that is remote shards (nginx, skipped visibly without it)
    streams as its local copy, and a member changed under its index fails
    only its own draws, as the remote source alone;
  - a state saved from another mixture (other weights) is refused, and a
    cache built by another mixture serves it nothing;
  - the weight rule: edge texts (trailing zeros past 18 digits, 18-digit
    values, 19 digits) accepted or refused alike by the tool and
    philox_ref.py, the accepted ones streaming the reference's epoch;
  - the open's bound: period x sources above 2^28 refused by name in under
    2 s (256 sources, period 67,104,640), the bound itself opens;
  - bad .mix files: clear errors naming the file and line.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philox_ref as R  # noqa: E402
from cli_testlib import procs, run, serve, stop_all  # noqa: E402

BIN = os.environ.get("SEEDPIPE_BIN")
BUILD = os.environ.get("SP_BUILD_DIR", "")
TRAINER = os.path.join(BUILD, "example_trainer")


def make_idx(folder, name, n):
    """An IDX dataset of n 1x1 images (pixel i % 251, label i % 10): cheap at
    any size, for the schedule tests."""
    os.makedirs(folder, exist_ok=True)
    img = os.path.join(folder, name + "-images-idx3-ubyte")
    with open(img, "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 1, 1) + bytes(i % 251 for i in range(n)))
    with open(os.path.join(folder, name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
    return img


def write_mix(path, sources, length=None):
    with open(path, "w") as f:
        f.write("# a test mixture\n")
        if length:
            f.write("length\t%d\n" % length)
        for w, ds in sources:
            f.write("%s\t%s\n" % (w, ds))
    return path


def order(mix, seed=0, epoch=0, sequential=False):
    args = ["order", mix, "--seed", seed, "--epoch", epoch]
    if sequential:
        args += ["--order", "sequential"]
    return [tuple(map(int, l.split())) for l in run(*args).stdout.splitlines()]


def check_prefixes(slots, weights, what):
    """Every prefix n: |C_s(n) - w_s n| <= 1, in exact integers."""
    w, total = R.mix_weights(weights)
    c = [0] * len(w)
    for n, (s, _) in enumerate(slots, 1):
        c[s] += 1
        for k, ws in enumerate(w):
            if abs(c[k] * total - ws * n) > total:
                raise AssertionError("%s: prefix %d: source %d has %d, weight %d/%d x %d" %
                                     (what, n, k, c[k], ws, total, n))
    return c


def test_proportions(tmp):
    rnd = random.Random(5)
    cases = [(["0.999", "0.001"], [50, 30], None), (["0.999", "0.001"], [50, 30], 20000),
             (["0.5", "0.5"], [7, 3], None), (["1", "2", "3"], [10, 20, 30], 1),
             (["1", "2", "3"], [10, 20, 30], 7), (["3", "1"], [5, 5], 4097),
             (["0.3333333333333333", "0.6666666666666667"], [100, 200], 3001),
             (["0.1"] * 10, [20] * 10, 999)]
    for _ in range(12):   # ten sources, random weights and lengths
        k = rnd.choice([3, 5, 10])
        ws = [rnd.choice(["1", "0.001", "0.25", "7", "12.5", "0.0625", str(rnd.randint(1, 999)),
                          "0.%d" % rnd.randint(1, 9999)]) for _ in range(k)]
        cases.append((ws, [rnd.randint(1, 60) for _ in range(k)], rnd.randint(1, 5000)))
    idx = {}
    for i, (ws, sizes, length) in enumerate(cases):
        for n in sizes:
            if n not in idx:
                idx[n] = make_idx(os.path.join(tmp, "idx"), "s%d" % n, n)
        mix = write_mix(os.path.join(tmp, "p%d.mix" % i),
                        [(w, idx[n]) for w, n in zip(ws, sizes)], length)
        slots = order(mix, seed=i, sequential=True)
        L = length or sum(sizes)
        assert len(slots) == L, (mix, len(slots), L)
        counts = check_prefixes(slots, ws, mix)
        w, total = R.mix_weights(ws)
        for s, ws_ in enumerate(w):   # the epoch's quota: floor or ceil of w L
            assert counts[s] * total in range(ws_ * L - total + 1, ws_ * L + total), (mix, s)
        # the shuffled epoch holds the same draws
        assert sorted(order(mix, seed=i)) == sorted(slots), mix
        for s, j in slots:
            assert 0 <= j < sizes[s], (mix, s, j)
    print("proportions: %d mixtures, every prefix within one sample" % len(cases))


def test_reference(tmp):
    a = make_idx(os.path.join(tmp, "ref"), "a", 37)
    b = make_idx(os.path.join(tmp, "ref"), "b", 5)
    c = make_idx(os.path.join(tmp, "ref"), "c", 120)
    cases = [(["0.7", "0.3"], [a, b], [37, 5], None), (["2", "1", "1"], [a, b, c], [37, 5, 120],
                                                        None),
             (["0.999", "0.001"], [c, b], [120, 5], 500), (["1"], [b], [5], 23)]
    n = 0
    for k, (ws, paths, sizes, length) in enumerate(cases):
        mix = write_mix(os.path.join(tmp, "ref%d.mix" % k), list(zip(ws, paths)), length)
        for seed, epoch in ((0, 0), (7, 1), (2**64 - 1, 5), (12345, 4294967295)):
            want = R.mix_order(sizes, ws, seed, epoch, length)
            got = order(mix, seed=seed, epoch=epoch)
            assert got == want, (mix, seed, epoch, got[:8], want[:8])
            n += 1
        # the tool's reference command prints the same lines
        ref = subprocess.run([sys.executable, R.__file__, "mix", "--sizes",
                              ",".join(map(str, sizes)), "--weights", ",".join(ws), "--seed", "3",
                              "--epoch", "2"] + (["--length", str(length)] if length else []),
                             capture_output=True, text=True, check=True).stdout
        assert ref == run("order", mix, "--seed", 3, "--epoch", 2).stdout, mix
    # A source drawn 5x its size an epoch: each pass is a whole permutation.
    mix = write_mix(os.path.join(tmp, "passes.mix"), [("1", b), ("1", a)], 50)
    got = [j for s, j in order(mix, seed=9, sequential=True) if s == 0]
    assert len(got) == 25, got
    for p in range(5):
        assert sorted(got[5 * p:5 * p + 5]) == list(range(5)), got
    print("reference: %d epochs equal to philox_ref.mix_order()" % n)


def test_weight_rule(tmp):
    """One weight rule (docs/determinism.md section 10) in the tool and the
    reference: trailing zeros after the point are dropped before the 18
    significant digits and 18 decimals are counted. Each text is accepted by
    both (and streams the reference's epoch) or refused by both."""
    a = make_idx(os.path.join(tmp, "wr"), "a", 11)
    b = make_idx(os.path.join(tmp, "wr"), "b", 7)
    ok = ["0.1000000000000000000", "999999999999999999.0", "999999999999999999",
          "0.999999999999999999", ".000000000000000001", "0.500", "10.0", "1.",
          "000000000000000000000001", "12345678.9012345678000000000", "0.1" + "0" * 200]
    refused = ["1000000000000000000", "9999999999999999999.0", "0.0000000000000000001",
               "0.1000000000000000001", "1234567890.123456789", "0.000", ".", "1e3",
               "1,5", "+1", "-1", "1.2.3", "1 ", "\u0661"]
    for k, w in enumerate(ok + refused):
        try:
            R.mix_weight(w)
            ref_ok = True
        except ValueError:
            ref_ok = False
        assert ref_ok == (w in ok), ("philox_ref", w)
        path = os.path.join(tmp, "w%d.mix" % k)
        with open(path, "w", encoding="utf-8") as f:
            f.write("%s\t%s\n1\t%s\nlength\t40\n" % (w, a, b))
        p = run("order", path, "--seed", 4, "--epoch", 1, ok=False)
        if w in ok:
            assert p.returncode == 0, (w, p.stderr)
            want = R.mix_order([11, 7], [w, "1"], 4, 1, 40)
            got = [tuple(map(int, l.split())) for l in p.stdout.splitlines()]
            assert got == want, (w, got[:8], want[:8])
        else:
            assert p.returncode != 0 and ":1: weight" in p.stderr, (w, p.stderr)
    print("weight rule: %d accepted by both (same epoch), %d refused by both" %
          (len(ok), len(refused)))


def test_open_bound(tmp):
    """The open's cost is bounded by period x sources <= 2^28: 256 sources
    with a period of 67,104,640 slots (a 5 KB file that took 290 s and
    1.1 GB to open) is refused by name in under 2 s; 256 sources x 2^20
    slots (the bound) opens, 2^20 + 1 is refused."""
    import time
    a = make_idx(os.path.join(tmp, "ob"), "a", 10)
    big = os.path.join(tmp, "big.mix")
    with open(big, "w") as f:   # W = sum of 256 weights of 8 decimals > L
        f.write("length\t67104640\n")
        for s in range(256):
            f.write("0.%08d\t%s\n" % (s * 7919 + 1, a))
    assert os.path.getsize(big) < 64 * 1024
    t0 = time.monotonic()
    p = run("inspect", big, ok=False)
    took = time.monotonic() - t0
    assert p.returncode != 0 and big in p.stderr and "67104640 slots x 256 sources" in \
        p.stderr and "2^28" in p.stderr, p.stderr
    assert took < 2, "refused after %.1f s" % took
    for length, ok in ((1 << 20, True), ((1 << 20) + 1, False)):
        m = write_mix(os.path.join(tmp, "ob%d.mix" % length),
                      [("0.%08d" % (s * 7919 + 1), a) for s in range(256)], length)
        p = run("inspect", m, ok=False)
        assert (p.returncode == 0) == ok, (length, p.stderr)
        if not ok:
            assert "exceeds the open's bound of 2^28" in p.stderr, p.stderr
    print("open bound: 256 sources x 67104640 slots refused in %.2f s, 2^28 opens" % took)


def digests(text):
    """The batch lines of a digest manifest: (epoch, batch) -> digest."""
    out = {}
    for l in text.splitlines():
        d = json.loads(l)
        if "batch" in d:
            out[(d["epoch"], d["batch"])] = (d["digest"], d["indices"], d["labels"])
    return out


def digest(mix, common, *extra, ok=True):
    p = run("digest", mix, *common, *extra, "--out", "-", ok=ok)
    return p if not ok else digests(p.stdout)


def stream_digest(p):
    for l in (p.stdout + p.stderr).splitlines():
        if l.startswith("digest:"):
            return l.split("stream ")[1].strip()
    raise AssertionError(p.stdout + p.stderr)


def test_streams(tmp):
    folder = os.path.join(tmp, "folder")
    run("make-shapes", folder, "--count", 60, "--size", 32, "--seed", 1)
    other = os.path.join(tmp, "other")
    run("make-shapes", other, "--count", 40, "--size", 32, "--seed", 2)
    shards = os.path.join(tmp, "shards")
    run("shard", other, shards, "--max-count", 15)
    mix = write_mix(os.path.join(tmp, "m.mix"), [("0.7", "folder"), ("0.3", "shards")])
    common = ["--pipeline", "shapes-train", "--seed", 11, "--epochs", 2, "--batch-size", 8]
    ref = digest(mix, common)
    assert len(ref) == 26, len(ref)
    # labels: the folder's 6 classes, then the shards' classes from 6
    info = run("inspect", mix).stdout
    assert "kind:        mixture" in info and "labels from 6" in info, info
    for (e, b), (_, idx, labels) in ref.items():
        for i, l in zip(idx, labels):
            assert (l < 6) == (i < 60), (e, b, i, l)
    for w in (1, 3):
        assert digest(mix, common, "--workers", w) == ref, w
    # world 2 and 4: the ranks' slices concatenated are the global batch
    for world in (2, 4):
        parts = [digest(mix, common, "--rank", r, "--world", world) for r in range(world)]
        for key, (_, idx, labels) in ref.items():
            assert sum((p[key][1] for p in parts), []) == idx, (world, key)
            assert sum((p[key][2] for p in parts), []) == labels, (world, key)
    # resumed at another worker count
    st = os.path.join(tmp, "state.json")
    run("digest", mix, *common, "--stop-after", 9, "--save-state", st, "--out", "/dev/null")
    rest = digest(mix, common, "--resume", st, "--workers", 3)
    assert rest == {k: v for k, v in ref.items() if k >= (0, 9)}, sorted(rest)
    # the cache, cold then warm
    cache = os.path.join(tmp, "cache")
    for what, line in (("cold", ": 0 batches read, 26 computed, 26 written"),
                       ("warm", ": 26 batches read, 0 computed, 0 written")):
        p = run("digest", mix, *common, "--cache", cache, "--out", "-")
        assert digests(p.stdout) == ref, what
        assert line in p.stderr, (what, p.stderr)
    # a corrupt source behaves as it does alone
    bad = os.path.join(tmp, "bad")
    shutil.copytree(folder, bad)
    victim = sorted(os.path.join(r, f) for r, _, fs in os.walk(bad) for f in fs
                    if f.endswith((".png", ".jpg")))[3]
    with open(victim, "r+b") as f:
        f.seek(0)
        f.write(b"\0" * 64)
    bmix = write_mix(os.path.join(tmp, "bad.mix"), [("0.7", "bad"), ("0.3", "shards")])
    one = common[:-4] + ["--epochs", 1, "--batch-size", 8]
    p = digest(bmix, one, ok=False)
    alone = digest(bad, one, ok=False)
    assert p.returncode != 0 and victim in p.stderr, p.stderr
    assert alone.returncode != 0 and victim in alone.stderr, alone.stderr
    vi = sorted(os.path.relpath(os.path.join(r, f), bad) for r, _, fs in os.walk(bad)
                for f in fs if f.endswith((".png", ".jpg"))).index(os.path.relpath(victim, bad))
    draws = sum(1 for s, j in order(bmix, seed=11) if (s, j) == (0, vi))
    got = digest(bmix, one, "--on-error", "skip")
    n = sum(len(v[1]) for v in got.values())
    assert n == 100 - draws and draws >= 1, (n, draws)
    assert all(i != vi for v in got.values() for i in v[1]), "the corrupt sample was served"
    print("streams: 0/1/3 workers, resume at 3 workers, cache cold/warm, corrupt source "
          "(%d draws skipped)" % draws)
    return mix, common, ref


def test_refusals(tmp, mix, common):
    other = write_mix(os.path.join(tmp, "other.mix"), [("0.6", "folder"), ("0.4", "shards")])
    st = os.path.join(tmp, "state2.json")
    run("digest", mix, *common, "--stop-after", 3, "--save-state", st, "--out", "/dev/null")
    p = run("digest", other, *common, "--resume", st, "--out", "/dev/null", ok=False)
    assert p.returncode != 0 and "fingerprint" in p.stderr, p.stderr
    longer = write_mix(os.path.join(tmp, "longer.mix"), [("0.7", "folder"), ("0.3", "shards")],
                       length=120)
    p = run("digest", longer, *common, "--resume", st, "--out", "/dev/null", ok=False)
    assert p.returncode != 0 and "fingerprint" in p.stderr, p.stderr
    # the cache built by `mix` (test_streams) serves the other mixture nothing
    cache = os.path.join(tmp, "cache")
    alone = digest(other, common)
    p = run("digest", other, *common, "--cache", cache, "--out", "-")
    assert digests(p.stdout) == alone
    assert ": 0 batches read, 26 computed" in p.stderr, p.stderr
    bad = [("0.5\tfolder\n0\tshards\n", ":2: weight \"0\""),
           ("0.5 folder\n", ":1: expected WEIGHT<TAB>DATASET"),
           ("1\tfolder\nlength\t0\n", ":2: length \"0\""),
           ("1\tmissing\n", ":1: "),
           ("1\tm.mix\n", ":1: m.mix: a mixture cannot be a source"),
           ("# nothing\n", "no source"),
           ("1.2.3\tfolder\n", ":1: weight"),
           ("1\tfolder\nlength\t5\nlength\t6\n", ":3: length given twice")]
    for k, (text, want) in enumerate(bad):
        path = os.path.join(tmp, "bad%d.mix" % k)
        with open(path, "w") as f:
            f.write(text)
        p = run("inspect", path, ok=False)
        assert p.returncode != 0 and path in p.stderr and want in p.stderr, (text, p.stderr)
    print("refusals: another mixture's state and cache entries, %d bad files" % len(bad))


def test_serve(tmp, mix, common):
    if not os.path.exists(TRAINER):
        print("SKIP: %s not built; serve to 2 ranks not run" % TRAINER)
        return
    ranks = [stream_digest(run("digest", mix, *common, "--rank", r, "--world", 2, "--out",
                               "/dev/null")) for r in (0, 1)]
    name = ".sp-test-mix-%d" % os.getpid()
    p, _ = serve(name, mix, common, "--workers", 2, "--world", 2)
    t1 = subprocess.Popen([TRAINER, "--name", name, "--rank", "1"], stdout=subprocess.PIPE,
                          text=True)
    procs.append(t1)
    t0 = run("--name", name, "--rank", 0, exe=TRAINER)
    out1, _ = t1.communicate(timeout=60)
    assert t1.returncode == 0, out1
    for out, want in ((t0.stdout, ranks[0]), (out1, ranks[1])):
        got = [l.split()[2].rstrip(",") for l in out.splitlines()
               if l.startswith("stream digest:")]
        assert got == [want], (got, want, out)
    p.wait(timeout=60)
    assert p.returncode == 0
    print("serve: 2 ranks equal to digest --rank R --world 2")


def test_remote_source(tmp, common):
    """A source that is remote shards (nginx, when it can start) streams as
    its local copy, and a member changed under the index fails only its
    own draws under --on-error, as the remote source does alone."""
    import tarfile
    import remote_servers as rs
    www = os.path.join(tmp, "www")
    shutil.copytree(os.path.join(tmp, "shards"), os.path.join(www, "shards"))
    try:
        ng = rs.Nginx(www, tmp)
    except rs.Unavailable as e:
        print("SKIP: a remote source (nginx): %s" % e)
        return
    try:
        url = "%s/shards/" % ng.url
        local = write_mix(os.path.join(tmp, "m.mix"), [("0.7", "folder"), ("0.3", "shards")])
        remote = write_mix(os.path.join(tmp, "remote.mix"), [("0.7", "folder"), ("0.3", url)])
        fps = []
        for m in (local, remote):
            fps += [l for l in run("inspect", m).stdout.splitlines() if l.startswith("fingerprint:")]
        assert fps[0] == fps[1], fps
        before = len(ng.requests())
        assert digest(remote, common, "--workers", 2) == digest(local, common)
        gets = len(ng.requests()) - before
        # read ahead through the mixture: 60 draws of the remote source in
        # two epochs, fewer requests (adjacent members of a run in one range)
        print("remote source: %d requests for 60 draws" % gets)
        assert gets < 60, gets
        # change one member's bytes in place (same size): its sample fails when read
        shard = os.path.join(www, "shards", "shard-000000.tar")
        with tarfile.open(shard) as t:
            m = [x for x in t.getmembers() if x.name.endswith((".png", ".jpg"))][3]
        with open(shard, "r+b") as f:
            f.seek(m.offset_data + 10)
            b = f.read(1)
            f.seek(m.offset_data + 10)
            f.write(bytes([b[0] ^ 0xFF]))
        one = common[:-4] + ["--epochs", 1, "--batch-size", 8]
        p = digest(remote, one, ok=False)
        alone = digest(url, one, ok=False)
        for q in (p, alone):
            assert q.returncode != 0 and "shard-000000.tar" in q.stderr, q.stderr
        draws = sum(1 for s, j in order(remote, seed=11) if (s, j) == (1, 3))
        got = digest(remote, one, "--on-error", "skip")
        assert sum(len(v[1]) for v in got.values()) == 100 - draws and draws >= 1
        assert all(i != 60 + 3 for v in got.values() for i in v[1])
        solo = digest(url, one, "--on-error", "skip")
        assert sum(len(v[1]) for v in solo.values()) == 39
        print("remote source: same fingerprint and batches as the local copy; a changed "
              "member skips its %d draws, as alone" % draws)
    finally:
        ng.stop()


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-mix-")
    try:
        test_proportions(tmp)
        test_reference(tmp)
        test_weight_rule(tmp)
        test_open_bound(tmp)
        mix, common, _ = test_streams(tmp)
        test_refusals(tmp, mix, common)
        test_serve(tmp, mix, common)
        test_remote_source(tmp, common)
    finally:
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
